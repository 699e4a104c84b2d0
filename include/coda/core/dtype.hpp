// coda/core/dtype.hpp: the element types coda moves, and exact host conversions between them.
//
//   coda::DType t = coda::DType::bf16;
//   uint16_t bits = coda::float_to_bf16_bits(1.0f / 3.0f);   // round to nearest, ties to even
//   float back    = coda::bf16_bits_to_float(bits);          // exact
//   uint8_t q     = coda::float_to_fp8_bits(DType::e4m3, 500.0f);  // saturates to 448
//
// Rounding: every narrowing conversion rounds to nearest, ties to even (IEEE 754 default), the
// rule the GPU's cvt.rn instructions follow, so host and device agree bit for bit.
//
// fp8 saturation (the OCP FP8 formats as CUDA implements them):
//   e4m3 (1-4-3, bias 7): largest finite 448, no infinities; NaN is S.1111.111.
//   e5m2 (1-5-2, bias 15): largest finite 57344, has ±inf; NaN is S.11111.{01,10,11}.
//   Fp8Saturation::finite (default, cvt.satfinite): a finite or infinite input whose rounded
//     magnitude exceeds the largest finite value becomes ±largest finite.
//   Fp8Saturation::none: such an input becomes NaN (e4m3) or ±inf (e5m2).
//   NaN inputs become NaN in either mode.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string_view>

#include "coda/core/api.hpp"

namespace coda {

enum class DType : uint8_t { f32, f16, bf16, e4m3, e5m2, i32 };

/// Bytes per element.
constexpr std::size_t size_of(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f16: return 2;
    case DType::bf16: return 2;
    case DType::e4m3: return 1;
    case DType::e5m2: return 1;
    case DType::i32: return 4;
  }
  return 0;
}

/// Lower-case name as users write it ("bf16", "e4m3", ...).
CODA_API std::string_view name(DType t);
/// Writes name(t).
CODA_API std::ostream& operator<<(std::ostream& out, DType t);

constexpr bool is_fp8(DType t) { return t == DType::e4m3 || t == DType::e5m2; }
constexpr bool is_16bit_float(DType t) { return t == DType::f16 || t == DType::bf16; }

enum class Fp8Saturation : uint8_t { finite, none };

/// Largest finite value of each floating type.
CODA_API double max_finite(DType t);

CODA_API uint16_t float_to_bf16_bits(float x);
CODA_API float bf16_bits_to_float(uint16_t bits);
CODA_API uint16_t float_to_fp16_bits(float x);
CODA_API float fp16_bits_to_float(uint16_t bits);
CODA_API uint8_t float_to_fp8_bits(DType fp8_type, float x, Fp8Saturation sat = Fp8Saturation::finite);
CODA_API float fp8_bits_to_float(DType fp8_type, uint8_t bits);

/// Round x to the nearest value representable in `t` (the value a store in `t` would keep).
CODA_API float round_to(DType t, float x);

/// Write x as one element of type t at `dst` (fp8 with the default, finite saturation).
CODA_API void store_element(DType t, void* dst, double x);
/// Read one element of type t at `src` as a double (exact).
CODA_API double load_element(DType t, const void* src);

}  // namespace coda

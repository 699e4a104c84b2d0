#include "coda/core/dtype.hpp"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <ostream>

namespace coda {
namespace {

// A narrow binary floating-point format: 1 sign bit, `exponent_bits`, `mantissa_bits`.
struct FloatFormat {
  int exponent_bits;
  int mantissa_bits;
  int bias;
  bool has_infinity;  // false for e4m3, whose all-ones exponent still holds finite values

  int total_bits() const { return 1 + exponent_bits + mantissa_bits; }
  uint32_t all_ones_exponent() const { return (1u << exponent_bits) - 1; }
  int min_normal_exponent() const { return 1 - bias; }
  double largest_finite() const {
    if (has_infinity)  // exponent field all-ones minus one, mantissa all ones
      return std::ldexp(2.0 - std::ldexp(1.0, -mantissa_bits), int(all_ones_exponent()) - 1 - bias);
    // e4m3: exponent field all ones, mantissa all ones but the last (S.1111.111 is NaN)
    return std::ldexp(2.0 - std::ldexp(1.0, 1 - mantissa_bits), int(all_ones_exponent()) - bias);
  }
  uint32_t nan_bits() const {
    if (has_infinity)  // quiet NaN: all-ones exponent, top mantissa bit set
      return (all_ones_exponent() << mantissa_bits) | (1u << (mantissa_bits - 1));
    return (1u << (total_bits() - 1)) - 1;  // S.1111.111
  }
  uint32_t infinity_bits() const { return all_ones_exponent() << mantissa_bits; }
};

constexpr FloatFormat kBf16{8, 7, 127, true};
constexpr FloatFormat kFp16{5, 10, 15, true};
constexpr FloatFormat kE4m3{4, 3, 7, false};
constexpr FloatFormat kE5m2{5, 2, 15, true};

// Exact round-to-nearest-even encoding of a double into `f`. All arithmetic here is exact in
// double: |x| is scaled by a power of two and rounded once by nearbyint (ties to even in the
// default rounding mode).
uint32_t encode(const FloatFormat& f, double x, bool saturate_to_finite) {
  const uint32_t sign = std::signbit(x) ? (1u << (f.total_bits() - 1)) : 0u;
  if (std::isnan(x)) return sign | f.nan_bits();
  const double magnitude = std::fabs(x);
  const double largest = f.largest_finite();
  auto overflow = [&]() -> uint32_t {
    if (saturate_to_finite) return sign | encode(f, largest, false);
    return f.has_infinity ? (sign | f.infinity_bits()) : (sign | f.nan_bits());
  };
  if (std::isinf(magnitude)) return overflow();
  if (magnitude == 0.0) return sign;

  int exponent = 0;
  std::frexp(magnitude, &exponent);  // magnitude = fraction * 2^exponent, fraction in [0.5, 1)
  const int unbiased = std::max(exponent - 1, f.min_normal_exponent());
  const double quantum = std::ldexp(1.0, unbiased - f.mantissa_bits);
  const double rounded = std::nearbyint(magnitude / quantum) * quantum;
  if (rounded > largest) return overflow();
  if (rounded == 0.0) return sign;

  if (rounded < std::ldexp(1.0, f.min_normal_exponent())) {  // subnormal: exponent field 0
    const double step = std::ldexp(1.0, f.min_normal_exponent() - f.mantissa_bits);
    return sign | uint32_t(rounded / step);
  }
  std::frexp(rounded, &exponent);
  const int e = exponent - 1;
  const uint32_t mantissa = uint32_t(std::ldexp(rounded, f.mantissa_bits - e)) - (1u << f.mantissa_bits);
  return sign | (uint32_t(e + f.bias) << f.mantissa_bits) | mantissa;
}

double decode(const FloatFormat& f, uint32_t bits) {
  const bool negative = (bits >> (f.total_bits() - 1)) & 1u;
  const uint32_t exponent_field = (bits >> f.mantissa_bits) & f.all_ones_exponent();
  const uint32_t mantissa = bits & ((1u << f.mantissa_bits) - 1);
  double value;
  if (f.has_infinity && exponent_field == f.all_ones_exponent()) {
    value = mantissa == 0 ? std::numeric_limits<double>::infinity()
                          : std::numeric_limits<double>::quiet_NaN();
  } else if (!f.has_infinity && exponent_field == f.all_ones_exponent() &&
             mantissa == (1u << f.mantissa_bits) - 1) {
    value = std::numeric_limits<double>::quiet_NaN();
  } else if (exponent_field == 0) {
    value = std::ldexp(double(mantissa), f.min_normal_exponent() - f.mantissa_bits);
  } else {
    value = std::ldexp(1.0 + std::ldexp(double(mantissa), -f.mantissa_bits),
                       int(exponent_field) - f.bias);
  }
  return negative ? -value : value;
}

const FloatFormat& fp8_format(DType t) { return t == DType::e4m3 ? kE4m3 : kE5m2; }

}  // namespace

std::ostream& operator<<(std::ostream& out, DType t) { return out << name(t); }

std::string_view name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::e4m3: return "e4m3";
    case DType::e5m2: return "e5m2";
    case DType::i32: return "i32";
  }
  return "unknown";
}

double max_finite(DType t) {
  switch (t) {
    case DType::f32: return std::numeric_limits<float>::max();
    case DType::f16: return kFp16.largest_finite();
    case DType::bf16: return kBf16.largest_finite();
    case DType::e4m3: return kE4m3.largest_finite();
    case DType::e5m2: return kE5m2.largest_finite();
    case DType::i32: return std::numeric_limits<int32_t>::max();
  }
  return 0;
}

uint16_t float_to_bf16_bits(float x) {
  // bf16 is the top half of a float: round the low 16 bits away, ties to even. Exact, and
  // overflow carries into the exponent to give infinity as IEEE requires.
  uint32_t u = std::bit_cast<uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

float bf16_bits_to_float(uint16_t bits) { return std::bit_cast<float>(uint32_t(bits) << 16); }

uint16_t float_to_fp16_bits(float x) { return uint16_t(encode(kFp16, x, false)); }

float fp16_bits_to_float(uint16_t bits) { return float(decode(kFp16, bits)); }

uint8_t float_to_fp8_bits(DType fp8_type, float x, Fp8Saturation sat) {
  return uint8_t(encode(fp8_format(fp8_type), x, sat == Fp8Saturation::finite));
}

float fp8_bits_to_float(DType fp8_type, uint8_t bits) { return float(decode(fp8_format(fp8_type), bits)); }

float round_to(DType t, float x) {
  switch (t) {
    case DType::bf16: return bf16_bits_to_float(float_to_bf16_bits(x));
    case DType::f16: return fp16_bits_to_float(float_to_fp16_bits(x));
    case DType::e4m3:
    case DType::e5m2: return fp8_bits_to_float(t, float_to_fp8_bits(t, x));
    case DType::f32: return x;
    case DType::i32: return std::nearbyint(x);
  }
  return x;
}

void store_element(DType t, void* dst, double x) {
  switch (t) {
    case DType::f32: { const float v = float(x); std::memcpy(dst, &v, 4); return; }
    case DType::i32: { const int32_t v = int32_t(x); std::memcpy(dst, &v, 4); return; }
    case DType::bf16: { const uint16_t v = uint16_t(encode(kBf16, x, false)); std::memcpy(dst, &v, 2); return; }
    case DType::f16: { const uint16_t v = uint16_t(encode(kFp16, x, false)); std::memcpy(dst, &v, 2); return; }
    case DType::e4m3:
    case DType::e5m2: { const uint8_t v = uint8_t(encode(fp8_format(t), x, true)); std::memcpy(dst, &v, 1); return; }
  }
}

double load_element(DType t, const void* src) {
  switch (t) {
    case DType::f32: { float v; std::memcpy(&v, src, 4); return v; }
    case DType::i32: { int32_t v; std::memcpy(&v, src, 4); return v; }
    case DType::bf16: { uint16_t v; std::memcpy(&v, src, 2); return bf16_bits_to_float(v); }
    case DType::f16: { uint16_t v; std::memcpy(&v, src, 2); return decode(kFp16, v); }
    case DType::e4m3:
    case DType::e5m2: { uint8_t v; std::memcpy(&v, src, 1); return decode(fp8_format(t), v); }
  }
  return 0;
}

}  // namespace coda

// coda/core/divisor.hpp: division by a divisor known only at run time, as a multiply-high and a
// shift (Granlund and Montgomery, "Division by invariant integers using multiplication", 1994).
//
//   const coda::Divisor head_dim(128);               // on the host: finds the multiplier once
//   const int32_t head = head_dim.divide(col);       // in a kernel: no integer division
//   const int32_t within = head_dim.remainder(col);
//
// An integer division by a run-time value compiles to ~20 instructions on the GPU; an epilogue
// that divides a column index per element pays that on every element. Valid for 0 <= n < 2^31.
#pragma once

#include <cstdint>

#include "coda/core/host_device.hpp"

namespace coda {

class Divisor {
 public:
  constexpr Divisor() = default;
  /// `value` >= 1 (checked by the caller; a Divisor of 0 or less divides as if by 1).
  constexpr explicit Divisor(int32_t value) : value_(value) {
    if (value <= 1) return;  // multiplier_ 0: divide() returns n
    int32_t log2_ceil = 0;   // smallest l with 2^l >= value
    while ((int64_t(1) << log2_ceil) < value) ++log2_ceil;
    // With p = 31 + l and m = ceil(2^p / value), n * m / 2^p exceeds n / value by less than
    // n / 2^p < 2^-l <= 1 / value, too little to reach the next integer: floor(n m / 2^p) = n / value.
    // m < 2^32 since value > 2^(l-1); umulhi takes 32 of the p bits of shift, `shift_` the rest.
    multiplier_ = uint32_t(((uint64_t(1) << (31 + log2_ceil)) + uint64_t(value) - 1) / uint64_t(value));
    shift_ = uint32_t(log2_ceil - 1);
  }

  CODA_HD int32_t value() const { return value_; }

  CODA_HD int32_t divide(int32_t n) const {
    if (multiplier_ == 0) return n;
#if defined(__CUDA_ARCH__)
    return int32_t(__umulhi(uint32_t(n), multiplier_) >> shift_);
#else
    return int32_t(uint32_t((uint64_t(uint32_t(n)) * multiplier_) >> 32) >> shift_);
#endif
  }
  CODA_HD int32_t remainder(int32_t n) const { return n - divide(n) * value_; }

 private:
  int32_t value_ = 1;
  uint32_t multiplier_ = 0;
  uint32_t shift_ = 0;
};

}  // namespace coda

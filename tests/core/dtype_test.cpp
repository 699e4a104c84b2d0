// Host conversions: exact round-to-nearest-even, checked value by value against CUDA's own host
// implementations (cuda_bf16.h, cuda_fp16.h, cuda_fp8.h) and against hand-computed cases.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "coda/core/dtype.hpp"
#include "support/random.hpp"

namespace coda {
namespace {

uint16_t cuda_bf16_bits(float x) {
  __nv_bfloat16 h = __float2bfloat16_rn(x);
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}
uint16_t cuda_fp16_bits(float x) {
  __half h = __float2half_rn(x);
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}
uint8_t cuda_fp8_bits(DType t, float x, Fp8Saturation sat) {
  return __nv_cvt_float_to_fp8(x, sat == Fp8Saturation::finite ? __NV_SATFINITE : __NV_NOSAT,
                               t == DType::e4m3 ? __NV_E4M3 : __NV_E5M2);
}

// Interesting floats: random across the full exponent range, plus exact ties and boundaries.
std::vector<float> probe_values() {
  std::vector<float> v = {0.0f, -0.0f, 1.0f, -1.0f, 448.0f, 464.0f, 465.0f, 480.0f, 57344.0f, 61440.0f,
                          61441.0f, 65504.0f, 65519.0f, 65520.0f, 1e-8f, 6e-8f, 2.0f / 3.0f,
                          std::numeric_limits<float>::max(), std::numeric_limits<float>::min(),
                          std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity()};
  for (int i = 0; i < 200000; ++i) {
    const uint32_t bits = uint32_t(test::uniform_int(0, 0xffffffffLL));
    const float f = std::bit_cast<float>(bits);
    if (!std::isnan(f)) v.push_back(f);
  }
  for (int e = -30; e <= 20; ++e)  // every tie of a 2-, 3-, 7- and 10-bit mantissa near 2^e
    for (int m = 0; m < 2048; ++m) v.push_back(std::ldexp(1.0f + float(m) / 2048.0f, e));
  return v;
}

TEST(DType, SizesAndNames) {
  EXPECT_EQ(size_of(DType::f32), 4u);
  EXPECT_EQ(size_of(DType::bf16), 2u);
  EXPECT_EQ(size_of(DType::f16), 2u);
  EXPECT_EQ(size_of(DType::e4m3), 1u);
  EXPECT_EQ(size_of(DType::e5m2), 1u);
  EXPECT_EQ(name(DType::bf16), "bf16");
  EXPECT_EQ(name(DType::e5m2), "e5m2");
  EXPECT_DOUBLE_EQ(max_finite(DType::e4m3), 448.0);
  EXPECT_DOUBLE_EQ(max_finite(DType::e5m2), 57344.0);
  EXPECT_DOUBLE_EQ(max_finite(DType::f16), 65504.0);
}

TEST(DType, Bf16MatchesCudaRoundNearestEven) {
  for (float x : probe_values()) ASSERT_EQ(float_to_bf16_bits(x), cuda_bf16_bits(x)) << "x = " << x << ", " << test::seed_note();
}

TEST(DType, Fp16MatchesCudaRoundNearestEven) {
  for (float x : probe_values()) ASSERT_EQ(float_to_fp16_bits(x), cuda_fp16_bits(x)) << "x = " << x << ", " << test::seed_note();
}

TEST(DType, Fp8MatchesCudaInBothSaturationModes) {
  for (DType t : {DType::e4m3, DType::e5m2})
    for (Fp8Saturation sat : {Fp8Saturation::finite, Fp8Saturation::none})
      for (float x : probe_values()) {
        const uint8_t ours = float_to_fp8_bits(t, x, sat);
        const uint8_t theirs = cuda_fp8_bits(t, x, sat);
        if (std::isnan(fp8_bits_to_float(t, theirs)))
          ASSERT_TRUE(std::isnan(fp8_bits_to_float(t, ours))) << name(t) << " x = " << x;
        else
          ASSERT_EQ(ours, theirs) << name(t) << (sat == Fp8Saturation::finite ? " satfinite" : " nosat") << " x = " << x;
      }
}

TEST(DType, DecodeIsExactForEveryEncoding) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float ours = bf16_bits_to_float(uint16_t(b));
    if (!std::isnan(ours)) {
      ASSERT_EQ(float_to_bf16_bits(ours), b);  // round trip
    }
    const float h = fp16_bits_to_float(uint16_t(b));
    __half_raw raw;
    raw.x = uint16_t(b);
    const float theirs = __half2float(__half(raw));
    if (std::isnan(theirs)) ASSERT_TRUE(std::isnan(h));
    else ASSERT_EQ(h, theirs) << "fp16 bits " << b;
  }
  for (DType t : {DType::e4m3, DType::e5m2})
    for (uint32_t b = 0; b < 256; ++b) {
      const float ours = fp8_bits_to_float(t, uint8_t(b));
      const __half_raw hr = __nv_cvt_fp8_to_halfraw(uint8_t(b), t == DType::e4m3 ? __NV_E4M3 : __NV_E5M2);
      const float theirs = __half2float(__half(hr));
      if (std::isnan(theirs)) ASSERT_TRUE(std::isnan(ours)) << name(t) << " bits " << b;
      else ASSERT_EQ(ours, theirs) << name(t) << " bits " << b;
    }
}

TEST(DType, HandComputedCases) {
  // 1 + 2^-8 is exactly halfway between bf16 neighbours 1 and 1 + 2^-7: ties to even keeps 1.
  EXPECT_EQ(float_to_bf16_bits(1.0f + 1.0f / 256.0f), 0x3F80);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even): rounds up.
  EXPECT_EQ(float_to_bf16_bits(1.0f + 3.0f / 256.0f), 0x3F82);
  EXPECT_EQ(float_to_fp16_bits(65520.0f), 0x7C00);  // halfway past the largest finite: infinity
  EXPECT_EQ(float_to_fp16_bits(65519.0f), 0x7BFF);
  // e4m3: 464 is halfway between 448 and the NaN slot; satfinite keeps 448, nosat makes NaN.
  EXPECT_EQ(float_to_fp8_bits(DType::e4m3, 464.0f), 0x7E);
  EXPECT_EQ(float_to_fp8_bits(DType::e4m3, 1e9f), 0x7E);
  EXPECT_TRUE(std::isnan(fp8_bits_to_float(DType::e4m3, float_to_fp8_bits(DType::e4m3, 1e9f, Fp8Saturation::none))));
  EXPECT_EQ(float_to_fp8_bits(DType::e5m2, -1e9f), 0xFB);  // -57344
  EXPECT_TRUE(std::isinf(fp8_bits_to_float(DType::e5m2, float_to_fp8_bits(DType::e5m2, 1e9f, Fp8Saturation::none))));
  EXPECT_EQ(fp8_bits_to_float(DType::e4m3, 0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(float_to_fp8_bits(DType::e4m3, std::ldexp(1.0f, -10)), 0x00);  // tie to even (zero)
  EXPECT_EQ(float_to_fp8_bits(DType::e4m3, std::ldexp(1.5f, -10)), 0x01);
}

TEST(DType, StoreAndLoadElementRoundOnce) {
  unsigned char buf[4];
  // 1 + 2^-8 + 2^-30 is just above a bf16 tie: one rounding from double goes up; a detour
  // through float (which drops the 2^-30) would tie to even and go down.
  store_element(DType::bf16, buf, 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30));
  EXPECT_DOUBLE_EQ(load_element(DType::bf16, buf), 1.0 + std::ldexp(1.0, -7));
  store_element(DType::i32, buf, 12345.0);
  EXPECT_DOUBLE_EQ(load_element(DType::i32, buf), 12345.0);
  store_element(DType::e4m3, buf, 1000.0);
  EXPECT_DOUBLE_EQ(load_element(DType::e4m3, buf), 448.0);
  EXPECT_EQ(round_to(DType::f16, 1.0f / 3.0f), fp16_bits_to_float(float_to_fp16_bits(1.0f / 3.0f)));
}

}  // namespace
}  // namespace coda

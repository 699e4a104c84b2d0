// The inputs and the fp64 counterpart of every activation of math.hpp, shared by the host test
// (math_test.cpp, which CI runs) and the GPU test (math_gpu_test.cu).
#pragma once

#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "coda/epilogue/math.hpp"
#include "coda/reference/epilogues.hpp"

namespace coda::test::activation_cases {

constexpr int kKinds = 10;

/// Every kind, leaky_relu with slope 1/4 and clamp to [-1.5, 2] (exact in fp32 and fp64 alike).
inline std::vector<epilogue::ActivationFunction> every_function() {
  std::vector<epilogue::ActivationFunction> functions;
  for (int kind = 0; kind < kKinds; ++kind)
    functions.push_back({.kind = epilogue::Activation(kind), .slope = 0.25f, .lo = -1.5f, .hi = 2.0f});
  return functions;
}

/// 0 and subnormals, each function's kinks, a dense sweep where they bend, a geometric sweep to
/// 1e6, overflow (|x| > 88 for e^x, x^3 past 1e13), infinities and NaN.
inline std::vector<float> inputs() {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {0.0f, -0.0f, 1e-40f, -1e-40f, 1e-20f, -1e-20f, 1e-6f, -1e-6f, inf, -inf,
                          std::numeric_limits<float>::quiet_NaN(), 88.0f, -88.0f, 89.0f, -89.0f, 1e30f, -1e30f,
                          -1.5f, 2.0f, 3.0f, -3.0f};
  for (float v = -30.0f; v <= 30.0f; v += 0.0625f) x.push_back(v);
  for (float v = 0.5f; v < 1e6f; v *= 1.37f) x.push_back(v), x.push_back(-v);
  return x;
}

inline reference::Activation reference_of(const epilogue::ActivationFunction& f) {
  using epilogue::Activation;
  switch (f.kind) {
    case Activation::identity:
      return reference::Activation::identity();
    case Activation::relu:
      return reference::Activation::relu();
    case Activation::gelu_erf:
      return reference::Activation::gelu_erf();
    case Activation::gelu_tanh:
      return reference::Activation::gelu_tanh();
    case Activation::silu:
      return reference::Activation::silu();
    case Activation::sigmoid:
      return reference::Activation::sigmoid();
    case Activation::tanh:
      return reference::Activation::tanh();
    case Activation::hardswish:
      return reference::Activation::hardswish();
    case Activation::leaky_relu:
      return reference::Activation::leaky_relu(f.slope);
    case Activation::clamp:
      return reference::Activation::clamp(f.lo, f.hi);
  }
  return reference::Activation::identity();
}

/// `got` (fp32) within `tolerance` relative to |want| plus 1e-7 absolute (fp32's rounding of the
/// terms of order 1 a small value is made of), with NaN and infinities exactly where `want` has them.
inline void expect_near(double got, double want, double tolerance, const char* what) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << what << ": got " << got << ", want NaN";
  } else if (std::isinf(want)) {
    EXPECT_EQ(got, want) << what;
  } else {
    EXPECT_LE(std::abs(got - want), tolerance * std::abs(want) + 1e-7) << what << ": got " << got << ", want " << want;
  }
}

/// The tolerance against fp64 for fp32 math of a few operations (erfc, e^x and 1/x of a few ulp).
inline constexpr double kAgainstFp64 = 1e-5;
/// Where fp32's x^3 overflows and fp64's does not, the two legitimately part ways.
inline bool comparable_with_fp64(double x) { return !std::isnan(x) && std::abs(x) <= 1e6; }

/// Each kind's code instantiated for it (ActivationFunction::visit is CODA_HD, for device code):
/// f.template operator()<Kind>(function, index) for every kind.
template <class F>
void for_each_kind(const std::vector<epilogue::ActivationFunction>& functions, F&& f) {
  [&]<int... Kinds>(std::integer_sequence<int, Kinds...>) {
    (f.template operator()<epilogue::Activation(Kinds)>(functions[std::size_t(Kinds)], Kinds), ...);
  }(std::make_integer_sequence<int, kKinds>{});
}

}  // namespace coda::test::activation_cases

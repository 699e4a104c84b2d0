// coda/epilogue/math.hpp: elementwise math for epilogue programs, host and device alike (fp32).
// The activations follow PyTorch's definitions and, for derivatives at kinks, PyTorch's backward
// kernels (the same conventions as coda/reference/epilogues.hpp); written with comparisons rather
// than fminf/fmaxf so that NaN passes through, as in the reference.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "coda/core/host_device.hpp"

namespace coda::epilogue {

/// e^x and 1/x as the GPU's special-function unit computes them (MUFU.EX2, MUFU.RCP): on the GPU,
/// e^x = 2^(x log2 e) by exp2f (2 ulp, plus about |x| x 1e-7 relative from rounding x log2 e) and
/// 1/x by rcp.approx.ftz.f32 (1 ulp over the full range, PTX ISA; 0 for x = inf); on the host,
/// expf and a division. A division by IEEE rules compiles to a Newton step and a call to a slow
/// path; beside 128 live accumulators it made x * sigmoid(z) take 4x the epilogue time of tanhf
/// (coda bench timeline). Results stay within a few ulp of the exact value (inf and 0 included).
CODA_HD float exp_approx(float x) {
#if defined(__CUDA_ARCH__)
  return exp2f(x * 1.44269504088896341f);
#else
  return expf(x);
#endif
}
/// 2^x by the special-function unit alone (ex2.approx.ftz.f32: one MUFU.EX2, 2 ulp, results below
/// 2^-126 flushed to 0; PTX ISA) where exp2f adds the instructions that keep subnormal results: for
/// per-element code that runs once per tile, whose length (not its arithmetic) bounds it; on the
/// host, exp2f.
CODA_HD float exp2_approx(float x) {
#if defined(__CUDA_ARCH__)
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
#else
  return exp2f(x);
#endif
}
inline constexpr float kLog2e = 1.44269504088896341f;

CODA_HD float reciprocal_approx(float x) {
#if defined(__CUDA_ARCH__)
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
#else
  return 1.0f / x;
#endif
}

/// sigmoid(x) = 1 / (1 + e^-x) and 1 - sigmoid(x), the second as e^-x sigmoid(x): 1 - s in fp32
/// keeps only the bits of s below 1 as s nears 1 (derivatives s (1 - s) off by 1e-5 relative at
/// x = 5). 0 and 1 at the ends (e^-x = inf gives 1/inf = 0), NaN for NaN.
struct SigmoidAndComplement {
  float value;
  float complement;
};
CODA_HD SigmoidAndComplement sigmoid_and_complement(float x) {
  const float e = exp_approx(-x);
  const float s = reciprocal_approx(1.0f + e);
  return {s, s == 0.0f ? 1.0f : e * s};  // where e^-x overflowed, s is 0 and 1 - s is 1 (not inf * 0)
}
CODA_HD float sigmoid(float x) { return sigmoid_and_complement(x).value; }
CODA_HD float silu(float x) { return x * sigmoid(x); }

/// d silu(g) / dg = s (1 + g (1 - s)), s = sigmoid(g).
CODA_HD float silu_derivative(float g) {
  const SigmoidAndComplement s = sigmoid_and_complement(g);
  return s.value * (1.0f + g * s.complement);
}

enum class Activation : uint8_t {
  identity, relu, gelu_erf, gelu_tanh, silu, sigmoid, tanh, hardswish, leaky_relu, clamp
};

constexpr const char* name(Activation a) {
  constexpr const char* kNames[] = {"identity", "relu", "gelu_erf", "gelu_tanh", "silu",
                                    "sigmoid", "tanh", "hardswish", "leaky_relu", "clamp"};
  return uint8_t(a) < sizeof(kNames) / sizeof(kNames[0]) ? kNames[uint8_t(a)] : "an unknown activation";
}

/// 2u of GELU's tanh approximation, u = sqrt(2 / pi) (x + 0.044715 x^3).
CODA_HD float gelu_tanh_twice_inner(float x) { return 1.5957691216057308f * (x + 0.044715f * x * x * x); }

/// An activation with its parameters (slope for leaky_relu, [lo, hi] for clamp). Its kind is
/// chosen once, outside a map over the tile, and the map then runs without a branch on it (a
/// switch per element, next to 128 accumulators, spilled ~5 KB in LinearCombination):
///
///   f.visit([&](auto kind) {
///     t.map([&](Element& x) { x.value = f.value_of<decltype(kind)::value>(x.value); });
///   });
struct ActivationFunction {
  Activation kind = Activation::identity;
  float slope = 0.01f;
  float lo = -INFINITY;
  float hi = INFINITY;

  template <Activation K>
  CODA_HD float value_of(float x) const {
    if constexpr (K == Activation::identity) return x;
    else if constexpr (K == Activation::relu) return x < 0.0f ? 0.0f : x;
    // 1 + erf(z) = erfc(-z), without 1 + erf's cancellation for negative x (1% off at x = -5)
    else if constexpr (K == Activation::gelu_erf) return 0.5f * x * erfcf(x * -0.70710678118654752f);
    else if constexpr (K == Activation::gelu_tanh)  // 0.5 x (1 + tanh(u)) = x sigmoid(2u): two MUFU, no tanhf
      return x * sigmoid(gelu_tanh_twice_inner(x));
    else if constexpr (K == Activation::silu) return silu(x);
    else if constexpr (K == Activation::sigmoid) return coda::epilogue::sigmoid(x);
    else if constexpr (K == Activation::tanh) return tanhf(x);
    else if constexpr (K == Activation::hardswish)  // times 1/6 rather than a division's slow path (1 ulp apart)
      return x * (x + 3.0f < 0.0f ? 0.0f : x + 3.0f > 6.0f ? 6.0f : x + 3.0f) * (1.0f / 6.0f);
    else if constexpr (K == Activation::leaky_relu) return x < 0.0f ? slope * x : x;
    else return x < lo ? lo : x > hi ? hi : x;  // clamp
  }

  template <Activation K>
  CODA_HD float derivative_of(float x) const {
    // NaN in, NaN out (the comparisons of the kinks would pick a branch), by a select after the
    // value is computed: returned early, it was a branch around every value, and the 128 of them
    // made dGELU's epilogue 9x longer (coda bench timeline).
    const float derivative = derivative_of_number<K>(x);
    return x != x ? x : derivative;
  }

  /// f(std::integral_constant<Activation, kind>{}).
  template <class F>
  CODA_HD void visit(F&& f) const {
    switch (kind) {
      case Activation::identity: return f(std::integral_constant<Activation, Activation::identity>{});
      case Activation::relu: return f(std::integral_constant<Activation, Activation::relu>{});
      case Activation::gelu_erf: return f(std::integral_constant<Activation, Activation::gelu_erf>{});
      case Activation::gelu_tanh: return f(std::integral_constant<Activation, Activation::gelu_tanh>{});
      case Activation::silu: return f(std::integral_constant<Activation, Activation::silu>{});
      case Activation::sigmoid: return f(std::integral_constant<Activation, Activation::sigmoid>{});
      case Activation::tanh: return f(std::integral_constant<Activation, Activation::tanh>{});
      case Activation::hardswish: return f(std::integral_constant<Activation, Activation::hardswish>{});
      case Activation::leaky_relu: return f(std::integral_constant<Activation, Activation::leaky_relu>{});
      case Activation::clamp: return f(std::integral_constant<Activation, Activation::clamp>{});
    }
  }

 private:
  template <Activation K>
  CODA_HD float derivative_of_number(float x) const {
    if constexpr (K == Activation::identity) return 1.0f;
    else if constexpr (K == Activation::relu) return x > 0.0f ? 1.0f : 0.0f;
    else if constexpr (K == Activation::gelu_erf) {
      const float cdf = 0.5f * erfcf(x * -0.70710678118654752f);
      return cdf + x * 0.39894228040143268f * expf(-0.5f * x * x);
    } else if constexpr (K == Activation::gelu_tanh) {
      // With s = sigmoid(2u), t = tanh(u) = 2s - 1: 0.5 (1 + t) = s and 0.5 (1 - t^2) = 2 s (1 - s).
      const SigmoidAndComplement s = sigmoid_and_complement(gelu_tanh_twice_inner(x));
      const float d_twice_inner = 1.5957691216057308f * (1.0f + 3.0f * 0.044715f * x * x);
      return s.value + x * (s.value * s.complement) * d_twice_inner;
    } else if constexpr (K == Activation::silu) return silu_derivative(x);
    else if constexpr (K == Activation::sigmoid) {
      const SigmoidAndComplement s = sigmoid_and_complement(x);
      return s.value * s.complement;
    } else if constexpr (K == Activation::tanh) {  // 1 - tanh^2 = 4 s (1 - s), s = sigmoid(2x): no cancellation
      const SigmoidAndComplement s = sigmoid_and_complement(2.0f * x);
      return 4.0f * s.value * s.complement;
    } else if constexpr (K == Activation::hardswish)
      return x < -3.0f ? 0.0f : x <= 3.0f ? x * (1.0f / 3.0f) + 0.5f : 1.0f;
    else if constexpr (K == Activation::leaky_relu) return x > 0.0f ? 1.0f : slope;
    else return (x > lo && x < hi) ? 1.0f : 0.0f;  // clamp
  }
};

}  // namespace coda::epilogue

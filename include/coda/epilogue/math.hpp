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

CODA_HD float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
CODA_HD float silu(float x) { return x * sigmoid(x); }

/// d silu(g) / dg = s (1 + g (1 - s)), s = sigmoid(g).
CODA_HD float silu_derivative(float g) {
  const float s = sigmoid(g);
  return s * (1.0f + g * (1.0f - s));
}

enum class Activation : uint8_t { identity, relu, gelu_erf, gelu_tanh, silu, sigmoid, tanh, hardswish, leaky_relu, clamp };

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
    else if constexpr (K == Activation::gelu_erf) return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    else if constexpr (K == Activation::gelu_tanh)
      return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
    else if constexpr (K == Activation::silu) return silu(x);
    else if constexpr (K == Activation::sigmoid) return coda::epilogue::sigmoid(x);
    else if constexpr (K == Activation::tanh) return tanhf(x);
    else if constexpr (K == Activation::hardswish) return x * (x + 3.0f < 0.0f ? 0.0f : x + 3.0f > 6.0f ? 6.0f : x + 3.0f) / 6.0f;
    else if constexpr (K == Activation::leaky_relu) return x < 0.0f ? slope * x : x;
    else return x < lo ? lo : x > hi ? hi : x;  // clamp
  }

  template <Activation K>
  CODA_HD float derivative_of(float x) const {
    if (x != x) return x;  // NaN in, NaN out (the comparisons below would otherwise pick a branch)
    if constexpr (K == Activation::identity) return 1.0f;
    else if constexpr (K == Activation::relu) return x > 0.0f ? 1.0f : 0.0f;
    else if constexpr (K == Activation::gelu_erf) {
      const float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752f));
      return cdf + x * 0.39894228040143268f * expf(-0.5f * x * x);
    } else if constexpr (K == Activation::gelu_tanh) {
      const float inner = 0.79788456080286536f * (x + 0.044715f * x * x * x);
      const float t = tanhf(inner);
      const float d_inner = 0.79788456080286536f * (1.0f + 3.0f * 0.044715f * x * x);
      return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * d_inner;
    } else if constexpr (K == Activation::silu) return silu_derivative(x);
    else if constexpr (K == Activation::sigmoid) {
      const float s = coda::epilogue::sigmoid(x);
      return s * (1.0f - s);
    } else if constexpr (K == Activation::tanh) {
      const float t = tanhf(x);
      return 1.0f - t * t;
    } else if constexpr (K == Activation::hardswish) return x < -3.0f ? 0.0f : x <= 3.0f ? x / 3.0f + 0.5f : 1.0f;
    else if constexpr (K == Activation::leaky_relu) return x > 0.0f ? 1.0f : slope;
    else return (x > lo && x < hi) ? 1.0f : 0.0f;  // clamp
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
};

}  // namespace coda::epilogue

// coda/epilogue/math.hpp: elementwise math for epilogue programs, host and device alike (fp32).
// The activations follow PyTorch's definitions and, for derivatives at kinks, PyTorch's backward
// kernels (the same conventions as coda/reference/epilogues.hpp); written with comparisons rather
// than fminf/fmaxf so that NaN passes through, as in the reference.
#pragma once

#include <cmath>
#include <cstdint>

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

/// An activation with its parameters (slope for leaky_relu, [lo, hi] for clamp).
struct ActivationFunction {
  Activation kind = Activation::identity;
  float slope = 0.01f;
  float lo = -INFINITY;
  float hi = INFINITY;

  CODA_HD float operator()(float x) const {
    switch (kind) {
      case Activation::identity: return x;
      case Activation::relu: return x < 0.0f ? 0.0f : x;
      case Activation::gelu_erf: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
      case Activation::gelu_tanh: return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
      case Activation::silu: return silu(x);
      case Activation::sigmoid: return coda::epilogue::sigmoid(x);
      case Activation::tanh: return tanhf(x);
      case Activation::hardswish: return x * (x + 3.0f < 0.0f ? 0.0f : x + 3.0f > 6.0f ? 6.0f : x + 3.0f) / 6.0f;
      case Activation::leaky_relu: return x < 0.0f ? slope * x : x;
      case Activation::clamp: return x < lo ? lo : x > hi ? hi : x;
    }
    return x;
  }

  CODA_HD float derivative(float x) const {
    if (x != x) return x;  // NaN in, NaN out (the comparisons below would otherwise pick a branch)
    switch (kind) {
      case Activation::identity: return 1.0f;
      case Activation::relu: return x > 0.0f ? 1.0f : 0.0f;
      case Activation::gelu_erf: {
        const float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752f));
        return cdf + x * 0.39894228040143268f * expf(-0.5f * x * x);
      }
      case Activation::gelu_tanh: {
        const float inner = 0.79788456080286536f * (x + 0.044715f * x * x * x);
        const float t = tanhf(inner);
        const float d_inner = 0.79788456080286536f * (1.0f + 3.0f * 0.044715f * x * x);
        return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * d_inner;
      }
      case Activation::silu: return silu_derivative(x);
      case Activation::sigmoid: {
        const float s = coda::epilogue::sigmoid(x);
        return s * (1.0f - s);
      }
      case Activation::tanh: {
        const float t = tanhf(x);
        return 1.0f - t * t;
      }
      case Activation::hardswish: return x < -3.0f ? 0.0f : x <= 3.0f ? x / 3.0f + 0.5f : 1.0f;
      case Activation::leaky_relu: return x > 0.0f ? 1.0f : slope;
      case Activation::clamp: return (x > lo && x < hi) ? 1.0f : 0.0f;
    }
    return 1.0f;
  }
};

}  // namespace coda::epilogue

// coda/reference/epilogues.hpp: the fp64 reference of the standard epilogues (the EVT set):
// linear combination, bias, activations and their derivatives, output conversion (bf16/f16/f32
// and scaled fp8 with amax), and the backward helpers. The reductions are in reductions.hpp,
// included here.
//
//   using namespace coda::reference;
//   Matrix d = linear_combination(y, /*alpha=*/2.0, &c, Scale::per_row(beta));    // 2Y + beta[m]*C
//   auto [pre, post] = bias_activation(y, Bias::per_column(b), Activation::gelu_tanh());
//   Matrix dx = activation_backward(dy, pre, Activation::gelu_tanh());            // dY * gelu'(pre)
//   Vector db = bias_gradient(dx, Bias::Kind::per_column);                        // DGELU_BGRAD
//   Matrix out = round_matrix(post, DType::bf16);
//   Fp8Output q = quantize_fp8(post, DType::e4m3, /*scale=*/4.0);                 // q.bits, q.amax
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "coda/core/dtype.hpp"
#include "coda/reference/matrix.hpp"
#include "coda/reference/reductions.hpp"

namespace coda::reference {

/// An elementwise activation with its PyTorch definition and PyTorch's derivative convention.
/// Every activation and derivative maps NaN to NaN. Derivatives at the kinks (chosen as
/// PyTorch's backward kernels do):
///   relu:       x > 0 ? 1 : 0                      (relu'(0) = 0, threshold_backward)
///   leaky_relu: x > 0 ? 1 : slope                  (leaky'(0) = slope, leaky_relu_backward)
///   hardswish:  x < -3 ? 0 : x <= 3 ? x/3 + 1/2 : 1 (hardswish_backward: the middle piece's value
///                                                   at both kinks, -1/2 at -3 and 3/2 at 3)
///   clamp:      lo < x < hi ? 1 : 0                (strictly inside, as F.hardtanh's backward; so
///                                                   clamp(0, +inf) has exactly relu's derivative.
///                                                   torch.clamp's own backward uses lo <= x <= hi)
struct Activation {
  enum class Kind { identity, relu, gelu_erf, gelu_tanh, silu, sigmoid, tanh, hardswish, leaky_relu, clamp };
  Kind kind = Kind::identity;
  double slope = 0.01;                                   // leaky_relu: output slope for x <= 0
  double lo = -std::numeric_limits<double>::infinity();  // clamp bounds
  double hi = std::numeric_limits<double>::infinity();

  static Activation identity();
  static Activation relu();
  static Activation gelu_erf();   // 0.5 x (1 + erf(x / sqrt 2))
  static Activation gelu_tanh();  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  static Activation silu();       // x * sigmoid(x)
  static Activation sigmoid();    // 1 / (1 + exp(-x))
  static Activation tanh();
  static Activation hardswish();  // x * relu6(x + 3) / 6
  /// x > 0 ? x : slope * x; throws InvalidArgument unless slope is finite.
  static Activation leaky_relu(double slope = 0.01);
  /// min(max(x, lo), hi); throws InvalidArgument unless lo <= hi (neither NaN).
  static Activation clamp(double lo, double hi);

  double operator()(double x) const;
  double derivative(double x) const;
};

/// A factor broadcast over an M x N tile: one scalar, one value per row (length M) or one per
/// column (length N). A plain number converts to a scalar Scale.
struct Scale {
  enum class Kind { scalar, per_row, per_column };
  Kind kind = Kind::scalar;
  double value = 1.0;  // the scalar (kind == scalar)
  Vector values;       // one per row or per column

  Scale(double scalar = 1.0) : value(scalar) {}  // NOLINT: implicit on purpose, 2.0 reads as a scale
  static Scale per_row(Vector values);
  static Scale per_column(Vector values);

  double at(int64_t m, int64_t n) const;
};

/// A bias has the same broadcast shapes: per-column (length N, the nn.Linear bias), per-row
/// (length M) or a scalar.
using Bias = Scale;

/// D = alpha*Y + beta*C + gamma*X2, each scale scalar, per-row or per-column. C and X2 are
/// optional (nullptr: the term is absent). As in BLAS, a source term is not read where its scale
/// is exactly 0, so a NaN in C with beta = 0 does not reach D.
Matrix linear_combination(const Matrix& y, const Scale& alpha, const Matrix* c = nullptr, const Scale& beta = 0.0,
                          const Matrix* x2 = nullptr, const Scale& gamma = 0.0);

/// Y + bias, broadcast per the bias kind.
Matrix add_bias(const Matrix& y, const Bias& bias);
/// act(Y) elementwise.
Matrix apply_activation(const Matrix& y, const Activation& act);

/// The full bias + activation epilogue with its aux output: pre = Y + bias (what backward needs,
/// stored as the "aux" tensor), post = act(pre).
struct BiasActivation {
  Matrix pre_activation;
  Matrix output;
};
BiasActivation bias_activation(const Matrix& y, const Bias& bias, const Activation& act);

/// Round every element to `type` (f32, f16 or bf16), nearest-even, once from fp64: the value a
/// store in that dtype keeps. fp8 needs a scale: use quantize_fp8.
Matrix round_matrix(const Matrix& y, DType type);

/// Scaled fp8 output: bits = fp8(Y * scale) elementwise, saturating to the largest finite value
/// (Fp8Saturation::finite, cvt.satfinite); NaN stays NaN.
struct Fp8Output {
  Matrix values;              // the fp8 values as doubles (decoded bits, ~Y*scale; divide by scale for Y)
  std::vector<uint8_t> bits;  // row-major, values.rows * values.cols
  double amax = 0;            // max |Y| BEFORE scaling (the next step's scale is derived from it);
                              // NaN when Y holds a NaN
};
/// `type` is e4m3 or e5m2; `scale` must be finite and > 0.
Fp8Output quantize_fp8(const Matrix& y, DType type, double scale);

/// dX = dY ⊙ act'(pre): the activation's backward from the saved pre-activation.
Matrix activation_backward(const Matrix& grad_output, const Matrix& pre_activation, const Activation& act);

/// The gradient of a bias of the given kind: the sum of `grad` over the broadcast axes
/// (per_column: column sums, length N, as cuBLASLt's BGRAD epilogues; per_row: row sums,
/// length M; scalar: the total, length 1).
Vector bias_gradient(const Matrix& grad, Bias::Kind kind);

}  // namespace coda::reference

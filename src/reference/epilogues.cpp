#include "coda/reference/epilogues.hpp"

#include <cmath>
#include <numbers>
#include <string_view>
#include <utility>

#include "reference/checks.hpp"

namespace coda::reference {
namespace {

double logistic(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// gelu_tanh's inner argument sqrt(2/pi) (x + 0.044715 x^3) and its derivative.
constexpr double kGeluTanhScale = std::numbers::sqrt2 * std::numbers::inv_sqrtpi;  // sqrt(2/pi)
constexpr double kGeluTanhCubic = 0.044715;
double gelu_tanh_inner(double x) { return kGeluTanhScale * (x + kGeluTanhCubic * x * x * x); }
double gelu_tanh_inner_derivative(double x) { return kGeluTanhScale * (1.0 + 3.0 * kGeluTanhCubic * x * x); }

// The standard normal CDF and density (gelu_erf = x * Phi(x)).
double normal_cdf(double x) { return 0.5 * (1.0 + std::erf(x / std::numbers::sqrt2)); }
double normal_pdf(double x) { return std::exp(-0.5 * x * x) * std::numbers::inv_sqrtpi / std::numbers::sqrt2; }

// Apply f(m, n, y(m, n)) to every element.
template <class F>
Matrix map_elements(const Matrix& y, F f) {
  Matrix out(y.rows, y.cols);
  for (int64_t m = 0; m < y.rows; ++m)
    for (int64_t n = 0; n < y.cols; ++n) out(m, n) = f(m, n, y(m, n));
  return out;
}

/// A scale (or bias) must match the tile it is broadcast over.
void require_broadcast(ArgumentCheck& check, std::string_view name, const Scale& s, int64_t rows, int64_t cols) {
  if (s.kind == Scale::Kind::per_row)
    checks::require_length(check, name, s.values.size(), rows, "a per-row vector has one entry per row of y");
  if (s.kind == Scale::Kind::per_column)
    checks::require_length(check, name, s.values.size(), cols, "a per-column vector has one entry per column of y");
}

}  // namespace

Activation Activation::identity() { return {Kind::identity}; }
Activation Activation::relu() { return {Kind::relu}; }
Activation Activation::gelu_erf() { return {Kind::gelu_erf}; }
Activation Activation::gelu_tanh() { return {Kind::gelu_tanh}; }
Activation Activation::silu() { return {Kind::silu}; }
Activation Activation::sigmoid() { return {Kind::sigmoid}; }
Activation Activation::tanh() { return {Kind::tanh}; }
Activation Activation::hardswish() { return {Kind::hardswish}; }

Activation Activation::leaky_relu(double slope) {
  ArgumentCheck("coda::reference::Activation::leaky_relu")
      .require(std::isfinite(slope), "slope", "is ", slope, " but must be finite")
      .throw_if_error();
  Activation a{Kind::leaky_relu};
  a.slope = slope;
  return a;
}

Activation Activation::clamp(double lo, double hi) {
  ArgumentCheck("coda::reference::Activation::clamp")
      .require(lo <= hi, "hi", "is ", hi, " but must be >= lo = ", lo, " (and neither may be NaN)")
      .throw_if_error();
  Activation a{Kind::clamp};
  a.lo = lo;
  a.hi = hi;
  return a;
}

double Activation::operator()(double x) const {
  switch (kind) {
    case Kind::identity: return x;
    case Kind::relu: return x < 0 ? 0.0 : x;  // written so that NaN passes through
    case Kind::gelu_erf: return x * normal_cdf(x);
    case Kind::gelu_tanh: return 0.5 * x * (1.0 + std::tanh(gelu_tanh_inner(x)));
    case Kind::silu: return x * logistic(x);
    case Kind::sigmoid: return logistic(x);
    case Kind::tanh: return std::tanh(x);
    case Kind::hardswish: return x * (x + 3 < 0 ? 0.0 : x + 3 > 6 ? 6.0 : x + 3) / 6.0;
    case Kind::leaky_relu: return x < 0 ? slope * x : x;
    case Kind::clamp: return x < lo ? lo : x > hi ? hi : x;
  }
  return x;
}

double Activation::derivative(double x) const {
  if (std::isnan(x)) return x;
  switch (kind) {
    case Kind::identity: return 1.0;
    case Kind::relu: return x > 0 ? 1.0 : 0.0;
    case Kind::gelu_erf: return normal_cdf(x) + x * normal_pdf(x);
    case Kind::gelu_tanh: {
      const double t = std::tanh(gelu_tanh_inner(x));
      return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * gelu_tanh_inner_derivative(x);
    }
    case Kind::silu: {
      const double s = logistic(x);
      return s * (1.0 + x * (1.0 - s));
    }
    case Kind::sigmoid: {
      const double s = logistic(x);
      return s * (1.0 - s);
    }
    case Kind::tanh: {
      const double t = std::tanh(x);
      return 1.0 - t * t;
    }
    case Kind::hardswish: return x < -3 ? 0.0 : x <= 3 ? x / 3.0 + 0.5 : 1.0;
    case Kind::leaky_relu: return x > 0 ? 1.0 : slope;
    case Kind::clamp: return lo < x && x < hi ? 1.0 : 0.0;
  }
  return 1.0;
}

Scale Scale::per_row(Vector values) {
  Scale s;
  s.kind = Kind::per_row;
  s.values = std::move(values);
  return s;
}

Scale Scale::per_column(Vector values) {
  Scale s;
  s.kind = Kind::per_column;
  s.values = std::move(values);
  return s;
}

double Scale::at(int64_t m, int64_t n) const {
  switch (kind) {
    case Kind::scalar: return value;
    case Kind::per_row: return values.at(std::size_t(m));
    case Kind::per_column: return values.at(std::size_t(n));
  }
  return value;
}

Matrix linear_combination(const Matrix& y, const Scale& alpha, const Matrix* c, const Scale& beta, const Matrix* x2,
                          const Scale& gamma) {
  ArgumentCheck check("coda::reference::linear_combination");
  require_broadcast(check, "alpha", alpha, y.rows, y.cols);
  require_broadcast(check, "beta", beta, y.rows, y.cols);
  require_broadcast(check, "gamma", gamma, y.rows, y.cols);
  if (c) checks::require_shape(check, "c", *c, y.rows, y.cols, "the shape of y");
  if (x2) checks::require_shape(check, "x2", *x2, y.rows, y.cols, "the shape of y");
  check.throw_if_error();
  return map_elements(y, [&](int64_t m, int64_t n, double v) {
    double d = alpha.at(m, n) * v;
    if (c && beta.at(m, n) != 0.0) d += beta.at(m, n) * (*c)(m, n);
    if (x2 && gamma.at(m, n) != 0.0) d += gamma.at(m, n) * (*x2)(m, n);
    return d;
  });
}

Matrix add_bias(const Matrix& y, const Bias& bias) {
  ArgumentCheck check("coda::reference::add_bias");
  require_broadcast(check, "bias", bias, y.rows, y.cols);
  check.throw_if_error();
  return map_elements(y, [&](int64_t m, int64_t n, double v) { return v + bias.at(m, n); });
}

Matrix apply_activation(const Matrix& y, const Activation& act) {
  return map_elements(y, [&](int64_t, int64_t, double v) { return act(v); });
}

BiasActivation bias_activation(const Matrix& y, const Bias& bias, const Activation& act) {
  Matrix pre = add_bias(y, bias);
  Matrix post = apply_activation(pre, act);
  return {std::move(pre), std::move(post)};
}

Matrix round_matrix(const Matrix& y, DType type) {
  ArgumentCheck check("coda::reference::round_matrix");
  check.require(type == DType::f32 || type == DType::f16 || type == DType::bf16, "type", "is ", name(type),
                " but must be f32, f16 or bf16 (fp8 needs a scale: use quantize_fp8)");
  check.throw_if_error();
  return map_elements(y, [&](int64_t, int64_t, double v) {
    unsigned char stored[4];
    store_element(type, stored, v);
    return load_element(type, stored);
  });
}

Fp8Output quantize_fp8(const Matrix& y, DType type, double scale) {
  ArgumentCheck check("coda::reference::quantize_fp8");
  check.require(is_fp8(type), "type", "is ", name(type), " but must be e4m3 or e5m2");
  check.require(std::isfinite(scale) && scale > 0, "scale", "is ", scale, " but must be finite and > 0");
  check.throw_if_error();
  Fp8Output out;
  out.bits.resize(y.data.size());
  out.values = map_elements(y, [&](int64_t m, int64_t n, double v) {
    uint8_t& bits = out.bits[std::size_t(m * y.cols + n)];
    store_element(type, &bits, v * scale);  // one rounding from fp64, saturating to finite
    return load_element(type, &bits);
  });
  out.amax = abs_max(y);
  return out;
}

Matrix activation_backward(const Matrix& grad_output, const Matrix& pre_activation, const Activation& act) {
  ArgumentCheck check("coda::reference::activation_backward");
  checks::require_shape(check, "pre_activation", pre_activation, grad_output.rows, grad_output.cols,
                        "the shape of grad_output");
  check.throw_if_error();
  return map_elements(grad_output,
                      [&](int64_t m, int64_t n, double g) { return g * act.derivative(pre_activation(m, n)); });
}

Vector bias_gradient(const Matrix& grad, Bias::Kind kind) {
  switch (kind) {
    case Bias::Kind::per_column: return column_sums(grad);
    case Bias::Kind::per_row: return row_sums(grad);
    case Bias::Kind::scalar: {
      double total = 0;
      for (double v : row_sums(grad)) total += v;
      return {total};
    }
  }
  return {};
}

}  // namespace coda::reference

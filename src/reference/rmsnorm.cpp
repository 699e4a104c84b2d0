#include "coda/reference/rmsnorm.hpp"

#include <cmath>
#include <string_view>

#include "coda/reference/reductions.hpp"
#include "reference/checks.hpp"

namespace coda::reference {
namespace {

void check_weight(ArgumentCheck& check, const Vector& weight, int64_t hidden) {
  checks::require_length(check, "weight", weight.size(), hidden, "one RMSNorm weight per hidden column");
}

void check_row_vector(ArgumentCheck& check, std::string_view name, const Vector& v, int64_t rows) {
  checks::require_length(check, name, v.size(), rows, "one value per row");
}

// H ⊙ g: the weight broadcast along every row (one weight per column).
Matrix times_weight(const Matrix& h, const Vector& weight) {
  Matrix out = h;
  for (int64_t m = 0; m < h.rows; ++m)
    for (int64_t n = 0; n < h.cols; ++n) out(m, n) *= weight[std::size_t(n)];
  return out;
}

// rstd ⊙ H ⊙ g, the normalized and weighted input of the next GEMM.
Matrix normalize(const Matrix& h, const Vector& rstd, const Vector& weight) {
  return row_scale(times_weight(h, weight), rstd);
}

}  // namespace

Vector rmsnorm_rstd(const Matrix& h, double eps) {
  ArgumentCheck check("coda::reference::rmsnorm_rstd");
  check.positive("h", h.cols, "the hidden size (columns of h)");
  checks::require_epsilon(check, "eps", eps);
  check.throw_if_error();
  Vector rstd = row_sums_of_squares(h);
  for (double& r : rstd) r = 1.0 / std::sqrt(r / double(h.cols) + eps);
  return rstd;
}

Matrix rmsnorm(const Matrix& h, const Vector& weight, double eps) {
  ArgumentCheck check("coda::reference::rmsnorm");
  check_weight(check, weight, h.cols);
  check.throw_if_error();
  return normalize(h, rmsnorm_rstd(h, eps), weight);
}

RmsNormBackward rmsnorm_backward(const Matrix& grad_output, const Matrix& h, const Vector& weight, double eps) {
  ArgumentCheck check("coda::reference::rmsnorm_backward");
  check_weight(check, weight, h.cols);
  checks::require_shape(check, "grad_output", grad_output, h.rows, h.cols, "the shape of h");
  check.throw_if_error();
  const Vector rstd = rmsnorm_rstd(h, eps);
  const double hidden = double(h.cols);
  RmsNormBackward out{Matrix(h.rows, h.cols), Vector(std::size_t(h.cols), 0.0)};
  for (int64_t m = 0; m < h.rows; ++m) {
    const double r = rstd[std::size_t(m)];
    double weighted_dot = 0;  // sum_n dN ⊙ g ⊙ H
    for (int64_t n = 0; n < h.cols; ++n) weighted_dot += grad_output(m, n) * weight[std::size_t(n)] * h(m, n);
    for (int64_t n = 0; n < h.cols; ++n) {
      out.grad_input(m, n) =
          r * grad_output(m, n) * weight[std::size_t(n)] - r * r * r * h(m, n) * weighted_dot / hidden;
      out.grad_weight[std::size_t(n)] += grad_output(m, n) * r * h(m, n);
    }
  }
  return out;
}

ResidualRmsNorm residual_rmsnorm(const Matrix& y, const Matrix& residual, const Vector& weight, int64_t bn) {
  ArgumentCheck check("coda::reference::residual_rmsnorm");
  checks::require_shape(check, "residual", residual, y.rows, y.cols, "the shape of y");
  check_weight(check, weight, y.cols);
  checks::require_tile_size(check, "bn", bn);
  check.throw_if_error();
  ResidualRmsNorm out;
  out.residual = y;
  for (std::size_t i = 0; i < y.data.size(); ++i) out.residual.data[i] += residual.data[i];
  out.sum_squares = row_partial_sums_of_squares(out.residual, bn);
  out.weighted = times_weight(out.residual, weight);
  return out;
}

Vector rstd_from_partials(const Matrix& sum_squares, int64_t hidden, double eps) {
  ArgumentCheck check("coda::reference::rstd_from_partials");
  check.positive("hidden", hidden, "hidden");
  checks::require_epsilon(check, "eps", eps);
  check.throw_if_error();
  Vector rstd = combine_row_partials(sum_squares, Combine::sum);
  for (double& r : rstd) r = 1.0 / std::sqrt(r / double(hidden) + eps);
  return rstd;
}

Matrix row_scale(const Matrix& y, const Vector& scale) {
  ArgumentCheck check("coda::reference::row_scale");
  check_row_vector(check, "scale", scale, y.rows);
  check.throw_if_error();
  Matrix out = y;
  for (int64_t m = 0; m < y.rows; ++m)
    for (int64_t n = 0; n < y.cols; ++n) out(m, n) *= scale[std::size_t(m)];
  return out;
}

RowScaleBackward row_scale_backward(const Matrix& grad_output, const Matrix& y, const Vector& scale) {
  ArgumentCheck check("coda::reference::row_scale_backward");
  checks::require_shape(check, "grad_output", grad_output, y.rows, y.cols, "the shape of y");
  check_row_vector(check, "scale", scale, y.rows);
  check.throw_if_error();
  return {row_scale(grad_output, scale), row_dots(grad_output, y)};
}

Vector rmsnorm_backward_correction(const Matrix& row_dot_partials, const Vector& rstd, int64_t hidden) {
  ArgumentCheck check("coda::reference::rmsnorm_backward_correction");
  check.positive("hidden", hidden, "hidden");
  check_row_vector(check, "rstd", rstd, row_dot_partials.rows);
  check.throw_if_error();
  Vector c = combine_row_partials(row_dot_partials, Combine::sum);
  for (std::size_t m = 0; m < c.size(); ++m) c[m] *= rstd[m] * rstd[m] / double(hidden);
  return c;
}

Matrix residual_rmsnorm_backward(const Matrix& d, const Matrix& h, const Vector& weight, const Vector& correction,
                                 const Matrix& grad_residual_in) {
  ArgumentCheck check("coda::reference::residual_rmsnorm_backward");
  checks::require_shape(check, "h", h, d.rows, d.cols, "the shape of d");
  check_weight(check, weight, d.cols);
  check_row_vector(check, "correction", correction, d.rows);
  checks::require_shape(check, "grad_residual_in", grad_residual_in, d.rows, d.cols, "the shape of d");
  check.throw_if_error();
  Matrix out(d.rows, d.cols);
  for (int64_t m = 0; m < d.rows; ++m)
    for (int64_t n = 0; n < d.cols; ++n)
      out(m, n) = grad_residual_in(m, n) + d(m, n) * weight[std::size_t(n)] - correction[std::size_t(m)] * h(m, n);
  return out;
}

RmsNormWeightGradients rmsnorm_weight_gradients(const Matrix& product, const Matrix& projection_weight,
                                                const Vector& weight, int64_t bm) {
  ArgumentCheck check("coda::reference::rmsnorm_weight_gradients");
  checks::require_shape(check, "projection_weight", projection_weight, product.rows, product.cols,
                        "W2 has the shape of the product G = (rstd dZ)^T H");
  check_weight(check, weight, product.cols);
  checks::require_tile_size(check, "bm", bm);
  check.throw_if_error();
  return {times_weight(product, weight), column_partial_dots(product, projection_weight, bm)};
}

}  // namespace coda::reference

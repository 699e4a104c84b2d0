#include "coda/reference/gemm_rmsnorm_gemm.hpp"

#include <utility>

#include "coda/core/layout.hpp"
#include "coda/reference/gemm.hpp"
#include "coda/reference/reductions.hpp"
#include "coda/reference/rmsnorm.hpp"
#include "coda/reference/swiglu.hpp"
#include "reference/checks.hpp"

namespace coda::reference {
namespace {

int64_t hidden_of(const GemmRmsNormGemm& layer) { return layer.w1.rows; }

void check_layer(ArgumentCheck& check, const GemmRmsNormGemm& layer) {
  const int64_t hidden = hidden_of(layer);
  check.require(
      layer.w1.cols == layer.x.cols, "layer.w1",
      text("is ", checks::shape_of(layer.w1), " but x is ", checks::shape_of(layer.x), " (they must agree on K)"));
  checks::require_shape(check, "layer.residual", layer.residual, layer.x.rows, hidden, "M x hidden");
  checks::require_length(check, "layer.norm_weight", layer.norm_weight.size(), hidden, "one weight per hidden column");
  check.require(layer.w2.cols == hidden, "layer.w2",
                text("is ", checks::shape_of(layer.w2), " but must have hidden = ", hidden, " columns"));
  checks::require_epsilon(check, "layer.eps", layer.eps);
}

void check_backward(ArgumentCheck& check, const GemmRmsNormGemm& layer, const GemmRmsNormGemmForward& saved,
                    const Matrix& grad_output, const Matrix& grad_residual_out) {
  check_layer(check, layer);
  const int64_t rows = layer.x.rows, hidden = hidden_of(layer);
  checks::require_shape(check, "saved.residual_out", saved.residual_out, rows, hidden, "H is M x hidden");
  checks::require_length(check, "saved.rstd", saved.rstd.size(), rows, "one per row");
  checks::require_shape(check, "saved.output", saved.output, rows, layer.w2.rows, "Z is M x N2");
  checks::require_shape(check, "grad_output", grad_output, rows, layer.w2.rows, "dZ has the shape of Z");
  checks::require_shape(check, "grad_residual_out", grad_residual_out, rows, hidden, "dH_out has the shape of H");
}

// H = X W1^T + R.
Matrix residual_stream(const GemmRmsNormGemm& layer) {
  Matrix h = gemm(layer.x, Major::k, layer.w1, Major::k);
  for (std::size_t i = 0; i < h.data.size(); ++i) h.data[i] += layer.residual.data[i];
  return h;
}

// The GEMMs both ways share once dH is known: dX = dH W1, dW1 = dH^T X, dR = dH.
GemmRmsNormGemmGradients gradients_from(const GemmRmsNormGemm& layer, const Matrix& grad_h, Vector grad_norm_weight,
                                        Matrix grad_w2) {
  GemmRmsNormGemmGradients out;
  out.x = gemm(grad_h, Major::k, layer.w1, Major::mn);   // dH W1
  out.w1 = gemm(grad_h, Major::mn, layer.x, Major::mn);  // dH^T X
  out.residual = grad_h;
  out.norm_weight = std::move(grad_norm_weight);
  out.w2 = std::move(grad_w2);
  return out;
}

}  // namespace

GemmRmsNormGemmForward gemm_rmsnorm_gemm_forward(const GemmRmsNormGemm& layer) {
  ArgumentCheck check("coda::reference::gemm_rmsnorm_gemm_forward");
  check_layer(check, layer);
  check.throw_if_error();
  GemmRmsNormGemmForward out;
  out.residual_out = residual_stream(layer);
  out.rstd = rmsnorm_rstd(out.residual_out, layer.eps);
  const Matrix normalized = rmsnorm(out.residual_out, layer.norm_weight, layer.eps);
  out.output = gemm(normalized, Major::k, layer.w2, Major::k);
  return out;
}

GemmRmsNormGemmForward gemm_rmsnorm_gemm_forward_fused(const GemmRmsNormGemm& layer, int64_t bn) {
  ArgumentCheck check("coda::reference::gemm_rmsnorm_gemm_forward_fused");
  check_layer(check, layer);
  checks::require_tile_size(check, "bn", bn);
  check.throw_if_error();
  const Matrix y = gemm(layer.x, Major::k, layer.w1, Major::k);
  const ResidualRmsNorm first = residual_rmsnorm(y, layer.residual, layer.norm_weight, bn);
  GemmRmsNormGemmForward out;
  out.residual_out = first.residual;
  out.rstd = rstd_from_partials(first.sum_squares, hidden_of(layer), layer.eps);
  out.output = row_scale(gemm(first.weighted, Major::k, layer.w2, Major::k), out.rstd);  // GEMM + row scale
  return out;
}

GemmRmsNormGemmGradients gemm_rmsnorm_gemm_backward(const GemmRmsNormGemm& layer, const GemmRmsNormGemmForward& saved,
                                                    const Matrix& grad_output, const Matrix& grad_residual_out) {
  ArgumentCheck check("coda::reference::gemm_rmsnorm_gemm_backward");
  check_backward(check, layer, saved, grad_output, grad_residual_out);
  check.throw_if_error();
  const Matrix grad_normalized = gemm(grad_output, Major::k, layer.w2, Major::mn);  // dN = dZ W2
  RmsNormBackward norm = rmsnorm_backward(grad_normalized, saved.residual_out, layer.norm_weight, layer.eps);
  for (std::size_t i = 0; i < norm.grad_input.data.size(); ++i) norm.grad_input.data[i] += grad_residual_out.data[i];
  const Matrix normalized = rmsnorm(saved.residual_out, layer.norm_weight, layer.eps);
  return gradients_from(layer, norm.grad_input, std::move(norm.grad_weight),
                        gemm(grad_output, Major::mn, normalized, Major::mn));  // dW2 = dZ^T N
}

GemmRmsNormGemmGradients gemm_rmsnorm_gemm_backward_fused(const GemmRmsNormGemm& layer,
                                                          const GemmRmsNormGemmForward& saved,
                                                          const Matrix& grad_output, const Matrix& grad_residual_out,
                                                          int64_t bn, int64_t bm) {
  ArgumentCheck check("coda::reference::gemm_rmsnorm_gemm_backward_fused");
  check_backward(check, layer, saved, grad_output, grad_residual_out);
  checks::require_tile_size(check, "bn", bn);
  checks::require_tile_size(check, "bm", bm);
  check.throw_if_error();
  // <dZ, Z> as row partials, where the epilogue producing dZ has both at hand; that epilogue also
  // stores dZ scaled by rstd, the A operand of both GEMMs below.
  const Matrix row_dot_partials = row_partial_dots(saved.output, grad_output, bn);
  const Vector correction = rmsnorm_backward_correction(row_dot_partials, saved.rstd, hidden_of(layer));
  const Matrix scaled_grad = row_scale(grad_output, saved.rstd);
  const Matrix d = gemm(scaled_grad, Major::k, layer.w2, Major::mn);  // D' = (rstd dZ) W2
  const Matrix grad_h =
      residual_rmsnorm_backward(d, saved.residual_out, layer.norm_weight, correction, grad_residual_out);
  const Matrix product = gemm(scaled_grad, Major::mn, saved.residual_out, Major::mn);  // G = (rstd dZ)^T H
  RmsNormWeightGradients weights = rmsnorm_weight_gradients(product, layer.w2, layer.norm_weight, bm);
  return gradients_from(layer, grad_h, combine_column_partials(weights.norm_weight_partials, Combine::sum),
                        std::move(weights.grad_projection_weight));
}

Matrix row_scale_swiglu(const Matrix& y, const Vector& rstd) { return swiglu(row_scale(y, rstd)); }

Matrix row_scale_rope(const Matrix& y, const Vector& rstd, const std::vector<int32_t>& positions,
                      const RopeCache& cache, int64_t head_dim, int64_t rot_heads) {
  return rope(row_scale(y, rstd), positions, cache, head_dim, rot_heads);
}

CrossEntropyPartials row_scale_cross_entropy_partials(const Matrix& y, const Vector& rstd,
                                                      const std::vector<int32_t>& targets, int64_t bn,
                                                      const CrossEntropyOptions& options) {
  return cross_entropy_partials(row_scale(y, rstd), targets, bn, options);
}

}  // namespace coda::reference

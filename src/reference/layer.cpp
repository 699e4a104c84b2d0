#include "coda/reference/layer.hpp"

#include <utility>

#include "coda/core/layout.hpp"
#include "coda/reference/gemm.hpp"
#include "coda/reference/reductions.hpp"
#include "coda/reference/rmsnorm.hpp"
#include "coda/reference/swiglu.hpp"
#include "reference/checks.hpp"

namespace coda::reference {
namespace {

int64_t hidden_of(const Layer& layer) { return layer.wo.rows; }

void check_layer(ArgumentCheck& check, const Layer& layer, const LayerInputs& in) {
  const int64_t hidden = hidden_of(layer), tokens = in.attn_out.rows;
  checks::require_shape(check, "layer.wo", layer.wo, hidden, hidden, "H x H");
  checks::require_length(check, "layer.norm1", layer.norm1.size(), hidden, "one weight per hidden column");
  check.require(layer.w_gate_up.rows % 2 == 0 && layer.w_gate_up.cols == hidden, "layer.w_gate_up", "is ",
                checks::shape_of(layer.w_gate_up), " but must be 2F x H with H = ", hidden);
  checks::require_shape(check, "layer.w_down", layer.w_down, hidden, layer.w_gate_up.rows / 2, "H x F");
  checks::require_length(check, "layer.norm2", layer.norm2.size(), hidden, "one weight per hidden column");
  check.require(layer.w_qkv.cols == hidden && layer.w_qkv.rows >= 1, "layer.w_qkv", "is ",
                checks::shape_of(layer.w_qkv), " but must be Nqkv x H with H = ", hidden);
  checks::require_epsilon(check, "layer.eps", layer.eps);
  checks::require_shape(check, "in.attn_out", in.attn_out, tokens, hidden, "T x H");
  checks::require_shape(check, "in.residual", in.residual, tokens, hidden, "T x H, like attn_out");
  // The RoPE rules (heads, positions, cache) are rope()'s, checked when it runs.
}

void check_backward(ArgumentCheck& check, const Layer& layer, const LayerInputs& in, const LayerForward& f,
                    const Matrix& grad_h2, const Matrix& grad_qkv) {
  check_layer(check, layer, in);
  const int64_t tokens = in.attn_out.rows, hidden = hidden_of(layer);
  checks::require_shape(check, "forward.h2", f.h2, tokens, hidden, "T x H");
  checks::require_shape(check, "forward.qkv", f.qkv, tokens, layer.w_qkv.rows, "T x Nqkv");
  checks::require_shape(check, "grad_h2", grad_h2, tokens, hidden, "the shape of h2");
  checks::require_shape(check, "grad_qkv", grad_qkv, tokens, layer.w_qkv.rows, "the shape of qkv");
}

Matrix plus(Matrix a, const Matrix& b) {
  for (std::size_t i = 0; i < a.data.size(); ++i) a.data[i] += b.data[i];
  return a;
}

// X W^T for an nn.Linear weight W (N x K).
Matrix linear(const Matrix& x, const Matrix& w) { return gemm(x, Major::k, w, Major::k); }
// dY W: the data gradient through that linear.
Matrix data_gradient(const Matrix& dy, const Matrix& w) { return gemm(dy, Major::k, w, Major::mn); }
// dY^T X: its weight gradient.
Matrix weight_gradient(const Matrix& dy, const Matrix& x) { return gemm(dy, Major::mn, x, Major::mn); }

}  // namespace

LayerForward layer_forward(const Layer& layer, const LayerInputs& in) {
  ArgumentCheck check("coda::reference::layer_forward");
  check_layer(check, layer, in);
  check.throw_if_error();
  LayerForward f;
  f.h1 = plus(linear(in.attn_out, layer.wo), in.residual);
  f.rstd1 = rmsnorm_rstd(f.h1, layer.eps);
  f.pre_activation = linear(rmsnorm(f.h1, layer.norm1, layer.eps), layer.w_gate_up);
  f.activation = swiglu(f.pre_activation);
  f.h2 = plus(linear(f.activation, layer.w_down), f.h1);
  f.rstd2 = rmsnorm_rstd(f.h2, layer.eps);
  f.qkv = rope(linear(rmsnorm(f.h2, layer.norm2, layer.eps), layer.w_qkv), in.positions, layer.cache, layer.head_dim,
               layer.rotated_heads);
  return f;
}

LayerForward layer_forward_fused(const Layer& layer, const LayerInputs& in, int64_t bn) {
  ArgumentCheck check("coda::reference::layer_forward_fused");
  check_layer(check, layer, in);
  checks::require_tile_size(check, "bn", bn);
  check.throw_if_error();
  const int64_t hidden = hidden_of(layer);
  LayerForward f;
  // GEMM + residual + RMSNorm partials (U = H g), rstd, GEMM + row scale + SwiGLU.
  const ResidualRmsNorm first = residual_rmsnorm(linear(in.attn_out, layer.wo), in.residual, layer.norm1, bn);
  f.h1 = first.residual;
  f.rstd1 = rstd_from_partials(first.sum_squares, hidden, layer.eps);
  f.pre_activation = row_scale(linear(first.weighted, layer.w_gate_up), f.rstd1);
  f.activation = swiglu(f.pre_activation);
  // Again for the second norm, then GEMM + row scale + RoPE.
  const ResidualRmsNorm second = residual_rmsnorm(linear(f.activation, layer.w_down), f.h1, layer.norm2, bn);
  f.h2 = second.residual;
  f.rstd2 = rstd_from_partials(second.sum_squares, hidden, layer.eps);
  f.qkv = rope(row_scale(linear(second.weighted, layer.w_qkv), f.rstd2), in.positions, layer.cache, layer.head_dim,
               layer.rotated_heads);
  return f;
}

LayerGradients layer_backward(const Layer& layer, const LayerInputs& in, const LayerForward& f, const Matrix& grad_h2,
                              const Matrix& grad_qkv) {
  ArgumentCheck check("coda::reference::layer_backward");
  check_backward(check, layer, in, f, grad_h2, grad_qkv);
  check.throw_if_error();
  LayerGradients g;
  // qkv = RoPE(N2 Wqkv^T), N2 = RMSNorm(h2)
  const Matrix grad_z2 = rope_backward(grad_qkv, in.positions, layer.cache, layer.head_dim, layer.rotated_heads);
  g.w_qkv = weight_gradient(grad_z2, rmsnorm(f.h2, layer.norm2, layer.eps));
  RmsNormBackward norm2 = rmsnorm_backward(data_gradient(grad_z2, layer.w_qkv), f.h2, layer.norm2, layer.eps);
  g.norm2 = std::move(norm2.grad_weight);
  const Matrix grad_h2_total = plus(norm2.grad_input, grad_h2);
  // h2 = h1 + a Wd^T, a = swiglu(P), P = N1 Wgu^T
  g.w_down = weight_gradient(grad_h2_total, f.activation);
  const Matrix grad_p = swiglu_backward(data_gradient(grad_h2_total, layer.w_down), f.pre_activation, 1).grad_y;
  g.w_gate_up = weight_gradient(grad_p, rmsnorm(f.h1, layer.norm1, layer.eps));
  RmsNormBackward norm1 = rmsnorm_backward(data_gradient(grad_p, layer.w_gate_up), f.h1, layer.norm1, layer.eps);
  g.norm1 = std::move(norm1.grad_weight);
  // h1 = r + attn_out Wo^T
  g.residual = plus(norm1.grad_input, grad_h2_total);
  g.wo = weight_gradient(g.residual, in.attn_out);
  g.attn_out = data_gradient(g.residual, layer.wo);
  return g;
}

LayerGradients layer_backward_fused(const Layer& layer, const LayerInputs& in, const LayerForward& f,
                                    const Matrix& grad_h2, const Matrix& grad_qkv, int64_t bn, int64_t bm) {
  ArgumentCheck check("coda::reference::layer_backward_fused");
  check_backward(check, layer, in, f, grad_h2, grad_qkv);
  checks::require_tile_size(check, "bn", bn);
  checks::require_tile_size(check, "bm", bm);
  check.throw_if_error();
  const int64_t hidden = hidden_of(layer);
  LayerGradients g;
  // RoPE backward: dZ2s = rstd2 R^T dqkv, the row partials of <dqkv, qkv> (= <dZ2, Z2>).
  const Matrix grad_z2 =
      row_scale(rope_backward(grad_qkv, in.positions, layer.cache, layer.head_dim, layer.rotated_heads), f.rstd2);
  const Vector correction2 = rmsnorm_backward_correction(row_partial_dots(grad_qkv, f.qkv, bn), f.rstd2, hidden);
  // GEMM dZ2s Wqkv + residual + RMSNorm backward; GEMM dZ2s^T h2 + the weight gradients.
  const Matrix grad_h2_total =
      residual_rmsnorm_backward(data_gradient(grad_z2, layer.w_qkv), f.h2, layer.norm2, correction2, grad_h2);
  RmsNormWeightGradients weights2 =
      rmsnorm_weight_gradients(weight_gradient(grad_z2, f.h2), layer.w_qkv, layer.norm2, bm);
  g.w_qkv = std::move(weights2.grad_projection_weight);
  g.norm2 = combine_column_partials(weights2.norm_weight_partials, Combine::sum);
  // GEMM dh2 Wd + SwiGLU backward (dPs = rstd1 dP, the row partials of <dP, P>); dWd a plain GEMM.
  g.w_down = weight_gradient(grad_h2_total, f.activation);
  const SwigluBackward swiglu = swiglu_backward(data_gradient(grad_h2_total, layer.w_down), f.pre_activation, bn);
  const Matrix grad_p = row_scale(swiglu.grad_y, f.rstd1);
  const Vector correction1 = rmsnorm_backward_correction(swiglu.row_partials, f.rstd1, hidden);
  // GEMM dPs Wgu + residual + RMSNorm backward (dR = dh1); GEMM dPs^T h1 + the weight gradients.
  g.residual =
      residual_rmsnorm_backward(data_gradient(grad_p, layer.w_gate_up), f.h1, layer.norm1, correction1, grad_h2_total);
  RmsNormWeightGradients weights1 =
      rmsnorm_weight_gradients(weight_gradient(grad_p, f.h1), layer.w_gate_up, layer.norm1, bm);
  g.w_gate_up = std::move(weights1.grad_projection_weight);
  g.norm1 = combine_column_partials(weights1.norm_weight_partials, Combine::sum);
  // The output projection: plain GEMMs.
  g.wo = weight_gradient(g.residual, in.attn_out);
  g.attn_out = data_gradient(g.residual, layer.wo);
  return g;
}

}  // namespace coda::reference

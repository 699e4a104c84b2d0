// The layer as a sequence of coda's ops (coda/blocks/layer.hpp; the steps and their math:
// docs/kernels.md, "Backward"). The block checks its own arguments first, so that a message names
// the block's argument rather than the argument of an op inside it.
#include "coda/blocks/layer.hpp"

#include <algorithm>
#include <cmath>

#include "blocks/block_checks.hpp"
#include "blocks/norm_backward.hpp"
#include "blocks/workspace.hpp"
#include "coda/core/validate.hpp"
#include "coda/epilogue/parts.hpp"
#include "coda/gemm.hpp"
#include "coda/ops/rmsnorm.hpp"
#include "coda/ops/rope.hpp"
#include "coda/ops/swiglu.hpp"
#include "ops/op_checks.hpp"

namespace coda::blocks {
namespace {

constexpr const char* kWorkspaceBytes = "coda::blocks::layer_workspace_bytes";
constexpr const char* kForward = "coda::blocks::layer_forward";
constexpr const char* kBackward = "coda::blocks::layer_backward";
constexpr const char* kTokens = "one row per token";

// H, F and the QKV width, from the weights, and their element type.
struct Sizes {
  int64_t hidden;
  int64_t ffn;
  int64_t qkv;
  DType dtype;
};

constexpr const char* kShapes = "wo H x H, w_gate_up 2F x H, w_down H x F, w_qkv Nqkv x H";

// Weights and their gradients: the shapes of coda/blocks/layer.hpp (H from wo's rows, F from
// w_down's columns, the QKV width from w_qkv's rows).
void check_weight(ArgumentCheck& check, const char* argument, const TensorView& w, int64_t rows, int64_t cols,
                  DType dtype) {
  ops::check_output(check, argument, w, rows, cols, dtype, kShapes);
}

Sizes check_weights(ArgumentCheck& check, const LayerWeights& w) {
  check.not_null("weights.wo", w.wo.data)
      .rank_in("weights.wo", w.wo, 2, 2)
      .dtype_in("weights.wo", w.wo.dtype, {DType::bf16, DType::f16})
      .not_null("weights.w_down", w.w_down.data)
      .rank_in("weights.w_down", w.w_down, 2, 2)
      .not_null("weights.w_qkv", w.w_qkv.data)
      .rank_in("weights.w_qkv", w.w_qkv, 2, 2);
  if (check.failed()) return {};
  const Sizes s{w.wo.rows(), w.w_down.cols(), w.w_qkv.rows(), w.wo.dtype};
  check.require(s.hidden % 8 == 0 && s.ffn % 8 == 0 && s.qkv % 8 == 0, "weights", "H = ", s.hidden, ", F = ", s.ffn,
                " and the QKV width ", s.qkv, " must be multiples of 8");
  check_weight(check, "weights.wo", w.wo, s.hidden, s.hidden, s.dtype);
  check_weight(check, "weights.w_gate_up", w.w_gate_up, 2 * s.ffn, s.hidden, s.dtype);
  check_weight(check, "weights.w_down", w.w_down, s.hidden, s.ffn, s.dtype);
  check_weight(check, "weights.w_qkv", w.w_qkv, s.qkv, s.hidden, s.dtype);
  ops::check_vector(check, "weights.norm1", w.norm1, s.hidden, {DType::f32, DType::bf16, DType::f16});
  ops::check_vector(check, "weights.norm2", w.norm2, s.hidden, {DType::f32, DType::bf16, DType::f16});
  const ops::RopeNames names{"weights.head_dim", "weights.rotated_heads", "weights.cos", "weights.sin"};
  ops::check_heads(check, "weights.w_qkv", "rows", s.qkv, w.head_dim, w.rotated_heads, names);
  ops::check_rope_tables(check, w.cos, w.sin, w.head_dim, names);
  check.require(std::isfinite(w.eps) && w.eps >= 0.0f, "weights.eps", "is ", w.eps, " but must be finite and >= 0");
  return s;
}

// The activations every call shares: T x H inputs and outputs, positions, the saved tensors.
void check_tokens(ArgumentCheck& check, const Sizes& s, int64_t tokens, const TensorView& attn_out,
                  const TensorView& positions, const TensorView& h2, const TensorView& qkv, const LayerSaved& saved) {
  ops::check_output(check, "attn_out", attn_out, tokens, s.hidden, s.dtype, kTokens);
  ops::check_vector(check, "positions", positions, tokens, {DType::i32});
  ops::check_output(check, "h2", h2, tokens, s.hidden, s.dtype, kTokens);
  ops::check_output(check, "qkv", qkv, tokens, s.qkv, s.dtype, kTokens);
  ops::check_output(check, "saved.h1", saved.h1, tokens, s.hidden, s.dtype, kTokens);
  ops::check_vector(check, "saved.rstd1", saved.rstd1, tokens, {DType::f32});
  ops::check_output(check, "saved.pre_activation", saved.pre_activation, tokens, 2 * s.ffn, s.dtype, kTokens);
  ops::check_output(check, "saved.activation", saved.activation, tokens, s.ffn, s.dtype, kTokens);
  ops::check_vector(check, "saved.rstd2", saved.rstd2, tokens, {DType::f32});
}

void check_weight_gradient(ArgumentCheck& check, const char* argument, const TensorView& g, int64_t rows, int64_t cols,
                           DType dtype) {
  detail::check_weight_gradient(check, argument, g, rows, cols, dtype, kShapes);
}

void check_gradients(ArgumentCheck& check, const Sizes& s, int64_t tokens, const TensorView& grad_h2,
                     const TensorView& grad_qkv, const LayerGradients& g) {
  ops::check_output(check, "grad_h2", grad_h2, tokens, s.hidden, s.dtype, kTokens);
  ops::check_output(check, "grad_qkv", grad_qkv, tokens, s.qkv, s.dtype, kTokens);
  ops::check_output(check, "grads.attn_out", g.attn_out, tokens, s.hidden, s.dtype, kTokens);
  ops::check_output(check, "grads.residual", g.residual, tokens, s.hidden, s.dtype, kTokens);
  check_weight_gradient(check, "grads.wo", g.wo, s.hidden, s.hidden, s.dtype);
  check_weight_gradient(check, "grads.w_gate_up", g.w_gate_up, 2 * s.ffn, s.hidden, s.dtype);
  check_weight_gradient(check, "grads.w_down", g.w_down, s.hidden, s.ffn, s.dtype);
  check_weight_gradient(check, "grads.w_qkv", g.w_qkv, s.qkv, s.hidden, s.dtype);
  ops::check_vector(check, "grads.norm1", g.norm1, s.hidden, {DType::f32, DType::bf16, DType::f16});
  ops::check_vector(check, "grads.norm2", g.norm2, s.hidden, {DType::f32, DType::bf16, DType::f16});
}

// The workspace: the forward's buffers and the backward's overlap (one runs at a time). Counts
// only when `base` is null.
struct Workspace {
  // forward
  TensorView weighted;  // U = h g, T x H: U1 for the gate/up GEMM, then U2 for the QKV GEMM
  void* sum_squares;    // the residual + RMSNorm ops' partials
  std::size_t sum_squares_bytes;
  // backward
  TensorView grad_z2;                // rstd2 dZ2, T x Nqkv (RoPE backward), until its two GEMMs have run
  TensorView grad_pre_activation;    // rstd1 dP, T x 2F (SwiGLU backward), in grad_z2's place after them
  TensorView grad_h2;                // dh2 with the second norm's backward, T x H
  TensorView row_dots_qkv;           // <dqkv, qkv> partials, T x parts(Nqkv)
  TensorView row_dots_ffn;           // <dP, P> partials, T x parts(F), in the same place
  detail::NormBackwardScratch norm;  // each norm's backward in turn
  std::size_t bytes;
};

Workspace layout(const Sizes& s, int64_t t, void* base) {
  Workspace w{};
  ops::Carve forward(base);
  w.weighted = forward.matrix(s.dtype, t, s.hidden);
  w.sum_squares_bytes = ops::residual_rmsnorm_workspace_bytes(t, s.hidden);
  w.sum_squares = forward.take(w.sum_squares_bytes);

  ops::Carve backward(base);
  const std::size_t gradient_region = backward.used();
  w.grad_z2 = backward.matrix(s.dtype, t, s.qkv);
  const std::size_t after_grad_z2 = backward.used();
  backward.rewind(gradient_region);
  w.grad_pre_activation = backward.matrix(s.dtype, t, 2 * s.ffn);
  backward.rewind(std::max(after_grad_z2, backward.used()));
  w.grad_h2 = backward.matrix(s.dtype, t, s.hidden);
  void* dots = backward.take(std::size_t(t) *
                             std::size_t(std::max(epilogue::parts_along(s.qkv), epilogue::parts_along(s.ffn))) * 4);
  w.row_dots_qkv = TensorView::matrix(dots, DType::f32, t, epilogue::parts_along(s.qkv));
  w.row_dots_ffn = TensorView::matrix(dots, DType::f32, t, epilogue::parts_along(s.ffn));
  w.norm = detail::carve_norm_backward(backward, t, std::max(s.qkv, 2 * s.ffn), s.hidden);
  w.bytes = std::max(forward.used(), backward.used());
  return w;
}

Workspace checked_workspace(ArgumentCheck& check, const Sizes& s, int64_t tokens, void* base, std::size_t bytes) {
  const Workspace w = layout(s, tokens, base);
  ops::check_workspace(check, base, bytes, w.bytes, kWorkspaceBytes);
  check.throw_if_error();
  return w;
}

}  // namespace

std::size_t layer_workspace_bytes(const LayerWeights& weights, int64_t tokens) {
  ArgumentCheck check(kWorkspaceBytes);
  const Sizes s = check_weights(check, weights);
  check.positive("tokens", tokens, "the tokens");
  check.throw_if_error();
  return layout(s, tokens, nullptr).bytes;
}

void layer_forward(const LayerWeights& weights, const TensorView& attn_out, const TensorView& residual,
                   const TensorView& positions, const TensorView& h2, const TensorView& qkv, const LayerSaved& saved,
                   void* workspace, std::size_t workspace_bytes, cudaStream_t stream) {
  reported_by(kForward, [&] {
    ArgumentCheck check(kForward);
    const Sizes s = check_weights(check, weights);
    check.throw_if_error();
    const int64_t t = detail::tokens_of(attn_out);
    check.positive("attn_out", t, "its rows (tokens)");
    check_tokens(check, s, t, attn_out, positions, h2, qkv, saved);
    ops::check_output(check, "residual", residual, t, s.hidden, s.dtype, kTokens);
    check.throw_if_error();
    const Workspace w = checked_workspace(check, s, t, workspace, workspace_bytes);

    // h1 = r + attn_out Wo^T, U1 = h1 g1, rstd1; then P = rstd1 (U1 Wgu^T), a = swiglu(P).
    ops::gemm_residual_rmsnorm(attn_out, weights.wo, residual, weights.norm1, weights.eps, saved.h1, w.weighted,
                               saved.rstd1, w.sum_squares, w.sum_squares_bytes, stream);
    ops::gemm_swiglu(w.weighted, weights.w_gate_up, saved.activation, stream,
                     {.pre_activation = saved.pre_activation, .row_scale = saved.rstd1, .gemm = {}});
    // h2 = h1 + a Wd^T, U2 = h2 g2, rstd2; then qkv = RoPE(rstd2 (U2 Wqkv^T)).
    ops::gemm_residual_rmsnorm(saved.activation, weights.w_down, saved.h1, weights.norm2, weights.eps, h2, w.weighted,
                               saved.rstd2, w.sum_squares, w.sum_squares_bytes, stream);
    ops::gemm_rope(w.weighted, weights.w_qkv, positions, weights.cos, weights.sin, weights.head_dim,
                   weights.rotated_heads, qkv, stream, {.row_scale = saved.rstd2, .gemm = {}});
  });
}

Status try_layer_forward(const LayerWeights& weights, const TensorView& attn_out, const TensorView& residual,
                         const TensorView& positions, const TensorView& h2, const TensorView& qkv,
                         const LayerSaved& saved, void* workspace, std::size_t workspace_bytes, cudaStream_t stream) {
  return status_of(kForward, [&] {
    layer_forward(weights, attn_out, residual, positions, h2, qkv, saved, workspace, workspace_bytes, stream);
  });
}

void layer_backward(const LayerWeights& weights, const TensorView& attn_out, const TensorView& positions,
                    const TensorView& h2, const TensorView& qkv, const LayerSaved& saved, const TensorView& grad_h2,
                    const TensorView& grad_qkv, const LayerGradients& grads, void* workspace,
                    std::size_t workspace_bytes, cudaStream_t stream) {
  reported_by(kBackward, [&] {
    ArgumentCheck check(kBackward);
    const Sizes s = check_weights(check, weights);
    check.throw_if_error();
    const int64_t t = detail::tokens_of(attn_out);
    check.positive("attn_out", t, "its rows (tokens)");
    check_tokens(check, s, t, attn_out, positions, h2, qkv, saved);
    check_gradients(check, s, t, grad_h2, grad_qkv, grads);
    check.throw_if_error();
    const Workspace w = checked_workspace(check, s, t, workspace, workspace_bytes);

    // RoPE backward: dZ2s = rstd2 R^T dqkv and the partials of <dqkv, qkv>.
    ops::rope_backward(grad_qkv, positions, weights.cos, weights.sin, weights.head_dim, weights.rotated_heads,
                       w.grad_z2, stream, {.output = qkv, .row_dots = w.row_dots_qkv, .row_scale = saved.rstd2});
    // The second norm: dh2 += its backward (dZ2s Wqkv), dWqkv and dg2 from dZ2s^T h2.
    detail::norm_backward(w.grad_z2, weights.w_qkv, h2, weights.norm2, saved.rstd2, w.row_dots_qkv, grad_h2,
                          w.grad_h2, grads.w_qkv, grads.norm2, w.norm, stream);
    // The MLP: dPs = rstd1 SwiGLU'(P) (dh2 Wd) with the partials of <dP, P>; dWd = dh2^T a.
    ops::gemm_swiglu_backward(w.grad_h2, weights.w_down, saved.pre_activation, w.grad_pre_activation, stream,
                              {.row_dots = w.row_dots_ffn, .row_scale = saved.rstd1, .output = {}, .gemm = {}});
    gemm({w.grad_h2, Major::mn}, {saved.activation, Major::mn}, grads.w_down, stream);
    // The first norm: dr = dh1 = dh2 + its backward (dPs Wgu); dWgu and dg1 from dPs^T h1.
    detail::norm_backward(w.grad_pre_activation, weights.w_gate_up, saved.h1, weights.norm1, saved.rstd1,
                          w.row_dots_ffn, w.grad_h2, grads.residual, grads.w_gate_up, grads.norm1, w.norm, stream);
    // The output projection: d attn_out = dr Wo, dWo = dr^T attn_out.
    gemm({grads.residual, Major::k}, {weights.wo, Major::mn}, grads.attn_out, stream);
    gemm({grads.residual, Major::mn}, {attn_out, Major::mn}, grads.wo, stream);
  });
}

Status try_layer_backward(const LayerWeights& weights, const TensorView& attn_out, const TensorView& positions,
                          const TensorView& h2, const TensorView& qkv, const LayerSaved& saved,
                          const TensorView& grad_h2, const TensorView& grad_qkv, const LayerGradients& grads,
                          void* workspace, std::size_t workspace_bytes, cudaStream_t stream) {
  return status_of(kBackward, [&] {
    layer_backward(weights, attn_out, positions, h2, qkv, saved, grad_h2, grad_qkv, grads, workspace, workspace_bytes,
                   stream);
  });
}

}  // namespace coda::blocks

// The GEMM–residual–RMSNorm–GEMM pair as a sequence of coda's ops (coda/blocks/gemm_rmsnorm_gemm.hpp;
// the math: docs/kernels.md, "The GEMM–residual–RMSNorm–GEMM pattern" and "Backward").
#include "coda/blocks/gemm_rmsnorm_gemm.hpp"

#include <algorithm>
#include <cmath>

#include "blocks/block_checks.hpp"
#include "blocks/norm_backward.hpp"
#include "blocks/workspace.hpp"
#include "coda/epilogue/parts.hpp"
#include "coda/gemm.hpp"
#include "coda/ops/rmsnorm.hpp"

namespace coda::blocks {
namespace {

constexpr const char* kWorkspaceBytes = "coda::blocks::gemm_rmsnorm_gemm_workspace_bytes";
constexpr const char* kForward = "coda::blocks::gemm_rmsnorm_gemm_forward";
constexpr const char* kBackward = "coda::blocks::gemm_rmsnorm_gemm_backward";
constexpr const char* kShapes = "w1 H x K, w2 N2 x H";
constexpr const char* kTokens = "one row per token";

struct Sizes {
  int64_t k, hidden, n2;
  DType dtype;
};

Sizes check_weights(ArgumentCheck& check, const NormPairWeights& w) {
  check.not_null("weights.w1", w.w1.data)
      .rank_in("weights.w1", w.w1, 2, 2)
      .dtype_in("weights.w1", w.w1.dtype, {DType::bf16, DType::f16})
      .not_null("weights.w2", w.w2.data)
      .rank_in("weights.w2", w.w2, 2, 2);
  if (check.failed()) return {};
  const Sizes s{w.w1.cols(), w.w1.rows(), w.w2.rows(), w.w1.dtype};
  check.require(s.k % 8 == 0 && s.hidden % 8 == 0 && s.n2 % 8 == 0, "weights", "K = ", s.k, ", H = ", s.hidden,
                " and N2 = ", s.n2, " must be multiples of 8");
  ops::check_output(check, "weights.w1", w.w1, s.hidden, s.k, s.dtype, kShapes);
  ops::check_output(check, "weights.w2", w.w2, s.n2, s.hidden, s.dtype, kShapes);
  ops::check_vector(check, "weights.norm", w.norm, s.hidden, {DType::f32, DType::bf16, DType::f16});
  check.require(std::isfinite(w.eps) && w.eps >= 0.0f, "weights.eps", "is ", w.eps, " but must be finite and >= 0");
  return s;
}

void check_tokens(ArgumentCheck& check, const Sizes& s, int64_t t, const TensorView& x, const TensorView& z,
                  const NormPairSaved& saved) {
  check.positive("x", t, "its rows (tokens)");
  ops::check_output(check, "x", x, t, s.k, s.dtype, kTokens);
  ops::check_output(check, "z", z, t, s.n2, s.dtype, kTokens);
  ops::check_output(check, "saved.h", saved.h, t, s.hidden, s.dtype, kTokens);
  ops::check_vector(check, "saved.rstd", saved.rstd, t, {DType::f32});
}

// The workspace: the forward's U and partials, then (overlapping) the backward's rstd dz, its row
// partials, the correction and the norm weight's partials.
struct Workspace {
  TensorView weighted;  // U = h g, T x H
  void* sum_squares;
  std::size_t sum_squares_bytes;
  TensorView grad_z_scaled;  // rstd dz, T x N2
  TensorView row_dots;       // <dz, z> partials, T x parts(N2)
  detail::NormBackwardScratch norm;
  std::size_t bytes;
};

Workspace layout(const Sizes& s, int64_t t, void* base) {
  Workspace w{};
  ops::Carve forward(base);
  w.weighted = forward.matrix(s.dtype, t, s.hidden);
  w.sum_squares_bytes = ops::residual_rmsnorm_workspace_bytes(t, s.hidden);
  w.sum_squares = forward.take(w.sum_squares_bytes);
  ops::Carve backward(base);
  w.grad_z_scaled = backward.matrix(s.dtype, t, s.n2);
  w.row_dots = backward.matrix(DType::f32, t, epilogue::parts_along(s.n2));
  w.norm = detail::carve_norm_backward(backward, t, s.n2, s.hidden);
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

std::size_t gemm_rmsnorm_gemm_workspace_bytes(const NormPairWeights& weights, int64_t tokens) {
  ArgumentCheck check(kWorkspaceBytes);
  const Sizes s = check_weights(check, weights);
  check.positive("tokens", tokens, "the tokens");
  check.throw_if_error();
  return layout(s, tokens, nullptr).bytes;
}

void gemm_rmsnorm_gemm_forward(const NormPairWeights& weights, const TensorView& x, const TensorView& residual,
                               const TensorView& z, const NormPairSaved& saved, void* workspace,
                               std::size_t workspace_bytes, cudaStream_t stream) {
  reported_by(kForward, [&] {
    ArgumentCheck check(kForward);
    const Sizes s = check_weights(check, weights);
    check.throw_if_error();
    const int64_t t = detail::tokens_of(x);
    check_tokens(check, s, t, x, z, saved);
    ops::check_output(check, "residual", residual, t, s.hidden, s.dtype, kTokens);
    check.throw_if_error();
    const Workspace w = checked_workspace(check, s, t, workspace, workspace_bytes);
    // h = r + x W1^T, U = h g, rstd; then z = rstd (U W2^T).
    ops::gemm_residual_rmsnorm(x, weights.w1, residual, weights.norm, weights.eps, saved.h, w.weighted, saved.rstd,
                               w.sum_squares, w.sum_squares_bytes, stream);
    ops::gemm_row_scale(w.weighted, weights.w2, saved.rstd, z, stream);
  });
}

Status try_gemm_rmsnorm_gemm_forward(const NormPairWeights& weights, const TensorView& x, const TensorView& residual,
                                     const TensorView& z, const NormPairSaved& saved, void* workspace,
                                     std::size_t workspace_bytes, cudaStream_t stream) {
  return status_of(
      kForward, [&] { gemm_rmsnorm_gemm_forward(weights, x, residual, z, saved, workspace, workspace_bytes, stream); });
}

void gemm_rmsnorm_gemm_backward(const NormPairWeights& weights, const TensorView& x, const TensorView& z,
                                const NormPairSaved& saved, const TensorView& grad_z, const TensorView& grad_h,
                                const NormPairGradients& grads, void* workspace, std::size_t workspace_bytes,
                                cudaStream_t stream) {
  reported_by(kBackward, [&] {
    ArgumentCheck check(kBackward);
    const Sizes s = check_weights(check, weights);
    check.throw_if_error();
    const int64_t t = detail::tokens_of(x);
    check_tokens(check, s, t, x, z, saved);
    ops::check_output(check, "grad_z", grad_z, t, s.n2, s.dtype, kTokens);
    if (grad_h.data) ops::check_output(check, "grad_h", grad_h, t, s.hidden, s.dtype, kTokens);
    ops::check_output(check, "grads.x", grads.x, t, s.k, s.dtype, kTokens);
    ops::check_output(check, "grads.residual", grads.residual, t, s.hidden, s.dtype, kTokens);
    detail::check_weight_gradient(check, "grads.w1", grads.w1, s.hidden, s.k, s.dtype, kShapes);
    detail::check_weight_gradient(check, "grads.w2", grads.w2, s.n2, s.hidden, s.dtype, kShapes);
    ops::check_vector(check, "grads.norm", grads.norm, s.hidden, {DType::f32, DType::bf16, DType::f16});
    check.throw_if_error();
    const Workspace w = checked_workspace(check, s, t, workspace, workspace_bytes);
    // rstd dz and the partials of <dz, z>; dh = grad_h + the norm's backward (rstd dz W2); dW2 and dg
    // from (rstd dz)^T h; dx = dh W1, dW1 = dh^T x.
    ops::row_scale_backward(grad_z, z, saved.rstd, w.grad_z_scaled, w.row_dots, stream);
    detail::norm_backward(w.grad_z_scaled, weights.w2, saved.h, weights.norm, saved.rstd, w.row_dots, grad_h,
                          grads.residual, grads.w2, grads.norm, w.norm, stream);
    gemm({grads.residual, Major::k}, {weights.w1, Major::mn}, grads.x, stream);
    gemm({grads.residual, Major::mn}, {x, Major::mn}, grads.w1, stream);
  });
}

Status try_gemm_rmsnorm_gemm_backward(const NormPairWeights& weights, const TensorView& x, const TensorView& z,
                                      const NormPairSaved& saved, const TensorView& grad_z, const TensorView& grad_h,
                                      const NormPairGradients& grads, void* workspace, std::size_t workspace_bytes,
                                      cudaStream_t stream) {
  return status_of(kBackward, [&] {
    gemm_rmsnorm_gemm_backward(weights, x, z, saved, grad_z, grad_h, grads, workspace, workspace_bytes, stream);
  });
}

}  // namespace coda::blocks

// coda/ops/rmsnorm.hpp: the GEMM-residual-RMSNorm-GEMM pattern: GEMM + residual + RMSNorm partials,
// then GEMM + row scale.
//
//   // h = x W1^T + residual (the new residual stream), u = h * g, rstd = rsqrt(mean(h^2) + eps)
//   std::size_t bytes = coda::ops::residual_rmsnorm_workspace_bytes(tokens, hidden);
//   coda::ops::gemm_residual_rmsnorm(x, w1, residual, g, 1e-6f, h, u, rstd, workspace, bytes, stream);
//   // RMSNorm(h) W2^T, without ever normalizing h: rstd is one scalar per row, so it commutes
//   coda::ops::gemm_row_scale(u, w2, rstd, z, stream);
//
// x, w1, residual, h, u share one type (bf16 or f16); g is f32, bf16 or f16; rstd f32. The
// workspace holds the per-part sums of squares: residual_rmsnorm_workspace_bytes(M, N), any
// contents (every byte the op reads, it writes first).
//
// u is optional: g scales along W2's K, so it can be folded into W2 once (W2' = W2 diag(g)) and
// the second GEMM read h itself; with an empty u (data null) U is not stored and g not read (it
// may be empty too), a third less memory traffic in the epilogue:
//
//   coda::ops::gemm_residual_rmsnorm(x, w1, residual, {}, 1e-6f, h, {}, rstd, workspace, bytes, stream);
//   coda::ops::gemm_row_scale(h, w2_times_g, rstd, z, stream);
//
// The backward (docs/kernels.md), given the gradient dZ of the second GEMM's output as the op
// producing it stores it: scaled by rstd (dZs = rstd ⊙ dZ: gemm_swiglu_backward's and
// rope_backward's row_scale), with the row partials of <dZ, Z> (their row_dots):
//
//   // dH = dH_out + the RMSNorm backward of dZs W2 (h, rstd: the forward's; weight g)
//   coda::ops::gemm_residual_rmsnorm_backward(dzs, w2, h, g, rstd, row_dots, dh, ws, ws_bytes, stream,
//                                             {.grad_residual = dh_out});
//   // dW2 = dZ^T RMSNorm(h) and dg, from one GEMM dZs^T h
//   coda::ops::gemm_rmsnorm_weight_gradients(dzs, h, w2, g, dw2, dg, ws2, ws2_bytes, stream);
//   // then dX = dH W1 and dW1 = dH^T X (coda::gemm), dR = dH
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "coda/core/api.hpp"
#include "coda/core/status.hpp"
#include "coda/core/tensor.hpp"
#include "coda/gemm.hpp"

namespace coda::ops {

struct ResidualRmsNormOptions {
  GemmOptions gemm;
};

struct RowScaleOptions {
  GemmOptions gemm;
};

/// Bytes of the workspace gemm_residual_rmsnorm needs for M x N outputs (M, N >= 1).
CODA_API std::size_t residual_rmsnorm_workspace_bytes(int64_t m, int64_t n);

/// h = X W^T + residual, u = h * weight, rstd = rsqrt(mean(h^2) + eps). h, u: M x N (u optional:
/// data null, not stored); rstd: M (f32).
CODA_API void gemm_residual_rmsnorm(const TensorView& x, const TensorView& w, const TensorView& residual,
                                    const TensorView& weight, float eps, const TensorView& h, const TensorView& u,
                                    const TensorView& rstd, void* workspace, std::size_t workspace_bytes,
                                    cudaStream_t stream = nullptr, const ResidualRmsNormOptions& options = {});
CODA_API Status try_gemm_residual_rmsnorm(const TensorView& x, const TensorView& w, const TensorView& residual,
                                          const TensorView& weight, float eps, const TensorView& h, const TensorView& u,
                                          const TensorView& rstd, void* workspace, std::size_t workspace_bytes,
                                          cudaStream_t stream = nullptr, const ResidualRmsNormOptions& options = {});

/// out = rstd[m] * (X W^T): the GEMM after an RMSNorm, the normalization moved past it.
CODA_API void gemm_row_scale(const TensorView& x, const TensorView& w, const TensorView& rstd, const TensorView& out,
                             cudaStream_t stream = nullptr, const RowScaleOptions& options = {});
CODA_API Status try_gemm_row_scale(const TensorView& x, const TensorView& w, const TensorView& rstd,
                                   const TensorView& out, cudaStream_t stream = nullptr,
                                   const RowScaleOptions& options = {});

// ---- backward ------------------------------------------------------------------------------------
/// Row partials per row an op writes over n columns of its output (row_dots): ceil(n / 128).
CODA_API int64_t row_partial_count(int64_t n);

/// The backward of Z = scale[m] * Y (gemm_row_scale; the row_scale of the fused ops) for a gradient
/// dZ that comes from outside rather than from a GEMM's epilogue: grad_input = scale ⊙ dZ (the
/// operand the backward ops below take) and, with `output` (Z), row_dots: the row partials of
/// <dZ, Z> (f32, M x row_partial_count(N)). grad_output, output and grad_input are M x N of one
/// type, bf16 or f16; scale is f32 (M). output and row_dots may be empty (not computed).
CODA_API void row_scale_backward(const TensorView& grad_output, const TensorView& output, const TensorView& scale,
                                 const TensorView& grad_input, const TensorView& row_dots,
                                 cudaStream_t stream = nullptr);
CODA_API Status try_row_scale_backward(const TensorView& grad_output, const TensorView& output,
                                       const TensorView& scale, const TensorView& grad_input,
                                       const TensorView& row_dots, cudaStream_t stream = nullptr);

struct ResidualRmsNormBackwardOptions {
  TensorView grad_residual;  // optional: dH_out (M x hidden), the gradient reaching h from later layers
  // grad_output holds rstd ⊙ dZ (what the backward ops store with their row_scale); false: dZ itself.
  bool grad_output_scaled = true;
  GemmOptions gemm;
};

/// Bytes of the workspace gemm_residual_rmsnorm_backward needs for M rows (M >= 1), any contents.
CODA_API std::size_t residual_rmsnorm_backward_workspace_bytes(int64_t m);

/// dH = dH_out + RMSNorm'(h) (dZ W2): grad_output dZs = rstd ⊙ dZ (M x N2; see options), w the
/// second GEMM's weight W2 (N2 x hidden, nn.Linear layout), h (M x hidden) and rstd (f32, M) as
/// gemm_residual_rmsnorm stored them, weight g (f32, bf16 or f16, hidden), row_dots the row partials
/// of <dZ, Z> (f32, M x P, any P >= 1: summed in order), grad_h (M x hidden). grad_output, w, h,
/// grad_h (and grad_residual) share one type, bf16 or f16.
CODA_API void gemm_residual_rmsnorm_backward(const TensorView& grad_output, const TensorView& w, const TensorView& h,
                                             const TensorView& weight, const TensorView& rstd,
                                             const TensorView& row_dots, const TensorView& grad_h, void* workspace,
                                             std::size_t workspace_bytes, cudaStream_t stream = nullptr,
                                             const ResidualRmsNormBackwardOptions& options = {});
CODA_API Status try_gemm_residual_rmsnorm_backward(const TensorView& grad_output, const TensorView& w,
                                                   const TensorView& h, const TensorView& weight,
                                                   const TensorView& rstd, const TensorView& row_dots,
                                                   const TensorView& grad_h, void* workspace,
                                                   std::size_t workspace_bytes, cudaStream_t stream = nullptr,
                                                   const ResidualRmsNormBackwardOptions& options = {});

struct RmsNormWeightGradientsOptions {
  GemmOptions gemm;
};

/// Bytes of the workspace gemm_rmsnorm_weight_gradients needs for a W2 of n2 x hidden, any contents.
CODA_API std::size_t rmsnorm_weight_gradients_workspace_bytes(int64_t n2, int64_t hidden);

/// The weight gradients around an RMSNorm feeding a GEMM, from the one GEMM G = dZs^T h: grad_w =
/// dW2 = G ⊙ g (N2 x hidden; the operands' type or f32) and grad_weight = dg = sum_i G ⊙ W2 (hidden;
/// f32, bf16 or f16). grad_output dZs = rstd ⊙ dZ (T x N2), h the saved residual stream (T x hidden),
/// w = W2 (N2 x hidden), weight g (f32, bf16 or f16, hidden); grad_output, h and w share one type.
CODA_API void gemm_rmsnorm_weight_gradients(const TensorView& grad_output, const TensorView& h, const TensorView& w,
                                            const TensorView& weight, const TensorView& grad_w,
                                            const TensorView& grad_weight, void* workspace, std::size_t workspace_bytes,
                                            cudaStream_t stream = nullptr,
                                            const RmsNormWeightGradientsOptions& options = {});
CODA_API Status try_gemm_rmsnorm_weight_gradients(const TensorView& grad_output, const TensorView& h,
                                                  const TensorView& w, const TensorView& weight,
                                                  const TensorView& grad_w, const TensorView& grad_weight,
                                                  void* workspace, std::size_t workspace_bytes,
                                                  cudaStream_t stream = nullptr,
                                                  const RmsNormWeightGradientsOptions& options = {});

}  // namespace coda::ops

// coda/ops/swiglu.hpp: GEMM + SwiGLU, the MLP's gate/up projection (with a row scale: after an RMSNorm).
//
//   // The MLP's gate/up projection: O = silu(X W_g^T) * (X W_u^T), one GEMM over interleaved W.
//   coda::ops::interleave_gate_up(w_gate_host, w_up_host, w_host);   // once, on the host
//   coda::ops::gemm_swiglu(x, w, out, stream);                         // x M x K, w 2F x K, out M x F
//
// All tensors are device memory except the host helper's. x, w, out (and pre_activation) share one
// type, bf16 or f16; row_scale is f32. Any M, K >= 1 and F >= 1 with 16-byte-aligned rows.
//
// The backward, from the gradient dP of the MLP's output (M x H) and the saved pre-activation:
//
//   // dY (M x 2F, interleaved like W): dO = dP W_down, then the SwiGLU derivative in its epilogue
//   coda::ops::gemm_swiglu_backward(grad_p, w_down, pre_activation, grad_pre_activation, stream,
//                                   {.row_dots = partials, .row_scale = rstd});   // for the RMSNorm before it
//   // then dX = dY W (coda::gemm, W N-major) and dW = dY^T X (both operands MN-major), or the
//   // RMSNorm backward ops of rmsnorm.hpp when an RMSNorm feeds the projection
#pragma once

#include <cuda_runtime_api.h>

#include "coda/core/api.hpp"
#include "coda/core/status.hpp"
#include "coda/core/tensor.hpp"
#include "coda/gemm.hpp"

namespace coda::ops {

struct SwigluOptions {
  TensorView pre_activation;  // optional (data null: not stored): Y = X W^T, M x 2F, for the backward
  TensorView row_scale;       // optional f32 (M): Y = rstd[m] * X W^T first (an RMSNorm before it: rmsnorm.hpp)
  GemmOptions gemm;
};

/// O[m, j] = silu(Y[m, 2j]) * Y[m, 2j + 1], Y = X W^T with W's rows interleaved (gate, up, ...).
CODA_API void gemm_swiglu(const TensorView& x, const TensorView& w, const TensorView& out,
                          cudaStream_t stream = nullptr, const SwigluOptions& options = {});
CODA_API Status try_gemm_swiglu(const TensorView& x, const TensorView& w, const TensorView& out,
                                cudaStream_t stream = nullptr, const SwigluOptions& options = {});

struct SwigluBackwardOptions {
  // Optional f32, M x row_partial_count(F) (rmsnorm.hpp): row partials of <dY, Y>, the statistic the
  // backward of an RMSNorm before the gate/up projection needs (gemm_residual_rmsnorm_backward).
  TensorView row_dots;
  // Optional f32 (M): dY stored times rstd[m], the operand the RMSNorm's backward GEMMs take.
  TensorView row_scale;
  TensorView output;  // optional (data null: not stored): O = silu(g) u recomputed (M x F), for dW_down
  GemmOptions gemm;
};

/// dY = SwiGLU'(Y) ⊙ (dP W_down): grad_output dP (M x H), w_down (H x F, the down projection's
/// nn.Linear weight), pre_activation Y (M x 2F, interleaved: what gemm_swiglu's pre_activation
/// stored), grad_pre_activation dY (M x 2F, interleaved). One dtype for all four, bf16 or f16.
CODA_API void gemm_swiglu_backward(const TensorView& grad_output, const TensorView& w_down,
                                   const TensorView& pre_activation, const TensorView& grad_pre_activation,
                                   cudaStream_t stream = nullptr, const SwigluBackwardOptions& options = {});
CODA_API Status try_gemm_swiglu_backward(const TensorView& grad_output, const TensorView& w_down,
                                         const TensorView& pre_activation, const TensorView& grad_pre_activation,
                                         cudaStream_t stream = nullptr, const SwigluBackwardOptions& options = {});

/// Host helper: W (2F x K) with rows gate_0, up_0, gate_1, up_1, ... from W_gate and W_up (F x K),
/// all in host memory, any element type.
CODA_API void interleave_gate_up(const TensorView& gate, const TensorView& up, const TensorView& out);

}  // namespace coda::ops

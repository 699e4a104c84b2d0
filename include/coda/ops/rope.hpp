// coda/ops/rope.hpp: GEMM + RoPE, the QKV projection (with a row scale: after the RMSNorm).
//
//   coda::ops::permute_rotate_half_to_interleaved(w_hf_host, 128, q_and_k_heads, w_host);  // once
//   coda::ops::gemm_rope(x, w, positions, cos, sin, /*head_dim=*/128, q_and_k_heads, out, stream);
//
// out = RoPE(X W^T) with pairs (2i, 2i + 1) of each head rotated by the angle of positions[m] and
// i, read from the cos/sin cache (max_pos x head_dim / 2, f32); heads from rotated_heads on (V)
// pass through. x, w, out share one type (bf16 or f16); positions are int32. A position outside
// [0, max_pos) makes that row's rotated outputs NaN (device data cannot be checked up front).
//
// The backward rotates the gradient back (the inverse rotation), a pass over it, with the row
// partials of <dY, Y> an RMSNorm before the projection needs (rmsnorm.hpp):
//
//   coda::ops::rope_backward(grad_qkv, positions, cos, sin, 128, q_and_k_heads, grad_z, stream,
//                            {.output = qkv, .row_dots = partials, .row_scale = rstd});
#pragma once

#include <cuda_runtime_api.h>

#include "coda/core/api.hpp"
#include "coda/core/status.hpp"
#include "coda/core/tensor.hpp"
#include "coda/gemm.hpp"

namespace coda::ops {

struct RopeOptions {
  TensorView row_scale;  // optional f32 (M): rstd[m] * X W^T first (an RMSNorm before it: rmsnorm.hpp)
  GemmOptions gemm;
};

CODA_API void gemm_rope(const TensorView& x, const TensorView& w, const TensorView& positions, const TensorView& cos,
                        const TensorView& sin, int head_dim, int rotated_heads, const TensorView& out,
                        cudaStream_t stream = nullptr, const RopeOptions& options = {});
CODA_API Status try_gemm_rope(const TensorView& x, const TensorView& w, const TensorView& positions,
                              const TensorView& cos, const TensorView& sin, int head_dim, int rotated_heads,
                              const TensorView& out, cudaStream_t stream = nullptr, const RopeOptions& options = {});

struct RopeBackwardOptions {
  TensorView output;     // Y (M x N), the forward's output: needed for row_dots
  TensorView row_dots;   // optional f32, M x row_partial_count(N) (rmsnorm.hpp): partials of <dY, Y>
  TensorView row_scale;  // optional f32 (M): the stored gradient times rstd[m] (rmsnorm.hpp's backward)
};

/// grad_input = R^T grad_output, the rotation gemm_rope applied undone row by row (same positions,
/// cache, head_dim and rotated_heads); grad_output, grad_input (and options.output) M x N of one
/// type, bf16 or f16, 16-byte-aligned rows. Reads the gradient once and writes it once (no GEMM:
/// the gradient comes from outside, attention's backward).
CODA_API void rope_backward(const TensorView& grad_output, const TensorView& positions, const TensorView& cos,
                            const TensorView& sin, int head_dim, int rotated_heads, const TensorView& grad_input,
                            cudaStream_t stream = nullptr, const RopeBackwardOptions& options = {});
CODA_API Status try_rope_backward(const TensorView& grad_output, const TensorView& positions, const TensorView& cos,
                                  const TensorView& sin, int head_dim, int rotated_heads, const TensorView& grad_input,
                                  cudaStream_t stream = nullptr, const RopeBackwardOptions& options = {});

/// Host helper: the rows of an nn.Linear weight written for rotate-half RoPE (HF/LLaMA: pairs
/// (i, i + d/2)) permuted into the interleaved order gemm_rope uses (pairs (2i, 2i + 1)), for the
/// first `rotated_heads` heads; the rest are copied. Host memory, any element type.
CODA_API void permute_rotate_half_to_interleaved(const TensorView& w, int head_dim, int rotated_heads,
                                                 const TensorView& out);

}  // namespace coda::ops

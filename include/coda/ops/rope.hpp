// coda/ops/rope.hpp: GEMM + RoPE, the QKV projection (with a row scale: after the RMSNorm).
//
//   coda::ops::permute_rotate_half_to_interleaved(w_hf_host, 128, q_and_k_heads, w_host);  // once
//   coda::ops::gemm_rope(x, w, positions, cos, sin, /*head_dim=*/128, q_and_k_heads, out, stream);
//
// out = RoPE(X W^T) with pairs (2i, 2i + 1) of each head rotated by the angle of positions[m] and
// i, read from the cos/sin cache (max_pos x head_dim / 2, f32); heads from rotated_heads on (V)
// pass through. x, w, out share one type (bf16 or f16); positions are int32. A position outside
// [0, max_pos) makes that row's rotated outputs NaN (device data cannot be checked up front).
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

/// Host helper: the rows of an nn.Linear weight written for rotate-half RoPE (HF/LLaMA: pairs
/// (i, i + d/2)) permuted into the interleaved order gemm_rope uses (pairs (2i, 2i + 1)), for the
/// first `rotated_heads` heads; the rest are copied. Host memory, any element type.
CODA_API void permute_rotate_half_to_interleaved(const TensorView& w, int head_dim, int rotated_heads,
                                                 const TensorView& out);

}  // namespace coda::ops

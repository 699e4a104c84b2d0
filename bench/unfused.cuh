// The unfused baselines: what runs after a plain GEMM when nothing is fused (PyTorch eager's
// sequence, written as straightforward CUDA kernels). One thread per element, or one block per
// row where a row statistic is needed; bf16 in and out, fp32 math.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace coda::bench {

/// O[m, j] = silu(Y[m, j]) * Y[m, F + j], with [gate | up] the two halves of Y's columns (torch.chunk).
void silu_mul(const __nv_bfloat16* y, __nv_bfloat16* out, int64_t m, int64_t f, cudaStream_t stream);

/// Interleaved RoPE on the first `rotated_heads` heads, in place.
void rope(__nv_bfloat16* y, const int32_t* positions, const float* cos, const float* sin, int64_t m, int64_t n,
          int head_dim, int rotated_heads, cudaStream_t stream);

/// h = y + r (stored), u = h * rsqrt(mean(h^2) + eps) * g (stored), rstd (stored where not null):
/// one block per row.
void residual_rmsnorm(const __nv_bfloat16* y, const __nv_bfloat16* r, const float* g, __nv_bfloat16* h,
                      __nv_bfloat16* u, int64_t m, int64_t n, float eps, cudaStream_t stream, float* rstd = nullptr);

// ---- the backward, as autograd runs it after each GEMM.

/// dY = [dgate | dup] from dO = d(silu(gate) * up) and the saved Y = [gate | up] (torch.chunk halves).
void silu_mul_backward(const __nv_bfloat16* grad_out, const __nv_bfloat16* y, __nv_bfloat16* grad_y, int64_t m,
                       int64_t f, cudaStream_t stream);

/// grad_x = the inverse rotation of grad_y (RoPE's backward).
void rope_backward(const __nv_bfloat16* grad_y, __nv_bfloat16* grad_x, const int32_t* positions, const float* cos,
                   const float* sin, int64_t m, int64_t n, int head_dim, int rotated_heads, cudaStream_t stream);

/// The backward of u = h * rstd * g: dh = dh_in + rstd * (du g - h rstd^2 mean(du g h)) (one block
/// per row), and dg = sum over rows of du h rstd (column partials of 256 rows in `partials`, f32,
/// ceil(m / 256) x n, then summed in order).
void rmsnorm_backward(const __nv_bfloat16* grad_u, const __nv_bfloat16* h, const float* g, const float* rstd,
                      const __nv_bfloat16* grad_h_in, __nv_bfloat16* grad_h, float* grad_g, float* partials, int64_t m,
                      int64_t n, cudaStream_t stream);

/// loss[m] = logsumexp(Y[m]) - Y[m, target[m]] from materialized logits: one block per row.
void cross_entropy_rows(const __nv_bfloat16* logits, const int32_t* targets, float* loss, int64_t m, int64_t v,
                        cudaStream_t stream);

}  // namespace coda::bench

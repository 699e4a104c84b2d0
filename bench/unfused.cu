#include "coda/core/device.hpp"
#include "unfused.cuh"

namespace coda::bench {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) { return unsigned((n + kThreads - 1) / kThreads); }

__global__ void silu_mul_kernel(const __nv_bfloat16* y, __nv_bfloat16* out, int64_t m, int64_t f) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= m * f) return;
  const int64_t row = i / f, j = i % f;
  const float g = __bfloat162float(y[row * 2 * f + j]), u = __bfloat162float(y[row * 2 * f + f + j]);
  out[i] = __float2bfloat16(g / (1.0f + __expf(-g)) * u);
}

// y = RoPE(x) (in place when x == y); direction -1 rotates back. Pairs past the rotated heads are
// copied.
__global__ void rope_kernel(const __nv_bfloat16* x, __nv_bfloat16* y, const int32_t* positions, const float* cos,
                            const float* sin, int64_t m, int64_t n, int head_dim, int rotated_heads, float direction) {
  const int64_t pair = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (pair >= m * n / 2) return;
  const int64_t row = pair / (n / 2), col = 2 * (pair % (n / 2));
  const __nv_bfloat16* from = x + row * n + col;
  __nv_bfloat16* to = y + row * n + col;
  if (col / head_dim >= rotated_heads) {
    if (x != y) to[0] = from[0], to[1] = from[1];
    return;
  }
  const int64_t i = (col % head_dim) / 2, p = positions[row];
  const float c = cos[p * (head_dim / 2) + i], s = direction * sin[p * (head_dim / 2) + i];
  const float a = __bfloat162float(from[0]), b = __bfloat162float(from[1]);
  to[0] = __float2bfloat16(a * c - b * s);
  to[1] = __float2bfloat16(a * s + b * c);
}

// Block-wide sum (fixed order: deterministic).
__device__ float block_sum(float v, float* scratch) {
  scratch[threadIdx.x] = v;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (int(threadIdx.x) < stride) scratch[threadIdx.x] += scratch[threadIdx.x + stride];
    __syncthreads();
  }
  const float total = scratch[0];
  __syncthreads();
  return total;
}

__global__ void residual_rmsnorm_kernel(const __nv_bfloat16* y, const __nv_bfloat16* r, const float* g,
                                        __nv_bfloat16* h, __nv_bfloat16* u, float* rstd_out, int64_t n, float eps) {
  __shared__ float scratch[kThreads];
  const int64_t row = blockIdx.x;
  float squares = 0.0f;
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x) {
    const __nv_bfloat16 v = __float2bfloat16(__bfloat162float(y[row * n + c]) + __bfloat162float(r[row * n + c]));
    h[row * n + c] = v;
    squares += __bfloat162float(v) * __bfloat162float(v);
  }
  const float rstd = rsqrtf(block_sum(squares, scratch) / float(n) + eps);
  if (rstd_out != nullptr && threadIdx.x == 0) rstd_out[row] = rstd;
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x)
    u[row * n + c] = __float2bfloat16(__bfloat162float(h[row * n + c]) * rstd * g[c]);
}

__global__ void cross_entropy_kernel(const __nv_bfloat16* logits, const int32_t* targets, float* loss, int64_t v) {
  __shared__ float scratch[kThreads];
  const int64_t row = blockIdx.x;
  const __nv_bfloat16* y = logits + row * v;
  float largest = -INFINITY;
  for (int64_t c = threadIdx.x; c < v; c += blockDim.x) largest = fmaxf(largest, __bfloat162float(y[c]));
  scratch[threadIdx.x] = largest;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (int(threadIdx.x) < stride) scratch[threadIdx.x] = fmaxf(scratch[threadIdx.x], scratch[threadIdx.x + stride]);
    __syncthreads();
  }
  largest = scratch[0];
  __syncthreads();
  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < v; c += blockDim.x) sum += __expf(__bfloat162float(y[c]) - largest);
  sum = block_sum(sum, scratch);
  if (threadIdx.x == 0) loss[row] = largest + logf(sum) - __bfloat162float(y[targets[row]]);
}

__global__ void silu_mul_backward_kernel(const __nv_bfloat16* grad_out, const __nv_bfloat16* y, __nv_bfloat16* grad_y,
                                         int64_t m, int64_t f) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= m * f) return;
  const int64_t row = i / f, j = i % f;
  const float g = __bfloat162float(y[row * 2 * f + j]), u = __bfloat162float(y[row * 2 * f + f + j]);
  const float d = __bfloat162float(grad_out[i]), sigmoid = 1.0f / (1.0f + __expf(-g));
  grad_y[row * 2 * f + j] = __float2bfloat16(d * u * sigmoid * (1.0f + g * (1.0f - sigmoid)));
  grad_y[row * 2 * f + f + j] = __float2bfloat16(d * g * sigmoid);
}

__global__ void rmsnorm_backward_rows(const __nv_bfloat16* grad_u, const __nv_bfloat16* h, const float* g,
                                      const float* rstd, const __nv_bfloat16* grad_h_in, __nv_bfloat16* grad_h,
                                      int64_t n) {
  __shared__ float scratch[kThreads];
  const int64_t row = blockIdx.x;
  float dot = 0.0f;
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x)
    dot += __bfloat162float(grad_u[row * n + c]) * g[c] * __bfloat162float(h[row * n + c]);
  const float r = rstd[row], correction = r * r * block_sum(dot, scratch) / float(n);
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x) {
    const float du = __bfloat162float(grad_u[row * n + c]), x = __bfloat162float(h[row * n + c]);
    grad_h[row * n + c] = __float2bfloat16(__bfloat162float(grad_h_in[row * n + c]) + r * (du * g[c] - x * correction));
  }
}

constexpr int kRowsPerPartial = 256;

// partials[b, c] = sum over rows b*256 .. b*256+255 of du h rstd.
__global__ void norm_weight_partials(const __nv_bfloat16* grad_u, const __nv_bfloat16* h, const float* rstd,
                                     float* partials, int64_t m, int64_t n) {
  const int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (c >= n) return;
  const int64_t first = int64_t(blockIdx.y) * kRowsPerPartial, last = min(first + kRowsPerPartial, m);
  float sum = 0.0f;
  for (int64_t row = first; row < last; ++row)
    sum += __bfloat162float(grad_u[row * n + c]) * __bfloat162float(h[row * n + c]) * rstd[row];
  partials[int64_t(blockIdx.y) * n + c] = sum;
}

__global__ void sum_partials(const float* partials, float* out, int64_t blocks, int64_t n) {
  const int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (c >= n) return;
  float sum = 0.0f;
  for (int64_t b = 0; b < blocks; ++b) sum += partials[b * n + c];
  out[c] = sum;
}

}  // namespace

void silu_mul(const __nv_bfloat16* y, __nv_bfloat16* out, int64_t m, int64_t f, cudaStream_t stream) {
  silu_mul_kernel<<<blocks_for(m * f), kThreads, 0, stream>>>(y, out, m, f);
  CODA_CUDA_CHECK(cudaGetLastError());
}

void rope(__nv_bfloat16* y, const int32_t* positions, const float* cos, const float* sin, int64_t m, int64_t n,
          int head_dim, int rotated_heads, cudaStream_t stream) {
  rope_kernel<<<blocks_for(m * n / 2), kThreads, 0, stream>>>(y, y, positions, cos, sin, m, n, head_dim, rotated_heads,
                                                              1.0f);
  CODA_CUDA_CHECK(cudaGetLastError());
}

void rope_backward(const __nv_bfloat16* grad_y, __nv_bfloat16* grad_x, const int32_t* positions, const float* cos,
                   const float* sin, int64_t m, int64_t n, int head_dim, int rotated_heads, cudaStream_t stream) {
  rope_kernel<<<blocks_for(m * n / 2), kThreads, 0, stream>>>(grad_y, grad_x, positions, cos, sin, m, n, head_dim,
                                                              rotated_heads, -1.0f);
  CODA_CUDA_CHECK(cudaGetLastError());
}

void residual_rmsnorm(const __nv_bfloat16* y, const __nv_bfloat16* r, const float* g, __nv_bfloat16* h,
                      __nv_bfloat16* u, int64_t m, int64_t n, float eps, cudaStream_t stream, float* rstd) {
  residual_rmsnorm_kernel<<<unsigned(m), kThreads, 0, stream>>>(y, r, g, h, u, rstd, n, eps);
  CODA_CUDA_CHECK(cudaGetLastError());
}

void cross_entropy_rows(const __nv_bfloat16* logits, const int32_t* targets, float* loss, int64_t m, int64_t v,
                        cudaStream_t stream) {
  cross_entropy_kernel<<<unsigned(m), kThreads, 0, stream>>>(logits, targets, loss, v);
  CODA_CUDA_CHECK(cudaGetLastError());
}

void silu_mul_backward(const __nv_bfloat16* grad_out, const __nv_bfloat16* y, __nv_bfloat16* grad_y, int64_t m,
                       int64_t f, cudaStream_t stream) {
  silu_mul_backward_kernel<<<blocks_for(m * f), kThreads, 0, stream>>>(grad_out, y, grad_y, m, f);
  CODA_CUDA_CHECK(cudaGetLastError());
}

void rmsnorm_backward(const __nv_bfloat16* grad_u, const __nv_bfloat16* h, const float* g, const float* rstd,
                      const __nv_bfloat16* grad_h_in, __nv_bfloat16* grad_h, float* grad_g, float* partials, int64_t m,
                      int64_t n, cudaStream_t stream) {
  rmsnorm_backward_rows<<<unsigned(m), kThreads, 0, stream>>>(grad_u, h, g, rstd, grad_h_in, grad_h, n);
  CODA_CUDA_CHECK(cudaGetLastError());
  const int64_t blocks = (m + kRowsPerPartial - 1) / kRowsPerPartial;
  norm_weight_partials<<<dim3(blocks_for(n), unsigned(blocks)), kThreads, 0, stream>>>(grad_u, h, rstd, partials, m, n);
  CODA_CUDA_CHECK(cudaGetLastError());
  sum_partials<<<blocks_for(n), kThreads, 0, stream>>>(partials, grad_g, blocks, n);
  CODA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace coda::bench

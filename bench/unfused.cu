#include "unfused.cuh"

#include "coda/core/device.hpp"

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

__global__ void rope_kernel(__nv_bfloat16* y, const int32_t* positions, const float* cos, const float* sin, int64_t m,
                            int64_t n, int head_dim, int rotated_heads) {
  const int64_t pair = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (pair >= m * n / 2) return;
  const int64_t row = pair / (n / 2), col = 2 * (pair % (n / 2));
  if (col / head_dim >= rotated_heads) return;
  const int64_t i = (col % head_dim) / 2, p = positions[row];
  const float c = cos[p * (head_dim / 2) + i], s = sin[p * (head_dim / 2) + i];
  __nv_bfloat16* at = y + row * n + col;
  const float a = __bfloat162float(at[0]), b = __bfloat162float(at[1]);
  at[0] = __float2bfloat16(a * c - b * s);
  at[1] = __float2bfloat16(a * s + b * c);
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
                                        __nv_bfloat16* h, __nv_bfloat16* u, int64_t n, float eps) {
  __shared__ float scratch[kThreads];
  const int64_t row = blockIdx.x;
  float squares = 0.0f;
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x) {
    const __nv_bfloat16 v = __float2bfloat16(__bfloat162float(y[row * n + c]) + __bfloat162float(r[row * n + c]));
    h[row * n + c] = v;
    squares += __bfloat162float(v) * __bfloat162float(v);
  }
  const float rstd = rsqrtf(block_sum(squares, scratch) / float(n) + eps);
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

}  // namespace

void silu_mul(const __nv_bfloat16* y, __nv_bfloat16* out, int64_t m, int64_t f, cudaStream_t stream) {
  silu_mul_kernel<<<blocks_for(m * f), kThreads, 0, stream>>>(y, out, m, f);
  CODA_CUDA_CHECK(cudaGetLastError());
}

void rope(__nv_bfloat16* y, const int32_t* positions, const float* cos, const float* sin, int64_t m, int64_t n,
          int head_dim, int rotated_heads, cudaStream_t stream) {
  rope_kernel<<<blocks_for(m * n / 2), kThreads, 0, stream>>>(y, positions, cos, sin, m, n, head_dim, rotated_heads);
  CODA_CUDA_CHECK(cudaGetLastError());
}

void residual_rmsnorm(const __nv_bfloat16* y, const __nv_bfloat16* r, const float* g, __nv_bfloat16* h,
                      __nv_bfloat16* u, int64_t m, int64_t n, float eps, cudaStream_t stream) {
  residual_rmsnorm_kernel<<<unsigned(m), kThreads, 0, stream>>>(y, r, g, h, u, n, eps);
  CODA_CUDA_CHECK(cudaGetLastError());
}

void cross_entropy_rows(const __nv_bfloat16* logits, const int32_t* targets, float* loss, int64_t m, int64_t v,
                        cudaStream_t stream) {
  cross_entropy_kernel<<<unsigned(m), kThreads, 0, stream>>>(logits, targets, loss, v);
  CODA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace coda::bench

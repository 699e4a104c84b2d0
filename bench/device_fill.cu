#include "device_fill.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>

#include "coda/core/device.hpp"

namespace coda::bench {
namespace {

__device__ float uniform_from_hash(uint64_t seed, uint64_t i) {
  uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;  // splitmix64
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  return float(x >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

template <class T>
__global__ void fill_kernel(T* data, std::size_t count, uint64_t seed, float scale) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < count; i += std::size_t(gridDim.x) * blockDim.x)
    data[i] = T(scale * uniform_from_hash(seed, i));
}

__global__ void along_direction_kernel(__nv_bfloat16* data, int64_t rows, int64_t cols, uint64_t seed, float noise,
                                       uint64_t direction_seed, float offset, float slope) {
  const std::size_t count = std::size_t(rows * cols);
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < count;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const int64_t r = int64_t(i / std::size_t(cols)), c = int64_t(i % std::size_t(cols));
    const float direction = uniform_from_hash(direction_seed, std::size_t(c)) < 0.0f ? -1.0f : 1.0f;
    data[i] = __float2bfloat16(noise * uniform_from_hash(seed, i) + (offset + slope * logf(float(r + 1))) * direction);
  }
}

// Four independent 16-byte loads in flight per thread before their stores.
__global__ void copy_kernel(int4* __restrict__ to, const int4* __restrict__ from, std::size_t count) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  for (; i + 3 * stride < count; i += 4 * stride) {
    int4 v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) v[u] = __ldcs(from + i + u * stride);
#pragma unroll
    for (int u = 0; u < 4; ++u) __stcs(to + i + u * stride, v[u]);
  }
  for (; i < count; i += stride) __stcs(to + i, __ldcs(from + i));
}

}  // namespace

void copy_16byte(void* to, const void* from, std::size_t bytes, cudaStream_t stream) {
  const int sms = current_device().sm_count;
  copy_kernel<<<sms * 4, 512, 0, stream>>>(static_cast<int4*>(to), static_cast<const int4*>(from), bytes / 16);
  CODA_CUDA_CHECK(cudaGetLastError());
}

void fill_along_direction(void* data, int64_t rows, int64_t cols, uint64_t seed, float noise, uint64_t direction_seed,
                          float offset, float slope, cudaStream_t stream) {
  along_direction_kernel<<<4096, 256, 0, stream>>>(static_cast<__nv_bfloat16*>(data), rows, cols, seed, noise,
                                                   direction_seed, offset, slope);
  CODA_CUDA_CHECK(cudaGetLastError());
}

void fill_uniform(void* data, DType dtype, std::size_t count, uint64_t seed, cudaStream_t stream, float scale) {
  const int blocks = 4096, threads = 256;
  switch (dtype) {
    case DType::bf16:
      fill_kernel<<<blocks, threads, 0, stream>>>(static_cast<__nv_bfloat16*>(data), count, seed, scale);
      break;
    case DType::f16:
      fill_kernel<<<blocks, threads, 0, stream>>>(static_cast<__half*>(data), count, seed, scale);
      break;
    case DType::f32:
      fill_kernel<<<blocks, threads, 0, stream>>>(static_cast<float*>(data), count, seed, scale);
      break;
    default:
      throw InvalidArgument("coda::bench::fill_uniform", "argument 'dtype': bf16, f16 or f32 only");
  }
  CODA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace coda::bench

namespace coda::bench {
namespace {

template <class T>
__global__ void squared_sums(const T* x, const T* y, std::size_t count, double* partials) {
  double diff = 0, norm = 0;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < count; i += std::size_t(gridDim.x) * blockDim.x) {
    const double a = double(float(x[i])), b = double(float(y[i]));
    diff += (a - b) * (a - b);
    norm += b * b;
  }
  __shared__ double sd[256], sn[256];
  sd[threadIdx.x] = diff;
  sn[threadIdx.x] = norm;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (int(threadIdx.x) < s) {
      sd[threadIdx.x] += sd[threadIdx.x + s];
      sn[threadIdx.x] += sn[threadIdx.x + s];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    partials[2 * blockIdx.x] = sd[0];
    partials[2 * blockIdx.x + 1] = sn[0];
  }
}

}  // namespace

double relative_difference(const void* x, const void* y, DType dtype, std::size_t count, cudaStream_t stream) {
  constexpr int kBlocks = 1024;
  double* partials = nullptr;
  CODA_CUDA_CHECK(cudaMalloc(&partials, sizeof(double) * 2 * kBlocks));
  switch (dtype) {
    case DType::bf16: squared_sums<<<kBlocks, 256, 0, stream>>>(static_cast<const __nv_bfloat16*>(x), static_cast<const __nv_bfloat16*>(y), count, partials); break;
    case DType::f16: squared_sums<<<kBlocks, 256, 0, stream>>>(static_cast<const __half*>(x), static_cast<const __half*>(y), count, partials); break;
    default: squared_sums<<<kBlocks, 256, 0, stream>>>(static_cast<const float*>(x), static_cast<const float*>(y), count, partials); break;
  }
  double host[2 * kBlocks];
  CODA_CUDA_CHECK(cudaMemcpyAsync(host, partials, sizeof(host), cudaMemcpyDeviceToHost, stream));
  CODA_CUDA_CHECK(cudaStreamSynchronize(stream));
  cudaFree(partials);
  double diff = 0, norm = 0;
  for (int b = 0; b < kBlocks; ++b) {
    diff += host[2 * b];
    norm += host[2 * b + 1];
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

}  // namespace coda::bench

#include "router_unfused.cuh"

#include <cmath>

namespace coda::bench {
namespace {

__global__ void softmax_topk_kernel(const float* logits, int64_t ld, int64_t m, int experts, int k, float* weights,
                                    int32_t* ids) {
  const int64_t row = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32;
  const int lane = int(threadIdx.x % 32);
  if (row >= m) return;
  const float* s = logits + row * ld;
  float max = -INFINITY;
  for (int e = lane; e < experts; e += 32) max = fmaxf(max, s[e]);
  for (int o = 16; o; o /= 2) max = fmaxf(max, __shfl_xor_sync(~0u, max, o));
  float sum = 0;
  for (int e = lane; e < experts; e += 32) sum += __expf(s[e] - max);
  for (int o = 16; o; o /= 2) sum += __shfl_xor_sync(~0u, sum, o);
  uint32_t taken[16] = {};  // bit e / 32 of lane's experts (E <= 512)
  for (int j = 0; j < k; ++j) {
    float best = -INFINITY;
    int id = 0x7fffffff;
    for (int e = lane, i = 0; e < experts; e += 32, ++i)
      if (!(taken[i / 32] >> (i % 32) & 1u) && (s[e] > best || (s[e] == best && e < id))) best = s[e], id = e;
    for (int o = 16; o; o /= 2) {
      const float ob = __shfl_xor_sync(~0u, best, o);
      const int oi = __shfl_xor_sync(~0u, id, o);
      if (ob > best || (ob == best && oi < id)) best = ob, id = oi;
    }
    if (id % 32 == lane) taken[(id / 32) / 32] |= 1u << ((id / 32) % 32);
    if (lane == 0) {
      weights[row * k + j] = __expf(best - max) / sum;
      ids[row * k + j] = id;
    }
  }
}

}  // namespace

void softmax_topk_after_gemm(const float* logits, int64_t ld, int64_t m, int experts, int k, float* weights,
                             int32_t* ids, cudaStream_t stream) {
  const int threads = 128;
  softmax_topk_kernel<<<unsigned((m * 32 + threads - 1) / threads), threads, 0, stream>>>(logits, ld, m, experts, k,
                                                                                          weights, ids);
}

}  // namespace coda::bench

// The unfused router baseline: softmax over every expert, then the k largest, from f32 logits a
// separate GEMM wrote (what vLLM's topk_softmax does after its GEMM): one warp per token.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace coda::bench {

/// logits f32 (M x E, ld), weights f32 (M x k), ids int32 (M x k); k <= 32.
void softmax_topk_after_gemm(const float* logits, int64_t ld, int64_t m, int experts, int k, float* weights,
                             int32_t* ids, cudaStream_t stream);

}  // namespace coda::bench

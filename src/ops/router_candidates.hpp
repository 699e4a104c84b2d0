// Internal: the router's fused_selection GEMM (coda/ops/router.hpp), in its own translation unit
// (router_candidates.cu): its program kernels are the library's longest compile.
#pragma once

#include <cuda_runtime_api.h>

#include "coda/core/tensor.hpp"
#include "coda/ops/router.hpp"

namespace coda::ops::router_detail {

/// Candidates a part keeps per row (TopK<8>). A TopK<16> variant doubles the insertion code per
/// element and this translation unit's compile time; a larger k goes through the scores.
inline constexpr int kCandidates = 8;

/// X W^T with the RouterCandidates program (epilogue/programs/router.hpp) on the cooperative
/// m128n256 tile: `candidates` (f32, M x parts * 2 kCandidates) gets each part's kCandidates
/// (selection score, expert) per row, and `lse` (f32, M x parts; topk_softmax only) its log-sum-exp.
void launch_candidates(const TensorView& x, const TensorView& w, const TensorView& candidates,
                       const TensorView& lse, const RouterOptions& options, const char* function,
                       cudaStream_t stream);

}  // namespace coda::ops::router_detail

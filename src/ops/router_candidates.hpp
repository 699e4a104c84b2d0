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
/// m128n256 tile: M x parts slots of kCandidates (selection score, expert) at `candidates`, and for
/// topk_softmax M x parts log-sum-exp partials at `lse`.
void launch_candidates(const TensorView& x, const TensorView& w, float* candidates, float* lse,
                       const RouterOptions& options, const char* function, cudaStream_t stream);

}  // namespace coda::ops::router_detail

// Internal: the router at decode sizes (M <= kDecodeMaxRows), one cooperative kernel
// (router_decode.cu). A decode batch's scores are a few thousand dot products over a weight of
// E x K: reading the weight is the whole cost (256 x 7168 bf16 is 3.7 MB, ~1.3 us of an H100's
// memory), so the kernel spreads it over every SM, K split across CTAs, and selects in the same
// launch after one grid-wide barrier:
//
//   1. CTA (tile, split): 16 experts x a range of K, its 8 warps on interleaved 32-wide K chunks with
//      mma.sync m16n8k16 (experts on the 16 rows, tokens on the 8 columns, fragments loaded straight
//      from global memory); the warps' sums added in a fixed order to the split's partials (f32).
//   2. a grid barrier (CTAs with no token arrive and leave), then CTA b takes tokens b, b + grid,
//      ...: its scores are the splits' partials added in split order (into shared memory), then one
//      warp selects (router_select.cuh) and counts the slots; grouped selection first keeps the
//      groups: where they are whole 32-expert columns the CTA's warps take each column's top two
//      (and the sigmoids and selection scores) while adding up the scores and the selecting warp
//      ranks the groups; else in that warp where a group is a power-of-two run of whole lanes;
//      else with the whole CTA.
//
// Same inputs, same bits: every sum runs in an order fixed by the shape alone; the only atomics are
// the integer slot counts.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "coda/core/tensor.hpp"
#include "router_select.cuh"

namespace coda::ops::router_detail {

/// Tokens the decode kernel takes: two mma column tiles of 8.
inline constexpr int64_t kDecodeMaxRows = 16;

/// K splits for an E x K weight: about one CTA per SM of a 132-SM H100 over the experts' 16-row tiles,
/// at least one 32-wide K chunk per warp. A function of the shape alone, so the workspace size is
/// too; a GPU with fewer SMs runs fewer splits (the cooperative grid must be resident at once).
int decode_splits(int64_t experts, int64_t k_dim);

/// The kernel: x (M x K) and w (E x K), bf16 or f16, K-major; `partials` (f32, splits x M x E,
/// any contents); `a.scores` the scores output (f32, M x E, ld a.scores_ld) or null; `counts`
/// (int32 E) or null. `a` carries the selection's options and outputs.
void launch_decode(const TensorView& x, const TensorView& w, float* partials, int splits, SelectArgs a, int32_t* counts,
                   cudaStream_t stream);

}  // namespace coda::ops::router_detail

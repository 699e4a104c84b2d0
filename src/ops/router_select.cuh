// Internal: the router's selection (coda/ops/router.hpp): one warp per token turns the token's row
// of scores into k (weight, expert) slots. Every step runs in a fixed order: the same bits run
// after run.
#pragma once

#include <cmath>
#include <cstdint>

#include "coda/epilogue/math.hpp"
#include "coda/epilogue/monoids.hpp"
#include "coda/ops/router.hpp"
#include "coda/sm90/grid_dependency.cuh"
#include "router_groups.cuh"
#include "router_select_common.cuh"

namespace coda::ops::router_detail {

// Step 3's k rounds on `key` (they shift its runs): lane j < k gets slot j's (value, id), or keeps
// id -1. kOneHolder (lane order): the lane holding the best code takes it, with no vote in the
// round's dependent chain; a round whose best several lanes hold (an exact tie) makes the pass
// return true, and its slots are void.
template <int kRun, int kRuns, bool kLaneOrder, bool kOneHolder>
__device__ __forceinline__ bool take_rounds(int k, uint64_t (&key)[kRuns][kRun], int lane, float& my_value,
                                            int32_t& my_id) {
  static_assert(kLaneOrder || !kOneHolder, "only in lane order is the lowest lane's best the lowest id");
  my_value = 0.0f;
  my_id = -1;
  uint32_t tied = 0;
  for (int slot = 0; slot < k; ++slot) {
    uint64_t top = key[0][0];
    int from = 0;  // the run holding `top`
#pragma unroll
    for (int r = 1; r < kRuns; ++r)
      if (key[r][0] > top) top = key[r][0], from = r;
    const uint32_t head = uint32_t(top >> 32), head_tag = uint32_t(top);
    const uint32_t best = __reduce_max_sync(0xffffffffu, head);
    if (!kLaneOrder && best == 0) break;  // nothing selectable is left (uniform across the warp)
    const uint32_t holders = __ballot_sync(0xffffffffu, head == best);
    uint32_t tag;  // the chosen id's complement
    bool taken;
    if constexpr (kOneHolder) {
      tied |= best != 0 ? holders & (holders - 1) : 0u;
      tag = __shfl_sync(0xffffffffu, head_tag, __ffs(int(holders)) - 1);
      taken = head == best;
    } else if (kLaneOrder || !(holders & (holders - 1))) {  // the lowest lane holding it holds the lowest id
      const int winner = __ffs(int(holders)) - 1;
      tag = __shfl_sync(0xffffffffu, head_tag, winner);
      taken = lane == winner;  // with best 0 (nothing selectable left) lane 0 drops an empty key
    } else {                   // equal codes on several lanes, ids not in lane order: the lowest id
      tag = __reduce_max_sync(0xffffffffu, head == best ? head_tag : 0u);
      taken = head == best && head_tag == tag;
    }
    if (lane == slot && best != 0) {
      my_value = value_of_code(best);
      my_id = int32_t(~tag);
    }
    // Selects, not a branch on the one lane: the warp stays converged (a branch there diverged it
    // once a round, 0.4 us a round at 16 entries a lane: decode router, E = 512).
#pragma unroll
    for (int r = 0; r < kRuns; ++r) {
      const bool shift = taken && from == r;
#pragma unroll
      for (int j = 0; j < kRun; ++j) key[r][j] = shift ? (j + 1 < kRun ? key[r][j + 1] : 0u) : key[r][j];
    }
  }
  return tied != 0;
}

// Token m's k slots, by one warp: lane j < k writes slot j and returns its expert (-1 on lanes >= k).
// kLaneOrder (the decode kernel: a row of scores in shared memory): lane j holds experts j kPerLane
// .. (j + 1) kPerLane - 1, so that a lower lane holds only lower ids and a round's winner is the
// lowest lane holding the best code, with no second reduction for ties; otherwise lane j holds
// j, j + 32, ... (the layout grouped selection in registers needs). kGroupsInLanes (lane order,
// groups_in_lanes): step 2 keeps the groups in the warp. kPrepared (lane order, sigmoid_bias: the
// decode kernel's grouped rows of whole-column groups): a.scores holds the selection scores,
// sigmoid(s) + bias, `prepared` the weights' sigmoid(s) and whether the lane's group is kept.
template <int kPerLane, bool kLaneOrder = false, bool kGroupsInLanes = false, bool kPrepared = false>
__device__ int32_t select_token(const SelectArgs& a, int64_t m, WarpScratch& s, int lane, PreparedRow prepared = {}) {
  static_assert(!kPrepared || (kLaneOrder && !kGroupsInLanes), "a prepared row is the decode kernel's");
  const RoutingMode mode = kPrepared ? RoutingMode::sigmoid_bias : a.mode;
  const bool sigmoid = mode == RoutingMode::sigmoid_bias;
  const bool renormalized_softmax = mode == RoutingMode::topk_softmax && a.renormalize;
  const bool needs_lse = needs_log_sum_exp(mode, a.renormalize);

  // 1. The token's scores in registers: (selection score, expert), bit i of `live` set for a
  // selectable one (not NaN). Indices are constants after unrolling: no local memory.
  float value[kPerLane];
  int32_t id[kPerLane];
  uint32_t live = 0;
  float lse = 0.0f;
  const float* row = a.scores + m * a.scores_ld;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int e = kLaneOrder ? lane * kPerLane + i : lane + 32 * i;
    const float score = e < a.experts ? row[e] : NAN;
    value[i] = !kPrepared && sigmoid ? sigmoid_selection_score(a, score, e) : score;
    id[i] = e;
    if (value[i] == value[i] && (!kPrepared || prepared.lane_kept)) live |= 1u << i;
  }
  if (needs_lse) {  // over the non-NaN scores (value holds s here)
    float scores[kPerLane];
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) scores[i] = (live >> i & 1u) ? value[i] : -INFINITY;
    epilogue::LogSumExp::State parts = epilogue::LogSumExp::fold(scores);
#pragma unroll
    for (int mask = 16; mask >= 1; mask /= 2)
      parts = epilogue::LogSumExp::combine(
          parts, {__shfl_xor_sync(0xffffffffu, parts.max, mask), __shfl_xor_sync(0xffffffffu, parts.sum, mask)});
    lse = __shfl_sync(0xffffffffu, epilogue::LogSumExp::finish(parts), 0);
  }

  // 2. Grouped selection (scores only: every expert of a group): a group scores its two best; the
  // topk_group best groups are kept, every other expert leaves `live`.
  if constexpr (kLaneOrder) {
    if constexpr (kGroupsInLanes) keep_best_groups_in_lanes<kPerLane>(a, value, live, lane);
    // otherwise n_group is 1, or the caller has kept the groups (keep_best_groups_in_block, or
    // lane_group_kept for a prepared row: `live` above)
  } else if (groups_in_shared_memory(a.experts, a.n_group)) {  // groups across lanes
    keep_best_groups_in_shared_memory<kPerLane>(a, value, id, live, s, lane);
  } else if (a.n_group > 1) {
    keep_best_groups_in_registers<kPerLane>(a, value, live, lane);
  }

  // 3. k rounds of the warp's best remaining candidate; lane j keeps slot j. A lane's entries
  // become keys, the order-preserving code of the value above the complement of the id (larger
  // first, ties to the lower id; code 0: not selectable), sorted once in runs of up to 8, so that
  // its best is the largest run head. A round is one warp reduction (redux.sync: the largest head
  // code) and a vote for the lanes holding it, and the lowest of those lanes gives the slot and
  // shifts that run. Where ids are not in lane order, equal codes on several lanes (rare, uniform)
  // take a second reduction for the lowest id. With kLaneOrder the rounds neither branch on ties
  // nor stop early (a round with nothing selectable left fills no slot). Measured on the decode
  // router (H200, E = 256, k = 8, M = 1, docs/performance.md): the sorted runs against two
  // reductions and a scan of the lane's entries a round 6.25 -> 5.95-6.02 us, the lane order
  // 6.06-6.10 -> 5.69-5.72; runs of 8, not one of 16: the 63 compare-exchanges of 16 keys cost more
  // than the 38 of two runs (E = 384, M = 16384: 196.7 against 187.3 us). A lane-order row whose
  // groups step 2 did not keep here (ungrouped, or kept by the decode kernel's CTA) first runs a
  // pass in which the lane holding the best code takes it without waiting for the vote
  // (take_rounds<.., kOneHolder>: the vote only detects a tie across lanes, and a pass that met one
  // is repeated exactly from the sorted keys): ungrouped, M = 1 5.46-5.58 -> 5.38-5.41 us, M = 8
  // 5.76-5.82 -> 5.56-5.66 (H200, same run). With the groups kept in the lanes, the second pass's
  // code made DeepSeek-V3's M = 1 0.3 us slower: those rows run the exact rounds only (DeepSeek-V3's
  // own groups, whole columns, are prepared rows, which run the pass).
  constexpr int kRun = kPerLane < 8 ? kPerLane : 8, kRuns = kPerLane / kRun;
  uint64_t key[kRuns][kRun];
#pragma unroll
  for (int r = 0; r < kRuns; ++r) {
#pragma unroll
    for (int j = 0; j < kRun; ++j) {
      const int i = r * kRun + j;
      key[r][j] = uint64_t((live >> i & 1u) ? ordered_code(value[i]) : 0u) << 32 | ~uint32_t(id[i]);
    }
    sort_descending(key[r]);
  }
  float my_value = 0.0f;
  int32_t my_id = -1;
  if constexpr (kLaneOrder && !kGroupsInLanes) {  // a pass without votes, repeated exactly on a tie
    uint64_t sorted[kRuns][kRun];
#pragma unroll
    for (int r = 0; r < kRuns; ++r)
#pragma unroll
      for (int j = 0; j < kRun; ++j) sorted[r][j] = key[r][j];
    if (take_rounds<kRun, kRuns, true, true>(a.k, key, lane, my_value, my_id))
      take_rounds<kRun, kRuns, true, false>(a.k, sorted, lane, my_value, my_id);
  } else {
    take_rounds<kRun, kRuns, kLaneOrder, false>(a.k, key, lane, my_value, my_id);
  }

  // 4. Weights of the filled slots.
  const bool filled = my_id >= 0;
  float weight = 0.0f;
  if (filled) {
    switch (mode) {
      case RoutingMode::softmax_topk:  // exponentiated below
        weight = my_value;
        break;
      case RoutingMode::topk_softmax:
        weight = renormalized_softmax ? my_value : expf(my_value - lse);
        break;
      case RoutingMode::sigmoid_bias:  // p of the score, not the selection score less the bias
        weight = kPrepared ? prepared.p[my_id] : epilogue::sigmoid(a.scores[m * a.scores_ld + my_id]);
        break;
    }
  }
  if (mode == RoutingMode::softmax_topk || renormalized_softmax) {
    const float top = __shfl_sync(0xffffffffu, my_value, 0);  // slot 0 holds the largest
    weight = filled ? expf(my_value - top) : 0.0f;
    weight /= slot_sum(weight, a.k);
  } else if (a.renormalize) {
    weight /= slot_sum(weight, a.k);
  }
  weight *= a.scale;

  // 5. Slots nothing selectable filled take the lowest ids not chosen, at weight 0.
  // The filled slots are the first ones (selection stops at the first empty round).
  const int filled_count = __popc(__ballot_sync(0xffffffffu, filled));
  if (filled) s.chosen[lane] = my_id;
  __syncwarp();
  if (!filled && lane < a.k) {
    my_id = nth_unchosen(lane - filled_count, s.chosen, filled_count);
    weight = 0.0f;
  }
  if (lane >= a.k) return -1;
  a.weights[m * a.k + lane] = weight;
  a.ids[m * a.k + lane] = my_id;
  if (a.token_expert_indices) a.token_expert_indices[m * a.k + lane] = int32_t(lane * a.rows + m);
  return my_id;
}

/// One warp per token; `scratch_bytes` of dynamic shared memory a warp: sizeof(WarpScratch) where
/// groups_in_shared_memory, else kSlotScratchBytes. The selection is a chain of dependent warp
/// reductions, so resident warps are what hides it: 48 an SM (40 registers, no spills) up to 8 per
/// lane, 24 at 16 (80 registers). The whole WarpScratch, 6 KB a warp, would cap an SM at 32.
template <int kPerLane>
__global__ void __launch_bounds__(32 * kWarpsPerBlock, kPerLane < 16 ? 12 : 6)
    select_experts(SelectArgs a, int scratch_bytes) {
  extern __shared__ __align__(16) unsigned char scratch_of[];
  sm90::wait_for_prerequisite_grids();  // the scores (a programmatic launch)
  const int warp = int(threadIdx.x / 32), lane = int(threadIdx.x % 32);
  const int64_t m = int64_t(blockIdx.x) * kWarpsPerBlock + warp;
  if (m >= a.rows) return;  // the whole warp
  select_token<kPerLane>(a, m, *reinterpret_cast<WarpScratch*>(scratch_of + warp * scratch_bytes), lane);
}

}  // namespace coda::ops::router_detail

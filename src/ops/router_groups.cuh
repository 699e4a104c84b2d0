// Internal: grouped selection's first half (sigmoid_bias with n_group > 1; coda/ops/router.hpp):
// a group scores the sum of its two best selection scores, the topk_group best groups are kept and
// every other expert leaves the selection. One set of rules in six layouts: a warp's row in column
// order with groups of whole 32-expert columns (registers) or not (the warp's shared memory); the
// decode kernel's lane-order row with groups of whole columns (the CTA's column top twos, ranked by
// the selecting warp), of whole lanes (the warp), or neither (the whole CTA); the GEMM epilogue's
// row in a quad, a group a chunk of each lane.
#pragma once

#include <cmath>
#include <cstdint>

#include "router_select_common.cuh"

namespace coda::ops::router_detail {

/// Whether selection with these options reads WarpScratch past `chosen`.
CODA_HD bool groups_in_shared_memory(int experts, int n_group) { return n_group > 1 && (experts / n_group) % 32 != 0; }

/// Whether a lane-order row's groups are each a power-of-two run of whole lanes
/// (keep_best_groups_in_lanes): E = 160's 10 groups of 16 at 8 a lane are 2 lanes each (the decode
/// kernel sends groups of whole 32-expert columns, DeepSeek-V3's, to column_top_two instead).
CODA_HD bool groups_in_lanes(int experts, int n_group, int per_lane) {
  const int group_size = n_group > 1 ? experts / n_group : 0, lanes = group_size / per_lane;
  return n_group > 1 && group_size % per_lane == 0 && (lanes & (lanes - 1)) == 0;
}

// Top two of a multiset, -inf where missing: (first >= second).
struct TopTwo {
  float first, second;
  int count;  // selectable values seen
};
__device__ __forceinline__ TopTwo merge(TopTwo a, TopTwo b) {
  return {fmaxf(a.first, b.first), a.first >= b.first ? fmaxf(a.second, b.first) : fmaxf(a.first, b.second),
          a.count + b.count};
}
// A group's score: the sum of its two best selection scores, -inf with fewer than two selectable
// or where the sum is NaN (+inf and -inf, from infinite biases: fmaxf takes the non-NaN operand).
// A NaN score would be unordered: the rank counts below would keep its group and topk_group others.
__device__ __forceinline__ float group_score(TopTwo t) {
  return t.count >= 2 ? fmaxf(t.first + t.second, -INFINITY) : -INFINITY;
}
// The same from the order-preserving codes of the two best (0: none).
__device__ __forceinline__ float group_score_of_codes(uint32_t first, uint32_t second) {
  return group_score({value_of_code(first), value_of_code(second), int(first != 0) + int(second != 0)});
}
// The two largest codes seen (first >= second, 0: none) after one more.
__device__ __forceinline__ void keep_top_two(uint32_t code, uint32_t& first, uint32_t& second) {
  second = max(second, min(first, code));
  first = max(first, code);
}

// Step 2 of select_token where groups are not whole 32-expert columns (groups_in_shared_memory):
// the row's selection scores by expert in the warp's shared memory, a lane a group scoring its two
// best, then topk_group rounds of the warp's best group.
template <int kPerLane>
__device__ __forceinline__ void keep_best_groups_in_shared_memory(const SelectArgs& a, const float (&value)[kPerLane],
                                                                  const int32_t (&id)[kPerLane], uint32_t& live,
                                                                  WarpScratch& s, int lane) {
  const int group_size = a.experts / a.n_group;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i)
    if (id[i] < a.experts) s.value[id[i]] = value[i];  // NaN exactly where not live (step 1)
  __syncwarp();
  for (int g = lane; g < a.n_group; g += 32) {
    float first = -INFINITY, second = -INFINITY;
    int selectable = 0;
    for (int e = g * group_size; e < (g + 1) * group_size; ++e) {
      const float v = s.value[e];
      if (v != v) continue;
      ++selectable;
      second = v > first ? first : fmaxf(second, v);
      first = fmaxf(first, v);
    }
    s.group_score[g] = group_score({first, second, selectable});
    s.group_kept[g] = 0;
  }
  __syncwarp();
  for (int round = 0; round < a.topk_group; ++round) {
    Best b{-INFINITY, -1};
    for (int g = lane; g < a.n_group; g += 32)
      if (!s.group_kept[g] && ranks_before(s.group_score[g], g, b.value, b.id)) b = {s.group_score[g], g};
    b = warp_best(b);
    if (b.id < 0) break;  // as in keep_best_groups_in_registers (uniform across the warp)
    if (lane == 0) s.group_kept[b.id] = 1;
    __syncwarp();
  }
#pragma unroll
  for (int i = 0; i < kPerLane; ++i)
    if (id[i] < a.experts && !s.group_kept[id[i] / group_size]) live &= ~(1u << i);
}

// Step 2 of select_token where a group is a whole number of 32-expert columns (DeepSeek-V3's 8 groups
// of 32): group g is entries [g r, (g + 1) r) of every lane, r = group size / 32, so each lane takes
// the order-preserving codes of its top two of each group (0: none), two warp reductions and a vote
// give the group's (the largest; then the largest once the lowest lane holding it gives its second
// instead), and the topk_group rounds run on every lane alike, without shared memory or shuffles.
// The same scores and choices as the shared-memory path: a group's two best values are one
// multiset. A butterfly of (first, second, count) shuffles a group measured slower (M = 16384,
// E = 256, 8 groups: 159.5 against 154.2 us, docs/performance.md).
template <int kPerLane>
__device__ __forceinline__ void keep_best_groups_in_registers(const SelectArgs& a, const float (&value)[kPerLane],
                                                              uint32_t& live, int lane) {
  const int per_group = a.experts / a.n_group / 32;
  float score[kPerLane];  // entry i: the score of the group ending at entry i (others unused)
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) score[i] = -INFINITY;
  uint32_t first = 0, second = 0;  // this lane's two largest codes of the group so far
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    if (32 * i >= a.experts) break;  // uniform
    keep_top_two((live >> i & 1u) ? ordered_code(value[i]) : 0u, first, second);
    if ((i + 1) % per_group != 0) continue;  // uniform
    const uint32_t top = __reduce_max_sync(0xffffffffu, first);
    const uint32_t holders = __ballot_sync(0xffffffffu, first == top);
    const uint32_t next = __reduce_max_sync(0xffffffffu, __ffs(int(holders)) - 1 == lane ? second : first);
    score[i] = group_score_of_codes(top, next);
    first = second = 0;
  }
  uint32_t kept = 0;  // bit g: group g kept
  for (int round = 0; round < a.topk_group; ++round) {
    Best b{-INFINITY, -1};
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int g = i / per_group;
      if ((i + 1) % per_group == 0 && g < a.n_group && !(kept >> g & 1u) && ranks_before(score[i], g, b.value, b.id))
        b = {score[i], g};
    }
    if (b.id < 0) break;  // no group left (a group at -inf still ranks before none, so it is kept)
    kept |= 1u << b.id;
  }
#pragma unroll
  for (int i = 0; i < kPerLane; ++i)
    if (!(kept >> (i / per_group) & 1u)) live &= ~(1u << i);
}

// Step 2 in the GEMM epilogue's quad (router_epilogue.cuh), where a lane's chunk q of a row is its
// share of group q (n_group = 8 chunks, E the tile's width: DeepSeek-V3's 8 groups of 32 on
// m128n256): `first` and `second` are the lane's two best selection scores of each chunk, -inf
// where missing, so that a group with fewer than two selectable sums to -inf (or NaN: group_score
// makes it -inf). Two xor shuffles a chunk merge them across the quad and every lane ranks the 8
// group scores alike (ranks_before: larger first, ties to the lower group). Bit q of the result:
// group q kept.
__device__ __forceinline__ uint32_t quad_kept_groups(int topk_group, const float (&first)[8],
                                                     const float (&second)[8]) {
  float score[8];
#pragma unroll
  for (int q = 0; q < 8; ++q) {
    TopTwo t{first[q], second[q], 0};
#pragma unroll
    for (int mask = 1; mask <= 2; mask *= 2)
      t = merge(t, {__shfl_xor_sync(0xffffffffu, t.first, mask), __shfl_xor_sync(0xffffffffu, t.second, mask), 0});
    score[q] = group_score({t.first, t.second, 2});  // -inf for missing already: the sum decides
  }
  uint32_t kept = 0;
#pragma unroll
  for (int q = 0; q < 8; ++q) {
    int before = 0;  // groups ranking before q
#pragma unroll
    for (int g = 0; g < 8; ++g) before += int(ranks_before(score[g], g, score[q], q));
    kept |= before < topk_group ? 1u << q : 0u;
  }
  return kept;
}

// Step 2 of select_token on a lane-order row whose groups are runs of L whole lanes
// (groups_in_lanes): a lane takes the codes of its two best selectable entries, a group's lanes
// merge theirs in log2 L shuffle steps (every group at once), each lane ranks its group against the
// others' scores (n_group independent shuffles), and the lanes of a group not kept drop their
// entries. The same scores and choices as keep_best_groups_in_block, without a CTA barrier.
template <int kPerLane>
__device__ __forceinline__ void keep_best_groups_in_lanes(const SelectArgs& a, const float (&value)[kPerLane],
                                                          uint32_t& live, int lane) {
  const int lanes = a.experts / a.n_group / kPerLane;
  uint32_t first = 0, second = 0;  // codes, 0: none
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) keep_top_two((live >> i & 1u) ? ordered_code(value[i]) : 0u, first, second);
  for (int mask = 1; mask < lanes; mask *= 2) {  // the two best of a multiset: exact in any order
    const uint32_t other_first = __shfl_xor_sync(0xffffffffu, first, mask);
    const uint32_t other_second = __shfl_xor_sync(0xffffffffu, second, mask);
    second = max(max(second, other_second), min(first, other_first));
    first = max(first, other_first);
  }
  const int group = lane / lanes;
  const float score = group_score_of_codes(first, second);
  int before = 0;  // groups ranking before this lane's
#pragma unroll 8
  for (int h = 0; h < a.n_group; ++h)
    before += int(ranks_before(__shfl_sync(0xffffffffu, score, h * lanes), h, score, group));
  if (group >= a.n_group || before >= a.topk_group) live = 0;
}

// Where groups are whole 32-expert columns of the row (group_size % 32 == 0: DeepSeek-V3's 8 groups
// of 32), the decode kernel splits grouped selection's first half between its warps: each warp,
// while it adds up a column of 32 selection scores (one a lane), takes the codes of the column's
// two best (two reductions and a vote: `column_top_two`), and where a group is one column its
// score; the selecting warp then ranks the groups and tells each lane whether its entries' group is
// kept (`lane_group_kept`). The same scores and choices as keep_best_groups_in_lanes, whose chain
// in the selecting warp took ~1,270 cycles at E = 256 / 8 groups (H200, clock64 around the step).
struct ColumnTopTwo {
  uint32_t first, second;  // codes, 0: none
};
// Every lane of a warp, `code` its expert's (0: not selectable); the column's two best codes.
__device__ __forceinline__ ColumnTopTwo column_top_two(uint32_t code, int lane) {
  const uint32_t first = __reduce_max_sync(0xffffffffu, code);
  const uint32_t holders = __ballot_sync(0xffffffffu, code == first);
  return {first, __reduce_max_sync(0xffffffffu, __ffs(int(holders)) - 1 == lane ? 0u : code)};
}
// Whether the group of this lane's kPerLane entries (lane order: experts lane kPerLane ..) is kept;
// every lane of the warp must call. `columns`: the row's column top twos, in shared memory;
// `columns_per_group`: E / n_group / 32, computed ahead (a division is ~100 cycles of this chain);
// `scores`: n_group floats of the warp's shared memory, already the group scores where a group is
// one column (the CTA's warps wrote them beside the columns' top twos). Lane g scores group g and
// ranks it against the n_group scores read back (broadcast loads issued together): with n_group
// dependent shuffles and the divisions in the chain it took ~1,000 cycles at 8 groups (H200,
// clock64 around the step).
template <int kPerLane>
__device__ __forceinline__ bool lane_group_kept(const SelectArgs& a, const ColumnTopTwo* columns, int columns_per_group,
                                                float* scores, int lane) {
  float mine = 0.0f;
  if (columns_per_group == 1) {  // uniform
    if (lane < a.n_group) mine = scores[lane];
  } else {
    if (lane < a.n_group) {
      uint32_t first = 0, second = 0;
      for (int c = lane * columns_per_group; c < (lane + 1) * columns_per_group; ++c) {
        keep_top_two(columns[c].first, first, second);
        keep_top_two(columns[c].second, first, second);
      }
      mine = group_score_of_codes(first, second);
      scores[lane] = mine;
    }
    __syncwarp();
  }
  int before = 0;  // groups ranking before lane's group
#pragma unroll 8
  for (int h = 0; h < a.n_group; ++h) before += int(ranks_before(scores[h], h, mine, lane));
  const uint32_t kept = __ballot_sync(0xffffffffu, lane < a.n_group && before < a.topk_group);
  const int column = lane * kPerLane / 32;
  return kept >> (columns_per_group == 1 ? column : column / columns_per_group) & 1u;
}

// Grouped selection's first half, by a whole CTA of kThreads threads (thread t; every thread must
// call) on one token's scores `row` (shared memory): keeps the topk_group groups whose two best
// selection scores sum highest, ties to the lower group (the warp's rules above), and turns every
// other group's scores into NaN, which select_token never selects: it then runs with n_group 1.
// A group's lanes merge their top two in one butterfly, every group at once, and a group's place is
// the number of groups ranking before it; against one warp's butterfly per group in turn (with
// the warp's row in column order) it measured 9.4 -> 7.6 us on 8 groups of 32 at M = 1 (decode
// router, docs/performance.md), where such groups are now whole columns (column_top_two). `s`: scratch.
template <int kThreads>
__device__ void keep_best_groups_in_block(const SelectArgs& a, float* row, WarpScratch& s, int t) {
  static_assert(kThreads % 32 == 0 && kMaxGroups <= kThreads, "whole warps; a thread per group ranks them");
  for (int e = t; e < a.experts; e += kThreads)  // sigmoid_bias: NaN where not selectable
    s.value[e] = sigmoid_selection_score(a, row[e], e);
  __syncthreads();
  const int group_size = a.experts / a.n_group;
  int lanes = 32;  // threads a group: a power of two, so a group's lanes are one aligned run
  while (lanes > 1 && lanes * a.n_group > kThreads) lanes /= 2;
  const int g = t / lanes;
  TopTwo run{-INFINITY, -INFINITY, 0};
  if (g < a.n_group)
    for (int e = g * group_size + t % lanes; e < (g + 1) * group_size; e += lanes) {
      const float v = s.value[e];
      if (v == v) run = merge(run, {v, -INFINITY, 1});
    }
  for (int mask = lanes / 2; mask >= 1; mask /= 2)
    run = merge(run, {__shfl_xor_sync(0xffffffffu, run.first, mask), __shfl_xor_sync(0xffffffffu, run.second, mask),
                      __shfl_xor_sync(0xffffffffu, run.count, mask)});
  if (g < a.n_group && t % lanes == 0) s.group_score[g] = group_score(run);
  __syncthreads();
  if (t < a.n_group) {
    const float mine = s.group_score[t];
    int before = 0;
    for (int h = 0; h < a.n_group; ++h) before += int(ranks_before(s.group_score[h], h, mine, t));
    s.group_kept[t] = before < a.topk_group;
  }
  __syncthreads();
  for (int e = t; e < a.experts; e += kThreads)
    if (!s.group_kept[e / group_size]) row[e] = NAN;
  __syncthreads();
}

}  // namespace coda::ops::router_detail

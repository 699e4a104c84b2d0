// Internal: the router's selection (coda/ops/router.hpp): one warp per token turns the
// token's candidates (the GEMM epilogue's per-part top-k lists, or its whole row of scores) into
// k (weight, expert) slots. Every step runs in a fixed order: the same bits run after run.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "coda/core/host_device.hpp"
#include "coda/epilogue/math.hpp"
#include "coda/epilogue/monoids.hpp"
#include "coda/ops/router.hpp"
#include "coda/sm90/grid_dependency.cuh"
#include "router_candidates.hpp"

namespace coda::ops::router_detail {

inline constexpr int kWarpsPerBlock = 4;
// Each lane holds candidates lane, lane + 32, ... in registers: a whole row of scores (E <= 512) or
// the parts' candidate lists (at most 4 x 8). The kernel is compiled for 1, 2, 4, 8 and 16 per lane
// (per_lane_for): every round of the selection scans each lane's entries, so a row of 256 scans 8.
inline constexpr int kMaxPerLane = int(kRouterMaxExperts / 32);
inline int per_lane_for(int candidates) {
  int per_lane = 1;
  while (32 * per_lane < candidates) per_lane *= 2;
  return per_lane;
}

/// f.template operator()<kPerLane>() for the kernels' per-lane count that holds `candidates`.
template <class F>
void with_per_lane(int candidates, F&& f) {
  switch (per_lane_for(candidates)) {
    case 1:
      return f.template operator()<1>();
    case 2:
      return f.template operator()<2>();
    case 4:
      return f.template operator()<4>();
    case 8:
      return f.template operator()<8>();
    default:
      return f.template operator()<kMaxPerLane>();
  }
}

inline constexpr int kMaxGroups = 256;  // n_group: at least two experts per group

struct SelectArgs {
  // Candidates: either the epilogue's partials (M x parts slots of 2 kCandidates words, and
  // topk_softmax's lse partials M x parts), or the scores (M x E, ld scores_ld).
  const float* candidates = nullptr;
  const float* lse_parts = nullptr;
  int parts = 0;
  const float* scores = nullptr;
  int64_t scores_ld = 0;

  const float* expert_bias = nullptr;  // f32 E, or null
  RoutingMode mode = RoutingMode::softmax_topk;
  int64_t rows = 0;
  int experts = 0;
  int k = 1;
  bool renormalize = false;
  int n_group = 1;
  int topk_group = 1;
  float scale = 1.0f;

  float* weights = nullptr;  // M x k, ld k
  int32_t* ids = nullptr;
  int32_t* token_expert_indices = nullptr;  // or null
};

// (value, id) ranks before (other_value, other_id): larger, or equal with the lower id; an empty
// entry (id < 0) ranks after every real one.
__device__ __forceinline__ bool ranks_before(float value, int32_t id, float other_value, int32_t other_id) {
  if (other_id < 0) return id >= 0;
  if (id < 0) return false;
  return value > other_value || (value == other_value && id < other_id);
}

// A float's order-preserving code: unsigned comparison of codes is float comparison of values,
// with -0 taken as +0 (they tie, as in ranks_before) and no code 0 (it would be a NaN's, and a NaN
// is never selectable): 0 marks "none" in the selection's reductions.
__device__ __forceinline__ uint32_t ordered_code(float v) {
  const uint32_t u = __float_as_uint(v == 0.0f ? 0.0f : v);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float value_of_code(uint32_t c) {
  return __uint_as_float((c & 0x80000000u) ? (c & 0x7fffffffu) : ~c);
}

// Batcher's odd-even merge sort of N keys as its list of compare-exchanges (lower index, higher
// index): N log2(N)^2 / 4 of them, 19 at N = 8, 63 at N = 16; `pairs` has room for more.
template <int N>
struct SortNetwork {
  std::array<std::pair<int, int>, N * N> pairs{};
  int size = 0;
};
template <int N>
constexpr SortNetwork<N> merge_sort_network() {
  SortNetwork<N> network;
  for (int p = 1; p < N; p *= 2)
    for (int k = p; k >= 1; k /= 2)
      for (int j = k % p; j + k < N; j += 2 * k)
        for (int i = 0; i < k && i + j + k < N; ++i)
          if ((i + j) / (2 * p) == (i + j + k) / (2 * p)) network.pairs[network.size++] = {i + j, i + j + k};
  return network;
}
template <int N>
inline constexpr SortNetwork<N> kMergeSortNetwork = merge_sort_network<N>();

template <int kLow, int kHigh, int N>
__device__ __forceinline__ void compare_exchange(uint64_t (&key)[N]) {
  const uint64_t a = key[kLow], b = key[kHigh];
  key[kLow] = a > b ? a : b;
  key[kHigh] = a > b ? b : a;
}
template <int N, std::size_t... I>
__device__ __forceinline__ void sort_descending(uint64_t (&key)[N], std::index_sequence<I...>) {
  (compare_exchange<kMergeSortNetwork<N>.pairs[I].first, kMergeSortNetwork<N>.pairs[I].second>(key), ...);
}
// Sorts N keys, largest first, with every index a compile-time constant (registers, no local memory).
template <int N>
__device__ __forceinline__ void sort_descending(uint64_t (&key)[N]) {
  sort_descending(key, std::make_index_sequence<kMergeSortNetwork<N>.size>());
}

// The warp's best (value, id), every lane ending with the same answer: a butterfly in a fixed pattern.
struct Best {
  float value;
  int32_t id;
};
__device__ __forceinline__ Best warp_best(Best b) {
#pragma unroll
  for (int mask = 16; mask >= 1; mask /= 2) {
    const Best o{__shfl_xor_sync(0xffffffffu, b.value, mask), __shfl_xor_sync(0xffffffffu, b.id, mask)};
    if (ranks_before(o.value, o.id, b.value, b.id)) b = o;
  }
  return b;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int mask = 16; mask >= 1; mask /= 2) v += __shfl_xor_sync(0xffffffffu, v, mask);
  return v;
}

// A warp's shared memory: the filled slots' experts, then what grouped selection through shared
// memory needs (groups that are not whole 32-expert columns); a kernel that runs no such selection
// gives each warp only kSlotScratchBytes (select_experts), so that more warps fit an SM.
struct WarpScratch {
  int32_t chosen[kRouterMaxK];
  float value[kRouterMaxExperts];  // the row's selection scores by expert, NaN where not selectable
  float group_score[kMaxGroups];
  int32_t group_kept[kMaxGroups];
};
inline constexpr std::size_t kSlotScratchBytes = sizeof(int32_t) * kRouterMaxK;
static_assert(offsetof(WarpScratch, chosen) == 0 && offsetof(WarpScratch, value) == kSlotScratchBytes);

/// Whether selection with these options reads WarpScratch past `chosen`.
CODA_HD bool groups_in_shared_memory(int experts, int n_group) { return n_group > 1 && (experts / n_group) % 32 != 0; }

/// Whether a lane-order row's groups are each a power-of-two run of whole lanes
/// (keep_best_groups_in_lanes): DeepSeek-V3's 8 groups of 32 experts at 8 a lane are 4 lanes each.
CODA_HD bool groups_in_lanes(int experts, int n_group, int per_lane) {
  const int group_size = n_group > 1 ? experts / n_group : 0, lanes = group_size / per_lane;
  return n_group > 1 && group_size % per_lane == 0 && (lanes & (lanes - 1)) == 0;
}

/// Whether the weights need the log-sum-exp of all E scores (the fused program's lse partials):
/// topk_softmax unless renormalized, where it cancels (the weights are the softmax over the k
/// selected, softmax_topk's formula).
CODA_HD bool needs_log_sum_exp(RoutingMode mode, bool renormalize) {
  return mode == RoutingMode::topk_softmax && !renormalize;
}

// sigmoid_bias's selection score of expert e (any e: past E there is no bias): sigmoid(s) + its
// bias, NaN where s is NaN (never selectable). The bias affects only the selection, not the weight.
__device__ __forceinline__ float sigmoid_selection_score(const SelectArgs& a, float score, int e) {
  return epilogue::sigmoid(score) + (a.expert_bias && e < a.experts ? a.expert_bias[e] : 0.0f);
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
// A group's score: the sum of its two best selection scores, -inf with fewer than two selectable.
__device__ __forceinline__ float group_score(TopTwo t) { return t.count >= 2 ? t.first + t.second : -INFINITY; }

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
    const uint32_t code = (live >> i & 1u) ? ordered_code(value[i]) : 0u;
    second = max(second, min(first, code));
    first = max(first, code);
    if ((i + 1) % per_group != 0) continue;  // uniform
    const uint32_t top = __reduce_max_sync(0xffffffffu, first);
    const uint32_t holders = __ballot_sync(0xffffffffu, first == top);
    const uint32_t next = __reduce_max_sync(0xffffffffu, __ffs(int(holders)) - 1 == lane ? second : first);
    score[i] = group_score({value_of_code(top), value_of_code(next), int(top != 0) + int(next != 0)});
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
    if (b.id < 0) break;  // every group left scores -inf (fewer than two selectable): none is kept
    kept |= 1u << b.id;
  }
#pragma unroll
  for (int i = 0; i < kPerLane; ++i)
    if (!(kept >> (i / per_group) & 1u)) live &= ~(1u << i);
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
  for (int i = 0; i < kPerLane; ++i) {
    const uint32_t code = (live >> i & 1u) ? ordered_code(value[i]) : 0u;
    second = max(second, min(first, code));
    first = max(first, code);
  }
  for (int mask = 1; mask < lanes; mask *= 2) {  // the two best of a multiset: exact in any order
    const uint32_t other_first = __shfl_xor_sync(0xffffffffu, first, mask);
    const uint32_t other_second = __shfl_xor_sync(0xffffffffu, second, mask);
    second = max(max(second, other_second), min(first, other_first));
    first = max(first, other_first);
  }
  const int group = lane / lanes;
  const float score = group_score({value_of_code(first), value_of_code(second), int(first != 0) + int(second != 0)});
  int before = 0;  // groups ranking before this lane's
#pragma unroll 8
  for (int h = 0; h < a.n_group; ++h)
    before += int(ranks_before(__shfl_sync(0xffffffffu, score, h * lanes), h, score, group));
  if (group >= a.n_group || before >= a.topk_group) live = 0;
}

// Grouped selection's first half, by a whole CTA of kThreads threads (thread t; every thread must
// call) on one token's scores `row` (shared memory): keeps the topk_group groups whose two best
// selection scores sum highest, ties to the lower group (the warp's rules above), and turns every
// other group's scores into NaN, which select_token never selects: it then runs with n_group 1.
// A group's lanes merge their top two in one butterfly, every group at once, and a group's place is
// the number of groups ranking before it; one warp's version is a butterfly per group in turn
// (decode router, DeepSeek-V3's 8 groups at M = 1: 9.4 -> 7.6 us, docs/performance.md). `s`: scratch.
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

// Step 3's k rounds on `key` (they shift its runs): lane j < k gets slot j's (value, id), or keeps
// id -1. kOneHolder (lane order): the lane holding the best code takes it, with no vote in the
// round's dependent chain; a round whose best several lanes hold (an exact tie) makes the pass
// return true, and its slots are void.
template <int kRun, int kRuns, bool kLaneOrder, bool kOneHolder>
__device__ __forceinline__ bool take_rounds(int k, uint64_t (&key)[kRuns][kRun], int lane, float& my_value,
                                            int32_t& my_id) {
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
// j, j + 32, ... (the layout grouped selection in registers needs). kLaneGroups (lane order,
// groups_in_lanes): step 2 keeps the groups in the warp.
template <int kPerLane, bool kLaneOrder = false, bool kLaneGroups = false>
__device__ int32_t select_token(const SelectArgs& a, int64_t m, WarpScratch& s, int lane) {
  const bool sigmoid = a.mode == RoutingMode::sigmoid_bias;
  const bool renormalized_softmax = a.mode == RoutingMode::topk_softmax && a.renormalize;
  const bool needs_lse = needs_log_sum_exp(a.mode, a.renormalize);

  // 1. The token's candidates in registers: (selection score, expert), bit i of `live` set for a
  // selectable one (not NaN). Indices are constants after unrolling: no local memory.
  float value[kPerLane];
  int32_t id[kPerLane];
  uint32_t live = 0;
  float lse = 0.0f;
  if (kLaneOrder || a.scores) {
    const float* row = a.scores + m * a.scores_ld;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int e = kLaneOrder ? lane * kPerLane + i : lane + 32 * i;
      const float score = e < a.experts ? row[e] : NAN;
      value[i] = sigmoid ? sigmoid_selection_score(a, score, e) : score;
      id[i] = e;
      if (value[i] == value[i]) live |= 1u << i;
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
  } else {
    const int count = a.parts * kCandidates;  // <= 32: one per lane
    const float* row = a.candidates + m * int64_t(count) * 2;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      value[i] = -INFINITY;
      id[i] = -1;
    }
    if (lane < count) {
      const float* slot = row + int64_t(lane / kCandidates) * 2 * kCandidates;
      const int j = lane % kCandidates;
      value[0] = slot[j];
      id[0] = __float_as_int(slot[kCandidates + j]);
      if (id[0] >= 0) live = 1u;
    }
    if (needs_lse) {  // the parts' lse in order, on every lane alike
      epilogue::LogSumExp::State all = epilogue::LogSumExp::identity();
      for (int part = 0; part < a.parts; ++part)
        all = epilogue::LogSumExp::combine(all, {a.lse_parts[m * a.parts + part], 1.0f});
      lse = epilogue::LogSumExp::finish(all);
    }
  }

  // 2. Grouped selection (scores only: every expert of a group): a group scores its two best; the
  // topk_group best groups are kept, every other expert leaves `live`.
  if constexpr (kLaneOrder) {
    if constexpr (kLaneGroups) keep_best_groups_in_lanes<kPerLane>(a, value, live, lane);
    // otherwise n_group is 1, or the caller has kept the groups (keep_best_groups_in_block)
  } else if (groups_in_shared_memory(a.experts, a.n_group)) {  // groups across lanes
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
  // than the 38 of two runs (E = 384, M = 16384: 196.7 against 187.3 us). An ungrouped lane-order
  // row first runs a pass in which the lane holding the best code takes it without waiting for the
  // vote (take_rounds<.., kOneHolder>: the vote only detects a tie across lanes, and a pass that
  // met one is repeated exactly from the sorted keys): M = 1 5.46-5.58 -> 5.38-5.41 us, M = 8
  // 5.76-5.82 -> 5.56-5.66 (H200, same run; in the grouped kernel the second pass's code made
  // DeepSeek-V3's M = 1 0.3 us slower, so it runs the exact rounds only).
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
  if constexpr (kLaneOrder && !kLaneGroups) {  // a pass without votes, repeated exactly on a tie
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
    switch (a.mode) {
      case RoutingMode::softmax_topk:  // exponentiated below
        weight = my_value;
        break;
      case RoutingMode::topk_softmax:
        weight = renormalized_softmax ? my_value : expf(my_value - lse);
        break;
      case RoutingMode::sigmoid_bias:  // a candidate carries only p + bias: p is that sum less the bias
        weight = a.scores ? epilogue::sigmoid(a.scores[m * a.scores_ld + my_id])
                          : my_value - (a.expert_bias ? a.expert_bias[my_id] : 0.0f);
        break;
    }
  }
  if (a.mode == RoutingMode::softmax_topk || renormalized_softmax) {
    const float top = __shfl_sync(0xffffffffu, my_value, 0);  // slot 0 holds the largest
    weight = filled ? expf(my_value - top) : 0.0f;
    weight /= warp_sum(weight);
  } else if (a.renormalize) {
    weight /= warp_sum(weight);
  }
  weight *= a.scale;

  // 5. Slots nothing selectable filled take the lowest ids not chosen, at weight 0.
  // The filled slots are the first ones (selection stops at the first empty round).
  const int filled_count = __popc(__ballot_sync(0xffffffffu, filled));
  if (filled) s.chosen[lane] = my_id;
  __syncwarp();
  if (!filled && lane < a.k) {
    int wanted = lane - filled_count;  // this slot takes the wanted-th unchosen id (from 0)
    int32_t e = 0;
    for (;; ++e) {
      bool chosen = false;
      for (int j = 0; j < filled_count; ++j) chosen |= s.chosen[j] == e;
      if (!chosen && wanted-- == 0) break;
    }
    my_id = e;
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
  sm90::wait_for_prerequisite_grids();  // the scores or candidates (a programmatic launch)
  const int warp = int(threadIdx.x / 32), lane = int(threadIdx.x % 32);
  const int64_t m = int64_t(blockIdx.x) * kWarpsPerBlock + warp;
  if (m >= a.rows) return;  // the whole warp
  select_token<kPerLane>(a, m, *reinterpret_cast<WarpScratch*>(scratch_of + warp * scratch_bytes), lane);
}

}  // namespace coda::ops::router_detail

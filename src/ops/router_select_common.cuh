// Internal: what the router's selection steps share (router_select.cuh, router_groups.cuh; the
// epilogue's selection, router_epilogue.cuh and router_quad.cuh, takes the codes and the sorting
// network): the kernels' arguments, the per-lane entry counts they are compiled for, the
// order-preserving codes and the ordering rule, the sorting network, warp reductions and a warp's
// shared memory.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "coda/core/host_device.hpp"
#include "coda/epilogue/math.hpp"
#include "coda/ops/router.hpp"

namespace coda::ops::router_detail {

inline constexpr int kWarpsPerBlock = 4;
// Each lane holds candidates lane, lane + 32, ... in registers: a whole row of scores (E <= 512).
// The kernel is compiled for 1, 2, 4, 8 and 16 per lane
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

/// The selection's rules and outputs, for every path: the selection kernel (scores read from
/// `scores`), the decode kernel and the GEMM epilogue's FusedSelection (scores in registers:
/// `scores` unused).
struct SelectArgs {
  const float* scores = nullptr;  // M x E, ld scores_ld
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

  // The epilogue's rows wider than its tile (FusedRows::wide, router_epilogue_wide.cuh): each of a
  // row's `tiles` column tiles publishes its k best, and the last tile to finish a row merges them.
  float* tile_slots = nullptr;       // [row][tile] of kWideSlotWords words
  float* tile_lse = nullptr;         // [row][tile]: the log-sum-exp of the tile's scores
  int32_t* tile_arrivals = nullptr;  // [tile row][consumer][row half], zeroed before the launch
  int32_t tiles = 1;
};

// A decode row the CTA prepared for sigmoid_bias with groups of whole columns (select_token's
// kPrepared): the weights' p = sigmoid(s) by expert, and whether the lane's entries' group is kept.
struct PreparedRow {
  const float* p = nullptr;
  bool lane_kept = true;
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

__device__ __forceinline__ float larger(float a, float b) { return fmaxf(a, b); }
__device__ __forceinline__ float smaller(float a, float b) { return fminf(a, b); }
__device__ __forceinline__ uint32_t larger(uint32_t a, uint32_t b) { return max(a, b); }
__device__ __forceinline__ uint32_t smaller(uint32_t a, uint32_t b) { return min(a, b); }
__device__ __forceinline__ uint64_t larger(uint64_t a, uint64_t b) { return a > b ? a : b; }
__device__ __forceinline__ uint64_t smaller(uint64_t a, uint64_t b) { return a > b ? b : a; }

template <int kLow, int kHigh, class T, int N>
__device__ __forceinline__ void compare_exchange(T (&v)[N]) {
  const T a = v[kLow], b = v[kHigh];
  v[kLow] = larger(a, b);
  v[kHigh] = smaller(a, b);
}
template <class T, int N, std::size_t... I>
__device__ __forceinline__ void sort_descending(T (&v)[N], std::index_sequence<I...>) {
  (compare_exchange<kMergeSortNetwork<N>.pairs[I].first, kMergeSortNetwork<N>.pairs[I].second>(v), ...);
}
// Sorts N values (floats without NaN, or 32- or 64-bit keys), largest first, with every index a
// compile-time constant (registers, no local memory).
template <class T, int N>
__device__ __forceinline__ void sort_descending(T (&v)[N]) {
  sort_descending(v, std::make_index_sequence<kMergeSortNetwork<N>.size>());
}

// v[i] for a run-time i in [0, 8): a tree of selects on i's three bits. Inline PTX, so that the
// front end cannot turn the choice into an indexed array: written as `if (j == i) r = v[j]` over
// the eight j, it became a local-memory copy of v and eight predicated loads (cuobjdump -sass, the
// router's epilogue selection: STL.128 x 2 and LDL in every row).
__device__ __forceinline__ uint32_t pick_of_8(const uint32_t (&v)[8], int i) {
  const auto select = [](uint32_t if_set, uint32_t if_clear, int bit) {
    uint32_t r;
    asm("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %3, 0;\n\tselp.b32 %0, %1, %2, p;\n\t}"
        : "=r"(r)
        : "r"(if_set), "r"(if_clear), "r"(bit));
    return r;
  };
  uint32_t pairs[4], quads[2];
#pragma unroll
  for (int j = 0; j < 4; ++j) pairs[j] = select(v[2 * j + 1], v[2 * j], i & 1);
#pragma unroll
  for (int j = 0; j < 2; ++j) quads[j] = select(pairs[2 * j + 1], pairs[2 * j], i & 2);
  return select(quads[1], quads[0], i & 4);
}
__device__ __forceinline__ float pick_of_8(const float (&v)[8], int i) {
  uint32_t bits[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) bits[j] = __float_as_uint(v[j]);
  return __uint_as_float(pick_of_8(bits, i));
}

// The n-th lowest id (from 0) not among chosen[0 .. count): the id of a slot that nothing
// selectable filled, the filled slots coming first (every path's rule for rows with fewer than k
// selectable scores).
__device__ __forceinline__ int32_t nth_unchosen(int n, const int32_t* chosen, int count) {
  for (int32_t e = 0;; ++e) {
    bool taken = false;
    for (int c = 0; c < count; ++c) taken = taken || chosen[c] == e;
    if (!taken && n-- == 0) return e;
  }
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
// warp_sum on lanes below k where every lane from k holds +0 (a token's k slots): for k <= 8 the
// butterfly's first two steps would only add those zeros (exactly), so it skips them: the same
// bits on lanes below k, two dependent shuffles fewer.
__device__ __forceinline__ float slot_sum(float v, int k) {
  if (k > 8) return warp_sum(v);
#pragma unroll
  for (int mask = 4; mask >= 1; mask /= 2) v += __shfl_xor_sync(0xffffffffu, v, mask);
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

/// Whether the weights need the log-sum-exp of all E scores: topk_softmax unless renormalized,
/// where it cancels (the weights are the softmax over the k selected, softmax_topk's formula).
CODA_HD bool needs_log_sum_exp(RoutingMode mode, bool renormalize) {
  return mode == RoutingMode::topk_softmax && !renormalize;
}

// sigmoid_bias's selection score of expert e (any e: past E there is no bias): sigmoid(s) + its
// bias, NaN where s is NaN (never selectable). The bias affects only the selection, not the weight.
__device__ __forceinline__ float sigmoid_selection_score(const SelectArgs& a, float score, int e) {
  return epilogue::sigmoid(score) + (a.expert_bias && e < a.experts ? a.expert_bias[e] : 0.0f);
}

}  // namespace coda::ops::router_detail

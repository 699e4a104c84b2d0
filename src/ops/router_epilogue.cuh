// Internal: the router's selection in the GEMM's epilogue (coda/ops/router.hpp, fused_selection):
// the mainloop's seam epilogue (mainloop/epilogue_seam.cuh) on tiles whose consumers split along M
// (m128n256, m128n128), so a consumer holds whole rows of E <= 256 scores and the four lanes of a
// quad hold one row, V = E_tile / 4 values each. Each row becomes its k <= 8 (weight, expert) slots
// from the fp32 accumulators; the scores are never written.
//
// Per row, in the quad (docs/kernels.md, "MoE routing"):
//   1. each lane's 8 chunk maxima of its selection scores (V / 8 consecutive values each);
//   2. T = the k-th largest of the quad's 32 chunk maxima: k distinct experts score >= T, so every
//      one of the k best does, and all of them lie in the chunks whose maximum is >= T;
//   3. those chunks (at most 8 unless chunk maxima tie at T) are copied to the warp's shared memory;
//   4. each lane keys two of them with 32 bits (the score's order-preserving code less its low 6
//      bits, above the candidate's place), sorts them, and two bitonic merges across the quad give
//      the k largest keys: the exact selection unless the best key left out shares the k-th's
//      truncated code (then the copied chunks again, with exact 64-bit keys); two of the k best
//      sharing one are put in exact order.
// Rows whose chunk maxima tie at T (rows of zeros, NaN rows, fewer than k selectable scores) take
// k exact rounds over the lanes' registers (select_exactly). Every path keeps the rule of the
// others: larger score first, ties to the lower id, NaN never; unfilled slots take the lowest
// unchosen ids at weight 0. Warp-uniform control around every shuffle.
#pragma once

#include <cmath>
#include <cstdint>

#include "coda/epilogue/math.hpp"
#include "coda/epilogue/monoids.hpp"
#include "coda/mainloop/epilogue_seam.cuh"
#include "coda/ops/router.hpp"
#include "coda/sm90/barrier.cuh"
#include "router_epilogue_slots.cuh"
#include "router_epilogue_wide.cuh"
#include "router_groups.cuh"
#include "router_quad.cuh"
#include "router_select_common.cuh"

namespace coda::ops::router_detail {
namespace fused {

// The k best keys (best[0 .. k)) in the exact order of their scores, ties to the lower column: for
// a row where two of them share a truncated code. No shuffles: a lane may run it alone.
template <bool kSigmoid, int kChunk>
__device__ __forceinline__ void order_exactly(const SelectArgs& a, const float* bias, uint32_t (&best)[8],
                                              const RowChunks<kChunk>& chunks) {
  float score[8];
  int col[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int place = int(best[i] & 63u), slot = place / kChunk, j = place % kChunk;
    col[i] = i < a.k ? chunks.first_col[slot] + 8 * (j / 2) + j % 2 : INT32_MAX;
    score[i] = i < a.k ? selection_score<kSigmoid>(bias, chunks.logit[slot][j], col[i]) : -INFINITY;
  }
  const auto exchange = [&]<int lo, int hi>() {
    if (score[hi] > score[lo] || (score[hi] == score[lo] && col[hi] < col[lo])) {
      const float s = score[lo];
      score[lo] = score[hi];
      score[hi] = s;
      const int c = col[lo];
      col[lo] = col[hi];
      col[hi] = c;
      const uint32_t k = best[lo];
      best[lo] = best[hi];
      best[hi] = k;
    }
  };
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (exchange.template operator()<kMergeSortNetwork<8>.pairs[I].first, kMergeSortNetwork<8>.pairs[I].second>(), ...);
  }
  (std::make_index_sequence<kMergeSortNetwork<8>.size>());
}

// Step 4's keys of the copied chunks (slots below `copied`; none where 0), lane j keying slots 2j
// and 2j + 1 (a slot of 8 scores is one run of 8 keys, two slots of 4 another): `key(score, col,
// place)` for a score >= T, else 0. `best` gets the quad's 8 largest, sorted, and `ninth` the
// largest left out. Every lane calls it (shuffles).
template <bool kSigmoid, class Key, int kChunk, class MakeKey>
__device__ __forceinline__ void best_copied_keys(const float* bias, const RowChunks<kChunk>& chunks, int copied,
                                                 float threshold, MakeKey key, Key (&best)[8], Key& ninth) {
  const int quad_lane = int(threadIdx.x % 4u);
  constexpr int kRuns = 2 * kChunk / 8;
  ninth = 0;
#pragma unroll
  for (int r = 0; r < kRuns; ++r) {
    Key run[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int slot = 2 * quad_lane + (r * 8 + i) / kChunk, j = (r * 8 + i) % kChunk;
      const bool valid = slot < copied;  // else the slot holds another row's data, or none
      const int col = (valid ? chunks.first_col[slot] : 0) + RowLayout<kChunk * kChunks>::col(j);
      const float score = selection_score<kSigmoid>(bias, valid ? chunks.logit[slot][j] : 0.0f, col);
      run[i] = valid && score >= threshold ? key(score, col, slot * kChunk + j) : Key(0);
    }
    sort_descending(run);
    if (r == 0) {
#pragma unroll
      for (int i = 0; i < 8; ++i) best[i] = run[i];
    } else {
      keep_larger_half(best, run, ninth);
    }
  }
  keep_quad_best(best, ninth);
}

// Step 4 again with exact keys, for rows whose k-th truncated key ties with the next one: (code of
// the score) << 32 | (511 - column) << 8 | place, so that equal scores rank the lower column first.
// `places` gets the 8 best candidates' places, best first (0 past the candidates).
template <bool kSigmoid, int kChunk>
__device__ __forceinline__ void select_copied_exactly(const float* bias, const RowChunks<kChunk>& chunks, int copied,
                                                      float threshold, uint32_t (&places)[8]) {
  uint64_t best[8], ninth;
  best_copied_keys<kSigmoid>(
      bias, chunks, copied, threshold,
      [](float score, int col, int place) {
        static_assert(kWideMaxExperts <= 512, "a column in 9 bits");
        return uint64_t(ordered_code(score)) << 32 | uint32_t(511 - col) << 8 | uint32_t(place);
      },
      best, ninth);
#pragma unroll
  for (int i = 0; i < 8; ++i) places[i] = uint32_t(best[i]) & 0xffu;
}

// What select_row hands back: the lane's slots of the row and topk_softmax's log-sum-exp of its
// scores (0 where the weights need none).
struct RowSlots {
  Slot mine[2];
  float lse;
};

// Slots j = lane % 4 and j + 4 of the row whose values are the thread's first row half (value v
// at RowLayout::index(v, 0); columns past E hold NaN), by the quad. FusedRows::groups (sigmoid_bias
// with 8 groups, groups_in_epilogue): chunk q is group q's share; the groups not kept turn NaN
// before the selection (logits and all), as their experts leave the scores path's `live`.
// FusedRows::narrow (E <= kNarrowMaxExperts): the quad's live chunks are the row's 8 slots, so
// steps 1 and 2 are skipped (the threshold is -inf) and step 3 copies them unconditionally.
template <int V, bool kSigmoid, FusedRows kRows, int N>
__device__ __forceinline__ RowSlots select_row(const SelectArgs& a, const float* bias, float (&acc)[N],
                                               RowChunks<RowLayout<V>::kChunk>& chunks, int lane_col) {
  using Layout = RowLayout<V>;
  constexpr int kChunk = Layout::kChunk;
  constexpr bool kGroups = kRows == FusedRows::groups, kNarrow = kRows == FusedRows::narrow;
  static_assert(!kNarrow || 4 * kNarrowChunks == kSlots, "a narrow row's live chunks fill its slots exactly");
  // Values a lane may hold below E: the others are NaN (FusedSelection::prepare) and add nothing.
  constexpr int kLive = kNarrow ? kNarrowChunks * kChunk : V;
  const int lane = int(threadIdx.x % 32u), quad_lane = lane % 4;
  const auto score_of = [&](float value, int offset) {
    return selection_score<kSigmoid>(bias, value, lane_col + offset);
  };
  const auto copy_chunk = [&](int q, int slot) {  // the lane's chunk q to the row's slot
#pragma unroll
    for (int j = 0; j < kChunk; ++j) chunks.logit[slot][j] = acc[Layout::index(q * kChunk + j, 0)];
    chunks.first_col[slot] = lane_col + Layout::col(q * kChunk);
  };

  // 1. Chunk maxima of the selection scores (fmaxf skips NaN; a chunk of NaN only gives -inf),
  // and with groups the second largest (-inf where missing: min.NaN gives NaN for a NaN score,
  // which fmaxf skips). sigmoid_bias's logits become p here, the row's values from now on.
  // A narrow row needs no maxima: only the log-sum-exp's (below).
  float chunk_max[kChunks], chunk_second[kGroups ? kChunks : 1];
  if constexpr (kNarrow) {
#pragma unroll
    for (int v = 0; v < kLive; ++v)
      if constexpr (kSigmoid) acc[Layout::index(v, 0)] = sigmoid_p(acc[Layout::index(v, 0)]);
  }
#pragma unroll
  for (int q = 0; q < (kNarrow ? 0 : kChunks); ++q) {
    float m = -INFINITY, second = -INFINITY;
#pragma unroll
    for (int j = 0; j < kChunk; ++j) {
      const int v = q * kChunk + j;
      if constexpr (kSigmoid) acc[Layout::index(v, 0)] = sigmoid_p(acc[Layout::index(v, 0)]);
      const float score = score_of(acc[Layout::index(v, 0)], Layout::col(v));
      if constexpr (kGroups) second = fmaxf(second, min_propagating_nan(m, score));
      m = fmaxf(m, score);
    }
    chunk_max[q] = m;
    if constexpr (kGroups) chunk_second[q] = second;
  }
  if constexpr (kGroups) {
    const uint32_t kept = quad_kept_groups(a.topk_group, chunk_max, chunk_second);
#pragma unroll
    for (int q = 0; q < kChunks; ++q)
      if (!(kept >> q & 1u)) {
        chunk_max[q] = -INFINITY;
#pragma unroll
        for (int j = 0; j < kChunk; ++j) acc[Layout::index(q * kChunk + j, 0)] = NAN;
      }
  }
  float lse = 0.0f;
  if (!kSigmoid && needs_log_sum_exp(a.mode, a.renormalize)) {
    // topk_softmax's softmax over every non-NaN score: LogSumExp::fold's terms, streamed from the
    // accumulators (an array of V would not fit beside them), then combined across the quad.
    float m;
    if constexpr (kNarrow) {
      m = -INFINITY;
#pragma unroll
      for (int v = 0; v < kLive; ++v) m = fmaxf(m, score_of(acc[Layout::index(v, 0)], Layout::col(v)));
    } else {
      m = chunk_max[0];
#pragma unroll
      for (int q = 1; q < kChunks; ++q) m = fmaxf(m, chunk_max[q]);
    }
    const float m_log2e = m * epilogue::kLog2e;
    float sums[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int v = 0; v < kLive; ++v) {
      float s = score_of(acc[Layout::index(v, 0)], Layout::col(v));
      s = s == s ? s : -INFINITY;
      const float e = exp2f(fmaf(s, epilogue::kLog2e, -m_log2e));
      sums[v % 4] += s == m ? 1.0f : e;
    }
    epilogue::LogSumExp::State state{m, (sums[0] + sums[1]) + (sums[2] + sums[3])};
#pragma unroll
    for (int mask = 1; mask <= 2; mask *= 2)
      state = epilogue::LogSumExp::combine(
          state, {__shfl_xor_sync(0xffffffffu, state.max, mask), __shfl_xor_sync(0xffffffffu, state.sum, mask)});
    lse = epilogue::LogSumExp::finish(state);
  }

  // 2. T, the k-th largest chunk maximum of the row, and the chunks reaching it.
  float threshold = -INFINITY;
  int reaching = kSlots;
  bool fast = true;
  if constexpr (kNarrow) {
    // 3 (narrow). Lane j's live chunks to slots 2j and 2j + 1.
#pragma unroll
    for (int q = 0; q < kNarrowChunks; ++q) copy_chunk(q, kNarrowChunks * quad_lane + q);
  } else {
    float ranked[kChunks];
#pragma unroll
    for (int q = 0; q < kChunks; ++q) ranked[q] = chunk_max[q];
    sort_descending(ranked);
    float unused = -INFINITY;
    keep_quad_best(ranked, unused);
    threshold = pick_of_8(ranked, a.k - 1);
    int own = 0;
#pragma unroll
    for (int q = 0; q < kChunks; ++q) own += chunk_max[q] >= threshold ? 1 : 0;
    int before = 0;
    reaching = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int count = __shfl_sync(0xffffffffu, own, (lane & ~3) + j);
      reaching += count;
      before += j < quad_lane ? count : 0;
    }
    fast = reaching <= kSlots;

    // 3. Those chunks' logits to shared memory, the quad's lanes in order.
    if (fast) {
      int slot = before;
#pragma unroll
      for (int q = 0; q < kChunks; ++q)
        if (chunk_max[q] >= threshold) {
          copy_chunk(q, slot);
          ++slot;
        }
    }
  }
  __syncwarp();

  // 4. 32-bit keys of the copied scores: (code with its low 6 bits cleared) | place. Every lane
  // runs this (the merge shuffles); a quad off the fast path keys nothing. Of the keys left out
  // only the largest is kept (`ninth`): registers are scarce beside the accumulators.
  uint32_t best[8], ninth;
  const int copied = fast ? reaching : 0;
  best_copied_keys<kSigmoid>(
      bias, chunks, copied, threshold,
      [](float score, int, int place) { return (ordered_code(score) & ~63u) | uint32_t(place); }, best, ninth);
  // The k best keys are the k best scores unless the best key left out shares the k-th's truncated
  // code (every key left out is at most that one): then the copied chunks are selected again with
  // exact 64-bit keys. Two of the k best sharing one (1 row in a few hundred at E = 256, K = 7168)
  // may be out of order: they are put in order.
  const uint32_t kth = pick_of_8(best, a.k - 1), next = a.k < 8 ? pick_of_8(best, a.k) : ninth;
  fast = fast && kth != 0;
  const bool boundary_shared = fast && (next >> 6) == (kth >> 6);
  bool shared_code = false;
#pragma unroll
  for (int j = 0; j + 1 < 8; ++j)
    if (j + 1 < a.k) shared_code = shared_code || (best[j] >> 6) == (best[j + 1] >> 6);
  if (__any_sync(0xffffffffu, boundary_shared)) {
    uint32_t places[8];
    select_copied_exactly<kSigmoid>(bias, chunks, copied, threshold, places);
    if (boundary_shared)
#pragma unroll
      for (int j = 0; j < 8; ++j) best[j] = places[j];
  }
  if (fast && shared_code && !boundary_shared) order_exactly<kSigmoid>(a, bias, best, chunks);

  Slot mine[2];
  if (fast) {
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      const uint32_t k_of_slot = pick_of_8(best, quad_lane + 4 * s);
      const int place = int(k_of_slot & 63u), slot = place / kChunk, j = place % kChunk;
      const int col = chunks.first_col[slot] + 8 * (j / 2) + j % 2;
      const float value = chunks.logit[slot][j];  // sigmoid_bias: p
      mine[s].score = selection_score<kSigmoid>(bias, value, col);
      if constexpr (kSigmoid) mine[s].p = value;
      mine[s].id = quad_lane + 4 * s < a.k ? col : -1;
      mine[s].filled = mine[s].id >= 0;
    }
  }
  if (__any_sync(0xffffffffu, !fast)) select_exactly<V, kSigmoid>(a, bias, acc, lane_col, fast, chunks.first_col, mine);
  __syncwarp();  // the next row's chunks reuse this row's shared memory
  return {{mine[0], mine[1]}, lse};
}

}  // namespace fused

/// The seam epilogue (mainloop/epilogue_seam.cuh) selecting on rows of V values a lane: tiles whose
/// consumers hold 64 x 4V accumulators (m128n128: V = 32, m128n256: V = 64). Everything happens in
/// prepare(); the outputs are k words a row, written from registers. kRows other than ungrouped
/// (FusedRows) is a kernel of its own, so that the others keep their code. FusedRows::wide: a row
/// spans args.tiles tiles, whose k best merge (router_epilogue_wide.cuh).
template <int V, FusedRows kRows = FusedRows::ungrouped>
struct FusedSelection : fused::SelectsInPrepare {
  static constexpr bool kGroups = kRows == FusedRows::groups;
  static constexpr bool kWide = kRows == FusedRows::wide;
  static_assert(kRows != FusedRows::narrow || V == 32, "narrow rows: m128n128's 8 chunks of 4 a lane");
  using Params = SelectArgs;
  using Row = fused::RowChunks<fused::RowLayout<V>::kChunk>;
  // A split tile's rows are selected on every segment's SM, a row half each (mainloop/segments.cuh):
  // the selection, not the wait for the partials, is what a split tile's last segment exposes.
  static constexpr bool kSharesTileRows = true;
  static constexpr int kBiasExperts = kWide ? kWideMaxExperts : kFusedMaxExperts;
  static constexpr int kMaxTiles = kWideMaxExperts / (4 * V);  // a wide row's
  struct SharedStorage {
    Row rows[2][4][8];  // [consumer][warp][quad]: the chunks of the row a quad is selecting
    float bias[2][kBiasExperts];  // each consumer's copy of the expert bias (copy_bias_once)
    uint32_t last_halves[2];      // wide rows: the halves each consumer merges (fused::arrive_wide)
  };

  template <class Acc>
  __device__ void prepare(const Params& a, SharedStorage& s, Acc& acc, const mainloop::TileCoordinates& t,
                          Pending<Acc>&) {
    static_assert(Acc::kCols == 4 * V, "a quad holds a whole row");
    if (t.row0 >= t.problem_m) return;  // a cluster's CTA past the last tile row
    const int lane = t.thread % 32;
    Row& chunks = s.rows[t.consumer][t.thread / 32][lane / 4];
    const int lane_col = t.col0 + 2 * (lane % 4);
    static_assert(Acc::kBlocks == 1, "a thread's two rows: value v of row half h at RowLayout::index(v, h)");
    using Layout = fused::RowLayout<V>;
    float(&values)[Acc::kValuesPerBlock] = acc.value[0];
    if (t.col0 + Acc::kCols > a.experts) {  // columns past E: NaN, never selectable
      const int limit = a.experts - lane_col;
#pragma unroll
      for (int i = 0; i < Acc::kValuesPerBlock; ++i)
        if (Layout::col(i / 4 * 2 + i % 2) >= limit) values[i] = NAN;
    }
    if (kGroups || a.mode == RoutingMode::sigmoid_bias) {
      fused::copy_bias_once(a, s.bias[t.consumer], t.consumer, t.thread, bias_copied_);
      select_rows<true>(a, s.bias[t.consumer], values, t, chunks, lane_col);
    } else if constexpr (!kGroups) {
      select_rows<false>(a, nullptr, values, t, chunks, lane_col);
    }
    if constexpr (kWide) merge_rows(a, s, t, chunks);
  }

 private:
  bool bias_copied_ = false;  // this consumer's copy of the expert bias is in shared memory

  // One copy of the selection's code, run for each row half in turn, the second half's values
  // moved into the first's registers: every index stays a constant (registers, not local memory)
  // and the code is fetched once. Unrolled twice (and again for tiles past E) it was slower, and so
  // were both halves selected together, step by step, as two chains in one instruction stream: a
  // half's ~660-940 instructions (E <= 32, 128) are issue- as much as latency-bound at two
  // consumer warps a scheduler (docs/performance.md, Designs measured slower). Wide rows publish
  // each half's slots, then merge the halves whose every tile has published.
  template <bool kSigmoid, int N>
  __device__ void select_rows(const Params& a, const float* bias, float (&values)[N],
                              const mainloop::TileCoordinates& t, Row& chunks, int lane_col) {
    using Layout = fused::RowLayout<V>;
    // The halves this CTA finishes (both unless K is split: kSharesTileRows), as the loop's one
    // register: a second one live across a half's selection spills the m128n256 kernels.
#pragma unroll 1
    for (uint32_t halves = t.row_halves; halves != 0; halves &= halves - 1) {
      const int h = (halves & 1u) ? 0 : 1;
      if (h == 1)
#pragma unroll
        for (int v = 0; v < V; ++v) values[Layout::index(v, 0)] = values[Layout::index(v, 1)];
      const fused::RowSlots slots = fused::select_row<V, kSigmoid, kRows>(a, bias, values, chunks, lane_col);
      if constexpr (kWide) fused::publish_slots(a, row_of_half(t, h), t.tile_n, slots.mine, slots.lse);
      else fused::write_slots(a, row_of_half(t, h), slots.mine, slots.lse);
    }
  }

  static __device__ int32_t row_of_half(const mainloop::TileCoordinates& t, int h) {
    return t.row0 + mainloop::Accumulators<64, 4 * V>::row(0, 2 * h, t.thread);
  }

  // Wide rows: the halves of this consumer's rows whose tiles have all published, merged.
  __device__ void merge_rows(const Params& a, SharedStorage& s, const mainloop::TileCoordinates& t, Row& chunks) {
    const uint32_t last = fused::arrive_wide(a, t, t.row_halves, s.last_halves[t.consumer]);
#pragma unroll 1
    for (int h = 0; h < 2; ++h)
      if (last >> h & 1u) fused::merge_row<kMaxTiles>(a, row_of_half(t, h), chunks);
  }
};

}  // namespace coda::ops::router_detail

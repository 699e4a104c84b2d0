// Internal: the router's epilogue selection on rows wider than the GEMM's tile (FusedRows::wide:
// E = 257 to 512 on two tiles of m128n256, fused_tile), the per-tile candidates merged
// deterministically. Each tile of a row selects the row's k best among its own columns exactly as
// a row within one tile is selected (router_epilogue.cuh, select_row) and publishes them, sorted,
// with the log-sum-exp of its scores; the last of the row's tiles to publish merges them:
//   rank of candidate (t, i) = i + #{candidates of the other tiles that rank before it}
// (larger score first, ties to the lower id; every tile's list is sorted by that rule and holds
// distinct ids), and the k candidates of rank below k are the row's slots. The row's k best lie
// among the tiles' k best, so the merge is exact; slots no selectable score filled take the lowest
// ids not chosen, and topk_softmax's log-sum-exp combines the tiles' in tile order. No step depends
// on which tile finished last: the same bits every run.
//
// A consumer's row half (64 rows / 2: rows 0-7 or 8-15 of each warp's 16) is the unit of
// arrival: its counter, one per (tile row, consumer, half), counts the N tiles whose consumer
// published that half (a K-split tile's halves are finished on different SMs:
// mainloop/segments.cuh, share_tile_rows), and the consumer that brings it to N merges the half.
#pragma once

#include <cmath>
#include <cstdint>

#include "coda/epilogue/monoids.hpp"
#include "coda/mainloop/epilogue_seam.cuh"
#include "coda/sm90/barrier.cuh"
#include "router_epilogue_slots.cuh"
#include "router_rank.hpp"
#include "router_select_common.cuh"

namespace coda::ops::router_detail {

// A (row, tile)'s published slots: score[8], p[8] (sigmoid_bias's weight), id[8] (-1: not filled).
inline constexpr int kWideSlotWords = 3 * kFusedMaxK;

/// The workspace of the wide rows for M rows of x in `tiles` column tiles of BlockM = 128 rows
/// (every tile row whole: its rows past M are published too, and never written out).
struct WideLayout {
  int64_t rows_padded, tiles, tile_rows;
  static constexpr int64_t kBlockM = 128;
  WideLayout(int64_t rows, int64_t tiles_)
      : rows_padded((rows + kBlockM - 1) / kBlockM * kBlockM), tiles(tiles_), tile_rows(rows_padded / kBlockM) {}
  std::size_t slot_bytes() const { return std::size_t(rows_padded * tiles * kWideSlotWords) * sizeof(float); }
  std::size_t lse_bytes() const { return std::size_t(rows_padded * tiles) * sizeof(float); }
  std::size_t arrival_bytes() const { return std::size_t(tile_rows * 4) * sizeof(int32_t); }
};

namespace fused {

// Publishes the lane's slots (j = lane % 4 and j + 4) of `row` in column tile `tile`, and the
// tile's log-sum-exp (lane j = 0).
__device__ __forceinline__ void publish_slots(const SelectArgs& a, int32_t row, int tile, const Slot (&mine)[2],
                                              float lse) {
  const int quad_lane = int(threadIdx.x % 4u);
  float* slots = a.tile_slots + (int64_t(row) * a.tiles + tile) * kWideSlotWords;
#pragma unroll
  for (int s = 0; s < 2; ++s) {
    const int j = quad_lane + 4 * s;
    if (j >= a.k) continue;
    __stcg(slots + j, mine[s].score);
    __stcg(slots + kFusedMaxK + j, mine[s].p);
    __stcg(slots + 2 * kFusedMaxK + j, __int_as_float(mine[s].filled ? mine[s].id : -1));
  }
  if (quad_lane == 0) __stcg(a.tile_lse + int64_t(row) * a.tiles + tile, lse);
}

// The row's slots from its tiles' published ones, by the quad (every lane: shuffles in
// write_slots), then written out. The quad's chunks (shared memory) hold the merged slots: slot j's
// score and p at logit[j][0, 1], its id at first_col[j].
template <int kMaxTiles, int kChunk>
__device__ __forceinline__ void merge_row(const SelectArgs& a, int32_t row, RowChunks<kChunk>& chunks) {
  static_assert(kChunk >= 2 && kSlots >= kFusedMaxK, "a slot's score and p in a chunk");
  const int quad_lane = int(threadIdx.x % 4u);
  // Every tile's slots at once, as float4s (a (row, tile)'s 96 bytes are 16-byte aligned); slots
  // past k hold whatever was there and count as empty.
  float score[kMaxTiles][kFusedMaxK], p[kMaxTiles][kFusedMaxK];
  int32_t id[kMaxTiles][kFusedMaxK];
  const float4* first = reinterpret_cast<const float4*>(a.tile_slots + int64_t(row) * a.tiles * kWideSlotWords);
#pragma unroll
  for (int t = 0; t < kMaxTiles; ++t)
#pragma unroll
    for (int q = 0; q < kFusedMaxK / 4; ++q) {
      const bool tile = t < a.tiles;
      const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      const float4 sv = tile ? __ldcg(first + t * kWideSlotWords / 4 + q) : zero;
      const float4 pv = tile ? __ldcg(first + t * kWideSlotWords / 4 + kFusedMaxK / 4 + q) : zero;
      const float4 iv = tile ? __ldcg(first + t * kWideSlotWords / 4 + kFusedMaxK / 2 + q) : zero;
      const float s4[4] = {sv.x, sv.y, sv.z, sv.w}, p4[4] = {pv.x, pv.y, pv.z, pv.w}, i4[4] = {iv.x, iv.y, iv.z, iv.w};
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int i = 4 * q + c;
        score[t][i] = s4[c];
        p[t][i] = p4[c];
        id[t][i] = tile && i < a.k ? __float_as_int(i4[c]) : -1;
      }
    }
  int filled = 0;
#pragma unroll
  for (int t = 0; t < kMaxTiles; ++t)
#pragma unroll
    for (int i = 0; i < kFusedMaxK; ++i) filled += id[t][i] >= 0 ? 1 : 0;
  filled = min(filled, a.k);

  // The lane's candidates (t, i), i = lane % 4 and + 4, to their places among the row's slots.
#pragma unroll
  for (int t = 0; t < kMaxTiles; ++t)
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      const int i = quad_lane + 4 * s;  // a run-time index: pick_of_8's selects keep the lists in registers
      const float mine_score = pick_of_8(score[t], i), mine_p = pick_of_8(p[t], i);
      const int32_t mine_id = int32_t(pick_of_8(reinterpret_cast<const uint32_t(&)[8]>(id[t]), i));
      const int rank = merged_rank(score, id, t, i, mine_score, mine_id);
      // Past k, past the tiles, or not filled (the filled come first): no place.
      if (mine_id >= 0 && rank < a.k) {
        chunks.logit[rank][0] = mine_score;
        chunks.logit[rank][1] = mine_p;
        chunks.first_col[rank] = mine_id;
      }
    }
  __syncwarp();
  Slot mine[2];
#pragma unroll
  for (int s = 0; s < 2; ++s) {
    const int j = quad_lane + 4 * s;
    if (j >= a.k) continue;
    if (j < filled) mine[s] = {chunks.logit[j][0], chunks.logit[j][1], chunks.first_col[j], true};
    else mine[s].id = nth_unchosen(j - filled, chunks.first_col, filled);  // the filled slots come first
  }

  float lse = 0.0f;
  if (needs_log_sum_exp(a.mode, a.renormalize)) {  // the tiles' log-sum-exps combined in tile order
    // LogSumExp::combine scales the side holding the max by exactly 1: a tile of +inf gives +inf,
    // as one tile's row would, and a tile with no finite score (-inf) adds nothing.
    const float* tile_lse = a.tile_lse + int64_t(row) * a.tiles;
    epilogue::LogSumExp::State state = epilogue::LogSumExp::identity();
#pragma unroll
    for (int t = 0; t < kMaxTiles; ++t)
      if (t < a.tiles) state = epilogue::LogSumExp::combine(state, epilogue::LogSumExp::lift(__ldcg(tile_lse + t)));
    lse = epilogue::LogSumExp::finish(state);
  }
  write_slots(a, row, mine, lse);
  __syncwarp();  // the quad's chunks are the next row's
}

// After a consumer published its row halves `halves` of tile (tile_m, consumer): counts them on
// their counters and returns the halves it published last, which it then merges. `flag`: the
// consumer's word in shared memory. Named barrier 1 + consumer, the epilogue's.
__device__ __forceinline__ uint32_t arrive_wide(const SelectArgs& a, const mainloop::TileCoordinates& t,
                                                uint32_t halves, uint32_t& flag) {
  __threadfence();  // every thread's slots visible device-wide before the arrival is counted
  sm90::named_barrier_sync(1 + uint32_t(t.consumer), 128);
  if (t.thread == 0) {
    uint32_t last = 0;
    for (int h = 0; h < 2; ++h) {
      if (!(halves >> h & 1u)) continue;
      // One batch (the router's GEMM is never batched): tile_m names the tile row.
      int32_t* counter = a.tile_arrivals + (int64_t(t.tile_m) * 2 + t.consumer) * 2 + h;
      int32_t before;
      asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], 1;" : "=r"(before) : "l"(counter) : "memory");
      if (before == a.tiles - 1) last |= 1u << h;
    }
    flag = last;
  }
  sm90::named_barrier_sync(1 + uint32_t(t.consumer), 128);
  const uint32_t last = flag;
  if (last) __threadfence();  // the reads of the merge after the acquiring atomic this CTA observed
  return last;
}

}  // namespace fused
}  // namespace coda::ops::router_detail

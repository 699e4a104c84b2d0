// coda/mainloop/segments.cuh: the end of a tile computed in several K segments (kernel.cuh), its
// segments' fp32 partials added in segment order by the CTA that finishes it. Two ways:
//   combine_segments    through a workspace in global memory: every segment publishes its partial
//                       and counts its arrival; the last to arrive adds them (any tile, split-K or
//                       stream-K; needs the workspace and its counters). share_tile_rows is its
//                       variant for an epilogue that shares a split tile's rows out
//                       (kSharesTileRows: the MoE router's selection): the segments wait for each
//                       other and the first min(segments, 4) each finish some of the rows (a
//                       quarter at 4 segments, half at 2), on up to four SMs instead of one.
//   combine_in_cluster  through distributed shared memory: the segments are the CTAs of one cluster
//                       (ScheduleParams::splits_in_cluster, swapped tiles only), which store their
//                       partials into CTA 0's shared memory (st.async); CTA 0 adds them and finishes
//                       the tile. No workspace, no counters to zero, no round trip through L2.
// Either way the sum runs in segment order: the same bits whichever segment finishes first.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "coda/mainloop/params.hpp"
#include "coda/mainloop/scheduler.cuh"
#include "coda/sm90/barrier.cuh"
#include "coda/sm90/cluster.cuh"

namespace coda::mainloop {

/// A segment of a multi-segment tile: publish this segment's partial, count the arrival, and if
/// it is the last, fold every segment's partial in, in segment order. Returns true when this CTA
/// now holds the whole tile. Partials are stored in fragment order (value i of thread t of the
/// tile's warpgroup w at [(i * WarpgroupsPerTile + w) * 128 + t], fully coalesced), and only for the rows inside
/// the problem, so a decode GEMM with M = 1 moves 1/64 of the tile. On a swapped tile the tokens are
/// the columns and are clipped the same way; elsewhere columns past N hold exact zeros, from TMA's
/// zero fill of B, and cost little: they are not worth a predicate per value.
template <class Config, class Acc>
__device__ __forceinline__ bool combine_segments(const PartialsWorkspace& ws, const ScheduleParams& schedule,
                                                 const WorkUnit& unit, Acc& acc, int32_t (&last_arrivals)[2],
                                                 int32_t valid_rows, int32_t valid_cols, int consumer, int thread) {
  constexpr int kStride = Config::kWarpgroupsPerTile * 128;  // floats between a thread's consecutive values
  constexpr int kTileFloats = Acc::kBlocks * Acc::kValuesPerBlock * kStride;
  // The warpgroups that share this tile, their barrier (ids 3 and 4; 1 and 2 are the epilogue's).
  const int part = Config::kPingPong ? 0 : consumer;
  const uint32_t barrier = Config::kPingPong ? 3 + consumer : 3;
  int32_t& last_arrival = last_arrivals[Config::kPingPong ? consumer : 0];
  float* column = ws.partials + int64_t(unit.counter) * slots_per_tile(schedule) * kTileFloats + part * 128 + thread;
  auto inside = [&](int block, int i) {
    return Acc::row(block, i, thread) < valid_rows && (!Config::kSwapAB || Acc::col(i, thread) < valid_cols);
  };

  float* mine = column + int64_t(unit.segment) * kTileFloats;
#pragma unroll
  for (int b = 0; b < Acc::kBlocks; ++b)
#pragma unroll
    for (int i = 0; i < Acc::kValuesPerBlock; ++i) {
      if (inside(b, i)) __stcg(mine + (b * Acc::kValuesPerBlock + i) * kStride, acc.value[b][i]);
    }
  // Every thread's partial must be visible device-wide before the arrival is counted.
  __threadfence();
  sm90::named_barrier_sync(barrier, kStride);
  if (part == 0 && thread == 0) {
    int32_t* counter = ws.arrivals + unit.counter;
    int32_t before;
    asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], 1;" : "=r"(before) : "l"(counter) : "memory");
    last_arrival = before == unit.segments - 1;
    if (last_arrival) *counter = 0;  // every segment has arrived: ready for the next launch
  }
  sm90::named_barrier_sync(barrier, kStride);
  if (!last_arrival) return false;
  __threadfence();  // order the reads below after the acquiring atomic observed by this CTA
  // Sum in segment order, own partial re-read too: the same bits whichever segment came last.
  for (int segment = 0; segment < unit.segments; ++segment) {
    const float* partial = column + int64_t(segment) * kTileFloats;
#pragma unroll
    for (int b = 0; b < Acc::kBlocks; ++b)
#pragma unroll
      for (int i = 0; i < Acc::kValuesPerBlock; ++i) {
        if (inside(b, i)) {
          const float v = __ldcg(partial + (b * Acc::kValuesPerBlock + i) * kStride);
          acc.value[b][i] = segment == 0 ? v : acc.value[b][i] + v;
        }
      }
  }
  return true;
}

/// Which of consumer c's row halves (values i with (i / 2) % 2 == h: rows 0-7 or 8-15 of each
/// warp's 16; bit h) segment `segment` of `segments` finishes in share_tile_rows: half h goes to
/// segment (2c + h) mod segments. Each of the four (c, h) has one finisher, and at two segments
/// or more no consumer finishes both its halves: at four, each segment finishes one consumer's
/// half; at two, segment h both consumers' half h; segments past the fourth none.
__device__ __forceinline__ uint32_t row_halves_finished(int segment, int segments, int consumer) {
  return ((2 * consumer) % segments == segment ? 1u : 0u) | ((2 * consumer + 1) % segments == segment ? 2u : 0u);
}

/// combine_segments for a split-K tile whose segments share its rows out (the epilogue's
/// kSharesTileRows): every segment publishes its partial and counts its arrival; a CTA finishing
/// a row half (row_halves_finished) waits until every segment has arrived, then adds that half's
/// partials in segment order (the bits combine_segments gives). Returns the halves this consumer
/// now holds whole (bit h; 0: none). The segments wait for each other, so they must all be running
/// at once: the kernel takes this way only where the launch's units fit its CTAs (one wave). The
/// counter counts the segments, then the CTAs finishing a half (min(segments, 4)), the last of
/// which zeroes it for the next launch. Cooperative unswapped tiles, one 64-row block a consumer.
template <class Config, class Acc>
__device__ __forceinline__ uint32_t share_tile_rows(const PartialsWorkspace& ws, const ScheduleParams& schedule,
                                                    const WorkUnit& unit, Acc& acc, int32_t valid_rows, int consumer,
                                                    int thread) {
  static_assert(!Config::kPingPong && !Config::kSwapAB && Acc::kBlocks == 1, "cooperative unswapped tiles");
  constexpr int kStride = Config::kWarpgroupsPerTile * 128;
  constexpr int kTileFloats = Acc::kValuesPerBlock * kStride;
  float* column =
      ws.partials + int64_t(unit.counter) * slots_per_tile(schedule) * kTileFloats + consumer * 128 + thread;
  const auto inside = [&](int i) { return Acc::row(0, i, thread) < valid_rows; };

  float* mine = column + int64_t(unit.segment) * kTileFloats;
#pragma unroll
  for (int i = 0; i < Acc::kValuesPerBlock; ++i)
    if (inside(i)) __stcg(mine + i * kStride, acc.value[0][i]);
  __threadfence();  // every thread's partial visible device-wide before the arrival is counted
  sm90::named_barrier_sync(3, kStride);
  const int finishers = min(unit.segments, 4);
  if (consumer == 0 && thread == 0) {
    int32_t* counter = ws.arrivals + unit.counter;
    int32_t count;
    asm volatile("atom.release.gpu.global.add.s32 %0, [%1], 1;" : "=r"(count) : "l"(counter) : "memory");
    if (unit.segment < finishers) {
      do asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(count) : "l"(counter) : "memory");
      while (count < unit.segments);
      asm volatile("atom.relaxed.gpu.global.add.s32 %0, [%1], 1;" : "=r"(count) : "l"(counter) : "memory");
      if (count == unit.segments + finishers - 1) *counter = 0;  // ready for the next launch
    }
  }
  if (unit.segment >= finishers) return 0;
  sm90::named_barrier_sync(3, kStride);
  const uint32_t halves = row_halves_finished(unit.segment, unit.segments, consumer);
  if (halves == 0) return 0;
  __threadfence();  // order the reads below after the acquiring load observed by this CTA
  // A consumer finishes one half, a constant in each copy of the loop, and adds it 32 values (64
  // accumulators) at a time: a run-time test of each value's half, or 64 loads in flight beside
  // 128 accumulators (m128n256), spilled.
  const auto add_half = [&]<int h>() {
#pragma unroll
    for (int part = 0; part < Acc::kValuesPerBlock / 64; ++part)
      for (int segment = 0; segment < unit.segments; ++segment) {
        const float* partial = column + int64_t(segment) * kTileFloats;
#pragma unroll
        for (int i = 64 * part; i < 64 * part + 64; ++i)
          if ((i / 2) % 2 == h && inside(i)) {
            const float v = __ldcg(partial + i * kStride);
            acc.value[0][i] = segment == 0 ? v : acc.value[0][i] + v;
          }
      }
  };
  if (halves == 1) add_half.template operator()<0>();
  else add_half.template operator()<1>();
  return halves;
}

/// Where CTA 0 of a cluster receives the other CTAs' partials of a swapped tile (combine_in_cluster).
/// A slot holds one thread's four values of 8 tokens in one 64-row block (an 8-column group of its
/// accumulators); CTA r writes slots [(r - 1) S, r S) for a tile of S = blocks x groups slots
/// (cluster_split_fits keeps (splits - 1) S within the slots).
struct ClusterPartials {
  float4 values[2][kClusterPartialSlots][128];  // [consumer][slot][thread]
  uint64_t landed[2];  // CTA 0: every other CTA's partial of consumer c's tile has landed
  uint64_t free[2];    // CTA r > 0: CTA 0 has read consumer c's partials: the slots may be written again
};
struct NoClusterPartials {};

/// A segment of a tile whose segments are the CTAs of one cluster (segment = the CTA's rank: the
/// scheduler hands CTA b of a grid of multiples of `splits` the units of split b % splits). CTA r > 0
/// stores its partial of the tokens inside the problem into CTA 0's slots and is done with the tile;
/// CTA 0 waits for them, adds them in rank order, and returns true: it finishes the tile.
/// `tiles_done`: the consumer's tiles before this one in the launch (every one split the same way),
/// whose parity is the phase of `landed` and, one less, of `free`.
template <class Acc>
__device__ __forceinline__ bool combine_in_cluster(ClusterPartials& shared, const WorkUnit& unit, Acc& acc,
                                                   int tiles_done, int32_t valid_cols, int consumer, int thread) {
  constexpr int kGroups = Acc::kCols / 8;  // value i of a thread's block is in column group i / 4
  const int groups = min(kGroups, (valid_cols + 7) / 8);
  const int slots = Acc::kBlocks * groups;  // a CTA's partial
  const uint32_t landed = sm90::shared_address(&shared.landed[consumer]);
  if (unit.segment > 0) {
    if (tiles_done > 0) sm90::wait_cluster(sm90::shared_address(&shared.free[consumer]), uint32_t(tiles_done - 1) & 1);
    const uint32_t first = sm90::shared_address(&shared.values[consumer][(unit.segment - 1) * slots][thread]);
    const uint32_t remote = sm90::peer_address(first, 0), remote_landed = sm90::peer_address(landed, 0);
#pragma unroll
    for (int b = 0; b < Acc::kBlocks; ++b)
#pragma unroll
      for (int g = 0; g < kGroups; ++g)
        if (g < groups) {
          const float* v = &acc.value[b][4 * g];
          sm90::store_to_peer(remote + uint32_t(b * groups + g) * 128 * sizeof(float4), v[0], v[1], v[2], v[3],
                              remote_landed);
        }
    return false;
  }
  if (thread == 0)
    sm90::arrive_expect_bytes(&shared.landed[consumer], uint32_t((unit.segments - 1) * slots) * 128 * sizeof(float4));
  sm90::wait_cluster(landed, uint32_t(tiles_done) & 1);
  for (int segment = 1; segment < unit.segments; ++segment)
#pragma unroll
    for (int b = 0; b < Acc::kBlocks; ++b)
#pragma unroll
      for (int g = 0; g < kGroups; ++g)
        if (g < groups) {
          const float4 v = shared.values[consumer][(segment - 1) * slots + b * groups + g][thread];
          acc.value[b][4 * g] += v.x;
          acc.value[b][4 * g + 1] += v.y;
          acc.value[b][4 * g + 2] += v.z;
          acc.value[b][4 * g + 3] += v.w;
        }
  // Every thread of the consumer has read the slots (barriers 3 and 4: combine_segments' ids, unused
  // in a launch that splits in clusters): the other CTAs may write them again.
  sm90::named_barrier_sync(3 + consumer, 128);
  if (thread == 0)
    for (int segment = 1; segment < unit.segments; ++segment)
      sm90::arrive_on_peer(sm90::peer_address(sm90::shared_address(&shared.free[consumer]), uint32_t(segment)));
  return true;
}

}  // namespace coda::mainloop

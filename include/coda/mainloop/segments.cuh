// coda/mainloop/segments.cuh: the end of a tile computed in several K segments (kernel.cuh), its
// segments' fp32 partials added in segment order by the CTA that finishes it. Two ways:
//   combine_segments    through a workspace in global memory: every segment publishes its partial
//                       and counts its arrival; the last to arrive adds them (any tile, split-K or
//                       stream-K; needs the workspace and its counters). share_tile_rows is its
//                       variant for an epilogue that shares a split tile's rows out
//                       (kSharesTileRows: the MoE router's selection) at 2 to 4 segments: they wait
//                       for each other and each finishes some of the rows (a quarter at 4
//                       segments, half at 2), on every segment's SM instead of one.
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
#include "coda/sm90/tma.cuh"

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
/// warp's 16; bit h) segment `segment` of `segments` (2 to kMaxSharedSegments) finishes in
/// share_tile_rows: half h goes to segment (2c + h) mod segments. Each of the four (c, h) has one
/// finisher and no consumer finishes both its halves: at four segments each finishes one
/// consumer's half; at two, segment h both consumers' half h.
__device__ __forceinline__ uint32_t row_halves_finished(int segment, int segments, int consumer) {
  return ((2 * consumer) % segments == segment ? 1u : 0u) | ((2 * consumer + 1) % segments == segment ? 2u : 0u);
}

/// The most K segments whose tile's rows share_tile_rows shares out: one per (consumer, row half).
constexpr int kMaxSharedSegments = 4;

/// combine_segments for a split-K tile of 2 to kMaxSharedSegments segments that share its rows out
/// (the epilogue's kSharesTileRows): every segment publishes the row halves it does not finish
/// itself (row_halves_finished) and counts its arrival, waits until every segment has arrived,
/// then adds its halves' partials in segment order, its own from its registers (the bits
/// combine_segments gives). Returns the halves this consumer now holds whole (bit h; 0: none). The
/// segments wait for each other, so they must all be running at once: the kernel takes this way
/// only where the launch's units fit its CTAs (one wave). The counter counts the arrivals, then the
/// departures, the last of which zeroes it for the next launch. Cooperative unswapped tiles, one
/// 64-row block a consumer.
///
/// A half's partial is stored as float4s, [half][quad][consumer][thread]: quad q of half h holds
/// values 8q + 2h + {0, 1, 4, 5} (one row of the thread's), so a warp stores 512 contiguous bytes
/// an instruction, and a consumer's quad of a half is 2 KB in one piece. At m128n128 a finisher
/// loads 16 values of each other segment at once; at m128n256 their halves come into `ring` (the
/// operand ring, idle once a CTA's one unit has its accumulators) by bulk copies, all in flight at
/// once, and are added from there. One value a load and a segment at a time, the exchange took
/// 12,000 cycles of a 6,000-cycle mainloop at E = 64, M = 4096 (H100, clock64: stores 2,500, fence
/// 2,200, adds 6,500), 21,500 at E = 256 (adds 11,500).
template <class Config, class Acc>
__device__ __forceinline__ uint32_t share_tile_rows(const PartialsWorkspace& ws, const ScheduleParams& schedule,
                                                    const WorkUnit& unit, Acc& acc, int32_t valid_rows, int consumer,
                                                    int thread, uint8_t* ring) {
  static_assert(!Config::kPingPong && !Config::kSwapAB && Acc::kBlocks == 1, "cooperative unswapped tiles");
  constexpr int kQuads = Acc::kValuesPerBlock / 8;           // float4s in a thread's row half
  constexpr int kStride = Config::kWarpgroupsPerTile * 128;  // float4s between a thread's quads
  constexpr int kSegmentQuads = 2 * kQuads * kStride;        // float4s of a segment's partial
  static_assert(kSegmentQuads * 4 == Acc::kValuesPerBlock * kStride, "a tile slot of combine_segments");
  // 128 accumulators (m128n256) leave registers for few loads in flight: the other segments' halves
  // come by bulk copies into a landing instead, a finisher's half of three other segments, or of
  // two for each consumer at three. At m128n128 (64) the loads into registers measured faster.
  constexpr bool kLands = kQuads > 8;
  constexpr int kPart = kLands ? 1 : 4;  // quads of each other segment in registers at once
  constexpr int kChunkBytes = 128 * 16;  // a consumer's quad of a half
  constexpr int kLandingBytes = 4 * kQuads * kChunkBytes;
  static_assert(kLandingBytes + 2 * 8 <= Config::kStages * (Config::kBlockM + Config::kBlockN) * Config::kBlockK * 2,
                "the landing and its barriers fit in the operand ring");
  const float4* column = reinterpret_cast<const float4*>(ws.partials) +
                         int64_t(unit.counter) * slots_per_tile(schedule) * kSegmentQuads + consumer * 128 + thread;
  const auto at = [&](int segment, int h, int q) {
    return column + int64_t(segment) * kSegmentQuads + (h * kQuads + q) * kStride;
  };
  const auto index = [](int h, int q, int c) { return 8 * q + 2 * h + c % 2 + 4 * (c / 2); };  // c: component
  const auto component = [](const float4& v, int c) { return c == 0 ? v.x : c == 1 ? v.y : c == 2 ? v.z : v.w; };
  const auto inside = [&](int h) { return Acc::row(0, 2 * h, thread) < valid_rows; };
  const int me = unit.segment;
  const uint32_t halves = row_halves_finished(me, unit.segments, consumer);

#pragma unroll
  for (int h = 0; h < 2; ++h)
    if (!(halves >> h & 1u) && inside(h))
#pragma unroll
      for (int q = 0; q < kQuads; ++q)
        __stcg(const_cast<float4*>(at(me, h, q)),
               make_float4(acc.value[0][index(h, q, 0)], acc.value[0][index(h, q, 1)], acc.value[0][index(h, q, 2)],
                           acc.value[0][index(h, q, 3)]));
  __threadfence();  // every thread's partial visible device-wide before the arrival is counted
  sm90::named_barrier_sync(3, kStride);
  if (consumer == 0 && thread == 0) {
    int32_t* counter = ws.arrivals + unit.counter;
    int32_t count;
    asm volatile("atom.release.gpu.global.add.s32 %0, [%1], 1;" : "=r"(count) : "l"(counter) : "memory");
    do asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(count) : "l"(counter) : "memory");
    while (count < unit.segments);
    asm volatile("atom.relaxed.gpu.global.add.s32 %0, [%1], 1;" : "=r"(count) : "l"(counter) : "memory");
    if (count == 2 * unit.segments - 1) *counter = 0;  // ready for the next launch
  }
  sm90::named_barrier_sync(3, kStride);
  if (halves == 0) return 0;

  // Half h of the other segments, segment j + (j >= me) at row j: at m128n256 (kLands) into the
  // landing, where at four segments a CTA's only finisher takes its start, at two and three each
  // consumer a half; at m128n128 into registers, kPart quads of each at a time.
  const int h = halves == 1u ? 0 : 1, others = unit.segments - 1;
  const auto other = [&](int j) { return j + (j >= me ? 1 : 0); };
  const float4* landing =
      reinterpret_cast<const float4*>(ring) + (unit.segments == 4 ? 0 : consumer * 2 * kQuads * 128);
  __threadfence();  // the reads below after the acquiring load observed by this CTA
  if constexpr (kLands) {
    uint64_t* landed = reinterpret_cast<uint64_t*>(ring + kLandingBytes) + consumer;
    if (thread == 0) {
      sm90::barrier_init(landed, 1);
      sm90::fence_barrier_init();
      sm90::arrive_expect_bytes(landed, uint32_t(others * kQuads * kChunkBytes));
    }
    sm90::named_barrier_sync(1 + uint32_t(consumer), 128);
    if (thread % 32 == 0) {           // each warp's lane 0 a quarter of the copies
      sm90::fence_global_to_async();  // the partials, acquired, before its copies (async proxy) read them
      for (int i = thread / 32; i < others * kQuads; i += 4)
        sm90::bulk_copy_to_shared(const_cast<float4*>(landing + i * 128), at(other(i / kQuads), h, i % kQuads) - thread,
                                  kChunkBytes, landed);
    }
    sm90::wait(landed, 0);
  }

  // The sum in segment order, its own half at its place (a constant half in each copy; rows past
  // the problem were not stored and are not selected).
  const auto add_half = [&]<int kHalf>() {
    if (!inside(kHalf)) return;
#pragma unroll
    for (int part = 0; part < kQuads / kPart; ++part) {
      float4 in[kMaxSharedSegments - 1][kPart];
#pragma unroll
      for (int j = 0; j < kMaxSharedSegments - 1; ++j)
        if (j < others)
#pragma unroll
          for (int p = 0; p < kPart; ++p) {
            const int q = part * kPart + p;
            in[j][p] = kLands ? landing[(j * kQuads + q) * 128 + thread] : __ldcg(at(other(j), kHalf, q));
          }
#pragma unroll
      for (int p = 0; p < kPart; ++p)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          float& own = acc.value[0][index(kHalf, part * kPart + p, c)];
          float sum = me == 0 ? own : component(in[0][p], c);
#pragma unroll
          for (int s = 1; s < kMaxSharedSegments; ++s)
            // Rows s and s - 1 by a select, as a run-time index would put `in` in local memory (s < me
            // only where s <= 2: min keeps the other index in bounds).
            if (s < unit.segments)
              sum += s == me  ? own
                     : s < me ? component(in[min(s, kMaxSharedSegments - 2)][p], c)
                              : component(in[s - 1][p], c);
          own = sum;
        }
    }
  };
  if (h == 0) add_half.template operator()<0>();
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

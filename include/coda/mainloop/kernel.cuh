// coda/mainloop/kernel.cuh: the fixed mainloop. A persistent, warp-specialized Hopper GEMM:
//
//   C[b, m, n] = epilogue( sum_k A[b, m, k] * B[b, n, k] )
//
// One CTA = three warpgroups. Warpgroup 0 is the producer: one thread issues TMA loads of A and
// B tiles into a ring of `Stages` shared-memory slots, each guarded by two mbarriers ("full":
// the slot's bytes have landed; "empty": every consumer is done reading it). Warpgroups 1 and 2
// are consumers: each waits for a full slot, runs wgmma on its part of the tile, and releases
// the slot once those wgmmas have retired. Two schedules (tile_config.cuh):
//   cooperative  the consumers split every tile. After the last K block each has the epilogue
//                prepare its accumulators (math, conversion) and moves on; the epilogue writes the
//                prepared results (staging, TMA stores) a step after each of the next tile's MMA
//                groups, in the shadow of the tensor cores, while the producer keeps the ring full.
//   ping-pong    the consumers take whole tiles in turn (even units of the CTA's list for
//                consumer 0, odd for consumer 1): while one runs its epilogue, the other runs
//                its MMAs. A "turn" barrier hands the slots over from one to the other. An
//                epilogue may stage a tile input in shared memory here (epilogue_seam.cuh):
//                producer warp 1 fetches each tile's by TMA into one buffer while the tile's MMAs
//                run, once the other consumer's epilogue has let go of it ("input" barriers).
//
// setmaxnreg moves registers from the producer (40 per thread) to the consumers (232), which
// hold 128 fp32 accumulators each. The CTAs of a cluster (2 x 1, 1 x 2 or 2 x 2) that share an
// operand tile split its loading and multicast it to each other, halving its L2 traffic. A tile
// computed in several K segments (split-K, stream-K; see scheduler.cuh) has every segment publish
// its fp32 partial to a workspace; the last to arrive adds them in segment order (deterministic, no
// atomics on data) and runs the epilogue, or, where the epilogue asks, every segment finishes some
// of the tile's rows (segments.cuh). A swapped configuration (tiles.hpp: small M) runs this
// same kernel on C^T = B A^T: the plan hands it B as its A, and its epilogue transposes back. Its
// split-K may instead run the segments of a tile on the CTAs of one cluster, which hand their
// partials to CTA 0 through distributed shared memory (segments.cuh).
// Where the epilogue asks (kSkipsKBlocks), a K-block mask (params.hpp) leaves K blocks of each tile
// row out: the producer loads and the consumers multiply only the blocks it keeps.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "coda/core/layout.hpp"
#include "coda/mainloop/epilogue_seam.cuh"
#include "coda/mainloop/params.hpp"
#include "coda/mainloop/scheduler.cuh"
#include "coda/mainloop/segments.cuh"
#include "coda/mainloop/tiles.hpp"
#include "coda/sm90/barrier.cuh"
#include "coda/sm90/cluster.cuh"
#include "coda/sm90/grid_dependency.cuh"
#include "coda/sm90/tma.cuh"
#include "coda/sm90/warpgroup.cuh"
#include "coda/sm90/wgmma.cuh"

namespace coda::mainloop {

template <class Config, class Epilogue, bool ClusterSplit>
struct SharedStorageOf {
  static constexpr int kBytesA = Config::kBlockM * Config::kBlockK * 2;
  static constexpr int kBytesB = Config::kBlockN * Config::kBlockK * 2;
  alignas(1024) uint8_t a[Config::kStages][kBytesA];  // 128B-swizzled tiles need 1024-byte alignment
  alignas(1024) uint8_t b[Config::kStages][kBytesB];
  typename Epilogue::SharedStorage epilogue;
  std::conditional_t<ClusterSplit, ClusterPartials, NoClusterPartials> cluster;  // K split in a cluster
  uint64_t full[Config::kStages];
  uint64_t empty[Config::kStages];
  uint64_t turn[2];          // ping-pong: turn[c] completes when consumer c may wait on its next tile's slots
  uint64_t input_landed[2];  // staged tile input: consumer c's tile's input has landed
  uint64_t input_free;       // staged tile input: the epilogue that read the buffer is done with it
  int32_t last_arrival[2];   // broadcast of "this CTA completes the tile" to the tile's consumers
};

constexpr int kMaxSharedBytes = 227 * 1024;  // dynamic shared memory an sm_90 CTA may have

/// Whether a kernel of `Config` with `Epilogue` can split K across the CTAs of a cluster
/// (segments.cuh): a swapped tile whose shared memory has room for CTA 0's slots beside its ring
/// and its epilogue's (the store epilogue's; a program's has not).
template <class Config, class Epilogue>
constexpr bool kSplitsInClusters = Config::kSwapAB
                                       ? int(sizeof(SharedStorageOf<Config, Epilogue, true>)) + 1024 <= kMaxSharedBytes
                                       : false;

template <class Config, class Element, class Epilogue>
using SharedStorage = SharedStorageOf<Config, Epilogue, kSplitsInClusters<Config, Epilogue>>;

template <class Config, class Element, class Epilogue>
constexpr int kSharedBytes = int(sizeof(SharedStorage<Config, Element, Epilogue>)) + 1024;  // + alignment slack

// Registers per thread after setmaxnreg: 40 * 128 + 2 * 232 * 128 = 64512, exactly what the launch
// gives the CTA (168 a thread for 384 threads: __launch_bounds__(384, 1)). setmaxnreg only moves
// registers inside that pool: .inc waits until a .dec has released enough (PTX ISA, setmaxnreg), so
// a split summing past it hangs (a 24 / 240 split fits; 32 / 240 hung every kernel). The consumers
// hold 128 accumulators plus the held-back part of the previous tile (see store_epilogue.cuh).
constexpr uint32_t kProducerRegisters = 40;
constexpr uint32_t kConsumerRegisters = 232;

// ---------------------------------------------------------------------------------------------
// Producer: one thread fills the ring.

/// Load rows [first_row, first_row + rows) of an operand tile for K block `k_block`.
/// K-major: rows / box_rows boxes of 64 K x box_rows rows (the tensor map's box; a multiple of 8,
/// whole 128B-swizzle atoms), one after another. MN-major: rows / 64 boxes of 64 M/N x 64 K, stored
/// one after another (each is one 64-wide MN chunk of the canonical MN-major layout, 64 x 128 bytes).
template <Major OperandMajor>
__device__ __forceinline__ void load_operand(uint8_t* tile, const CUtensorMap* map, int first_row, int rows,
                                             int box_rows, int32_t tile_row0, int32_t k_block, int32_t batch,
                                             uint64_t* full, uint16_t multicast_mask) {
  auto issue = [&](uint8_t* dst, int32_t x, int32_t y) {
    if (multicast_mask) sm90::tma_load_multicast(dst, map, x, y, batch, full, multicast_mask);
    else sm90::tma_load(dst, map, x, y, batch, full);
  };
  if constexpr (OperandMajor == Major::k) {
    for (int row = first_row; row < first_row + rows; row += box_rows)
      issue(tile + row * 128, k_block * 64, tile_row0 + row);
  } else {
    for (int chunk = first_row / 64; chunk < (first_row + rows) / 64; ++chunk)
      issue(tile + chunk * 64 * 128, tile_row0 + chunk * 64, k_block * 64);
  }
}

/// Whether a kernel of `Config` with `Epilogue` honours the launch's K-block mask: where the epilogue
/// asks, on the cooperative unswapped tile (a ping-pong consumer steps over the other's slots by
/// their count, which a mask would change). launch.cuh refuses a mask elsewhere.
template <class Config, class Epilogue>
constexpr bool kReadsKBlockMask = kSkipsKBlocks<Epilogue> && !Config::kPingPong && !Config::kSwapAB;

/// Whether a unit of output tile row `tile_m` computes K block `kb` (params.hpp, KBlockMask; no
/// mask: every block). The CTAs of a cluster read one row of the mask, so they load the same
/// blocks and keep sharing them by multicast. `WholeWarp` (the consumers): every lane calls, and
/// the word is broadcast from lane 0 so the compiler knows the branch on it is uniform (a branch it
/// must treat as divergent around wgmma serializes the MMAs: ptxas C7518). The producer's one
/// thread reads it alone.
template <class Config, bool WholeWarp>
__device__ __forceinline__ bool computes_k_block(const KBlockMask& mask, int32_t tile_m, int32_t kb) {
  if (mask.bits == nullptr) return true;
  uint32_t word =
      __ldg(mask.bits + uint32_t(tile_m) / Config::kClusterM * uint32_t(mask.words_per_row) + uint32_t(kb) / 32u);
  if constexpr (WholeWarp) word = __shfl_sync(0xffffffffu, word, 0);
  return (word >> (uint32_t(kb) % 32u)) & 1u;
}

/// The first K block at or after `kb` that a unit of tile row `tile_m` computes (`end` if none):
/// the K loops step from kept block to kept block, so no branch skips the body holding the wgmma.
template <class Config, bool Skips, bool WholeWarp>
__device__ __forceinline__ int32_t kept_k_block(const KBlockMask& mask, int32_t tile_m, int32_t kb, int32_t end) {
  if constexpr (Skips)
    while (kb < end && !computes_k_block<Config, WholeWarp>(mask, tile_m, kb)) ++kb;
  return kb;
}

// ---------------------------------------------------------------------------------------------
// Consumer: wgmma over one slot.

/// The descriptor of rows [first_row, first_row + 64 ...) of the operand tile at shared address
/// `tile`, at its first 16 K.
template <Major OperandMajor>
__device__ __forceinline__ uint64_t operand_descriptor(uint32_t tile, int first_row) {
  // Both layouts put 64 rows (of K or of M/N) in 64 x 128 = 8192 contiguous bytes, so a
  // warpgroup's part starting at row r begins r * 128 bytes into the tile either way.
  const uint32_t start = tile + uint32_t(first_row) * 128;
  if constexpr (OperandMajor == Major::k) return sm90::make_sw128_descriptor(start, 16, 1024);
  else return sm90::make_sw128_descriptor(start, 64 * 128, 1024);
}

/// How far the start address moves, in the descriptor's 16-byte units, from one 16-K step to the
/// next: 16 K values = 32 bytes (K-major), 16 k-rows of 128 bytes (MN-major). 64-row blocks move
/// it by a constant too, so the MMA loop encodes one descriptor per slot and operand and adds
/// constants to it (sm90::advance_descriptor) instead of encoding one per wgmma.
template <Major OperandMajor>
constexpr uint32_t kDescriptorK16Step = OperandMajor == Major::k ? 32 / 16 : 2048 / 16;
constexpr uint32_t kDescriptorRowStep = 128 / 16;  // one row (of either layout) = 128 bytes

template <class Element, Major AMajor, Major BMajor, int Cols, int Values>
__device__ __forceinline__ void mma_k16(float (&acc)[Values], uint64_t desc_a, uint64_t desc_b, bool accumulate) {
  constexpr int kTransA = AMajor == Major::mn ? 1 : 0;
  constexpr int kTransB = BMajor == Major::mn ? 1 : 0;
  if constexpr (Cols == 256) sm90::mma_m64n256k16<Element, kTransA, kTransB>(acc, desc_a, desc_b, accumulate);
  else if constexpr (Cols == 128) sm90::mma_m64n128k16<Element, kTransA, kTransB>(acc, desc_a, desc_b, accumulate);
  else sm90::mma_m64n64k16<Element, kTransA, kTransB>(acc, desc_a, desc_b, accumulate);
}

/// Tell every CTA of the cluster that this warp is done with `slot` (each consumer warp arrives
/// after its own wgmma.wait, so the count never depends on cross-warp completion order).
template <class Config>
__device__ __forceinline__ void release_slot(uint32_t empty, int lane) {
  if constexpr (Config::kClusterSize == 1) {
    if (lane == 0) sm90::arrive(empty);
  } else {
    if (lane < Config::kClusterSize) sm90::arrive_cluster(empty, uint32_t(lane));
  }
}

template <class Config, class Element, Major AMajor, Major BMajor, class Epilogue>
__global__ void __launch_bounds__(Config::kThreads, 1)
    gemm_kernel(const __grid_constant__ KernelParams<typename Epilogue::Params> p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using Storage = SharedStorage<Config, Element, Epilogue>;
  using Acc = Accumulators<Config::kWarpgroupM, Config::kWarpgroupN>;
  constexpr int kStages = Config::kStages;

  extern __shared__ uint8_t shared_raw[];
  // Aligned by an offset computed in the shared window, so `s` stays a pointer into __shared__:
  // every address taken in it is one shared address plus a constant, not a generic address
  // rebuilt from the window base (which the MMA loop would redo per K block).
  Storage& s = *reinterpret_cast<Storage*>(shared_raw + ((1024u - (sm90::shared_address(shared_raw) & 1023u)) & 1023u));

  // Unsigned division and remainder: with a signed threadIdx they carry sign fix-ups.
  const int warpgroup = int(threadIdx.x / 128u);
  const int thread = int(threadIdx.x % 128u);
  const uint32_t cta_rank = Config::kClusterSize > 1 ? sm90::cluster_cta_rank() : 0;
  // A swapped launch whose segments are the CTAs of a cluster (the launch's clusters, not Config's).
  constexpr bool kClusterSplit = kSplitsInClusters<Config, Epilogue>;
  const bool splits_in_cluster = kClusterSplit && p.schedule.splits_in_cluster;
  // Split-K tiles whose segments each finish some of the rows (segments.cuh, share_tile_rows): where
  // the epilogue asks, K is split at most kMaxSharedSegments ways (the automatic split's cap; more
  // only when options.split_k asks) and every unit of the launch has a cluster of its own, so that
  // the segments that wait for each other all run at once. Evaluated from the parameters where it
  // is used, so that no register holds it across the MMA loop.
  constexpr bool kSharesRows = kSharesTileRows<Epilogue> && !Config::kPingPong && !Config::kSwapAB && Acc::kBlocks == 1;
  const auto shares_rows = [&] {
    return kSharesRows && p.schedule.splits > 1 && p.schedule.splits <= kMaxSharedSegments &&
           p.schedule.cluster_tiles * p.schedule.splits <= int32_t(gridDim.x) / Config::kClusterSize;
  };

  if (threadIdx.x == 0) {
    for (int i = 0; i < kStages; ++i) {
      sm90::barrier_init(&s.full[i], 1);
      sm90::barrier_init(&s.empty[i], Config::kWarpgroupsPerTile * 4 * Config::kClusterSize);
    }
    for (int c = 0; c < 2; ++c) sm90::barrier_init(&s.turn[c], 4);  // one arrival per warp
    for (int c = 0; c < 2; ++c) sm90::barrier_init(&s.input_landed[c], 1);
    sm90::barrier_init(&s.input_free, 4);  // one arrival per warp of the reading consumer
    if constexpr (kClusterSplit)
      for (int c = 0; c < 2; ++c) {
        sm90::barrier_init(&s.cluster.landed[c], 1);  // CTA 0's expect-tx; the peers' stores complete it
        sm90::barrier_init(&s.cluster.free[c], 1);    // CTA 0's arrival once it has read the slots
      }
    sm90::fence_barrier_init();
  }
  // A K-major B of fewer rows than the tile loads in one box of them (plan.cpp, token_box_rows):
  // the slots' rows past it are never written by TMA, so they are zeroed once here, standing for
  // the zeros a whole box's boundary fill would give (an epilogue sees exact zeros past N). The
  // fence orders these generic stores before the async proxy's wgmma reads (PTX ISA, "Proxies").
  if constexpr (BMajor == Major::k && Config::kClusterM == 1) {
    // 16-byte words of a B slot (128-byte rows): the first `loaded` by TMA, the rest zeroed.
    const int loaded = p.token_box_rows * 128 / 16, slot_words = Config::kBlockN * 128 / 16;
    if (loaded < slot_words) {
      const int rest = slot_words - loaded;
      for (int i = int(threadIdx.x); i < kStages * rest; i += Config::kThreads)
        reinterpret_cast<uint4*>(s.b[i / rest])[loaded + i % rest] = uint4{};
      sm90::fence_shared_to_async();
    }
  }
  // Peers multicast into this CTA's slots, store partials to it and arrive on its barriers: they must
  // be initialised first.
  if (Config::kClusterSize > 1 || splits_in_cluster) sm90::cluster_sync();
  else __syncthreads();
  // Programmatic dependent launch (launch.cuh): this grid may have started while the one ahead of it
  // in the stream finished, its setup above overlapping that grid's tail. Nothing here reads or
  // writes global memory before the wait. Then the grid behind it may start: the next launch, whose
  // CTAs take the SMs this one leaves and set up while it runs, or a primary's companion (which
  // reads the same inputs, so only once they are final, and waits for the primary at its end).
  if (p.role != LaunchRole::companion) {
    sm90::wait_for_prerequisite_grids();
    sm90::launch_dependent_grids();
  }

  static_assert(!kStagesInput<Epilogue> || Config::kPingPong, "a staged tile input needs the ping-pong schedule");
  constexpr bool kSkips = kReadsKBlockMask<Config, Epilogue>;  // K blocks left out (params.hpp, KBlockMask)
  if (warpgroup == 0) {
    // ---- producer ----
    sm90::setmaxnreg_decrease<kProducerRegisters>();
    if constexpr (kStagesInput<Epilogue>) {
      // Warp 1 fetches each tile's staged input into the one buffer, as soon as the epilogue of
      // the tile before (the other consumer's) is done with it: while the tile's MMAs run.
      Epilogue epilogue;
      if (thread / 32 == 1 && sm90::elect_one()) {
        TileCoordinates tile{};
        tile.problem_m = p.m;
        tile.problem_n = p.n;
        int unit_index = 0;
        WorkList<Config::kClusterM, Config::kClusterN> work(p.schedule);
        for (WorkUnit unit; work.next(p.schedule, unit, cta_rank); ++unit_index) {
          // Released once per unit, in unit order: unit u - 1's release completes phase u - 1.
          if (unit_index > 0) sm90::wait(&s.input_free, uint32_t(unit_index - 1) & 1);
          tile.row0 = unit.tile_m * Config::kBlockM;
          tile.col0 = unit.tile_n * Config::kBlockN;
          tile.batch = unit.batch;
          tile.tile_m = unit.tile_m;
          tile.tile_n = unit.tile_n;
          tile.consumer = unit_index % 2;
          uint64_t* landed = &s.input_landed[unit_index % 2];
          sm90::arrive_expect_bytes(landed, Epilogue::kStagedInputBytes);
          epilogue.fetch_input(p.epilogue, s.epilogue, tile, landed);
        }
      }
    }
    if (thread < 32 && sm90::elect_one()) {
      sm90::tma_prefetch_map(&p.a);
      sm90::tma_prefetch_map(&p.b);
      // Multicast: CTAs with the same tile_n (a cluster column) share B; the same tile_m, A.
      const uint32_t rank_m = cta_rank % Config::kClusterM, rank_n = cta_rank / Config::kClusterM;
      uint16_t mask_b = 0, mask_a = 0;
      if constexpr (Config::kClusterM > 1)
        for (int r = 0; r < Config::kClusterM; ++r) mask_b |= uint16_t(1u << (rank_n * Config::kClusterM + r));
      if constexpr (Config::kClusterN > 1)
        for (int r = 0; r < Config::kClusterN; ++r) mask_a |= uint16_t(1u << (r * Config::kClusterM + rank_m));
      int stage = 0;
      uint32_t phase = 0;
      WorkList<Config::kClusterM, Config::kClusterN> work(p.schedule);
      for (WorkUnit unit; work.next(p.schedule, unit, cta_rank);) {
        const int32_t row_a = unit.tile_m * Config::kBlockM, row_b = unit.tile_n * Config::kBlockN;
        // Each slot receives whole A and B tiles (a multicast share from each peer). A K-major B
        // of fewer rows than the tile (a swapped tile's M <= 64 tokens, a router's E < 128 experts;
        // no multicast) comes in one box of its rows rounded up to 8, because a box mostly past
        // the tensor's last row costs TMA its boundary handling (plan.cpp); the rows not loaded
        // hold the zeros stored above.
        int rows_b = Config::kRowsLoadedB;
        const int box_rows_b = p.token_box_rows;
        uint32_t stage_bytes = uint32_t(Storage::kBytesA + Storage::kBytesB);
        if constexpr (BMajor == Major::k) {
          if (box_rows_b < rows_b) {  // B's rows from row_b in whole boxes; one past N (a cluster's CTA)
            rows_b = min(rows_b, max(1, (p.n - row_b + box_rows_b - 1) / box_rows_b) * box_rows_b);
            stage_bytes = uint32_t(Storage::kBytesA + rows_b * Config::kBlockK * 2);
          }
        }
        const auto kept = [&](int32_t kb) {
          return kept_k_block<Config, kSkips, false>(p.k_block_mask, unit.tile_m, kb, unit.k_block_end);
        };
        for (int32_t kb = kept(unit.k_block_begin); kb < unit.k_block_end; kb = kept(kb + 1)) {
          sm90::wait(&s.empty[stage], phase ^ 1);
          sm90::arrive_expect_bytes(&s.full[stage], stage_bytes);
          load_operand<AMajor>(s.a[stage], &p.a, int(rank_n) * Config::kRowsLoadedA, Config::kRowsLoadedA,
                               Config::kRowsLoadedA, row_a, kb, unit.batch, &s.full[stage], mask_a);
          load_operand<BMajor>(s.b[stage], &p.b, int(rank_m) * Config::kRowsLoadedB, rows_b, box_rows_b, row_b, kb,
                               unit.batch, &s.full[stage], mask_b);
          if (++stage == kStages) {
            stage = 0;
            phase ^= 1;
          }
        }
      }
    }
  } else {
    // ---- consumers ----
    sm90::setmaxnreg_increase<kConsumerRegisters>();
    // Broadcast so the compiler knows the consumer index is warp-uniform: the ping-pong branch on
    // it decides the ring position, and a position it must treat as divergent keeps the whole K
    // loop (descriptors, barrier addresses) out of the uniform registers wgmma reads from, with
    // two R2UR moves per descriptor. Uniform, the loop runs in the uniform datapath (SASS: UIADD3,
    // no R2UR; residual + RMSNorm 1.32 -> 1.23 of the GEMM on the H200).
    const int consumer = __shfl_sync(0xffffffffu, warpgroup - 1, 0);
    const int lane = int(threadIdx.x % 32u);
    const int part_row = Config::kPingPong ? 0 : (consumer / Config::kConsumerCols) * Config::kWarpgroupM;
    const int part_col = Config::kPingPong ? 0 : (consumer % Config::kConsumerCols) * Config::kWarpgroupN;
    // The ring's shared addresses, computed once and kept in registers. In a cluster launch a
    // shared::cta address carries the CTA's id (S2UR SR_CgaCtaId, a slow special register), and
    // left to itself the compiler re-derived it in every K block: 13% of the mainloop's stall
    // samples (ncu, cross-entropy kernel). A shuffle from lane 0 fixes the base (it is not
    // recomputed) and tells the compiler it is warp-uniform, so the descriptors built from it
    // can live in uniform registers, where wgmma reads them.
    const uint32_t storage = __shfl_sync(0xffffffffu, sm90::shared_address(&s), 0);
    const auto offset_of = [&](const void* member) {
      return uint32_t(static_cast<const uint8_t*>(member) - reinterpret_cast<const uint8_t*>(&s));
    };
    const uint32_t full_barriers = storage + offset_of(s.full), empty_barriers = storage + offset_of(s.empty);
    const uint32_t tiles_a = storage + offset_of(s.a), tiles_b = storage + offset_of(s.b);
    Epilogue epilogue;
    TileCoordinates coords{};
    coords.consumer = consumer;
    coords.thread = thread;
    coords.problem_m = p.m;
    coords.problem_n = p.n;
    // The previous tile's prepared results, written once this tile's first MMAs are issued.
    typename Epilogue::template Pending<Acc> pending;
    TileCoordinates pending_coords = coords;
    bool has_pending = false;
    int unit_index = 0;  // position in the CTA's list of units
    int write_step = 0;
    int stage = 0;
    uint32_t phase = 0;
    uint32_t turn_phase = 0;
    WorkList<Config::kClusterM, Config::kClusterN> work(p.schedule);
    for (WorkUnit unit; work.next(p.schedule, unit, cta_rank); ++unit_index) {
      if constexpr (Config::kPingPong) {
        if (unit_index % 2 != consumer) {  // the other consumer's tile: step over its slots
          const int32_t after = stage + (unit.k_block_end - unit.k_block_begin);
          phase ^= uint32_t(after / kStages) & 1;
          stage = after % kStages;
          continue;
        }
        // A parity wait tells apart only the phase in progress and the one before (PTX ISA,
        // mbarrier.test_wait.parity): wait on this tile's slots only once the other consumer has
        // passed its waits on the previous tile's, which sit one ring round earlier at most.
        if (unit_index > 0) {
          sm90::wait(&s.turn[consumer], turn_phase);
          turn_phase ^= 1;
        }
      }
      if constexpr (kMarksTiles<Epilogue>) epilogue.mark(p.epilogue, TileEvent::mma_begin, coords);
      coords.row0 = unit.tile_m * Config::kBlockM + part_row;
      coords.col0 = unit.tile_n * Config::kBlockN + part_col;
      coords.batch = unit.batch;
      coords.tile_m = unit.tile_m;
      coords.tile_n = unit.tile_n;
      Acc acc;
      // A unit whose every K block is left out sums to zero. (Zeroed here rather than after the
      // loop: a branch that writes the accumulators after it serializes the wgmmas, ptxas C7518,
      // and spills.)
      if constexpr (kSkips) {
#pragma unroll
        for (int block = 0; block < Acc::kBlocks; ++block)
#pragma unroll
          for (int i = 0; i < Acc::kValuesPerBlock; ++i) acc.value[block][i] = 0.0f;
      }
      int previous = -1;  // the slot of the last K block computed (-1: none yet)
      const auto kept = [&](int32_t kb) {
        return kept_k_block<Config, kSkips, true>(p.k_block_mask, unit.tile_m, kb, unit.k_block_end);
      };
      for (int32_t kb = kept(unit.k_block_begin); kb < unit.k_block_end; kb = kept(kb + 1)) {
        // The first K block computed starts the sum (wgmma's scale-d = 0), the others add to it.
        const bool adds = kSkips ? previous >= 0 : kb > unit.k_block_begin;
        sm90::wait(full_barriers + 8 * stage, phase);
        sm90::wgmma_fence();
        const uint64_t slot_a = operand_descriptor<AMajor>(tiles_a + stage * Storage::kBytesA, part_row);
        const uint64_t slot_b = operand_descriptor<BMajor>(tiles_b + stage * Storage::kBytesB, part_col);
#pragma unroll
        for (int k16 = 0; k16 < Config::kBlockK / 16; ++k16) {
          const uint64_t desc_b = sm90::advance_descriptor(slot_b, k16 * kDescriptorK16Step<BMajor>);
#pragma unroll
          for (int block = 0; block < Acc::kBlocks; ++block) {
            const uint64_t desc_a =
                sm90::advance_descriptor(slot_a, (64 * block) * kDescriptorRowStep + k16 * kDescriptorK16Step<AMajor>);
            mma_k16<Element, AMajor, BMajor, Config::kWarpgroupN>(acc.value[block], desc_a, desc_b, adds || k16 > 0);
          }
        }
        sm90::wgmma_commit();
        // The tensor cores have work: write a step of the previous tile's results meanwhile.
        if (has_pending) has_pending = !epilogue.write(p.epilogue, s.epilogue, pending, pending_coords, write_step++);
        // Keep one group in flight: once the previous one retires, its slot can be refilled.
        sm90::wgmma_wait<1>();
        if (previous >= 0) release_slot<Config>(empty_barriers + 8 * previous, lane);
        previous = stage;
        if (++stage == kStages) {
          stage = 0;
          phase ^= 1;
        }
      }
      // Every full-slot wait of this tile is passed: the other consumer may start on its next tile.
      if constexpr (Config::kPingPong)
        if (lane == 0) sm90::arrive(&s.turn[consumer ^ 1]);
      sm90::wgmma_wait<0>();
#pragma unroll
      for (int block = 0; block < Acc::kBlocks; ++block) sm90::accumulators_fence(acc.value[block]);
      if (!kSkips || previous >= 0) release_slot<Config>(empty_barriers + 8 * previous, lane);
      if constexpr (kMarksTiles<Epilogue>) epilogue.mark(p.epilogue, TileEvent::accumulators_final, coords);

      // This consumer's tiles are every other unit, so input_landed[consumer] completes once per
      // tile of its own: the k-th (unit_index / 2) has parity k & 1. Waited for even when the unit
      // does not finish its tile, so the fetch is over before the buffer is handed on.
      if constexpr (kStagesInput<Epilogue>) sm90::wait(&s.input_landed[consumer], uint32_t(unit_index / 2) & 1);
      bool finishes_tile = unit.segments == 1;
      if constexpr (kClusterSplit)
        if (!finishes_tile && splits_in_cluster)
          finishes_tile = combine_in_cluster(s.cluster, unit, acc, Config::kPingPong ? unit_index / 2 : unit_index,
                                             p.n - coords.col0, consumer, thread);
      coords.row_halves = 3;
      if (!finishes_tile && !splits_in_cluster) {
        if constexpr (kSharesRows) {
          // The ring (A's slots, then B's: no padding between them) is idle once the one unit a
          // CTA has there has its accumulators: share_tile_rows' scratch.
          static_assert(sizeof(Storage::a) % 1024 == 0, "B's slots follow A's directly");
          if (shares_rows())
            coords.row_halves =
                share_tile_rows<Config>(p.partials, p.schedule, unit, acc, p.m - coords.row0, consumer, thread, s.a[0]);
        }
        // shares_rows() again rather than a flag: one live across the exchange spills m128n256.
        finishes_tile = (kSharesRows && shares_rows())
                            ? coords.row_halves != 0
                            : combine_segments<Config>(p.partials, p.schedule, unit, acc, s.last_arrival,
                                                       p.m - coords.row0, p.n - coords.col0, consumer, thread);
      }
      if (finishes_tile) {
        // A tile shorter than the write leaves some of it: finish it before `pending` is reused.
        while (has_pending)
          has_pending = !epilogue.write(p.epilogue, s.epilogue, pending, pending_coords, write_step++);
        epilogue.prepare(p.epilogue, s.epilogue, acc, coords, pending);
        if constexpr (Config::kPingPong) {
          // The other consumer has the tensor cores: write everything now.
          for (int step = 0; !epilogue.write(p.epilogue, s.epilogue, pending, coords, step);) ++step;
        } else {
          pending_coords = coords;
          has_pending = true;
          write_step = 0;
        }
        if constexpr (kMarksTiles<Epilogue>) epilogue.mark(p.epilogue, TileEvent::epilogue_done, coords);
      }
      if constexpr (kStagesInput<Epilogue>) {
        // This warp's reads and writes (generic proxy) are ordered before the next fetch's writes
        // (async proxy) by a proxy fence (PTX ISA, memory consistency model, "proxies"), then one
        // lane tells the producer.
        sm90::fence_shared_to_async();
        __syncwarp();
        if (lane == 0) sm90::arrive(&s.input_free);
      }
    }
    while (has_pending) has_pending = !epilogue.write(p.epilogue, s.epilogue, pending, pending_coords, write_step++);
    epilogue.finish(p.epilogue, s.epilogue, coords);
  }
  // No CTA may exit while a peer can still multicast or store into it or arrive on its barriers.
  if (Config::kClusterSize > 1 || splits_in_cluster) sm90::cluster_sync();
  // The stream orders later work after the companion only: it must not complete before the primary.
  if (p.role == LaunchRole::companion) sm90::wait_for_prerequisite_grids();
#endif
}

}  // namespace coda::mainloop

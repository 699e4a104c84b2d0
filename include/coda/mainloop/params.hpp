// coda/mainloop/params.hpp: what a mainloop launch passes its kernel: the schedule, the workspace
// of multi-segment tiles, the launch's role beside a companion, and the epilogue's parameters.
// Plain structs, so host code that plans a launch needs no device code.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "coda/core/dtype.hpp"

namespace coda::mainloop {

/// The tiles of one launch and how they are cut into units of work (scheduler.cuh).
struct ScheduleParams {
  int32_t tiles_m;       // output tiles along M
  int32_t tiles_n;       // and along N
  int32_t cluster_rows;  // ceil(tiles_m / ClusterM)
  int32_t cluster_cols;  // ceil(tiles_n / ClusterN)
  int32_t batches;
  int32_t cluster_tiles;   // cluster_rows * cluster_cols * batches
  int32_t k_blocks;        // ceil(K / 64)
  int32_t group_m;         // raster group height, in cluster rows
  int32_t splits;          // split-K: K ranges per tile (1: off)
  int32_t stream_k_tiles;  // stream-K: cluster tiles at the end shared out by K iterations (0: off)
  int32_t max_segments;    // partial slots reserved per tile
  int32_t first_tile_row;  // the launch's tiles start at this tile row (plan.hpp: over_rows)
  // 1: the `splits` segments of each tile are the CTAs of one cluster (launched in clusters of
  // `splits`), which add their partials through distributed shared memory (segments.cuh; swapped
  // tiles only); 0: segments meet in the workspace.
  int32_t splits_in_cluster;
};

/// K split across the CTAs of a cluster (ScheduleParams::splits_in_cluster): at most this many CTAs
/// (the portable cluster size), and CTA 0 receives the others' partials in this many 16-byte slots
/// per consumer thread (segments.cuh: ClusterPartials, 12 KB: what the swapped tiles' shared memory has
/// left beside their rings and epilogues).
constexpr int kMaxClusterSplits = 4;
constexpr int kClusterPartialSlots = 3;

/// Whether `splits` CTAs of a cluster can combine a swapped tile of `tile_tokens` token columns
/// over a problem of `tokens` tokens, whose consumers hold `consumer_blocks` blocks of 64 weight
/// rows: each CTA but the first sends one slot per block and 8 tokens of a tile.
constexpr bool cluster_split_fits(int64_t splits, int64_t tokens, int64_t tile_tokens, int consumer_blocks = 1) {
  const int64_t groups = ((tokens < tile_tokens ? tokens : tile_tokens) + 7) / 8;
  return splits >= 2 && splits <= kMaxClusterSplits && (splits - 1) * consumer_blocks * groups <= kClusterPartialSlots;
}

/// Bookkeeping of tiles computed in several K segments: one arrival counter per tile, zeroed by
/// the launch's host side before the kernel (plan.hpp: LaunchPlan::counters) and back to zero
/// after it, and the segments' fp32 partials.
struct PartialsWorkspace {
  int32_t* arrivals;
  float* partials;
};

/// K blocks a launch may leave out (kernel.cuh): tile row r (of BlockM x ClusterM output rows, a
/// cluster's rows, which share their operand loads) computes K block kb only where bit kb % 32 of
/// word bits[r * words_per_row + kb / 32] is set; the blocks left out add nothing to its sum. Null
/// bits: every block. Only kernels whose epilogue skips K blocks read it (epilogue_seam.cuh); the
/// cross-entropy backward builds it from the gradient's magnitude (ops/cross_entropy.hpp).
struct KBlockMask {
  const uint32_t* bits = nullptr;
  int32_t words_per_row = 0;
};

/// How a launch relates to the one beside it (plan.hpp: a program's companion launch).
enum class LaunchRole : int32_t {
  alone,      // the only launch of its GEMM
  primary,    // lets its companion start (programmatic dependent launch) once its inputs are final
  companion,  // runs beside the primary on the SMs it leaves idle; finishes after it
};

template <class EpilogueParams>
struct KernelParams {
  CUtensorMap a;  // box: K-major (64 K x rows), MN-major (64 M/N x 64 K)
  CUtensorMap b;
  ScheduleParams schedule;
  int32_t m, n;
  int32_t token_box_rows;  // rows of a K-major B's TMA box (plan.cpp): fewer than the tile's where B has fewer
  PartialsWorkspace partials;
  KBlockMask k_block_mask;
  EpilogueParams epilogue;
  LaunchRole role;
};

/// The store epilogue's parameters (store_epilogue.cuh).
struct StoreParams {
  CUtensorMap output;  // 3-D map of C, box (128 bytes of columns) x 64 rows
  DType output_type;   // bf16, f16 or f32
};

}  // namespace coda::mainloop

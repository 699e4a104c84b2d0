// coda/gemm/tile_config.cuh: the tile configurations the mainloop is compiled for.
//
// A CTA has two consumer warpgroups, fed by a producer warpgroup. Two schedules:
//   cooperative  both consumers work on one BlockM x BlockN output tile, each owning a
//                WarpgroupM x WarpgroupN part of it (two parts tile the block along M or N);
//   ping-pong    (WarpgroupM x WarpgroupN == BlockM x BlockN) each consumer owns whole tiles, the
//                two taking turns: one runs its tile's MMAs while the other runs its epilogue, so
//                a long epilogue (an epilogue program) costs no tensor-core time.
// The producer warpgroup fills a ring of `Stages` shared-memory slots of BlockK = 64 (one 128-byte
// row of 16-bit K values, the 128B-swizzle width). Clusters of ClusterM x ClusterN CTAs share operand
// tiles by TMA multicast: CTAs of one cluster column (same N tile) share B, CTAs of one
// cluster row (same M tile) share A. The epilogue stages `StagingBuffers` 64 x 128-byte
// subtiles per consumer; shared memory is split between the operand ring and that staging.
#pragma once

#include <cstdint>

namespace coda::mainloop {

template <int BlockM_, int BlockN_, int WarpgroupM_, int WarpgroupN_, int Stages_, int ClusterM_, int ClusterN_,
          int StagingBuffers_>
struct TileConfig {
  static constexpr int kBlockM = BlockM_;
  static constexpr int kBlockN = BlockN_;
  static constexpr int kBlockK = 64;
  static constexpr int kWarpgroupM = WarpgroupM_;
  static constexpr int kWarpgroupN = WarpgroupN_;
  static constexpr int kStages = Stages_;
  static constexpr int kClusterM = ClusterM_;
  static constexpr int kClusterN = ClusterN_;
  static constexpr int kClusterSize = ClusterM_ * ClusterN_;
  static constexpr int kStagingBuffers = StagingBuffers_;  // epilogue staging subtiles per consumer

  static constexpr int kConsumers = 2;                          // consumer warpgroups per CTA
  static constexpr int kConsumerRows = kBlockM / kWarpgroupM;  // warpgroups sharing a tile: along M
  static constexpr int kConsumerCols = kBlockN / kWarpgroupN;  // and along N
  static constexpr int kWarpgroupsPerTile = kConsumerRows * kConsumerCols;
  static constexpr bool kPingPong = kWarpgroupsPerTile == 1;
  static constexpr int kThreads = 128 * (1 + kConsumers);

  // Each CTA of a multicast group loads a 1/group share of the shared operand.
  static constexpr int kRowsLoadedA = kBlockM / kClusterN;
  static constexpr int kRowsLoadedB = kBlockN / kClusterM;

  static_assert(kWarpgroupsPerTile == 1 || kWarpgroupsPerTile == kConsumers,
                "a tile is one consumer's (ping-pong) or split between both (cooperative)");
  static_assert(kWarpgroupM % 64 == 0 && kWarpgroupN % 64 == 0 && kWarpgroupN <= 256, "wgmma is m64 x n<=256");
  static_assert(kClusterSize <= 4, "clusters of at most four CTAs (2 x 2: each operand multicast over two)");
  static_assert(kRowsLoadedA % 64 == 0 && kRowsLoadedB % 64 == 0, "multicast shares are whole 64-row chunks");
};

// The configurations coda ships (see gemm.hpp's GemmTile for when each is used).
using TileM128N256 = TileConfig<128, 256, 64, 256, 4, 2, 1, 2>;    // large GEMMs: B multicast over 2 M tiles
using TileM256N128 = TileConfig<256, 128, 128, 128, 4, 1, 2, 2>;   // large GEMMs: A multicast over 2 N tiles
using TileM128N128 = TileConfig<128, 128, 64, 128, 5, 1, 1, 4>;    // medium shapes, split-K capable
using TileM64N256 = TileConfig<64, 256, 64, 128, 4, 1, 1, 2>;      // decode-sized M <= 64, split-K capable
// Ping-pong: each consumer holds a whole tile (128 accumulators per thread). A 128 x 128 tile reads
// 1.5x the operand bytes per MMA of a 128 x 256 one, so it needs a deeper ring to cover the same
// load latency: 6 stages (all the shared memory left beside 32 KB of staging) measured 0.96 of
// cuBLAS on the Transformer set, against 0.92 with 5. Each operand is multicast over a 2 x 2 cluster:
// what a cluster reads from L2 per MMA is then that of one 256 x 256 tile. On the H100 (coda bench
// gemm, transformer set, each beside 2 x 1 in one run): 2 x 2 0.93 of cuBLAS, 2 x 1 (B shared) 0.81,
// 1 x 2 (A shared) 0.71, no cluster 0.62, and the fused ops 4-15% faster; on the H200 (fourteenth
// session) 2 x 2 was 0.94 against 0.96. (A 64 x 256 ping-pong tile: 0.91 at 5 stages; 128 x 192: 0.82 on the H100;
// 192 x 128 in 2 x 2 clusters: 0.94 against this tile's 0.93, and the programs, beside 192 accumulators a
// thread, spilled and ran up to 27% slower: bench/RESULTS.md, twenty-second session. Dropped.)
using TilePingPongM128N128 = TileConfig<128, 128, 128, 128, 6, 2, 2, 2>;  // A and B multicast over 2 x 2
// Epilogue programs on the m128n256 tile (GemmTile::m128n256, long K: epilogue/launch.cuh): the
// consumers split the tile along N, each owning a 128 x 128 part, the part a program sees. The same
// L2 traffic per MMA as TileM128N256 and every SM; the programs run with the tensor cores idle.
using TileProgramM128N256 = TileConfig<128, 256, 128, 128, 4, 2, 1, 2>;  // B multicast over 2 M tiles

}  // namespace coda::mainloop

// coda/gemm/tile_config.cuh: the tile configurations the mainloop is compiled for.
//
// A CTA computes a BlockM x BlockN output tile with two consumer warpgroups, each owning a
// WarpgroupM x WarpgroupN part of it (so two parts tile the block along M or along N), fed by a
// producer warpgroup through `Stages` shared-memory slots of BlockK = 64 (one 128-byte row of
// 16-bit K values, the 128B-swizzle width). Clusters of ClusterM x ClusterN CTAs share operand
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

  static constexpr int kConsumerRows = kBlockM / kWarpgroupM;  // consumer warpgroups along M
  static constexpr int kConsumerCols = kBlockN / kWarpgroupN;  // and along N
  static constexpr int kConsumers = kConsumerRows * kConsumerCols;
  static constexpr int kThreads = 128 * (1 + kConsumers);

  // Each CTA of a multicast group loads a 1/group share of the shared operand.
  static constexpr int kRowsLoadedA = kBlockM / kClusterN;
  static constexpr int kRowsLoadedB = kBlockN / kClusterM;

  static_assert(kConsumers == 2, "the mainloop schedules exactly two consumer warpgroups");
  static_assert(kWarpgroupM % 64 == 0 && kWarpgroupN % 64 == 0 && kWarpgroupN <= 256, "wgmma is m64 x n<=256");
  static_assert(kClusterSize <= 2, "clusters of one or two CTAs");
  static_assert(kRowsLoadedA % 64 == 0 && kRowsLoadedB % 64 == 0, "multicast shares are whole 64-row chunks");
};

// The configurations coda ships (see gemm.hpp's GemmTile for when each is used).
using TileM128N256 = TileConfig<128, 256, 64, 256, 4, 2, 1, 2>;    // large GEMMs: B multicast over 2 M tiles
using TileM256N128 = TileConfig<256, 128, 128, 128, 4, 1, 2, 2>;   // large GEMMs: A multicast over 2 N tiles
using TileM128N128 = TileConfig<128, 128, 64, 128, 5, 1, 1, 4>;    // medium shapes, split-K capable
using TileM64N256 = TileConfig<64, 256, 64, 128, 4, 1, 1, 2>;      // decode-sized M <= 64, split-K capable

}  // namespace coda::mainloop

// coda/mainloop/tiles.hpp: the tile configurations the mainloop is compiled for, in one list.
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
//
// Swapped tiles (SwapAB) serve small M: the kernel computes C^T = B A^T, so the weight B fills
// wgmma's 64-row side and the few tokens of A its N side (n = 64, where an M of 1 to 64 would waste
// most of an m64 fragment). BlockM and BlockN are the kernel's (features x tokens); the
// output tile of C is BlockN x BlockM, and the epilogue sees it in C's layout (transposed_epilogue.cuh).
//
// ShippedTiles is the one list of the tiles coda::gemm runs (GemmTile): the planner's facts
// (src/mainloop/plan.cpp), the launch switch and the kernels' declarations are derived from it.
// Adding a tile is a GemmTile enumerator, one row here and one translation unit
// (src/mainloop/tile_<name>.cu: CODA_MAINLOOP_TILE(<name>)).
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "coda/gemm.hpp"

namespace coda::mainloop {

template <int BlockM_, int BlockN_, int WarpgroupM_, int WarpgroupN_, int Stages_, int ClusterM_, int ClusterN_,
          int StagingBuffers_, bool SwapAB_ = false>
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
  static constexpr bool kSwapAB = SwapAB_;                 // computes C^T: kernel rows are C's columns

  static constexpr int kConsumers = 2;                         // consumer warpgroups per CTA
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
  static_assert(!kSwapAB || kClusterSize == 1, "a swapped tile's token boxes are not multicast");
};

/// One row of the list: the GemmTile that names a configuration, the configuration, and the
/// planner's estimate of its per-tile throughput relative to the largest tiles (percent).
template <GemmTile Id, class Config_, int RelativeSpeedPercent>
struct ShippedTile {
  static constexpr GemmTile kId = Id;
  using Config = Config_;
  static constexpr double kRelativeSpeed = RelativeSpeedPercent / 100.0;
  /// "m128n256", "pingpong_m128n128", "swap_m64n128": the GemmTile's name, from the configuration
  /// (the output tile of C: a swapped tile's kernel rows are C's columns).
  static std::string name() {
    std::string s = Config::kSwapAB ? "swap_m" : Config::kPingPong ? "pingpong_m" : "m";
    s += std::to_string(Config::kSwapAB ? Config::kBlockN : Config::kBlockM);
    s += 'n';
    s += std::to_string(Config::kSwapAB ? Config::kBlockM : Config::kBlockN);
    return s;
  }
};

template <class... Tiles>
struct TileList {
  static constexpr int kSize = sizeof...(Tiles);
};

// The ping-pong tile: each consumer holds a whole tile (128 accumulators per thread). A 128 x 128
// tile reads 1.5x the operand bytes per MMA of a 128 x 256 one, so it needs a deeper ring to cover
// the same load latency: 6 stages (all the shared memory left beside 32 KB of staging) measured 0.96
// of cuBLAS on the Transformer set, against 0.92 with 5. Each operand is multicast over a 2 x 2
// cluster, so what a cluster reads from L2 per MMA is that of one 256 x 256 tile: 0.93 of cuBLAS on an
// H100, against 0.81 for 2 x 1 clusters, 0.71 for 1 x 2 and 0.62 for none, and the fused ops 4-15%
// faster. The other ping-pong shapes measured slower: docs/performance.md.
using ShippedTiles = TileList<
    // large GEMMs: B multicast over 2 M tiles
    ShippedTile<GemmTile::m128n256, TileConfig<128, 256, 64, 256, 4, 2, 1, 2>, 100>,
    // large GEMMs: A multicast over 2 N tiles
    ShippedTile<GemmTile::m256n128, TileConfig<256, 128, 128, 128, 4, 1, 2, 2>, 100>,
    // medium shapes, split-K capable
    ShippedTile<GemmTile::m128n128, TileConfig<128, 128, 64, 128, 5, 1, 1, 4>, 90>,
    // 64-row tiles, split-K capable (forced only: the heuristic swaps at M <= 128)
    ShippedTile<GemmTile::m64n256, TileConfig<64, 256, 64, 128, 4, 1, 1, 2>, 80>,
    // epilogue programs: A and B multicast over 2 x 2
    ShippedTile<GemmTile::pingpong_m128n128, TileConfig<128, 128, 128, 128, 6, 2, 2, 2>, 95>,
    // small M, swapped: 128 weight rows x 64 tokens a CTA, each consumer 64 rows; a 24 KB slot
    // (16 KB of weight), 6 deep: 96 KB of weight in flight per SM (the planner picks it by M and
    // splits it by bandwidth, plan.cpp: its relative speed is not used)
    ShippedTile<GemmTile::swap_m64n128, TileConfig<128, 64, 64, 64, 6, 1, 1, 2, true>, 50>,
    // small M, swapped, ping-pong: 64 weight rows x 64 tokens a tile, twice the tiles of
    // swap_m64n128 for a weight of few rows; 16 KB slots, 9 deep: 72 KB of weight in flight per SM
    ShippedTile<GemmTile::swap_m64n64, TileConfig<64, 64, 64, 64, 9, 1, 1, 2, true>, 50>,
    // small M, swapped, ping-pong, 128 tokens: 64 weight rows x 128 tokens a tile, so M = 65-128
    // reads each weight tile once (not once per 64-token tile); 24 KB slots (8 KB of weight), 6 deep
    ShippedTile<GemmTile::swap_m128n64, TileConfig<64, 128, 64, 128, 6, 1, 1, 2, true>, 50>>;

namespace detail {
template <GemmTile Id, class List>
struct FindTile;
template <GemmTile Id, class First, class... Rest>
struct FindTile<Id, TileList<First, Rest...>> {
  using type = std::conditional_t<First::kId == Id, First, typename FindTile<Id, TileList<Rest...>>::type>;
};
template <GemmTile Id>
struct FindTile<Id, TileList<>> {
  using type = void;
};
}  // namespace detail

/// The row of ShippedTiles that `Id` names.
template <GemmTile Id>
using TileOf = typename detail::FindTile<Id, ShippedTiles>::type;

/// `f.template operator()<Row>()` for the row of ShippedTiles that `tile` names; `otherwise()`
/// when none does (GemmTile::automatic).
template <class F, class Otherwise>
decltype(auto) with_tile(GemmTile tile, F&& f, Otherwise&& otherwise) {
  return [&]<class... Tiles>(TileList<Tiles...>) -> decltype(auto) {
    using Result = decltype(f.template operator()<TileOf<GemmTile::m128n256>>());
    Result result{};
    const bool found = ((tile == Tiles::kId && (result = f.template operator()<Tiles>(), true)) || ...);
    return found ? result : Result(otherwise());
  }(ShippedTiles{});
}

}  // namespace coda::mainloop

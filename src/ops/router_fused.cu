#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "coda/core/device.hpp"
#include "coda/mainloop/launch.cuh"
#include "coda/mainloop/plan.hpp"
#include "coda/mainloop/tiles.hpp"
#include "router_decode.hpp"
#include "router_epilogue.cuh"
#include "router_epilogue_ranked.cuh"
#include "router_fused.hpp"

namespace coda::ops::router_detail {
namespace {

// Where the epilogue's selection beat the scores path unasked (CUDA graphs, k = 8 (2 at E = 8),
// topk_softmax renormalized, K = 4096 (2048 at E <= 64, 7168 at E = 256); epilogue against scores
// path; docs/performance.md). At M = 16384 every E (H200, E = 256: 106.4 against 123.6 us). Below,
// the GEMM splits K and every segment selects some of the tile's rows (mainloop/segments.cuh,
// share_tile_rows): at E <= 128 (m128n128) the epilogue wins from M = 256 (H100: E = 64 13.8
// against 17.1 us, E = 128 16.8 against 19.0, E = 32 16.4 against 19.1; DeepSeek-V3's 8 groups at
// E = 128 M = 512 16.0 against 22.9), not at M = 128, one tile row, where the scores path's GEMM
// splits K over more SMs (E = 64 14.0 against 10.0); at E = 129 to 256 (m128n256) from M = 2048,
// with 8 groups from M = 4096 (H100, E = 256: M = 2048 32.8 against 34.8 us, groups 44.2 against
// 41.1; M = 4096 42.6 against 47.6, groups 44.8 against 56.2; M = 1024 31.3 against 25.2). Rows
// wider than 256 (two m128n256 tiles, merged: router_epilogue_wide.cuh) from M = 8192 past E = 384
// (H100, K = 4096, k = 8: E = 512 M = 16384 118.5 against 132.0 us, M = 8192 63.4 against 70.5, M =
// 4096 44.1 against 38.9; E = 448 M = 16384 119.0 against 132.3), not at E = 384, whose second tile
// is a third padding (K = 7168, M = 16384: 235.8 against 191.1; M = 8192 121.5-126.5 against 125.3-126.2).
bool measured_faster(int64_t rows, int64_t experts, int n_group) {
  if (experts <= 128) return rows >= 256;
  if (experts > kFusedMaxExperts) return experts > 384 && rows >= 8192;
  return rows >= (n_group > 1 ? 4096 : 2048);
}

}  // namespace

bool fused_selection_applies(int64_t rows, int64_t experts, const RouterOptions& o) {
  const bool can = rows > kDecodeMaxRows && experts <= kWideMaxExperts && o.k <= kFusedMaxK &&
                   groups_in_epilogue(int(experts), o.n_group) && o.scores.data == nullptr &&
                   o.gemm.tile == GemmTile::automatic;
  return can && (o.fused_selection || measured_faster(rows, experts, o.n_group));
}

// Rows wider than 256 span two m128n256 tiles (at E = 384 a third padding): m128n128's three tiles
// without padding read 16 KB of operands an MFLOP against m128n256's 12 (8 with its cluster's
// multicast B) and measured slower (H100, E = 384, K = 7168, M = 16384: 227 us against 163 for
// coda's GEMM).
GemmTile fused_tile(int64_t experts) { return experts <= 128 ? GemmTile::m128n128 : GemmTile::m128n256; }

int fused_tiles(int64_t experts) {
  const int64_t width = fused_tile(experts) == GemmTile::m128n128 ? 128 : 256;
  return int((experts + width - 1) / width);
}

namespace {

template <GemmTile kTile, class Epilogue>
void launch_on(const mainloop::LaunchPlan& plan, const SelectArgs& args, DType input, cudaStream_t stream) {
  using Config = typename mainloop::TileOf<kTile>::Config;
  static_assert(!Config::kPingPong && !Config::kSwapAB && Config::kWarpgroupN == Config::kBlockN,
                "consumers split the tile along M, each holding whole rows");
  const auto params = plan.kernel_params(args);
  if (input == DType::bf16)
    mainloop::launch_kernel<Config, __nv_bfloat16, Major::k, Major::k, Epilogue>(plan, params, stream);
  else mainloop::launch_kernel<Config, __half, Major::k, Major::k, Epilogue>(plan, params, stream);
}

}  // namespace

void launch_fused(const TensorView& x, const TensorView& w, const SelectArgs& args, const GemmOptions& gemm,
                  const char* function, cudaStream_t stream) {
  GemmOptions options = gemm;
  options.tile = fused_tile(w.rows());
  const mainloop::LaunchPlan plan = mainloop::plan_launch({x, Major::k}, {w, Major::k}, options, function);
  const bool grouped = args.n_group > 1;
  if (args.tiles > 1) {  // rows wider than the tile: their arrival counters zeroed, as the GEMM's are
    CODA_CUDA_CHECK(cudaMemsetAsync(args.tile_arrivals, 0, WideLayout(args.rows, args.tiles).arrival_bytes(), stream));
    launch_on<GemmTile::m128n256, FusedSelection<64, FusedRows::wide>>(plan, args, x.dtype, stream);
  } else if (options.tile == GemmTile::m128n128) {
    if (grouped) launch_on<GemmTile::m128n128, FusedSelection<32, FusedRows::groups>>(plan, args, x.dtype, stream);
    else if (args.experts <= 8) launch_on<GemmTile::m128n128, RankedSelection<8>>(plan, args, x.dtype, stream);
    else if (args.experts <= kRankedMaxExperts)
      launch_on<GemmTile::m128n128, RankedSelection<kRankedMaxExperts>>(plan, args, x.dtype, stream);
    else if (args.experts <= kNarrowMaxExperts)
      launch_on<GemmTile::m128n128, FusedSelection<32, FusedRows::narrow>>(plan, args, x.dtype, stream);
    else launch_on<GemmTile::m128n128, FusedSelection<32>>(plan, args, x.dtype, stream);
  } else {
    if (grouped) launch_on<GemmTile::m128n256, FusedSelection<64, FusedRows::groups>>(plan, args, x.dtype, stream);
    else launch_on<GemmTile::m128n256, FusedSelection<64>>(plan, args, x.dtype, stream);
  }
}

}  // namespace coda::ops::router_detail

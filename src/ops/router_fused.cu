#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "coda/mainloop/launch.cuh"
#include "coda/mainloop/plan.hpp"
#include "coda/mainloop/tiles.hpp"
#include "router_decode.hpp"
#include "router_epilogue.cuh"
#include "router_epilogue_ranked.cuh"
#include "router_fused.hpp"

namespace coda::ops::router_detail {
namespace {

// Where the epilogue's selection beat the scores path unasked (H200, coda bench router, k = 8 (2 at
// E = 8), topk_softmax renormalized, docs/performance.md): at M = 16384 every E (E = 256, K = 7168:
// 106.4 against 123.6 us); at M = 4096 for E = 64 and 128 (E = 128: 23.0 against 24.9; E = 8 the
// same within noise), not at E = 256 (49.1 against 42.6: its K split leaves each tile's selection
// to the last segment's CTA); at M = 128 at no E (one tile row: the scores path's GEMM splits K
// over more SMs). With DeepSeek-V3's groups (8 of 32 at E = 256, 4 kept): at M = 16384 (110.0
// against 147.3 us), not at M = 4096 (56.4 against 50.5); E = 128's groups were not measured.
// Between (CUDA events, k = 8 (2 at E <= 16), K = 4096 (2048 at E = 64), epilogue against scores
// path): rows of E <= 16 (ranked, router_epilogue_ranked.cuh) from M = 256 (E = 8: M = 256 16.7
// against 18.8 us, M = 2048 17.2 against 20.7), not at M = 128 (15.7 against 13.7); E = 32 from M
// = 1024 (19.2-19.4 against 20.9); E = 128 from M = 2048 (20.5-20.6 against 21.7-22.0); E = 64
// not below M = 4096 (M = 2048 19.5-19.6 against 19.3-19.4).
bool measured_faster(int64_t rows, int64_t experts, int n_group) {
  if (n_group > 1) return experts == 256 && rows >= 8192;
  if (experts <= kRankedMaxExperts) return rows >= 256;
  if (experts <= kNarrowMaxExperts) return rows >= 1024;
  if (experts <= 64) return rows >= 4096;
  return rows >= (experts <= 128 ? 2048 : 8192);
}

}  // namespace

bool fused_selection_applies(int64_t rows, int64_t experts, const RouterOptions& o) {
  const bool can = rows > kDecodeMaxRows && experts <= kFusedMaxExperts && o.k <= kFusedMaxK &&
                   groups_in_epilogue(int(experts), o.n_group) && o.scores.data == nullptr &&
                   o.gemm.tile == GemmTile::automatic;
  return can && (o.fused_selection || measured_faster(rows, experts, o.n_group));
}

GemmTile fused_tile(int64_t experts) { return experts <= 128 ? GemmTile::m128n128 : GemmTile::m128n256; }

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
  if (options.tile == GemmTile::m128n128) {
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

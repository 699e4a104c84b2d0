// coda/mainloop/plan.hpp: planning a mainloop launch on the host: one tile configuration over the
// output's tile rows (all of them, or a range: over_rows), its split-K, grid and tensor maps.
// coda::gemm plans with the store epilogue; the epilogue layer plans a program's launches with it
// (coda/epilogue/plan.hpp: which tile a program runs on, its companion launch).
//
//   mainloop::LaunchPlan plan = mainloop::plan_launch(a, b, {.tile = GemmTile::m128n256}, "coda::my_op");
//   mainloop::KernelParams<MyEpilogue::Params> params = plan.kernel_params(my_epilogue_params);
//   mainloop::launch_kernel<TileOf<GemmTile::m128n256>::Config, __nv_bfloat16, Major::k, Major::k, MyEpilogue>(
//       plan, params, stream);                                                            // launch.cuh
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "coda/core/api.hpp"
#include "coda/core/dtype.hpp"
#include "coda/core/layout.hpp"
#include "coda/gemm.hpp"
#include "coda/mainloop/params.hpp"

namespace coda::mainloop {

/// Output tile rows [first, first + count); count -1: to the last.
struct TileRows {
  int32_t first = 0;
  int32_t count = -1;
};

/// Everything a launch needs besides the epilogue's parameters.
struct LaunchPlan {
  GemmPlan summary;  // configuration, split-K, CTAs, workspace
  int64_t m = 0, n = 0, k = 0, batch = 0;
  DType input = DType::bf16;
  Major a_major = Major::k, b_major = Major::k;  // C's operands'
  bool swap_ab = false;                          // a swapped tile (tiles.hpp): the kernel computes C^T, its A is C's B
  CUtensorMap a{}, b{};
  int32_t token_box_rows = 0;  // rows of a K-major B's TMA box (plan.cpp): fewer than the tile's where B has fewer
  ScheduleParams schedule{};
  PartialsWorkspace partials{};
  std::size_t counter_bytes = 0;  // arrival counters at partials.arrivals, zeroed before each launch
  LaunchRole role = LaunchRole::alone;
  KBlockMask k_block_mask{};  // none: every K block (params.hpp; a kernel that skips K blocks reads it)

  template <class EpilogueParams>
  KernelParams<EpilogueParams> kernel_params(const EpilogueParams& epilogue) const {
    KernelParams<EpilogueParams> p{};
    p.a = a;
    p.b = b;
    p.schedule = schedule;
    p.m = int32_t(swap_ab ? n : m);  // the kernel's problem
    p.n = int32_t(swap_ab ? m : n);
    p.token_box_rows = token_box_rows;
    p.partials = partials;
    p.k_block_mask = k_block_mask;
    p.epilogue = epilogue;
    p.role = role;
    return p;
  }
};

/// Validate A and B (the rules of coda::gemm, messages naming `function`) and plan C = A B^T:
/// tile (options.tile, or the heuristic), split-K, tensor maps of A and B, schedule. Needs a
/// Hopper GPU (throws coda::Unsupported without one, after validating the arguments).
CODA_API LaunchPlan plan_launch(const GemmOperand& a, const GemmOperand& b, const GemmOptions& options,
                                const char* function);

/// `plan` (one K range per tile, one batch, not swapped) restricted to the output tile rows `rows`: a launch
/// that computes those rows only, on at most as many CTAs as they keep busy. The rows must end at
/// the last tile row or at a multiple of the configuration's cluster height (a cluster computes
/// whole cluster rows), and start at such a multiple.
CODA_API LaunchPlan over_rows(const LaunchPlan& plan, TileRows rows, const char* function);

/// CTAs of `tile` that fit on the current device at once (whole clusters; GemmTile::automatic is
/// refused).
CODA_API int resident_ctas(GemmTile tile);

}  // namespace coda::mainloop

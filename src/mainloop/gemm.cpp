// coda::gemm and its queries: validate, plan (planner.hpp), launch the store kernel.
#include "coda/gemm.hpp"

#include <cstdint>

#include "coda/core/device.hpp"
#include "coda/core/validate.hpp"
#include "coda/mainloop/tiles.hpp"
#include "coda/sm90/tensor_map.hpp"
#include "mainloop/launch.hpp"
#include "mainloop/planner.hpp"

namespace coda {
namespace {

constexpr const char* kGemm = "coda::gemm";

mainloop::Problem validated(const GemmOperand& a, const GemmOperand& b, const TensorView& c, const GemmOptions& options,
                            const char* function) {
  mainloop::Problem p = mainloop::validate_operands(a, b, options, function);
  mainloop::validate_output(c, p, function);
  require_hopper(function);
  return p;
}

mainloop::Launcher store_kernel(GemmTile tile, DType input, Major a, Major b) {
  return mainloop::with_tile(
      tile, [&]<class Tile>() { return mainloop::launcher_for<Tile>(input, a, b); },
      []() -> mainloop::Launcher { throw InternalError(kGemm, "no kernel for the automatic tile"); });
}

}  // namespace

GemmPlan plan_gemm(const GemmOperand& a, const GemmOperand& b, const TensorView& c, const GemmOptions& options) {
  return reported_by("coda::plan_gemm", [&] {
    const mainloop::Problem p = validated(a, b, c, options, "coda::plan_gemm");
    return mainloop::make_plan(p, options, "coda::plan_gemm").public_plan;
  });
}

std::size_t gemm_workspace_bytes(const GemmOperand& a, const GemmOperand& b, const TensorView& c,
                                 const GemmOptions& options) {
  constexpr const char* kFunction = "coda::gemm_workspace_bytes";
  return reported_by(kFunction, [&] {
    const mainloop::Problem p = validated(a, b, c, options, kFunction);
    GemmOptions sizing = options;  // as if a workspace of any size were given
    sizing.workspace = reinterpret_cast<void*>(uintptr_t(256));
    sizing.workspace_bytes = SIZE_MAX;
    return mainloop::make_plan(p, sizing, kFunction).public_plan.workspace_bytes;
  });
}

void gemm(const GemmOperand& a, const GemmOperand& b, const TensorView& c, cudaStream_t stream,
          const GemmOptions& options) {
  reported_by(kGemm, [&] {
    const mainloop::Problem p = validated(a, b, c, options, kGemm);
    const mainloop::Plan plan = mainloop::make_plan(p, options, kGemm);
    const mainloop::LaunchPlan launch = mainloop::build_launch(a, b, p, plan, options);
    mainloop::StoreParams store{};
    store.output = sm90::make_tensor_map_3d(c.data, c.dtype, {c.cols(), c.rows(), c.batch()},
                                            {c.ld(), c.batch_stride()}, {uint32_t(128 / size_of(c.dtype)), 64}, "c");
    store.output_type = c.dtype;
    store_kernel(plan.public_plan.tile, p.input, a.major, b.major)(launch, launch.kernel_params(store), stream);
  });
}

Status try_gemm(const GemmOperand& a, const GemmOperand& b, const TensorView& c, cudaStream_t stream,
                const GemmOptions& options) {
  return status_of(kGemm, [&] { gemm(a, b, c, stream, options); });
}

}  // namespace coda

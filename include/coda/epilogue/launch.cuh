// coda/epilogue/launch.cuh: run a GEMM whose epilogue is a program (compile with nvcc).
//
//   // Y = X W^T with the user's GatedSilu program (program.hpp) as the epilogue:
//   coda::epilogue::GatedSilu program;
//   program.out = coda::epilogue::tile_out(out_view, "out");
//   coda::gemm_program({x, coda::Major::k}, {w, coda::Major::k}, program, stream);
//
// The program sees parts of kPartRows x kPartCols (parts.hpp). Operands are K-major, the layout of
// a forward projection X W^T; each TileOut is written in the operands' type.
#pragma once

#include <cuda_runtime.h>

#include "coda/core/validate.hpp"
#include "coda/epilogue/gpu_executor.cuh"
#include "coda/epilogue/parts.hpp"
#include "coda/gemm/launch.cuh"

namespace coda {

/// C-less GEMM: A B^T feeds `program`, whose descriptors name every output. `function` names the
/// caller in error messages.
template <class Program>
void gemm_program(const GemmOperand& a, const GemmOperand& b, const Program& program, cudaStream_t stream = nullptr,
                  GemmOptions options = {}, const char* function = "coda::gemm_program") {
  using Config = mainloop::TileM128N128;
  static_assert(Config::kWarpgroupM == epilogue::kPartRows && Config::kWarpgroupN == epilogue::kPartCols);
  ArgumentCheck check(function);
  check.require(a.major == Major::k, "a", "epilogue programs take a K-major A (activations X, M x K)", StatusCode::unsupported)
      .require(b.major == Major::k, "b", "epilogue programs take a K-major B (an nn.Linear weight, N x K)",
               StatusCode::unsupported)
      .require(options.tile == GemmTile::automatic || options.tile == GemmTile::m128n128, "options.tile",
               "epilogue programs run on the m128n128 configuration", StatusCode::unsupported);
  check.throw_if_error();
  options.tile = GemmTile::m128n128;
  const mainloop::LaunchPlan plan = mainloop::plan_launch(a, b, options, function);
  if (plan.input == DType::bf16)
    mainloop::launch_kernel<Config, __nv_bfloat16, Major::k, Major::k,
                            epilogue::ProgramEpilogue<Program, Config::kStagingBuffers, DType::bf16>>(
        plan.kernel_params(program), plan.summary.ctas, stream);
  else
    mainloop::launch_kernel<Config, __half, Major::k, Major::k,
                            epilogue::ProgramEpilogue<Program, Config::kStagingBuffers, DType::f16>>(
        plan.kernel_params(program), plan.summary.ctas, stream);
}

}  // namespace coda

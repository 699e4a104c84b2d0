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
#include "coda/epilogue/host_arguments.hpp"
#include "coda/epilogue/parts.hpp"
#include "coda/gemm/launch.cuh"

namespace coda {

/// Validate A and B for an epilogue program and plan its launch (needs a Hopper GPU). Plan before
/// building the program's tile outputs: their TMA maps need the CUDA driver.
inline mainloop::LaunchPlan plan_program(const GemmOperand& a, const GemmOperand& b, GemmOptions options,
                                         const char* function) {
  ArgumentCheck check(function);
  check.require(a.major == Major::k, "a", "epilogue programs take a K-major A (activations X, M x K)", StatusCode::unsupported)
      .require(b.major == Major::k, "b", "epilogue programs take a K-major B (an nn.Linear weight, N x K)",
               StatusCode::unsupported)
      .require(options.tile == GemmTile::automatic || options.tile == GemmTile::pingpong_m128n128, "options.tile",
               "epilogue programs run on the pingpong_m128n128 configuration", StatusCode::unsupported);
  check.throw_if_error();
  options.tile = GemmTile::pingpong_m128n128;
  return mainloop::plan_launch(a, b, options, function);
}

/// Launch a planned GEMM whose epilogue is `program`.
template <class Program>
void launch_program(const mainloop::LaunchPlan& plan, const Program& program, cudaStream_t stream) {
  epilogue::check_tile_inputs(program, plan.input, "coda::launch_program");
  using Config = mainloop::TilePingPongM128N128;
  static_assert(Config::kWarpgroupM == epilogue::kPartRows && Config::kWarpgroupN == epilogue::kPartCols);
  if (plan.input == DType::bf16)
    mainloop::launch_kernel<Config, __nv_bfloat16, Major::k, Major::k,
                            epilogue::ProgramEpilogue<Program, Config::kStagingBuffers, DType::bf16>>(
        plan.kernel_params(program), plan.summary.ctas, stream);
  else
    mainloop::launch_kernel<Config, __half, Major::k, Major::k,
                            epilogue::ProgramEpilogue<Program, Config::kStagingBuffers, DType::f16>>(
        plan.kernel_params(program), plan.summary.ctas, stream);
}

/// C-less GEMM: A B^T feeds `program`, whose descriptors name every output.
template <class Program>
void gemm_program(const GemmOperand& a, const GemmOperand& b, const Program& program, cudaStream_t stream = nullptr,
                  const GemmOptions& options = {}) {
  launch_program(plan_program(a, b, options, "coda::gemm_program"), program, stream);
}

}  // namespace coda

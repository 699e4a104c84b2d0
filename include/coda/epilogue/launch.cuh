// coda/epilogue/launch.cuh: run a GEMM whose epilogue is a program (compile with nvcc).
//
//   // Y = X W^T with the user's GatedSilu program (program.hpp) as the epilogue:
//   coda::epilogue::GatedSilu program;
//   program.out = coda::epilogue::tile_out(out_view, "out");
//   coda::gemm_program({x, coda::Major::k}, {w, coda::Major::k}, program, stream);
//
// The program sees parts of kPartRows x kPartCols (parts.hpp). Operands are K-major, the layout of
// a forward projection X W^T. Tile outputs are written in the operands' type, or in another type
// the launch names (one kernel is built per type, so each is asked for):
//
//   program.out = coda::epilogue::tile_out(out_e4m3_view, "out", /*scale=*/0.5f);
//   coda::gemm_program(a, b, program, stream, {}, coda::OutputTypes<coda::DType::e4m3>{});
//
// Every tile output of one launch has the same type (output_types.hpp checks, naming the store).
#pragma once

#include <cuda_runtime.h>

#include "coda/core/validate.hpp"
#include "coda/epilogue/gpu_executor.cuh"
#include "coda/epilogue/host_arguments.hpp"
#include "coda/epilogue/output_types.hpp"
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

/// Tile-output types a launch may write besides the operands' type (each adds a kernel).
template <DType... Types>
struct OutputTypes {};

namespace detail {

// The kernel for operands of `Element` (DType In) whose program writes `out`: In or one of Also.
template <class Element, DType In, DType... Also, class Program>
void launch_program_writing(const mainloop::LaunchPlan& plan, const Program& program, DType out, cudaStream_t stream) {
  using Config = mainloop::TilePingPongM128N128;
  static_assert(Config::kWarpgroupM == epilogue::kPartRows && Config::kWarpgroupN == epilogue::kPartCols);
  auto launch = [&]<DType Out>() {
    mainloop::launch_kernel<Config, Element, Major::k, Major::k,
                            epilogue::ProgramEpilogue<Program, Config::kStagingBuffers, In, Out>>(
        plan.kernel_params(program), plan.summary.ctas, stream);
  };
  if (out == In) launch.template operator()<In>();
  else (void)((out == Also && (launch.template operator()<Also>(), true)) || ...);
}

}  // namespace detail

/// Launch a planned GEMM whose epilogue is `program`; its tile outputs are of the operands' type
/// or of one of `Also` (epilogue::output_type checks before anything runs).
template <class Program, DType... Also>
void launch_program(const mainloop::LaunchPlan& plan, const Program& program, cudaStream_t stream,
                    OutputTypes<Also...> = {}) {
  epilogue::check_arguments(program, "coda::launch_program");
  epilogue::check_tile_inputs(program, plan.input, "coda::launch_program");
  const DType out = epilogue::output_type(program, plan.input, {Also...}, "coda::launch_program");
  if (plan.input == DType::bf16) detail::launch_program_writing<__nv_bfloat16, DType::bf16, Also...>(plan, program, out, stream);
  else detail::launch_program_writing<__half, DType::f16, Also...>(plan, program, out, stream);
}

/// C-less GEMM: A B^T feeds `program`, whose descriptors name every output.
template <class Program, DType... Also>
void gemm_program(const GemmOperand& a, const GemmOperand& b, const Program& program, cudaStream_t stream = nullptr,
                  const GemmOptions& options = {}, OutputTypes<Also...> output_types = {}) {
  launch_program(plan_program(a, b, options, "coda::gemm_program"), program, stream, output_types);
}

}  // namespace coda

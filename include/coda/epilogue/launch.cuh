// coda/epilogue/launch.cuh: run a GEMM whose epilogue is a program (compile with nvcc).
//
//   // Y = X W^T with the user's GatedSilu program (program.hpp) as the epilogue:
//   coda::epilogue::GatedSilu program;
//   program.out = coda::epilogue::tile_out(out_view, "out");
//   coda::gemm_program({x, coda::Major::k}, {w, coda::Major::k}, program, stream);
//
// The program sees parts of kPartRows x kPartCols (parts.hpp). Tile outputs are written in the
// operands' type, or in another type the launch names (one kernel is built per type, so each is
// asked for):
//
//   program.out = coda::epilogue::tile_out(out_e4m3_view, "out", /*scale=*/0.5f);
//   coda::gemm_program(a, b, program, stream, {}, coda::OutputTypes<coda::DType::e4m3>{});
//
// Every TileOut of one launch has the same type (output_types.hpp checks, naming the store); a
// program fixes another output's type by declaring it a TileOutOf<T> (arguments.hpp): an e4m3
// result with a bf16 auxiliary output is one launch.
// Operands are K-major, the layout of a forward projection X W^T, unless the launch names other
// majors (a kernel is built per pair): a data gradient dX = dY W takes W as an N-major B,
//
//   coda::gemm_program({dy, coda::Major::k}, {w_view_k_x_n, coda::Major::mn}, program, stream, {},
//                      coda::OutputTypes<>{}, coda::OperandMajors<coda::Major::k, coda::Major::mn>{});
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
  check.require(options.tile == GemmTile::automatic || options.tile == GemmTile::pingpong_m128n128, "options.tile",
                "epilogue programs run on the pingpong_m128n128 configuration", StatusCode::unsupported);
  check.throw_if_error();
  options.tile = GemmTile::pingpong_m128n128;
  return mainloop::plan_launch(a, b, options, function);
}

/// Tile-output types a launch may write besides the operands' type (each adds a kernel).
template <DType... Types>
struct OutputTypes {};

/// The operand majors a launch is built for (its kernels are built for this pair only).
template <Major A, Major B>
struct OperandMajors {};

namespace detail {

// The kernel for operands of `Element` (DType In) and majors A, B whose program writes `out`: In
// or one of Also.
template <class Element, DType In, Major A, Major B, DType... Also, class Program>
void launch_program_writing(const mainloop::LaunchPlan& plan, const Program& program, DType out, cudaStream_t stream) {
  using Config = mainloop::TilePingPongM128N128;
  static_assert(Config::kWarpgroupM == epilogue::kPartRows && Config::kWarpgroupN == epilogue::kPartCols);
  auto launch = [&]<DType Out>() {
    mainloop::launch_kernel<Config, Element, A, B,
                            epilogue::ProgramEpilogue<Program, Config::kStagingBuffers, In, Out>>(
        plan.kernel_params(program), plan.summary.ctas, stream);
  };
  if (out == In) launch.template operator()<In>();
  else (void)((out == Also && (launch.template operator()<Also>(), true)) || ...);
}

}  // namespace detail

/// Launch a planned GEMM whose epilogue is `program`; its tile outputs are of the operands' type
/// or of one of `Also` (epilogue::output_type checks before anything runs), its operands of the
/// majors A and B.
template <class Program, DType... Also, Major A = Major::k, Major B = Major::k>
void launch_program(const mainloop::LaunchPlan& plan, const Program& program, cudaStream_t stream,
                    OutputTypes<Also...> = {}, OperandMajors<A, B> = {}) {
  constexpr const char* kFunction = "coda::launch_program";
  epilogue::check_operand_majors(plan.a_major, plan.b_major, A, B, kFunction);
  epilogue::check_arguments(program, kFunction);
  epilogue::check_tile_inputs(program, plan.input, kFunction);
  const DType out = epilogue::output_type(program, plan.input, {Also...}, kFunction);
  if (plan.input == DType::bf16)
    detail::launch_program_writing<__nv_bfloat16, DType::bf16, A, B, Also...>(plan, program, out, stream);
  else detail::launch_program_writing<__half, DType::f16, A, B, Also...>(plan, program, out, stream);
}

/// C-less GEMM: A B^T feeds `program`, whose descriptors name every output.
template <class Program, DType... Also, Major A = Major::k, Major B = Major::k>
void gemm_program(const GemmOperand& a, const GemmOperand& b, const Program& program, cudaStream_t stream = nullptr,
                  const GemmOptions& options = {}, OutputTypes<Also...> output_types = {},
                  OperandMajors<A, B> majors = {}) {
  epilogue::check_operand_majors(a.major, b.major, A, B, "coda::gemm_program");  // before the plan needs a GPU
  launch_program(plan_program(a, b, options, "coda::gemm_program"), program, stream, output_types, majors);
}

}  // namespace coda

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

/// The K from which a program runs on the cooperative m128n256 tile, when the launch leaves the
/// tile to coda. There the two consumers split each 128 x 256 tile into two 128 x 128 parts and
/// run their programs at the same time, with the tensor cores idle; in a ping-pong tile one
/// consumer's program runs beside the other's MMAs. What the cooperative tile buys instead: every
/// SM (2-CTA clusters: 132 CTAs on an H100, against the ping-pong tile's 120 in 4-CTA clusters) at
/// the same L2 traffic per MMA. The idle time per tile is fixed and the MMAs grow with K, so the
/// trade turns with K (H100, coda bench ops: at K = 4096 SwiGLU 3% and RoPE 1% faster than on the
/// ping-pong tile; at K = 2048 RoPE 13% and cross-entropy 6% slower). On the ping-pong tile a
/// program may ask for the SMs its 4-CTA clusters leave idle, through a companion launch of the
/// m128n256 tile on its last tile rows (program.hpp, `companion_speed`); at K = 4096 the cooperative
/// tile still won (SwiGLU 5.44 ms against 5.70 on ping-pong with a companion, H100). Nor does it pay
/// to let the cooperative tile's MMAs go on while a fourth warpgroup runs the program on accumulators
/// handed to it through L2 (128 KB of fp32 a tile): every op was slower, at K = 4096 than this tile
/// too (bench/RESULTS.md, twenty-third session).
inline constexpr int64_t kCooperativeProgramMinK = 4096;

/// Throw unless `Program` runs on `tile`: pingpong_m128n128, or m128n256 unless it stages a tile
/// input (program.hpp): staging hands one buffer from one ping-pong consumer to the other, and only a
/// companion launch (which has the ping-pong launch beside it) runs such a program on m128n256,
/// reading that input from global memory. (Run there whole, residual + RMSNorm took 1.03-1.11 of
/// its ping-pong launch with a companion: bench/RESULTS.md, twenty-first session.)
template <class Program>
void check_program_tile(GemmTile tile, const char* argument, const char* function) {
  constexpr bool kPingPongOnly = epilogue::StagesAnInput<Program>;
  ArgumentCheck check(function);
  check.require(tile == GemmTile::pingpong_m128n128 || (tile == GemmTile::m128n256 && !kPingPongOnly), argument,
                kPingPongOnly ? "this epilogue program stages a tile input: it runs on pingpong_m128n128 only"
                              : "epilogue programs run on pingpong_m128n128 or m128n256",
                StatusCode::unsupported);
  check.throw_if_error();
}

/// The tile `Program` runs on: `requested`, or (automatic) by K as above.
template <class Program>
GemmTile program_tile(const GemmOperand& a, GemmTile requested, const char* function) {
  constexpr bool kPingPongOnly = epilogue::StagesAnInput<Program>;
  if (requested != GemmTile::automatic) {
    check_program_tile<Program>(requested, "options.tile", function);
    return requested;
  }
  const TensorView& v = a.view;
  const int64_t k = a.major == Major::k ? v.cols() : v.rows();
  return !kPingPongOnly && k >= kCooperativeProgramMinK ? GemmTile::m128n256 : GemmTile::pingpong_m128n128;
}

/// Validate A and B for `Program` and plan its launch (needs a Hopper GPU). Plan before building
/// the program's tile outputs: their TMA maps need the CUDA driver.
template <class Program>
mainloop::LaunchPlan plan_program(const GemmOperand& a, const GemmOperand& b, GemmOptions options,
                                  const char* function) {
  static_assert(!requires { Program::companion_launch; },
                "companion_launch is gone: a program asks for a companion launch by its companion_speed (program.hpp)");
  options.tile = program_tile<Program>(a, options.tile, function);
  mainloop::LaunchPlan plan = mainloop::plan_launch(a, b, options, function);
  if constexpr (epilogue::AsksForACompanionLaunch<Program>)
    mainloop::plan_companion(plan, a, b, options, double(Program::companion_speed));
  return plan;
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
  // A staged input is staged on the ping-pong tile only (its one buffer is handed between the
  // consumers); on the cooperative tile it is read from global memory.
  auto launch = [&]<class Config, DType Out>(const mainloop::KernelParams<Program>& params, int ctas) {
    static_assert(Config::kWarpgroupM == epilogue::kPartRows && Config::kWarpgroupN == epilogue::kPartCols);
    using Epilogue = epilogue::ProgramEpilogue<Program, Config::kStagingBuffers, In, Out, Config::kPingPong>;
    mainloop::launch_kernel<Config, Element, A, B, Epilogue>(params, ctas, stream);
  };
  auto launch_on_tile = [&]<DType Out>() {
    using Cooperative = mainloop::TileProgramM128N256;
    const mainloop::KernelParams<Program> params = plan.kernel_params(program);
    if constexpr (!epilogue::StagesAnInput<Program>)  // check_program_tile: ping-pong only
      if (plan.summary.tile == GemmTile::m128n256)
        return launch.template operator()<Cooperative, Out>(params, plan.summary.ctas);
    launch.template operator()<mainloop::TilePingPongM128N128, Out>(params, plan.summary.ctas);
    if constexpr (epilogue::AsksForACompanionLaunch<Program>)
      if (plan.companion.ctas > 0)  // right behind it on the stream: gemm/launch.cuh
        launch.template operator()<Cooperative, Out>(plan.companion_params(program), plan.companion.ctas);
  };
  if (out == In) launch_on_tile.template operator()<In>();
  else (void)((out == Also && (launch_on_tile.template operator()<Also>(), true)) || ...);
}

}  // namespace detail

/// Launch a planned GEMM whose epilogue is `program`; its tile outputs are of the operands' type
/// or of one of `Also` (epilogue::output_type checks before anything runs), its operands of the
/// majors A and B.
template <class Program, DType... Also, Major A = Major::k, Major B = Major::k>
void launch_program(const mainloop::LaunchPlan& plan, const Program& program, cudaStream_t stream,
                    OutputTypes<Also...> = {}, OperandMajors<A, B> = {}) {
  constexpr const char* kFunction = "coda::launch_program";
  check_program_tile<Program>(plan.summary.tile, "plan", kFunction);  // a plan made by plan_program<Program>
  if constexpr (!epilogue::AsksForACompanionLaunch<Program>) {
    ArgumentCheck check(kFunction);
    check.require(plan.companion.ctas == 0, "plan",
                  "has a companion launch (mainloop::plan_companion), which this program does not ask for "
                  "(program.hpp: companion_speed): plan it with plan_program<Program>",
                  StatusCode::unsupported);
    check.throw_if_error();
  }
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
  launch_program(plan_program<Program>(a, b, options, "coda::gemm_program"), program, stream, output_types, majors);
}

}  // namespace coda

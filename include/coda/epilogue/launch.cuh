// coda/epilogue/launch.cuh: run a GEMM whose epilogue is a program (compile with nvcc).
//
//   // Y = X W^T with the user's GatedSilu program (program.hpp) as the epilogue:
//   coda::epilogue::GatedSilu program;
//   program.out = coda::epilogue::tile_out(out_view, "out");
//   coda::epilogue::gemm_program({x, coda::Major::k}, {w, coda::Major::k}, program, stream);
//
// The program sees parts of kPartRows x kPartCols (parts.hpp) on the tile plan.hpp picks. Tile
// outputs are written in the operands' type, or in another type the launch names (one kernel is
// built per type, so each is asked for):
//
//   program.out = coda::epilogue::tile_out(out_e4m3_view, "out", /*scale=*/0.5f);
//   coda::epilogue::gemm_program(a, b, program, stream, {}, coda::epilogue::OutputTypes<coda::DType::e4m3>{});
//
// Every TileOut of one launch has the same type (output_types.hpp checks, naming the store); a
// program fixes another output's type by declaring it a TileOutOf<T> (arguments.hpp): an e4m3
// result with a bf16 auxiliary output is one launch.
// Operands are K-major, the layout of a forward projection X W^T, unless the launch names other
// majors (a kernel is built per pair): a data gradient dX = dY W takes W as an N-major B,
//
//   coda::epilogue::gemm_program({dy, coda::Major::k}, {w_view_k_x_n, coda::Major::mn}, program, stream, {},
//                                coda::epilogue::OutputTypes<>{},
//                                coda::epilogue::OperandMajors<coda::Major::k, coda::Major::mn>{});
#pragma once

#include <cuda_runtime.h>

#include <type_traits>

#include "coda/core/validate.hpp"
#include "coda/epilogue/gpu_executor.cuh"
#include "coda/epilogue/host_arguments.hpp"
#include "coda/epilogue/output_types.hpp"
#include "coda/epilogue/parts.hpp"
#include "coda/epilogue/plan.hpp"
#include "coda/mainloop/launch.cuh"
#include "coda/mainloop/tiles.hpp"
#include "coda/mainloop/transposed_epilogue.cuh"

namespace coda::epilogue {

/// Tile-output types a launch may write besides the operands' type (each adds a kernel).
template <DType... Types>
struct OutputTypes {};

/// The operand majors a launch is built for (its kernels are built for this pair only).
template <Major A, Major B>
struct OperandMajors {};

/// The configurations programs run on: the ping-pong tile as coda::gemm runs it, and the
/// m128n256 tile with its consumers splitting each 128 x 256 tile along N into two parts
/// (plan.hpp). Both are parts of kPartRows x kPartCols. At M <= 64, the swap_m64n128 tile with each
/// consumer holding a whole tile (128 weight rows x 64 tokens, ping-pong): transposed back to C, a
/// part of 64 x kPartCols holding every row of the problem (transposed_epilogue.cuh). Five stages:
/// 120 KB of ring beside the transposes (68 KB) and the staging (32 KB).
using PingPongProgramTile = mainloop::TileOf<GemmTile::pingpong_m128n128>::Config;
using CooperativeProgramTile = mainloop::TileConfig<128, 256, 128, 128, 4, 2, 1, 2>;
using SwappedProgramTile = mainloop::TileConfig<128, 64, 128, 64, 5, 1, 1, 2, true>;

/// Whether a program's configuration `Config` plans as the shipped tile `Tile`: the same tiles,
/// clusters and schedule (mainloop::plan_launch plans for the shipped tile).
template <class Config, GemmTile Tile, class Shipped = typename mainloop::TileOf<Tile>::Config>
constexpr bool kPlansAs = (Config::kBlockM == Shipped::kBlockM) && (Config::kBlockN == Shipped::kBlockN) &&
                          (Config::kClusterM == Shipped::kClusterM) && (Config::kClusterN == Shipped::kClusterN) &&
                          (Config::kSwapAB == Shipped::kSwapAB);
static_assert(kPlansAs<CooperativeProgramTile, GemmTile::m128n256>);
static_assert(kPlansAs<SwappedProgramTile, GemmTile::swap_m64n128>);

namespace detail {

template <DType In>
using ElementOf = std::conditional_t<In == DType::bf16, __nv_bfloat16, __half>;

// The kernel of `program` on one configuration, for operands of type In and majors A, B, writing its
// TileOuts in Out.
template <class Config, DType In, DType Out, Major A, Major B, class Program>
void launch_on(const mainloop::LaunchPlan& plan, const Program& program, cudaStream_t stream) {
  if constexpr (Config::kSwapAB) {
    // The kernel computes C^T = B A^T: its A is C's B. A staged input is read from global memory.
    static_assert(Config::kWarpgroupM == kPartCols && Config::kWarpgroupN == 64 && Config::kPingPong);
    using Epilogue =
        mainloop::Transposed<ProgramEpilogue<Program, Config::kStagingBuffers, In, Out, false>, Config::kWarpgroupM>;
    mainloop::launch_kernel<Config, ElementOf<In>, B, A, Epilogue>(plan, plan.kernel_params(program), stream);
  } else {
    static_assert(Config::kWarpgroupM == kPartRows && Config::kWarpgroupN == kPartCols);
    // A staged input is staged on the ping-pong tile only (its one buffer is handed between the
    // consumers); on the cooperative tile it is read from global memory.
    using Epilogue = ProgramEpilogue<Program, Config::kStagingBuffers, In, Out, Config::kPingPong>;
    mainloop::launch_kernel<Config, ElementOf<In>, A, B, Epilogue>(plan, plan.kernel_params(program), stream);
  }
}

// f.template operator()<Out>() for the launch's output type `out`: In or one of Also.
template <DType In, DType... Also, class F>
void with_output_type(DType out, F&& f) {
  if (out == In) f.template operator()<In>();
  else (void)((out == Also && (f.template operator()<Also>(), true)) || ...);
}

// What every launch of a planned program checks first; returns the type its TileOuts are written in.
template <class Program, DType... Also>
DType checked_output_type(const ProgramPlan& plan, const Program& program, Major a, Major b, const char* function) {
  check_program_tile<Program>(plan.main.summary.tile, "plan", function);  // a plan made by plan_program<Program>
  ArgumentCheck swapped(function);
  swapped.require_supported(!plan.main.swap_ab || plan.main.m <= kSwappedProgramMaxM, "plan",
                            "runs a program on a swapped tile at M = ", plan.main.m, ", above ", kSwappedProgramMaxM,
                            " (plan.hpp: one token tile)");
  swapped.throw_if_error();
  if constexpr (!AsksForACompanionLaunch<Program>) {
    ArgumentCheck check(function);
    check.require_supported(plan.companion_ctas() == 0, "plan",
                            "has a companion launch (plan_companion), which this program does not ask for "
                            "(program.hpp: companion_speed): plan it with plan_program<Program>");
    check.throw_if_error();
  }
  check_operand_majors(plan.main.a_major, plan.main.b_major, a, b, function);
  check_arguments(program, function);
  check_tile_inputs(program, plan.main.input, function);
  return output_type(program, plan.main.input, {Also...}, function);
}

// Every kernel a plan of `Program` may need for operands of type In: its tile's and its companion's.
template <DType In, Major A, Major B, DType... Also, class Program>
void launch_planned(const ProgramPlan& plan, const Program& program, DType out, cudaStream_t stream) {
  with_output_type<In, Also...>(out, [&]<DType Out>() {
    if (plan.main.summary.tile == GemmTile::swap_m64n128)
      return launch_on<SwappedProgramTile, In, Out, A, B>(plan.main, program, stream);
    if constexpr (!StagesAnInput<Program>)  // check_program_tile: ping-pong only
      if (plan.main.summary.tile == GemmTile::m128n256)
        return launch_on<CooperativeProgramTile, In, Out, A, B>(plan.main, program, stream);
    launch_on<PingPongProgramTile, In, Out, A, B>(plan.main, program, stream);
    if constexpr (AsksForACompanionLaunch<Program>)
      if (plan.companion_ctas() > 0)  // right behind it on the stream (programmatic dependent launch)
        launch_on<CooperativeProgramTile, In, Out, A, B>(plan.companion, program, stream);
  });
}

}  // namespace detail

/// Launch a planned GEMM whose epilogue is `program`; its tile outputs are of the operands' type
/// or of one of `Also` (output_type checks before anything runs), its operands of the majors A and B.
/// The kernels of every tile and operand type a plan may have are built.
template <class Program, DType... Also, Major A = Major::k, Major B = Major::k>
void launch_program(const ProgramPlan& plan, const Program& program, cudaStream_t stream, OutputTypes<Also...> = {},
                    OperandMajors<A, B> = {}) {
  constexpr const char* kFunction = "coda::epilogue::launch_program";
  const DType out = detail::checked_output_type<Program, Also...>(plan, program, A, B, kFunction);
  if (plan.main.input == DType::bf16) detail::launch_planned<DType::bf16, A, B, Also...>(plan, program, out, stream);
  else detail::launch_planned<DType::f16, A, B, Also...>(plan, program, out, stream);
}

/// launch_program for plans known to run on `Tile` (pingpong_m128n128, m128n256 or swap_m64n128) with operands of
/// type `In` and no companion launch: the same checks, and only that tile's kernels for `In` are
/// built (a benchmark's, an op's of one operand type), where launch_program builds every tile's for
/// both operand types. Another plan is refused.
//
//   coda::epilogue::ProgramPlan plan{coda::mainloop::plan_launch(a, b, {.tile = GemmTile::pingpong_m128n128}, "f"), {}};
//   coda::epilogue::launch_program_on<GemmTile::pingpong_m128n128, DType::bf16>(plan, program, stream);
template <GemmTile Tile, DType In, class Program, DType... Also, Major A = Major::k, Major B = Major::k>
void launch_program_on(const ProgramPlan& plan, const Program& program, cudaStream_t stream, OutputTypes<Also...> = {},
                       OperandMajors<A, B> = {}) {
  static_assert(Tile == GemmTile::pingpong_m128n128 || Tile == GemmTile::m128n256 || Tile == GemmTile::swap_m64n128,
                "programs run on these tiles");
  static_assert(In == DType::bf16 || In == DType::f16, "program kernels take bf16 or f16 operands");
  constexpr const char* kFunction = "coda::epilogue::launch_program_on";
  const DType out = detail::checked_output_type<Program, Also...>(plan, program, A, B, kFunction);
  ArgumentCheck check(kFunction);
  check
      .require_supported(plan.main.summary.tile == Tile && plan.companion_ctas() == 0, "plan", "runs on ",
                         plan.main.summary.tile, plan.companion_ctas() > 0 ? " with a companion launch" : "",
                         ", but this launch is built for ", Tile, " alone")
      .require_supported(plan.main.input == In, "plan", "has ", plan.main.input,
                         " operands, but this launch is built for ", In);
  check.throw_if_error();
  using Config =
      std::conditional_t<Tile == GemmTile::m128n256, CooperativeProgramTile,
                         std::conditional_t<Tile == GemmTile::swap_m64n128, SwappedProgramTile, PingPongProgramTile>>;
  detail::with_output_type<In, Also...>(
      out, [&]<DType Out>() { detail::launch_on<Config, In, Out, A, B>(plan.main, program, stream); });
}

/// C-less GEMM: A B^T feeds `program`, whose descriptors name every output.
template <class Program, DType... Also, Major A = Major::k, Major B = Major::k>
void gemm_program(const GemmOperand& a, const GemmOperand& b, const Program& program, cudaStream_t stream = nullptr,
                  const GemmOptions& options = {}, OutputTypes<Also...> output_types = {},
                  OperandMajors<A, B> majors = {}) {
  constexpr const char* kFunction = "coda::epilogue::gemm_program";
  reported_by(kFunction, [&] {
    check_operand_majors(a.major, b.major, A, B, kFunction);  // before the plan needs a GPU
    launch_program(plan_program<Program>(a, b, options, kFunction), program, stream, output_types, majors);
  });
}

}  // namespace coda::epilogue

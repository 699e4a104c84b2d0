// coda/epilogue/plan.hpp: which tile configuration an epilogue program runs on, and its companion
// launch: the program side of planning (the mainloop plans one configuration over tile rows:
// mainloop/plan.hpp).
//
//   coda::epilogue::ProgramPlan plan =
//       coda::epilogue::plan_program<MyProgram>(a, b, options, "my_op");   // validates a and b
//   coda::epilogue::launch_program(plan, program, stream);                  // launch.cuh
//
// A program runs on parts of 128 x 128 (parts.hpp): on the ping-pong tile, a consumer's whole tile,
// its program beside the other consumer's MMAs; on the cooperative m128n256 tile (from K =
// kCooperativeProgramMinK) half a tile, the two consumers running their programs at once. At M <=
// kSwappedProgramMaxM (decode) on the swap_m64n128 tile, computed transposed with the weight on
// wgmma's 64-row side (a part of 64 x 128 holding every row: launch.cuh, SwappedProgramTile).
//
// On the ping-pong tile a program may ask for a companion launch (program.hpp: companion_speed): the
// ping-pong tile's 4-CTA clusters leave SMs idle (12 of an H100's 132), and a second launch of the
// m128n256 tile in 2-CTA clusters runs the last tile rows there, started by programmatic dependent
// launch beside the first, as many rows as let both end together (companion.hpp). Same bits.
#pragma once

#include <cstdint>

#include "coda/core/api.hpp"
#include "coda/core/validate.hpp"
#include "coda/epilogue/program.hpp"
#include "coda/gemm.hpp"
#include "coda/mainloop/plan.hpp"

namespace coda::epilogue {

/// The K from which a program runs on the cooperative m128n256 tile, when the launch leaves the
/// tile to coda. There the two consumers split each 128 x 256 tile into two 128 x 128 parts and
/// run their programs at the same time, with the tensor cores idle; in a ping-pong tile one
/// consumer's program runs beside the other's MMAs. What the cooperative tile buys instead: every
/// SM (2-CTA clusters: 132 CTAs on an H100, against the ping-pong tile's 120 in 4-CTA clusters) at
/// the same L2 traffic per MMA. The idle time per tile is fixed and the MMAs grow with K, so the
/// trade turns with K (H100, coda bench ops: at K = 4096 SwiGLU 3% and RoPE 1% faster than on the
/// ping-pong tile; at K = 2048 RoPE 13% and cross-entropy 6% slower). At K = 4096 the cooperative
/// tile also beat the ping-pong tile with a companion launch (SwiGLU 5.44 ms against 5.70, H100).
inline constexpr int64_t kCooperativeProgramMinK = 4096;

/// The M up to which a program runs on the swapped tile: one token tile, so its 64-row part holds
/// every row and its partials (row, column and whole-part reductions) are those of a 128 x 128 part.
inline constexpr int64_t kSwappedProgramMaxM = 64;

/// A program's launches: `main`, and a companion beside it on the SMs `main` leaves idle (its
/// summary.ctas 0: none).
struct ProgramPlan {
  mainloop::LaunchPlan main;
  mainloop::LaunchPlan companion;
  int companion_ctas() const { return companion.summary.ctas; }
};

/// Throw unless `Program` runs on `tile`: pingpong_m128n128, or m128n256 unless it stages a tile
/// input (program.hpp): staging hands one buffer from one ping-pong consumer to the other. (Only a
/// companion launch, which has the ping-pong launch beside it, runs such a program on m128n256,
/// reading that input from global memory: run there whole, residual + RMSNorm took 1.03-1.11 of
/// its ping-pong launch with a companion.)
template <class Program>
void check_program_tile(GemmTile tile, const char* argument, const char* function) {
  constexpr bool kPingPongOnly = StagesAnInput<Program>;
  ArgumentCheck check(function);
  check.require_supported(tile == GemmTile::pingpong_m128n128 || tile == GemmTile::swap_m64n128 ||
                              (tile == GemmTile::m128n256 && !kPingPongOnly),
                          argument,
                          kPingPongOnly ? "this epilogue program stages a tile input: it runs on pingpong_m128n128 "
                                          "(or swap_m64n128 at M <= 64) only"
                                        : "epilogue programs run on pingpong_m128n128, m128n256 or (M <= 64) "
                                          "swap_m64n128");
  check.throw_if_error();
}

/// The tile `Program` runs on: `requested`, or (automatic) by K as above.
template <class Program>
GemmTile program_tile(const GemmOperand& a, GemmTile requested, const char* function) {
  const TensorView& v = a.view;
  const int64_t m = a.major == Major::k ? v.rows() : v.cols();
  const int64_t k = a.major == Major::k ? v.cols() : v.rows();
  if (requested != GemmTile::automatic) {
    check_program_tile<Program>(requested, "options.tile", function);
    ArgumentCheck check(function);
    check.require_supported(requested != GemmTile::swap_m64n128 || m <= kSwappedProgramMaxM, "options.tile",
                            "swap_m64n128 runs epilogue programs at M <= ", kSwappedProgramMaxM, ", but a has M = ", m);
    check.throw_if_error();
    return requested;
  }
  if (m <= kSwappedProgramMaxM) return GemmTile::swap_m64n128;
  return !StagesAnInput<Program> && k >= kCooperativeProgramMinK ? GemmTile::m128n256 : GemmTile::pingpong_m128n128;
}

/// Give a ping-pong plan a companion launch where options.companion allows and companion.hpp finds
/// it pays for a program that runs at `companion_speed` on a companion SM against a primary SM: one
/// K range per tile, one batch, every SM allowed (no max_ctas), SMs left over. For programs that also
/// run on the m128n256 program tile (every program; a staged tile input is read from global memory
/// there).
CODA_API void plan_companion(ProgramPlan& plan, const GemmOperand& a, const GemmOperand& b, const GemmOptions& options,
                             double companion_speed, const char* function);

/// Validate A and B for `Program` and plan its launches (needs a Hopper GPU). Plan before building
/// the program's tile outputs: their TMA maps need the CUDA driver.
template <class Program>
ProgramPlan plan_program(const GemmOperand& a, const GemmOperand& b, GemmOptions options, const char* function) {
  options.tile = program_tile<Program>(a, options.tile, function);
  // K splits through the workspace only: a program's swapped kernel has no shared memory left for
  // the slots a cluster's CTAs would add their partials in (kernel.cuh: kSplitsInClusters).
  options.split_k_in_cluster = false;
  ProgramPlan plan{mainloop::plan_launch(a, b, options, function), {}};
  if constexpr (AsksForACompanionLaunch<Program>)
    plan_companion(plan, a, b, options, double(Program::companion_speed), function);
  return plan;
}

}  // namespace coda::epilogue

#include "router_candidates.hpp"

#include "coda/epilogue/host_arguments.hpp"
#include "coda/epilogue/launch.cuh"
#include "coda/epilogue/programs/router.hpp"
#include "coda/mainloop/plan.hpp"

namespace coda::ops::router_detail {

// One tile (m128n256: every SM in 2-CTA clusters; the program runs once per tile after its K loop)
// for both operand types: launch_program would build the ping-pong tile's kernels too, doubling the
// compile time of a path that is opt-in.
void launch_candidates(const TensorView& x, const TensorView& w, const TensorView& candidates, const TensorView& lse,
                       const RouterOptions& o, const char* function, cudaStream_t stream) {
  constexpr GemmTile kTile = GemmTile::m128n256;
  GemmOptions gemm = o.gemm;
  if (gemm.tile == GemmTile::automatic) gemm.tile = kTile;
  const epilogue::ProgramPlan plan{mainloop::plan_launch({x, Major::k}, {w, Major::k}, gemm, function), {}};
  using Program = epilogue::RouterCandidates<kCandidates>;
  Program program;
  program.candidates = epilogue::row_partials(candidates, "workspace", epilogue::TopK<kCandidates>::kWords);
  if (lse.data) program.lse = epilogue::row_partials(lse, "workspace");
  program.sigmoid = o.mode == RoutingMode::sigmoid_bias;
  if (o.expert_bias.data) program.expert_bias = epilogue::row_vector(o.expert_bias, "options.expert_bias");
  if (x.dtype == DType::bf16) epilogue::launch_program_on<kTile, DType::bf16>(plan, program, stream);
  else epilogue::launch_program_on<kTile, DType::f16>(plan, program, stream);
}

}  // namespace coda::ops::router_detail

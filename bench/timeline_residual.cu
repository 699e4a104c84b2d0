// `coda bench timeline`: the residual + RMSNorm case (timeline.hpp).
#include "coda/epilogue/programs/rmsnorm.hpp"
#include "coda/epilogue/programs/standard.hpp"
#include "timeline.cuh"

namespace coda::bench::timeline {

void residual_cases(Arena& arena, cudaStream_t stream) {
  const DType bf = DType::bf16;
  auto allocate = [&](DType t, int64_t rows, int64_t cols, bool fill) {
    return arena.matrix(t, rows, cols, stream, fill);
  };
  const int64_t m = 16384, n = 2048, k = 2048;
  const TensorView residual = allocate(bf, m, n, true), h = allocate(bf, m, n, false), u = allocate(bf, m, n, false);
  const TensorView g = TensorView::vector(allocate(DType::f32, 1, n, true).data, DType::f32, n);
  const TensorView sums = allocate(DType::f32, m, parts_along(n), false);
  const char* shape = "M=16384 N=2048 K=2048";
  const ProgramPlan plan = start_case(arena, stream, m, n, k, h, shape);
  print("tile load + store", shape,
        time_program(plan, TileLoad{tile_in(residual, "residual"), tile_out(h, "h")}, stream));
  ResidualRmsNorm rms;
  rms.residual = tile_in(residual, "residual");
  rms.residual_out = tile_out(h, "h");
  rms.out = tile_out(u, "u");
  rms.weight = row_vector(g, "weight");
  rms.sum_squares = row_partials(sums, "sums");
  print("residual + RMSNorm", shape, time_program(plan, rms, stream));
  // The standard set's bias + GELU, as a kernel of those two terms alone.
  LinearCombinationOf<LinearCombinationTerms{.column_bias = true, .activation = Activation::gelu_tanh}> bias_gelu;
  bias_gelu.column_bias = row_vector(g, "bias");
  bias_gelu.out = tile_out(h, "out");
  print("bias + GELU (LC-Of)", shape, time_program(plan, bias_gelu, stream));
}

}  // namespace coda::bench::timeline

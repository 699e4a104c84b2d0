// coda bench primitives: what each primitive class costs inside the GEMM. Each row runs
// coda::gemm_program with a one- or two-primitive program on the same shape (M = 16384,
// N = 2048, the K given) and reports its time over the plain GEMM on the programs' tile
// configuration (pingpong_m128n128) and over coda's default GEMM. A ratio near 1 means the
// primitive hides behind the other consumer warpgroup's MMAs. More rows: an e4m3 output (scaled,
// saturating), and the standard set's LinearCombination computing bias + GELU (the epilogue of
// CUTLASS's numbers in PERFORMANCE.md): with every term compiled and the activation's kind read at
// run time, and as LinearCombinationOf the bias and GELU alone (and with the pre-activation stored);
// then its backward, ActivationBackward: dX = dY gelu'(pre) and the bias gradient (column sums),
// with the kind read at run time and fixed (ActivationBackwardOf).
#include "primitives_bench.hpp"

#include <cuda_runtime.h>

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "coda/core/device.hpp"
#include "coda/epilogue/host_arguments.hpp"
#include "coda/epilogue/launch.cuh"
#include "coda/epilogue/programs/standard.hpp"
#include "coda/gemm/gemm.hpp"
#include "arena.hpp"
#include "bench_programs.hpp"
#include "timing.hpp"

namespace coda::bench {
namespace {

using namespace coda::epilogue;

struct TwoStores {
  TileOut out, second;
  template <class T> CODA_HD void operator()(T& t) const { t.store(out); t.store(second); }
};
struct HalfWidthStore {  // SwiGLU's shape of output
  TileOut half;
  template <class T> CODA_HD void operator()(T& t) const {
    t.store_pairs(half, [](const Pair& p) { return p.first * p.second; });
  }
};
struct RowVectorLoad {
  RowVector v;
  TileOut out;
  template <class T> CODA_HD void operator()(T& t) const {
    t.store(out, [&](const Element& x) { return x.value * t.load(v, x); });
  }
};
struct ColumnVectorLoad {
  ColumnVector v;
  TileOut out;
  template <class T> CODA_HD void operator()(T& t) const {
    t.store(out, [&](const Element& x) { return x.value * t.load(v, x); });
  }
};
struct RowSumSquares {
  Partials partials;
  template <class T> CODA_HD void operator()(T& t) const {
    t.row_reduce(partials, Sum{}, [](const Element& x) { return x.value * x.value; });
  }
};
struct RowLogSumExp {
  Partials partials;
  template <class T> CODA_HD void operator()(T& t) const {
    t.row_reduce(partials, LogSumExp{}, [](const Element& x) { return x.value; });
  }
};
struct ColumnSum {
  Partials partials;
  template <class T> CODA_HD void operator()(T& t) const {
    t.column_reduce(partials, Sum{}, [](const Element& x) { return x.value; });
  }
};

}  // namespace

int primitives_benchmark(int, char**) {
  if (!hopper_available()) {
    std::printf("coda bench primitives: no Hopper GPU here; the benchmark needs one (see `coda info`)\n");
    return 1;
  }
  cudaStream_t stream = nullptr;
  CODA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const DType bf = DType::bf16;
  const int64_t m = 16384, n = 2048;
  Arena arena(10);
  auto allocate = [&](DType t, int64_t rows, int64_t cols, bool fill) { return arena.matrix(t, rows, cols, stream, fill); };
  std::printf("coda bench primitives: %s, bf16, M=%lld N=%lld; time / plain GEMM on pingpong_m128n128 and on the default tile\n",
              current_device().name.c_str(), (long long)m, (long long)n);
  std::printf("%-28s %6s %10s %10s %10s %9s %9s\n", "program", "K", "ms", "pingpong", "default", "/pingpong",
              "/default");
  for (int64_t k : {2048, 4096}) {
    const TensorView x = allocate(bf, m, k, true), w = allocate(bf, n, k, true);
    const TensorView out = allocate(bf, m, n, false), second = allocate(bf, m, n, false);
    const TensorView half = allocate(bf, m, n / 2, false), in = allocate(bf, m, n, true);
    const TensorView fp8_out = allocate(DType::e4m3, m, n, false);
    const TensorView row_vector_view = TensorView::vector(allocate(DType::f32, 1, n, true).data, DType::f32, n);
    const TensorView column_vector_view = TensorView::vector(allocate(DType::f32, 1, m, true).data, DType::f32, m);
    const TensorView row_parts = allocate(DType::f32, m, n / kPartCols, false);
    const TensorView column_parts = allocate(DType::f32, m / kPartRows, n, false);
    const GemmOperand a{x, Major::k}, b{w, Major::k};
    GemmOptions pingpong;
    pingpong.tile = GemmTile::pingpong_m128n128;
    // Every program on the ping-pong tile, beside that tile's plain GEMM and the default one.
    const mainloop::LaunchPlan plan = mainloop::plan_launch(a, b, pingpong, "coda bench primitives");
    // Each program is timed side by side with the two plain GEMMs (alternating rounds, timing.hpp):
    // the H200's clock drifts under its power limit, and the drift then moves all three alike.
    auto row = [&]<DType... Also>(const char* name, auto program, OutputTypes<Also...> output_types = {}) {
      const std::vector<Timing> t = time_side_by_side(
          {[&](int) { launch_program(plan, program, stream, output_types); },
           [&](int) { gemm(a, b, out, stream, pingpong); }, [&](int) { gemm(a, b, out, stream); }},
          stream);
      const double ms = t[0].median_ms, pingpong_ms = t[1].median_ms, default_ms = t[2].median_ms;
      std::printf("%-28s %6lld %10.4f %10.4f %10.4f %9.3f %9.3f\n", name, (long long)k, ms, pingpong_ms, default_ms,
                  ms / pingpong_ms, ms / default_ms);
    };
    row("store", StoreOnly{tile_out(out, "out")});
    row("store + store", TwoStores{tile_out(out, "out"), tile_out(second, "second")});
    row("store_pairs (half width)", HalfWidthStore{tile_out(half, "half")});
    row("tile load + store", TileLoad{tile_in(in, "in"), tile_out(out, "out")});
    row("row-vector load + store", RowVectorLoad{row_vector(row_vector_view, "v"), tile_out(out, "out")});
    row("column-vector load + store", ColumnVectorLoad{column_vector(column_vector_view, "v"), tile_out(out, "out")});
    row("row_reduce Sum", RowSumSquares{row_partials(row_parts, "parts")});
    row("row_reduce LogSumExp", RowLogSumExp{row_partials(row_parts, "parts")});
    row("column_reduce Sum", ColumnSum{column_partials(column_parts, "parts")});
    row("store (e4m3 out, scaled)", StoreOnly{tile_out(fp8_out, "out", 4.0f)}, OutputTypes<DType::e4m3>{});
    auto bias_gelu = [&](auto program) {
      program.column_bias = row_vector(row_vector_view, "bias");
      program.activation.kind = epilogue::Activation::gelu_tanh;
      program.out = tile_out(out, "out");
      return program;
    };
    row("LinearCombination bias+GELU", bias_gelu(epilogue::LinearCombination{}));
    row("  ...Of<bias, GELU>", bias_gelu(LinearCombinationOf<LinearCombinationTerms{
                                   .column_bias = true, .activation = Activation::gelu_tanh}>{}));
    auto with_pre_activation = bias_gelu(LinearCombinationOf<LinearCombinationTerms{
        .column_bias = true, .pre_activation = true, .activation = Activation::gelu_tanh}>{});
    with_pre_activation.pre_activation = tile_out(second, "pre_activation");
    row("  ...Of<bias, GELU, pre-act>", with_pre_activation);
    ActivationBackward backward;  // the training backward of bias + GELU: dX and the bias gradient
    backward.pre_activation = tile_in(in, "pre_activation");
    backward.activation.kind = Activation::gelu_tanh;
    backward.out = tile_out(out, "dx");
    backward.bias_gradient = column_partials(column_parts, "bias_gradient");
    row("ActivationBackward dGELU+db", backward);
    ActivationBackwardOf<Activation::gelu_tanh> backward_of_gelu;
    backward_of_gelu.pre_activation = backward.pre_activation;
    backward_of_gelu.out = backward.out;
    backward_of_gelu.bias_gradient = backward.bias_gradient;
    row("  ...Of<gelu_tanh>", backward_of_gelu);
  }
  CODA_CUDA_CHECK(cudaStreamSynchronize(stream));
  return 0;
}

}  // namespace coda::bench

// coda bench primitives: what each primitive class costs inside the GEMM. Each row runs a one- or
// two-primitive program on the same shape (M = 16384, N = 2048, the K given) and reports its time
// over the plain GEMM on the programs' tile configuration (pingpong_m128n128) and over coda's
// default GEMM. A ratio near 1 means the primitive hides behind the other consumer warpgroup's
// MMAs. More rows: an e4m3 output (scaled, saturating), and the standard set's bias + GELU and its
// backward (primitives_standard.cu, primitives_backward.cu).
#include "primitives_bench.hpp"

#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

#include "arena.hpp"
#include "coda/core/device.hpp"
#include "coda/epilogue/parts.hpp"
#include "coda/gemm.hpp"
#include "coda/mainloop/plan.hpp"
#include "primitives_rows.hpp"
#include "timing.hpp"

namespace coda::bench {

int primitives_benchmark() {
  if (!hopper_available()) {
    std::fprintf(stderr, "coda bench primitives: no Hopper GPU here; the benchmark needs one (see `coda info`)\n");
    return 1;
  }
  cudaStream_t stream = nullptr;
  CODA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const DType bf = DType::bf16;
  const int64_t m = 16384, n = 2048;
  Arena arena(10);
  auto allocate = [&](DType t, int64_t rows, int64_t cols, bool fill) {
    return arena.matrix(t, rows, cols, stream, fill);
  };
  std::printf(
      "coda bench primitives: %s, bf16, M=%lld N=%lld; time / plain GEMM on pingpong_m128n128 and on the "
      "default tile\n",
      current_device().name.c_str(), (long long)m, (long long)n);
  std::printf("%-28s %6s %10s %10s %10s %9s %9s\n", "program", "K", "ms", "pingpong", "default", "/pingpong",
              "/default");
  for (int64_t k : {2048, 4096}) {
    const TensorView x = allocate(bf, m, k, true), w = allocate(bf, n, k, true);
    const GemmOperand a{x, Major::k}, b{w, Major::k};
    const GemmOptions pingpong{.tile = GemmTile::pingpong_m128n128};
    primitives::Buffers buffers;
    // Every program on the ping-pong tile, beside that tile's plain GEMM and the default one.
    buffers.plan.main = mainloop::plan_launch(a, b, pingpong, "coda bench primitives");
    buffers.out = allocate(bf, m, n, false);
    buffers.second = allocate(bf, m, n, false);
    buffers.half = allocate(bf, m, n / 2, false);
    buffers.in = allocate(bf, m, n, true);
    buffers.fp8_out = allocate(DType::e4m3, m, n, false);
    buffers.row_vector = arena.vector(DType::f32, n, stream);
    buffers.column_vector = arena.vector(DType::f32, m, stream);
    buffers.row_parts = allocate(DType::f32, m, n / epilogue::kPartCols, false);
    buffers.column_parts = allocate(DType::f32, m / epilogue::kPartRows, n, false);
    std::vector<primitives::Row> rows;
    for (auto group : {primitives::store_rows, primitives::load_rows, primitives::reduction_rows,
                       primitives::standard_rows, primitives::backward_rows})
      for (primitives::Row& row : group(buffers)) rows.push_back(std::move(row));
    // Each program is timed side by side with the two plain GEMMs (alternating rounds, timing.hpp):
    // the H200's clock drifts under its power limit, and the drift then moves all three alike.
    for (const primitives::Row& row : rows) {
      const std::vector<Timing> t =
          time_side_by_side({[&](int) { row.launch(stream); }, [&](int) { gemm(a, b, buffers.out, stream, pingpong); },
                             [&](int) { gemm(a, b, buffers.out, stream); }},
                            stream);
      const double ms = t[0].median_ms, pingpong_ms = t[1].median_ms, default_ms = t[2].median_ms;
      std::printf("%-28s %6lld %10.4f %10.4f %10.4f %9.3f %9.3f\n", row.name, (long long)k, ms, pingpong_ms, default_ms,
                  ms / pingpong_ms, ms / default_ms);
    }
  }
  CODA_CUDA_CHECK(cudaStreamSynchronize(stream));
  return 0;
}

}  // namespace coda::bench

// coda bench timeline: where a program kernel's time goes, tile by tile. The programs run on the
// ping-pong tile, where one consumer warpgroup's epilogue should hide behind the other's MMAs;
// this says whether it does. Thread 0 of each consumer reads the SM clock (clock64) when a tile's
// MMAs begin, when its accumulators are final and when its program is done (the mainloop's
// mark() hook, gemm/epilogue_seam.cuh), and the table averages over the tiles:
//
//   MMA        cycles from the start of a tile's MMAs to final accumulators (the K loop; it grows
//              when the other consumer's epilogue slows it down)
//   epilogue   cycles of the program, prepare() and its stores
//   turn wait  cycles a consumer then waits before its next tile's MMAs may start: the slack its
//              epilogue left (0: the epilogue, not the MMAs, set the pace)
//   span       cycles from a CTA's first MMA to its last epilogue, and the clock that span and the
//              kernel's time imply: the GPU lowers its clock under its power limit, so a kernel
//              can be slower at the same cycle count
//
// Programs: a plain store, a tile load + store, and the library's SwiGLU, RoPE, residual + RMSNorm
// and cross-entropy programs (cross-entropy also soft-capped), at shapes of `coda bench ops`, and
// the standard set's bias + GELU (LinearCombinationOf those two terms).
#include "tile_timeline.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <vector>

#include "coda/core/device.hpp"
#include "coda/epilogue/host_arguments.hpp"
#include "coda/epilogue/launch.cuh"
#include "coda/epilogue/programs/cross_entropy.hpp"
#include "coda/epilogue/programs/standard.hpp"
#include "coda/epilogue/programs/rmsnorm.hpp"
#include "coda/epilogue/programs/rope.hpp"
#include "coda/epilogue/programs/swiglu.hpp"
#include "arena.hpp"
#include "bench_programs.hpp"
#include "timing.hpp"

namespace coda::bench {
namespace {

using namespace coda::epilogue;
using mainloop::TileCoordinates;
using mainloop::TileEvent;

/// `Inner` (an epilogue of the seam), with the clock read at each of a tile's events by thread 0
/// of its consumer: clocks[((cta * 2 + consumer) * tiles + tile) * 3 + event].
template <class Inner>
struct TimedEpilogue {
  struct Params {
    typename Inner::Params inner;
    unsigned long long* clocks;
    int32_t tiles;  // slots per consumer
  };
  using SharedStorage = typename Inner::SharedStorage;
  template <class Acc>
  using Pending = typename Inner::template Pending<Acc>;

  template <class Acc>
  __device__ void prepare(const Params& p, SharedStorage& s, Acc& acc, const TileCoordinates& t, Pending<Acc>& out) {
    inner_.prepare(p.inner, s, acc, t, out);
  }
  template <class Acc>
  __device__ bool write(const Params& p, SharedStorage& s, const Pending<Acc>& in, const TileCoordinates& t, int step) {
    return inner_.write(p.inner, s, in, t, step);
  }
  __device__ void finish(const Params& p, SharedStorage& s, const TileCoordinates& t) { inner_.finish(p.inner, s, t); }

  static constexpr uint32_t kStagedInputBytes = Inner::kStagedInputBytes;
  __device__ void fetch_input(const Params& p, SharedStorage& s, const TileCoordinates& t, uint64_t* landed) const {
    inner_.fetch_input(p.inner, s, t, landed);
  }

  __device__ void mark(const Params& p, TileEvent event, const TileCoordinates& t) {
    if (t.thread == 0 && tile_ < p.tiles)
      p.clocks[((int64_t(blockIdx.x) * 2 + t.consumer) * p.tiles + tile_) * 3 + int(event)] = clock64();
    if (event == TileEvent::epilogue_done) ++tile_;
  }

 private:
  Inner inner_;
  int32_t tile_ = 0;
};

struct Summary {
  double ms = 0, plain_ms = 0, mma = 0, epilogue = 0, turn_wait = 0, span = 0;
  long tiles = 0;
};

// Averages over the recorded tiles (see the file comment).
Summary summarize(const std::vector<unsigned long long>& clocks, int ctas, int tiles) {
  Summary r;
  long waits = 0;
  int ctas_seen = 0;
  for (int cta = 0; cta < ctas; ++cta) {
    unsigned long long first = ~0ull, last = 0;
    for (int consumer = 0; consumer < 2; ++consumer) {
      unsigned long long previous_done = 0;
      for (int tile = 0; tile < tiles; ++tile) {
        const unsigned long long* e = &clocks[((std::size_t(cta) * 2 + consumer) * tiles + tile) * 3];
        if (e[2] == 0) break;
        r.mma += double(e[1] - e[0]);
        r.epilogue += double(e[2] - e[1]);
        ++r.tiles;
        if (tile > 0) {
          r.turn_wait += std::max(0.0, double(e[0]) - double(previous_done));
          ++waits;
        }
        previous_done = e[2];
        first = std::min(first, e[0]);
        last = std::max(last, e[2]);
      }
    }
    if (last > 0) {
      r.span += double(last - first);
      ++ctas_seen;
    }
  }
  if (r.tiles > 0) {
    r.mma /= double(r.tiles);
    r.epilogue /= double(r.tiles);
  }
  if (waits > 0) r.turn_wait /= double(waits);
  if (ctas_seen > 0) r.span /= ctas_seen;
  return r;
}

// Launch `program` with the timed epilogue: its time beside the plain kernel's (side by side, as
// the other benchmarks) and its clocks (one more launch).
template <class Program>
Summary time_program(const mainloop::LaunchPlan& plan, const Program& program, cudaStream_t stream) {
  using Config = mainloop::TilePingPongM128N128;
  using Epilogue = TimedEpilogue<ProgramEpilogue<Program, Config::kStagingBuffers, DType::bf16, DType::bf16>>;
  const int ctas = plan.summary.ctas;
  const int64_t tiles_total =
      ((plan.m + Config::kBlockM - 1) / Config::kBlockM) * ((plan.n + Config::kBlockN - 1) / Config::kBlockN) * plan.batch;
  const int tiles = int(tiles_total / (2 * ctas) + 2);
  const std::size_t count = std::size_t(ctas) * 2 * std::size_t(tiles) * 3;
  unsigned long long* clocks = nullptr;
  CODA_CUDA_CHECK(cudaMalloc(&clocks, count * sizeof(unsigned long long)));
  typename Epilogue::Params params{program, clocks, tiles};
  auto launch = [&] {
    mainloop::launch_kernel<Config, __nv_bfloat16, Major::k, Major::k, Epilogue>(plan.kernel_params(params), ctas,
                                                                               stream);
  };
  const std::vector<Timing> timings =
      time_side_by_side({[&](int) { launch(); }, [&](int) { launch_program(plan, program, stream); }}, stream, 3);
  CODA_CUDA_CHECK(cudaMemsetAsync(clocks, 0, count * sizeof(unsigned long long), stream));
  launch();
  std::vector<unsigned long long> host(count);
  CODA_CUDA_CHECK(cudaMemcpyAsync(host.data(), clocks, count * sizeof(unsigned long long), cudaMemcpyDeviceToHost, stream));
  CODA_CUDA_CHECK(cudaStreamSynchronize(stream));
  CODA_CUDA_CHECK(cudaFree(clocks));
  Summary r = summarize(host, ctas, tiles);
  r.ms = timings[0].median_ms;
  r.plain_ms = timings[1].median_ms;
  return r;
}

void print(const char* name, const char* shape, const Summary& r) {
  std::printf("%-22s %-22s %9.4f %9.4f %7ld %9.0f %9.0f %9.0f %10.0f %6.2f\n", name, shape, r.ms, r.plain_ms, r.tiles, r.mma,
              r.epilogue, r.turn_wait, r.span, r.span / (r.ms * 1e6));
}

}  // namespace

int timeline_benchmark(int, char**) {
  if (!hopper_available()) {
    std::printf("coda bench timeline: no Hopper GPU here; the benchmark needs one (see `coda info`)\n");
    return 1;
  }
  cudaStream_t stream = nullptr;
  CODA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  Arena arena(30);
  auto allocate = [&](DType t, int64_t rows, int64_t cols, bool fill) { return arena.matrix(t, rows, cols, stream, fill); };
  const DType bf = DType::bf16;
  std::printf("coda bench timeline: %s, bf16, pingpong_m128n128; per tile (means, SM clock cycles)\n",
              current_device().name.c_str());
  std::printf("%-22s %-22s %9s %9s %7s %9s %9s %9s %10s %6s\n", "program", "shape", "ms", "plain ms", "tiles", "MMA",
              "epilogue", "turn wait", "CTA span", "GHz");
  // A case's operands and plan, and the store-only row its programs are measured against.
  auto start_case = [&](int64_t m, int64_t n, int64_t k, const TensorView& out, const char* shape) {
    const TensorView x = allocate(bf, m, k, true), w = allocate(bf, n, k, true);
    // The timeline instruments the ping-pong kernel (its turn waits).
    const mainloop::LaunchPlan plan =
        mainloop::plan_launch({x, Major::k}, {w, Major::k}, {.tile = GemmTile::pingpong_m128n128}, "coda bench timeline");
    print("store", shape, time_program(plan, StoreOnly{tile_out(out, "out")}, stream));
    return plan;
  };
  {
    const int64_t m = 16384, n = 2048, k = 2048;
    const TensorView residual = allocate(bf, m, n, true), h = allocate(bf, m, n, false), u = allocate(bf, m, n, false);
    const TensorView g = TensorView::vector(allocate(DType::f32, 1, n, true).data, DType::f32, n);
    const TensorView sums = allocate(DType::f32, m, parts_along(n), false);
    const char* shape = "M=16384 N=2048 K=2048";
    const mainloop::LaunchPlan plan = start_case(m, n, k, h, shape);
    print("tile load + store", shape, time_program(plan, TileLoad{tile_in(residual, "residual"), tile_out(h, "h")}, stream));
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
  {
    const int64_t m = 16384, n = 6144, k = 2048, head_dim = 128, max_position = 4096;
    const TensorView out = allocate(bf, m, n, false);
    const TensorView cos = allocate(DType::f32, max_position, head_dim / 2, true);
    const TensorView sin = allocate(DType::f32, max_position, head_dim / 2, true);
    const TensorView positions = arena.int32_vector(m, [&](int64_t i) { return int32_t(i % max_position); });
    const char* shape = "M=16384 N=6144 K=2048";
    const mainloop::LaunchPlan plan = start_case(m, n, k, out, shape);
    Rope rope;
    rope.positions = column_vector(positions, "positions");
    rope.cos = table(cos, "cos");
    rope.sin = table(sin, "sin");
    rope.head_dim = Divisor(int32_t(head_dim));
    rope.rotated_heads = int32_t(2 * n / 3 / head_dim);  // Q and K rotate, V passes through
    rope.out = tile_out(out, "out");
    print("RoPE (QKV)", shape, time_program(plan, rope, stream));
  }
  {
    const int64_t m = 16384, n = 16384, k = 2048;
    const TensorView out = allocate(bf, m, n, false), half = allocate(bf, m, n / 2, false);
    const char* shape = "M=16384 N=16384 K=2048";
    const mainloop::LaunchPlan plan = start_case(m, n, k, out, shape);
    Swiglu swiglu;
    swiglu.out = tile_out(half, "out");
    print("SwiGLU", shape, time_program(plan, swiglu, stream));
  }
  {
    const int64_t m = 8192, n = 128256, k = 2048;
    const TensorView logits = allocate(bf, m, n, false), lse = allocate(DType::f32, m, parts_along(n), false);
    const TensorView picked = TensorView::vector(allocate(DType::f32, 1, m, false).data, DType::f32, m);
    const TensorView targets = arena.int32_vector(m, [&](int64_t i) { return int32_t((i * 7919) % n); });
    const char* shape = "M=8192 N=128256 K=2048";
    const mainloop::LaunchPlan plan = start_case(m, n, k, logits, shape);
    CrossEntropyPartials ce;
    ce.targets = column_vector(targets, "targets");
    ce.lse = row_partials(lse, "lse");
    ce.target_logit = per_row(picked, "target_logit");
    print("cross-entropy", shape, time_program(plan, ce, stream));
    ce.softcap = 30.0f;
    print("cross-entropy softcap", shape, time_program(plan, ce, stream));
  }
  CODA_CUDA_CHECK(cudaStreamDestroy(stream));
  return 0;
}

}  // namespace coda::bench

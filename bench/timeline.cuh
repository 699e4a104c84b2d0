// Internal to `coda bench timeline`: the timed epilogue and the timing of one program with it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "bench_programs.hpp"
#include "coda/core/device.hpp"
#include "coda/epilogue/host_arguments.hpp"
#include "coda/epilogue/launch.cuh"
#include "coda/mainloop/plan.hpp"
#include "timeline.hpp"
#include "timing.hpp"

namespace coda::bench::timeline {

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

// Launch `program` with the timed epilogue: its time beside the plain kernel's (side by side, as
// the other benchmarks) and its clocks (one more launch).
template <class Program>
Summary time_program(const ProgramPlan& plan, const Program& program, cudaStream_t stream) {
  using Config = PingPongProgramTile;
  using Epilogue = TimedEpilogue<ProgramEpilogue<Program, Config::kStagingBuffers, DType::bf16, DType::bf16>>;
  const int ctas = plan.main.summary.ctas;
  const int64_t tiles_total = ((plan.main.m + Config::kBlockM - 1) / Config::kBlockM) *
                              ((plan.main.n + Config::kBlockN - 1) / Config::kBlockN) * plan.main.batch;
  const int tiles = int(tiles_total / (2 * ctas) + 2);
  const std::size_t count = std::size_t(ctas) * 2 * std::size_t(tiles) * 3;
  unsigned long long* clocks = nullptr;
  CODA_CUDA_CHECK(cudaMalloc(&clocks, count * sizeof(unsigned long long)));
  typename Epilogue::Params params{program, clocks, tiles};
  auto launch = [&] {
    mainloop::launch_kernel<Config, __nv_bfloat16, Major::k, Major::k, Epilogue>(
        plan.main, plan.main.kernel_params(params), stream);
  };
  const std::vector<Timing> timings =
      time_side_by_side({[&](int) { launch(); }, [&](int) { launch_program_on<GemmTile::pingpong_m128n128, DType::bf16>(plan, program, stream); }}, stream, 3);
  CODA_CUDA_CHECK(cudaMemsetAsync(clocks, 0, count * sizeof(unsigned long long), stream));
  launch();
  std::vector<unsigned long long> host(count);
  CODA_CUDA_CHECK(
      cudaMemcpyAsync(host.data(), clocks, count * sizeof(unsigned long long), cudaMemcpyDeviceToHost, stream));
  CODA_CUDA_CHECK(cudaStreamSynchronize(stream));
  CODA_CUDA_CHECK(cudaFree(clocks));
  Summary r = summarize(host, ctas, tiles);
  r.ms = timings[0].median_ms;
  r.plain_ms = timings[1].median_ms;
  return r;
}

/// A case's operands and plan (the ping-pong tile: the timeline instruments its turn waits), after
/// the store-only row its programs are measured against.
inline ProgramPlan start_case(Arena& arena, cudaStream_t stream, int64_t m, int64_t n, int64_t k, const TensorView& out,
                              const char* shape) {
  const TensorView x = arena.matrix(DType::bf16, m, k, stream), w = arena.matrix(DType::bf16, n, k, stream);
  const ProgramPlan plan{
      mainloop::plan_launch({x, Major::k}, {w, Major::k}, {.tile = GemmTile::pingpong_m128n128}, "coda bench timeline"),
      {}};
  print("store", shape, time_program(plan, StoreOnly{tile_out(out, "out")}, stream));
  return plan;
}

}  // namespace coda::bench::timeline

// coda bench timeline: where a program kernel's time goes, tile by tile. The programs run on the
// ping-pong tile, where one consumer warpgroup's epilogue should hide behind the other's MMAs;
// this says whether it does. Thread 0 of each consumer reads the SM clock (clock64) when a tile's
// MMAs begin, when its accumulators are final and when its program is done (the mainloop's
// mark() hook, mainloop/epilogue_seam.cuh), and the table averages over the tiles:
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
#include <vector>

#include "arena.hpp"
#include "coda/core/device.hpp"
#include "timeline.hpp"

namespace coda::bench {
namespace timeline {

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

void print(const char* name, const char* shape, const Summary& r) {
  std::printf("%-22s %-22s %9.4f %9.4f %7ld %9.0f %9.0f %9.0f %10.0f %6.2f\n", name, shape, r.ms, r.plain_ms, r.tiles,
              r.mma, r.epilogue, r.turn_wait, r.span, r.span / (r.ms * 1e6));
}

}  // namespace timeline

int timeline_benchmark() {
  if (!hopper_available()) {
    std::fprintf(stderr, "coda bench timeline: no Hopper GPU here; the benchmark needs one (see `coda info`)\n");
    return 1;
  }
  cudaStream_t stream = nullptr;
  CODA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  Arena arena(30);
  std::printf("coda bench timeline: %s, bf16, pingpong_m128n128; per tile (means, SM clock cycles)\n",
              current_device().name.c_str());
  std::printf("%-22s %-22s %9s %9s %7s %9s %9s %9s %10s %6s\n", "program", "shape", "ms", "plain ms", "tiles", "MMA",
              "epilogue", "turn wait", "CTA span", "GHz");
  timeline::residual_cases(arena, stream);
  timeline::projection_cases(arena, stream);
  CODA_CUDA_CHECK(cudaStreamDestroy(stream));
  return 0;
}

}  // namespace coda::bench

// Benchmark timing: CUDA events around each launch, after a warm-up, reporting the median.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <vector>

namespace coda::bench {

struct Timing {
  double median_ms = 0;
  double min_ms = 0;
  int samples = 0;
};

/// How long each time_launches call runs its graph before timing it (default 100 ms). An H200 at
/// its power limit sets its clock by the work of the last tens of milliseconds: timed right after
/// lighter work (a memory-bound kernel, a pause), a GEMM starts at a higher clock and reads faster
/// than it runs in steady state. Warming each piece up until the clock has settled on it takes the
/// previous piece out of its numbers. 0 keeps one warm-up replay only.
void set_warmup_ms(double ms);

/// Time `launch(i)` (i = 0, 1, ...: rotate buffers with it) on `stream`. The launches are
/// captured once into a CUDA graph of `per_graph` launches; the graph is replayed for the warm-up
/// time (set_warmup_ms), then each of `samples` replays is timed between two events and
/// contributes its time / per_graph. Graph replay keeps host launch overhead out of the numbers (as in serving, where
/// small GEMMs run inside graphs), for every library alike.
Timing time_launches(const std::function<void(int)>& launch, cudaStream_t stream, int per_graph, int samples);

/// Merge timings of the same work taken in several rounds (median of all samples).
Timing merge(const std::vector<double>& samples_ms);

/// Several pieces of work timed side by side: `rounds` rounds, each timing every piece in turn
/// (time_launches(work, stream, per_graph, samples)), each piece's samples pooled over the rounds.
/// Work compared in one table is measured this way, so slow drift in clock or temperature (an H200
/// at its power limit slows down over the first seconds of a heavy run) falls on every piece alike,
/// not on whichever was timed first. Each round starts one piece further along the list, so no
/// piece is always timed first; what ran just before a piece is kept out of its numbers by the
/// warm-up (set_warmup_ms), not by the order.
std::vector<Timing> time_side_by_side(const std::vector<std::function<void(int)>>& works, cudaStream_t stream,
                                      int rounds = 5, int per_graph = 2, int samples = 6);

/// The per-launch samples of the last time_launches call on this thread.
const std::vector<double>& last_samples();

}  // namespace coda::bench

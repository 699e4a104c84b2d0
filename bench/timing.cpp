#include "timing.hpp"

#include <cuda_runtime.h>

#include <algorithm>

#include "coda/core/device.hpp"

namespace coda::bench {
namespace {
thread_local std::vector<double> samples_of_last_call;
double warmup_milliseconds = 100;

// Milliseconds between two recorded events, once `stop` has completed.
double elapsed_ms(cudaEvent_t start, cudaEvent_t stop) {
  CODA_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  CODA_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  return ms;
}
}  // namespace

void set_warmup_ms(double ms) { warmup_milliseconds = ms > 0 ? ms : 0; }

const std::vector<double>& last_samples() { return samples_of_last_call; }

Timing merge(const std::vector<double>& samples_ms) {
  Timing t;
  if (samples_ms.empty()) return t;
  std::vector<double> sorted = samples_ms;
  std::sort(sorted.begin(), sorted.end());
  t.samples = int(sorted.size());
  t.min_ms = sorted.front();
  t.median_ms = sorted.size() % 2 ? sorted[sorted.size() / 2]
                                  : 0.5 * (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]);
  return t;
}

Timing time_launches(const std::function<void(int)>& launch, cudaStream_t stream, int per_graph, int samples) {
  launch(0);  // outside the graph: lazy initialisation (kernel attributes, handles) happens here
  CODA_CUDA_CHECK(cudaStreamSynchronize(stream));
  cudaGraph_t graph = nullptr;
  CODA_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < per_graph; ++i) launch(i);
  CODA_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  CODA_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t start = nullptr, stop = nullptr;
  CODA_CUDA_CHECK(cudaEventCreate(&start));
  CODA_CUDA_CHECK(cudaEventCreate(&stop));
  // Warm-up: one replay, timed, tells how many more fill the warm-up time; they go out back to
  // back (no host round trip between them, which would let the clock recover).
  CODA_CUDA_CHECK(cudaEventRecord(start, stream));
  CODA_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  CODA_CUDA_CHECK(cudaEventRecord(stop, stream));
  const double replay_ms = std::max(elapsed_ms(start, stop), 1e-3);
  const int warmup_replays = int(std::min(warmup_milliseconds / replay_ms, 100000.0));
  for (int i = 0; i < warmup_replays; ++i) CODA_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  samples_of_last_call.clear();
  for (int s = 0; s < samples; ++s) {
    CODA_CUDA_CHECK(cudaEventRecord(start, stream));
    CODA_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    CODA_CUDA_CHECK(cudaEventRecord(stop, stream));
    samples_of_last_call.push_back(elapsed_ms(start, stop) / per_graph);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  CODA_CUDA_CHECK(cudaGetLastError());
  return merge(samples_of_last_call);
}

std::vector<Timing> time_side_by_side(const std::vector<std::function<void(int)>>& works, cudaStream_t stream,
                                      int rounds, int per_graph, int samples) {
  std::vector<std::vector<double>> pooled(works.size());
  for (int round = 0; round < rounds; ++round)
    for (std::size_t step = 0; step < works.size(); ++step) {
      const std::size_t i = (step + std::size_t(round)) % works.size();
      time_launches(works[i], stream, per_graph, samples);
      pooled[i].insert(pooled[i].end(), last_samples().begin(), last_samples().end());
    }
  std::vector<Timing> timings;
  for (const auto& s : pooled) timings.push_back(merge(s));
  return timings;
}

}  // namespace coda::bench

#include "timing.hpp"

#include <cuda_runtime.h>

#include <algorithm>

#include "coda/core/device.hpp"

namespace coda::bench {
namespace {
thread_local std::vector<double> samples_of_last_call;
}

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

Timing time_launches(const std::function<void(int)>& launch, cudaStream_t stream, int warmup, int samples) {
  for (int i = 0; i < warmup; ++i) launch(i);
  std::vector<cudaEvent_t> events(std::size_t(samples) + 1);
  for (auto& e : events) CODA_CUDA_CHECK(cudaEventCreate(&e));
  CODA_CUDA_CHECK(cudaEventRecord(events[0], stream));
  for (int i = 0; i < samples; ++i) {
    launch(warmup + i);
    CODA_CUDA_CHECK(cudaEventRecord(events[std::size_t(i) + 1], stream));
  }
  CODA_CUDA_CHECK(cudaEventSynchronize(events.back()));
  CODA_CUDA_CHECK(cudaGetLastError());
  samples_of_last_call.clear();
  for (int i = 0; i < samples; ++i) {
    float ms = 0;
    CODA_CUDA_CHECK(cudaEventElapsedTime(&ms, events[std::size_t(i)], events[std::size_t(i) + 1]));
    samples_of_last_call.push_back(ms);
  }
  for (auto& e : events) cudaEventDestroy(e);
  return merge(samples_of_last_call);
}

}  // namespace coda::bench

// `coda bench layer`: the layer block (coda/blocks/layer.hpp) forward and forward + backward at
// T = 16384, (H, F) = (2048, 5632) and (4096, 11008), beside the unfused sequence of the same layer
// (coda's GEMMs + plain CUDA kernels, as autograd runs it) and coda's GEMMs of the same shapes alone,
// in one run; then each backward step beside its GEMM. bench/layer_vs_torch.py adds PyTorch eager
// and torch.compile in the same session and prints one table.
#pragma once

#include <cstdint>
#include <string>

namespace coda::bench {

struct LayerBenchOptions {
  std::string json = "bench_layer.json";
  int64_t tokens = 16384;
};

/// Prints the tables and writes them to options.json.
int layer_benchmark(const LayerBenchOptions& options);

}  // namespace coda::bench

// `coda bench gemm`: coda's GEMM against cuBLAS on the same shapes, majors and data, in one run.
#pragma once

#include <string>
#include <vector>

#include "coda/core/dtype.hpp"
#include "coda/gemm.hpp"

namespace coda::bench {

struct GemmBenchOptions {
  std::string set = "all";  // one of gemm_bench_sets()
  std::string shape;        // "M,N,K": that one shape (group "shape") instead of a set
  DType dtype = DType::bf16;
  std::string json = "bench_gemm.json";
  GemmOptions forced;  // a tile, split-K, raster group or grid cap forced on every shape
};

/// The shape sets: transformer, square, decode, backward, quick, all.
std::vector<std::string> gemm_bench_sets();

int gemm_benchmark(const GemmBenchOptions& options);

}  // namespace coda::bench

// `coda bench ops`: each fused op against coda's GEMM alone, cuBLAS alone and the unfused
// sequence (cuBLAS + plain CUDA kernels) at the shapes of docs/performance.md, in one run.
#pragma once

#include <string>

namespace coda::bench {

/// Prints the table and writes it to `json`.
int ops_benchmark(const std::string& json);

}  // namespace coda::bench

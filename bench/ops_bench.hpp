// `coda bench ops`: each fused op against coda's GEMM alone, cuBLAS alone and the unfused
// sequence (cuBLAS + plain CUDA kernels) at the shapes of PERFORMANCE.md, in one run.
#pragma once

namespace coda::bench {

/// Options: --json PATH (default bench_ops.json).
int ops_benchmark(int argc, char** argv);

}  // namespace coda::bench

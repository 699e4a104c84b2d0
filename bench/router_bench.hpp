// The MoE router for `coda bench router`: coda's router (GEMM + selection) against coda's plain
// GEMM to the logits, cuBLAS's, and cuBLAS followed by a plain CUDA softmax + top-k kernel.
#pragma once

#include <string>

namespace coda::bench {

/// Prints its table and writes its rows to `json_path`; returns the process exit code.
int router_benchmark(const std::string& json_path);

}  // namespace coda::bench

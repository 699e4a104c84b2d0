// Internal to `coda bench primitives` (primitives_bench.cpp): the rows of its table, each a small
// program launched on shared buffers. The programs are instantiated in one translation unit per
// primitive class (primitives_<class>.cu), so their kernels build in parallel.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <vector>

#include "coda/core/tensor.hpp"
#include "coda/epilogue/plan.hpp"

namespace coda::bench::primitives {

/// What every row's program reads and writes: M x N outputs and inputs of the case, and the plan of
/// the GEMM they all run on (the ping-pong tile, no companion launch).
struct Buffers {
  epilogue::ProgramPlan plan;
  TensorView out, second, half, in, fp8_out;  // M x N (half: M x N/2; fp8_out: e4m3)
  TensorView row_vector, column_vector;       // N and M f32 values
  TensorView row_parts, column_parts;         // M x N/128 and M/128 x N f32 partials
};

struct Row {
  const char* name;
  std::function<void(cudaStream_t)> launch;
};

std::vector<Row> store_rows(const Buffers& b);      // primitives_stores.cu
std::vector<Row> load_rows(const Buffers& b);       // primitives_loads.cu
std::vector<Row> reduction_rows(const Buffers& b);  // primitives_reductions.cu
std::vector<Row> standard_rows(const Buffers& b);   // primitives_standard.cu: bias + GELU
std::vector<Row> backward_rows(const Buffers& b);   // primitives_backward.cu: dGELU + the bias gradient

}  // namespace coda::bench::primitives

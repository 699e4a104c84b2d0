// Internal to `coda bench timeline` (tile_timeline.cpp): the per-tile summary of a program kernel's
// clocks, and the benchmark's cases, instantiated in two translation units so their kernels build in
// parallel (timeline_residual.cu, timeline_projections.cu; the timed epilogue: timeline.cuh).
#pragma once

#include <cuda_runtime_api.h>

#include <vector>

#include "arena.hpp"

namespace coda::bench::timeline {

struct Summary {
  double ms = 0, plain_ms = 0, mma = 0, epilogue = 0, turn_wait = 0, span = 0;
  long tiles = 0;
};

/// Averages of the clocks a timed launch recorded (see tile_timeline.cpp's comment).
Summary summarize(const std::vector<unsigned long long>& clocks, int ctas, int tiles);

/// One row of the table.
void print(const char* name, const char* shape, const Summary& r);

/// residual + RMSNorm, a tile load and bias + GELU at M = 16384, N = 2048, K = 2048.
void residual_cases(Arena& arena, cudaStream_t stream);
/// RoPE on QKV, SwiGLU and the LM head's cross-entropy, at the shapes of `coda bench ops`.
void projection_cases(Arena& arena, cudaStream_t stream);

}  // namespace coda::bench::timeline

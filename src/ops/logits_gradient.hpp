// Internal: dZ of LM head + cross-entropy from the forward's stored logits, the one pass of
// gemm_cross_entropy_backward with CrossEntropyBackwardOptions::logits (ops/cross_entropy.hpp).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "coda/core/dtype.hpp"

namespace coda::ops {

struct LogitsGradient {
  const void* logits;  // M x V, bf16 or f16 (the forward's, after the row scale and the cap)
  int64_t logits_ld;
  void* grad_logits;  // M x V, the same type: dZ times the row scale (may be `logits`)
  int64_t grad_logits_ld;
  DType dtype;
  int64_t rows, vocab;
  const int32_t* targets;    // M
  const float* row_factors;  // M x epilogue::kRowFactors (the backward's row_factors kernel)
  const float* row_scale;    // optional, M
  float* row_dots;           // optional, M x parts of 128 columns: <dZ, Z> (Z the stored logit)
  int64_t row_dots_ld;
  float softcap;  // > 0: the logits are capped; dZ takes the cap's slope
};

/// dZ[m, n] = cross_entropy_gradient(logit) (times the cap's slope) times row_scale[m], each logit read
/// once and each gradient written once; with row_dots, <dZ, Z> per part of 128 columns, summed in a
/// fixed order. One warp per row and part.
void launch_logits_gradient(const LogitsGradient& g, cudaStream_t stream);

}  // namespace coda::ops

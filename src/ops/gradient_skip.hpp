// Internal: which blocks of dZ the recomputing cross-entropy backward multiplies once it skips
// (CrossEntropyBackwardOptions::skip_below, ops/cross_entropy.hpp): the K-block masks of its dW and
// dX products (mainloop/params.hpp, KBlockMask), built per vocabulary chunk from the row maxima the
// logits GEMM's epilogue wrote (CrossEntropyBackward::row_max).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace coda::ops {

struct GradientSkip {
  const float* row_max;  // M x parts of the chunk: max of Z (after the row scale) over each 128 columns
  int64_t row_max_ld;
  const float* lse;          // M
  const float* row_factors;  // M x epilogue::kRowFactors
  const int32_t* targets;    // M
  int64_t rows;
  int64_t vocab;          // the whole vocabulary (the smoothing factor's V)
  int64_t first_column;   // the chunk's first vocabulary column
  int64_t columns;        // the chunk's width
  float softcap;          // > 0: Y = cap tanh(Z / cap)
  float threshold;        // skip_below
  int32_t tile_rows;      // rows of a mask row: the products' BlockM x ClusterM
  uint32_t* grad_w_mask;  // ceil(columns / tile_rows) rows of grad_w_words: bits over 64-token blocks
  int32_t grad_w_words;
  uint32_t* grad_x_mask;  // ceil(rows / tile_rows) rows of grad_x_words: bits over the chunk's 64-column blocks
  int32_t grad_x_words;
};

/// Words of a mask row over a K of `k` elements (one bit per block of 64).
inline int32_t mask_words(int64_t k) { return int32_t(((k + 63) / 64 + 31) / 32); }

/// Rows of a mask over an output of `rows` rows, `tile_rows` a mask row.
inline int64_t mask_rows(int64_t rows, int64_t tile_rows) { return (rows + tile_rows - 1) / tile_rows; }

/// Clear both masks, then set the bit of every (tile row, K block) that holds an element of dZ the
/// skip does not bound: |dZ[m, n]| <= threshold |g[m]| row_scale[m] unless the block's bit is set.
/// A part (128 columns of a row) is kept when its largest softmax bound |g (1 + 2 lambda lse)| p_max
/// + |g eps / V| exceeds threshold |g|, when it holds the row's target, or when anything in it is
/// NaN; a row whose g is 0 (ignored) keeps nothing. Integer ORs only: the same masks in any order.
void launch_gradient_skip(const GradientSkip& s, cudaStream_t stream);

}  // namespace coda::ops

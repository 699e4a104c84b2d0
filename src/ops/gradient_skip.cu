// The skip masks of the recomputing cross-entropy backward (gradient_skip.hpp). A block judges 64
// rows x 64 parts of 128 columns: thread (lane, quarter) reads part `lane` (and lane + 32) of 16 of
// the rows, so a warp's loads of the row maxima are consecutive, and the block ORs its verdicts in
// shared memory before one integer OR per mask word it touches.
#include <cmath>

#include "coda/core/device.hpp"
#include "coda/epilogue/parts.hpp"
#include "coda/epilogue/programs/cross_entropy.hpp"
#include "gradient_skip.hpp"

namespace coda::ops {
namespace {

constexpr int kRows = 64;   // rows a block judges: one 64-token K block of the dW product
constexpr int kParts = 64;  // parts a block judges (8192 columns): lane and lane + 32 of each warp
constexpr int kThreads = 256;
constexpr int kRowsPerThread = kRows / (kThreads / kParts);  // the four warps of a half share the rows

// Whether row m's part b holds an element of dZ above the bound (gradient_skip.hpp).
__device__ bool keeps_part(const GradientSkip& s, int64_t m, int64_t part) {
  const float* factors = s.row_factors + m * epilogue::kRowFactors;
  const float smoothing = factors[epilogue::kSmoothing];
  const float g = factors[epilogue::kTarget] + smoothing * float(s.vocab);  // g (1 - eps) + g eps
  const float z = s.row_max[m * s.row_max_ld + part];
  const float y = s.softcap > 0.0f ? s.softcap * tanhf(z / s.softcap) : z;
  const float bound = fabsf(factors[epilogue::kSoftmaxScale]) * expf(y - s.lse[m]) + fabsf(smoothing);
  const int64_t first = s.first_column + part * epilogue::kPartCols;
  const int64_t target = s.targets[m];
  // NaN anywhere (a logit, g of a target outside the vocabulary) fails the comparison: kept. A row
  // whose g is 0 (ignored, even where ignore_index names a column of this part) has dZ = 0.
  return !(bound <= s.threshold * fabsf(g)) || (g != 0.0f && target >= first && target < first + epilogue::kPartCols);
}

__global__ void __launch_bounds__(kThreads) gradient_skip_kernel(GradientSkip s) {
  __shared__ int kept[kParts];
  const int lane = int(threadIdx.x % 32), quarter = int(threadIdx.x / 32) % 4, half = int(threadIdx.x / 128);
  const int64_t first_row = int64_t(blockIdx.x) * kRows, first_part = int64_t(blockIdx.y) * kParts;
  const int64_t parts = epilogue::parts_along(s.columns);
  if (threadIdx.x < kParts) kept[threadIdx.x] = 0;
  __syncthreads();
  const int64_t part = first_part + lane + 32 * half;
  bool keep = false;
  if (part < parts)
    for (int i = 0; i < kRowsPerThread; ++i) {
      const int64_t m = first_row + quarter * kRowsPerThread + i;
      if (m < s.rows) keep = keep || keeps_part(s, m, part);
    }
  if (keep) kept[lane + 32 * half] = 1;  // the same value from any writer
  __syncthreads();
  if (threadIdx.x >= 32) return;
  // Warp 0: the verdicts of parts lane and lane + 32, as bits.
  const uint32_t low = __ballot_sync(0xffffffffu, kept[lane] != 0);
  const uint32_t high = __ballot_sync(0xffffffffu, kept[lane + 32] != 0);
  // dX: the two 64-column K blocks of each kept part, in the mask row of these tokens. Parts
  // first_part + 16 w ... + 16 w + 15 are the bits of word (2 first_part) / 32 + w.
  const int64_t column_blocks = (s.columns + 63) / 64;
  uint32_t* x_row = s.grad_x_mask + (first_row / s.tile_rows) * s.grad_x_words + 2 * first_part / 32;
  if (lane < 4) {
    const uint32_t parts16 = ((lane < 2 ? low : high) >> (16 * (lane % 2))) & 0xffffu;
    uint32_t word = 0;
    for (int b = 0; b < 16; ++b)
      if ((parts16 >> b) & 1u) word |= 3u << (2 * b);
    const int64_t first_block = 2 * first_part + 32 * lane;
    if (word != 0 && first_block < column_blocks) atomicOr(x_row + lane, word);
  }
  // dW: the mask row of each kept part's vocabulary rows (tile_rows / 128 parts), this K block's bit.
  const auto kept_bit = [&](int p) { return ((p < 32 ? low >> p : high >> (p - 32)) & 1u) != 0; };
  const int parts_per_row = s.tile_rows / epilogue::kPartCols;
  const int64_t token_block = first_row / 64;
  for (int p = lane * parts_per_row; p < kParts; p += 32 * parts_per_row) {
    bool any = false;
    for (int q = p; q < p + parts_per_row && q < kParts; ++q) any = any || kept_bit(q);
    if (any)
      atomicOr(
          s.grad_w_mask + ((first_part + p) * epilogue::kPartCols / s.tile_rows) * s.grad_w_words + token_block / 32,
          1u << (token_block % 32));
  }
}

}  // namespace

void launch_gradient_skip(const GradientSkip& s, cudaStream_t stream) {
  const int64_t parts = epilogue::parts_along(s.columns);
  const int64_t x_rows = mask_rows(s.rows, s.tile_rows), w_rows = mask_rows(s.columns, s.tile_rows);
  CODA_CUDA_CHECK(cudaMemsetAsync(s.grad_x_mask, 0, std::size_t(x_rows * s.grad_x_words) * 4, stream));
  CODA_CUDA_CHECK(cudaMemsetAsync(s.grad_w_mask, 0, std::size_t(w_rows * s.grad_w_words) * 4, stream));
  const dim3 grid(unsigned((s.rows + kRows - 1) / kRows), unsigned((parts + kParts - 1) / kParts));
  gradient_skip_kernel<<<grid, kThreads, 0, stream>>>(s);
  CODA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace coda::ops

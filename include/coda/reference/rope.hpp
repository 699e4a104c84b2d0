// coda/reference/rope.hpp: the fp64 reference of GEMM + RoPE, its backward, the
// cos/sin cache, and the host permutation that makes rotate-half (LLaMA/HF) weights interleaved.
//
//   RopeCache cache = coda::reference::rope_cache(/*max_pos=*/4096, /*head_dim=*/128);
//   Matrix w = coda::reference::permute_rotate_half_to_interleaved(w_qkv_hf, 128, /*rot_heads=*/q_heads + kv_heads);
//   Matrix y = coda::reference::gemm(x, Major::k, w, Major::k);
//   Matrix q = coda::reference::rope(y, positions, cache, 128, q_heads + kv_heads);  // V heads pass through
//   Matrix dy = coda::reference::rope_backward(dq, positions, cache, 128, q_heads + kv_heads);
//
// Layout: Y is M x N with N = heads * head_dim; head h owns columns [h*d, (h+1)*d). Pairs are
// adjacent (interleaved): pair i of a head is columns (2i, 2i+1) within it, rotated by the angle
// whose cos/sin are cache[pos[m], i]:
//   (y0, y1) -> (y0*c - y1*s, y0*s + y1*c).
// Heads h >= rot_heads (the V part of a fused QKV projection) pass through unchanged.
#pragma once

#include <cstdint>
#include <vector>

#include "coda/reference/matrix.hpp"

namespace coda::reference {

/// cos and sin of every position's angles: both max_pos x head_dim/2.
struct RopeCache {
  Matrix cos;
  Matrix sin;
};

/// cache[p, i] = cos/sin(p * theta^(-2i/head_dim)), the standard RoPE frequencies
/// (HF's inv_freq = 1 / theta^(arange(0, d, 2) / d)). head_dim must be even; theta > 0.
RopeCache rope_cache(int64_t max_pos, int64_t head_dim, double theta = 10000.0);

/// Kernel 1's epilogue on Y (M x heads*head_dim): rotate each pair of the first rot_heads heads
/// by the angle of position positions[m]. Every position must lie in [0, max_pos).
Matrix rope(const Matrix& y, const std::vector<int32_t>& positions, const RopeCache& cache, int64_t head_dim,
            int64_t rot_heads);

/// RoPE backward: the inverse rotation (angle -theta), since the rotation is orthogonal:
/// dY_pre = R^T dY_post, so <dY_pre, Y_pre> = <dY_post, Y_post> row by row.
Matrix rope_backward(const Matrix& grad_output, const std::vector<int32_t>& positions, const RopeCache& cache,
                     int64_t head_dim, int64_t rot_heads);

/// Permute the ROWS of an nn.Linear weight (N x K, N = heads*head_dim) written for rotate-half
/// RoPE (pairs (i, i + d/2) within a head) into the interleaved convention (pairs (2i, 2i+1)):
/// within each of the first rot_heads heads, new row 2i = old row i and new row 2i+1 = old row
/// i + d/2. Other heads are unchanged. A bias of the same projection permutes the same way
/// (pass it as an N x 1 matrix).
Matrix permute_rotate_half_to_interleaved(const Matrix& w, int64_t head_dim, int64_t rot_heads);

/// The inverse, for outputs: permute the COLUMNS of Y (M x N) computed with the permuted weight
/// back into rotate-half order (column 2i -> i, column 2i+1 -> i + d/2 within each rotated head).
Matrix permute_interleaved_to_rotate_half_columns(const Matrix& y, int64_t head_dim, int64_t rot_heads);

}  // namespace coda::reference

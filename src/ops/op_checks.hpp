// Internal: argument rules and small helpers the fused ops share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "coda/core/validate.hpp"
#include "coda/epilogue/parts.hpp"
#include "coda/ops/cross_entropy.hpp"

namespace coda::ops {

/// x (M x K) and w (N x K): the GEMM the op fuses into; returns {M, N}.
struct GemmShape {
  int64_t m;
  int64_t n;
};
GemmShape check_projection(ArgumentCheck& check, const TensorView& x, const TensorView& w);

/// grad (M x K) and w (K x N, the forward's nn.Linear weight, read N-major): the data-gradient GEMM
/// grad W an op fuses into; returns {M, N}.
GemmShape check_gradient_projection(ArgumentCheck& check, const char* grad_name, const TensorView& grad,
                                    const char* w_name, const TensorView& w);

/// grad (T x N2) and x (T x N), both read MN-major: the weight-gradient GEMM grad^T x an op fuses
/// into; returns {N2, N}.
GemmShape check_weight_gradient(ArgumentCheck& check, const char* grad_name, const TensorView& grad, const char* x_name,
                                const TensorView& x);

/// A tile (output, or input beside the GEMM's) of `rows` x `cols` in `dtype` (the op's element
/// type); `rows_why` says where the row count comes from.
void check_output(ArgumentCheck& check, const char* argument, const TensorView& t, int64_t rows, int64_t cols,
                  DType dtype, std::string_view rows_why = "one row per row of x");

/// f32 partials the op writes or reads: rows x cols, rows contiguous (plain loads and stores: no
/// alignment beyond the element's).
void check_partials(ArgumentCheck& check, const char* argument, const TensorView& t, int64_t rows, int64_t cols,
                    std::string_view rows_why, std::string_view cols_why);

/// The names RoPE's arguments have where they are checked: an op's own, or a block's
/// ("weights.head_dim", ...).
struct RopeNames {
  const char* head_dim = "head_dim";
  const char* rotated_heads = "rotated_heads";
  const char* cos = "cos";
  const char* sin = "sin";
};

/// RoPE's heads: `columns` (of `argument`, its `what`: "rows" or "columns") are whole heads of an
/// even head_dim >= 2, and rotated_heads lies in [0, heads].
void check_heads(ArgumentCheck& check, const char* argument, const char* what, int64_t columns, int head_dim,
                 int rotated_heads, const RopeNames& names = {});

/// RoPE's cos and sin caches: f32, max_pos x head_dim / 2 (max_pos >= 1), rows contiguous.
void check_rope_tables(ArgumentCheck& check, const TensorView& cos, const TensorView& sin, int head_dim,
                       const RopeNames& names = {});

/// The caller's workspace: not null, and at least the `needed` bytes that `size_function` (the
/// query a caller sizes it by) tells.
void check_workspace(ArgumentCheck& check, const void* workspace, std::size_t bytes, std::size_t needed,
                     const char* size_function);

/// The loss options the cross-entropy forward and backward share (label smoothing, z-loss,
/// soft-cap, the row scale of M rows).
void check_cross_entropy_options(ArgumentCheck& check, const CrossEntropyOptions& options, int64_t m);

/// The cross-entropy backward's chunk width (`argument`: its name where it is given): 0 (chosen) or
/// a positive multiple of 128.
void check_chunk_columns(ArgumentCheck& check, const char* argument, int64_t chunk_columns);

/// The cross-entropy backward's skip threshold (CrossEntropyBackwardOptions::skip_below): in [0, 1).
void check_skip_below(ArgumentCheck& check, const char* argument, float skip_below);

/// The names the stored-logits arguments of the cross-entropy backward have where they are checked.
struct StoredLogitsNames {
  const char* logits;
  const char* grad_logits;
  const char* row_dots;
  const char* chunk_columns;
};

/// CrossEntropyBackwardOptions::logits and grad_logits (M x V of `dtype`, TMA-aligned rows; grad_logits
/// is logits or overlaps nothing of it), chunk_columns 0, and no row_dots with a soft-cap.
void check_stored_logits(ArgumentCheck& check, float softcap, const CrossEntropyBackwardOptions& backward, int64_t m,
                         int64_t vocab, DType dtype, const StoredLogitsNames& names);

/// A vector of `length` elements of one of `types`.
void check_vector(ArgumentCheck& check, const char* argument, const TensorView& t, int64_t length,
                  std::initializer_list<DType> types);

using epilogue::parts_along;

/// The address of row `r` of a matrix, host or device (pointer arithmetic only).
inline char* row_address(const TensorView& t, int64_t r) {
  return static_cast<char*>(t.data) + r * t.ld() * int64_t(t.element_bytes());
}

}  // namespace coda::ops

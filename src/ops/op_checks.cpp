#include "op_checks.hpp"

#include <algorithm>

namespace coda::ops {

GemmShape check_projection(ArgumentCheck& check, const TensorView& x, const TensorView& w) {
  check.not_null("x", x.data)
      .not_null("w", w.data)
      .rank_in("x", x, 2, 2)
      .rank_in("w", w, 2, 2)
      .dtype_in("x", x.dtype, {DType::bf16, DType::f16})
      .require(w.dtype == x.dtype, "w", "dtype ", name(w.dtype), " must match x's dtype ", name(x.dtype))
      .inner_contiguous("x", x)
      .inner_contiguous("w", w)
      .tma_aligned("x", x)
      .tma_aligned("w", w);
  if (!check.failed())
    check.dim_equals("w", w, 1, x.cols(), "columns", "w is N x K and x is M x K: they must agree on K");
  return {x.rows(), w.rows()};
}

namespace {

// The two operands of a GEMM an op fuses into: present, rank 2, one 16-bit type, TMA-addressable.
void check_operands(ArgumentCheck& check, const char* a_name, const TensorView& a, const char* b_name,
                    const TensorView& b) {
  check.not_null(a_name, a.data)
      .not_null(b_name, b.data)
      .rank_in(a_name, a, 2, 2)
      .rank_in(b_name, b, 2, 2)
      .dtype_in(a_name, a.dtype, {DType::bf16, DType::f16})
      .require(b.dtype == a.dtype, b_name, "dtype ", name(b.dtype), " must match ", a_name, "'s dtype ", name(a.dtype))
      .inner_contiguous(a_name, a)
      .inner_contiguous(b_name, b)
      .tma_aligned(a_name, a)
      .tma_aligned(b_name, b);
}

}  // namespace

GemmShape check_gradient_projection(ArgumentCheck& check, const char* grad_name, const TensorView& grad,
                                    const char* w_name, const TensorView& w) {
  check_operands(check, grad_name, grad, w_name, w);
  if (!check.failed())
    check.dim_equals(w_name, w, 0, grad.cols(), "rows",
                     "the forward's weight is (its outputs x its inputs): one row per column of the gradient");
  return {grad.rows(), w.cols()};
}

GemmShape check_weight_gradient(ArgumentCheck& check, const char* grad_name, const TensorView& grad, const char* x_name,
                                const TensorView& x) {
  check_operands(check, grad_name, grad, x_name, x);
  if (!check.failed()) check.dim_equals(x_name, x, 0, grad.rows(), "rows", "one per token, as many as the gradient's");
  return {grad.cols(), x.cols()};
}

void check_output(ArgumentCheck& check, const char* argument, const TensorView& t, int64_t rows, int64_t cols,
                  DType dtype, std::string_view rows_why) {
  check.not_null(argument, t.data)
      .rank_in(argument, t, 2, 2)
      .require(t.dtype == dtype, argument, "dtype ", name(t.dtype), " must be ", name(dtype), " (the operands' dtype)")
      .dim_equals(argument, t, 0, rows, "rows", rows_why)
      .dim_equals(argument, t, 1, cols, "columns", "see the op's shape rules")
      .inner_contiguous(argument, t)
      .tma_aligned(argument, t);
}

void check_partials(ArgumentCheck& check, const char* argument, const TensorView& t, int64_t rows, int64_t cols,
                    std::string_view rows_why, std::string_view cols_why) {
  check.not_null(argument, t.data)
      .rank_in(argument, t, 2, 2)
      .dtype_in(argument, t.dtype, {DType::f32})
      .dim_equals(argument, t, 0, rows, "rows", rows_why)
      .dim_equals(argument, t, 1, cols, "columns", cols_why)
      .inner_contiguous(argument, t);
}

void check_heads(ArgumentCheck& check, const char* argument, const char* what, int64_t columns, int head_dim,
                 int rotated_heads, const RopeNames& names) {
  check.require(head_dim >= 2 && head_dim % 2 == 0, names.head_dim, "is ", head_dim, " but must be even and >= 2");
  if (check.failed()) return;
  check
      .require(columns % head_dim == 0, argument, "has ", columns, " ", what, ", not a whole number of heads of ",
               head_dim)
      .require(rotated_heads >= 0 && rotated_heads <= columns / head_dim, names.rotated_heads, "is ", rotated_heads,
               " but must be in [0, ", columns / head_dim, "] (the heads of ", argument, ")");
}

void check_rope_tables(ArgumentCheck& check, const TensorView& cos, const TensorView& sin, int head_dim,
                       const RopeNames& names) {
  check.not_null(names.cos, cos.data)
      .not_null(names.sin, sin.data)
      .rank_in(names.cos, cos, 2, 2)
      .rank_in(names.sin, sin, 2, 2)
      .dtype_in(names.cos, cos.dtype, {DType::f32})
      .dtype_in(names.sin, sin.dtype, {DType::f32});
  if (check.failed()) return;
  check.positive(names.cos, cos.rows(), "its rows (cached positions)")
      .dim_equals(names.cos, cos, 1, head_dim / 2, "columns", "one per rotated pair: head_dim / 2")
      .dim_equals(names.sin, sin, 0, cos.rows(), "rows", "as many positions as cos")
      .dim_equals(names.sin, sin, 1, head_dim / 2, "columns", "one per rotated pair: head_dim / 2")
      .inner_contiguous(names.cos, cos)
      .inner_contiguous(names.sin, sin);
}

void check_workspace(ArgumentCheck& check, const void* workspace, std::size_t bytes, std::size_t needed,
                     const char* size_function) {
  check.not_null("workspace", workspace)
      .require(bytes >= needed, "workspace", "holds ", bytes, " bytes but needs ", needed, " (", size_function, ")");
}

void check_vector(ArgumentCheck& check, const char* argument, const TensorView& t, int64_t length,
                  std::initializer_list<DType> types) {
  check.not_null(argument, t.data).rank_in(argument, t, 1, 1).dtype_in(argument, t.dtype, types);
  if (!check.failed() && t.shape[0] != length)
    check.require(false, argument, "length ", t.shape[0], " must be ", length);
  check.require(t.stride[0] == 1, argument, "must be contiguous");
}

void check_cross_entropy_options(ArgumentCheck& check, const CrossEntropyOptions& options, int64_t m) {
  check
      .require(options.label_smoothing >= 0.0f && options.label_smoothing < 1.0f, "options.label_smoothing", "is ",
               options.label_smoothing, " but must be in [0, 1)")
      .require(options.z_loss >= 0.0f, "options.z_loss", "is ", options.z_loss, " but must be >= 0")
      .require(options.softcap >= 0.0f, "options.softcap", "is ", options.softcap, " but must be >= 0 (0: off)");
  if (options.row_scale.data) check_vector(check, "options.row_scale", options.row_scale, m, {DType::f32});
}

void check_chunk_columns(ArgumentCheck& check, const char* argument, int64_t chunk_columns) {
  check.require(chunk_columns >= 0 && chunk_columns % 128 == 0, argument, "is ", chunk_columns,
                " but must be 0 (chosen) or a positive multiple of 128");
}

void check_skip_below(ArgumentCheck& check, const char* argument, float skip_below) {
  check.require(skip_below >= 0.0f && skip_below < 1.0f, argument, "is ", skip_below,
                " but must lie in [0, 1) (0: no skipping)");
}

void check_stored_logits(ArgumentCheck& check, float softcap, const CrossEntropyBackwardOptions& backward, int64_t m,
                         int64_t vocab, DType dtype, const StoredLogitsNames& names) {
  const TensorView &in = backward.logits, &out = backward.grad_logits;
  check_output(check, names.logits, in, m, vocab, dtype, "one row per row of x");
  check_output(check, names.grad_logits, out, m, vocab, dtype, "one row per row of x");
  check.require(backward.chunk_columns == 0, names.chunk_columns, "is ", backward.chunk_columns,
                " but must be 0 with stored logits (they are read whole: no chunks)");
  check.require(!(softcap > 0.0f && backward.row_dots.data), names.row_dots,
                "cannot be computed from soft-capped stored logits (<dZ, Z> needs the logits before the cap); "
                "recompute them instead (no stored logits)");
  if (check.failed()) return;
  const auto* a = static_cast<const char*>(in.data);
  const auto* b = static_cast<const char*>(out.data);
  const int64_t span = ((m - 1) * std::max(in.ld(), out.ld()) + vocab) * int64_t(in.element_bytes());
  const bool in_place = a == b && in.ld() == out.ld();
  check.require(in_place || a + span <= b || b + span <= a, names.grad_logits, "overlaps ", names.logits,
                " without being it (in place: the same address and row stride)");
}

}  // namespace coda::ops

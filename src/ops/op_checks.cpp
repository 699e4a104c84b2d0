#include "op_checks.hpp"

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

void check_output(ArgumentCheck& check, const char* argument, const TensorView& t, int64_t rows, int64_t cols,
                  DType dtype) {
  check.not_null(argument, t.data)
      .rank_in(argument, t, 2, 2)
      .require(t.dtype == dtype, argument, "dtype ", name(t.dtype), " must be ", name(dtype), " (x's dtype)")
      .dim_equals(argument, t, 0, rows, "rows", "one row per row of x")
      .dim_equals(argument, t, 1, cols, "columns", "see the op's shape rules")
      .inner_contiguous(argument, t)
      .tma_aligned(argument, t);
}

void check_vector(ArgumentCheck& check, const char* argument, const TensorView& t, int64_t length,
                  std::initializer_list<DType> types) {
  check.not_null(argument, t.data).rank_in(argument, t, 1, 1).dtype_in(argument, t.dtype, types);
  if (!check.failed() && t.shape[0] != length)
    check.require(false, argument, "length ", t.shape[0], " must be ", length);
  check.require(t.stride[0] == 1, argument, "must be contiguous");
}

}  // namespace coda::ops

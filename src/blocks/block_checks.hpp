// Internal: the argument rules the blocks share (a block checks its own arguments first, so that a
// message names the block's argument rather than the argument of an op inside it).
#pragma once

#include <cstdint>

#include "coda/core/tensor.hpp"
#include "coda/core/validate.hpp"
#include "ops/op_checks.hpp"

namespace coda::blocks::detail {

/// A weight's gradient: the weight's shape, in the activations' type or f32.
inline void check_weight_gradient(ArgumentCheck& check, const char* argument, const TensorView& g, int64_t rows,
                                  int64_t cols, DType dtype, const char* shapes) {
  check.not_null(argument, g.data).dtype_in(argument, g.dtype, {dtype, DType::f32});
  if (!check.failed()) ops::check_output(check, argument, g, rows, cols, g.dtype, shapes);
}

/// The rows of a block's call: its first activation's (0 when it is not a matrix).
inline int64_t tokens_of(const TensorView& activation) { return activation.rank == 2 ? activation.rows() : 0; }

}  // namespace coda::blocks::detail

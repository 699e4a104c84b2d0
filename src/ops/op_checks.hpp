// Internal: argument rules and small helpers the fused ops share.
#pragma once

#include <cstdint>

#include "coda/core/validate.hpp"
#include "coda/epilogue/parts.hpp"

namespace coda::ops {

/// x (M x K) and w (N x K): the GEMM the op fuses into; returns {M, N}.
struct GemmShape {
  int64_t m;
  int64_t n;
};
GemmShape check_projection(ArgumentCheck& check, const TensorView& x, const TensorView& w);

/// A tile output of `rows` x `cols` in `dtype` (the op's element type).
void check_output(ArgumentCheck& check, const char* argument, const TensorView& t, int64_t rows, int64_t cols,
                  DType dtype);

/// A vector of `length` elements of one of `types`.
void check_vector(ArgumentCheck& check, const char* argument, const TensorView& t, int64_t length,
                  std::initializer_list<DType> types);

using epilogue::parts_along;

/// Row `r` of a host matrix (the weight-preparation helpers copy whole rows).
inline char* host_row(const TensorView& t, int64_t r) {
  return static_cast<char*>(t.data) + r * t.ld() * int64_t(t.element_bytes());
}

}  // namespace coda::ops

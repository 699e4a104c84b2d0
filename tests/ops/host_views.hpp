// Shared by the ops' validation tests: views of host memory that stand in for device memory.
// Validation and the device check come before any launch, so nothing ever reads or writes it.
#pragma once

#include <cstdint>

#include "coda/core/tensor.hpp"

namespace coda::test {

alignas(256) inline unsigned char memory[1 << 20];

/// rows x cols of `dtype`, rows packed.
inline TensorView tile(int64_t rows, int64_t cols, DType dtype = DType::bf16) {
  return TensorView::matrix(memory, dtype, rows, cols);
}
/// n elements of `dtype`.
inline TensorView vec(int64_t n, DType dtype = DType::f32) { return TensorView::vector(memory, dtype, n); }

}  // namespace coda::test

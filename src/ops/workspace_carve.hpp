// Internal: a workspace carved into sub-buffers at 256-byte boundaries, for the ops and the blocks.
// One function per op or block lays its workspace out with it, so the size query and the call agree
// by construction: called with no base it only counts.
#pragma once

#include <cstddef>
#include <cstdint>

#include "coda/core/tensor.hpp"

namespace coda::ops {

class Carve {
 public:
  explicit Carve(void* base) : base_(static_cast<char*>(base)) {}

  /// The next `bytes` (null while only counting).
  void* take(std::size_t bytes) {
    offset_ = aligned(offset_);
    void* p = base_ ? base_ + offset_ : nullptr;
    offset_ += bytes;
    return p;
  }
  /// A rows x cols matrix of `dtype`, rows packed.
  TensorView matrix(DType dtype, int64_t rows, int64_t cols) {
    return TensorView::matrix(take(std::size_t(rows * cols) * size_of(dtype)), dtype, rows, cols);
  }
  /// Bytes taken so far.
  std::size_t used() const { return aligned(offset_); }
  /// Go back to `offset` (a region whose buffers are no longer live is reused).
  void rewind(std::size_t offset) { offset_ = offset; }

 private:
  static std::size_t aligned(std::size_t n) { return (n + 255) / 256 * 256; }
  char* base_;
  std::size_t offset_ = 0;
};

}  // namespace coda::ops

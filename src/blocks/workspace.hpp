// Internal: the blocks' workspaces, carved into sub-buffers at 256-byte boundaries. One function
// per block lays its workspace out, so the size query and the call agree by construction: called
// with no base it only counts.
#pragma once

#include <cstddef>
#include <cstdint>

#include "coda/core/tensor.hpp"
#include "coda/ops/rmsnorm.hpp"

namespace coda::blocks::detail {

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

/// What one RMSNorm's backward needs besides its gradients (ops/rmsnorm.hpp): the correction c'
/// and the norm weight's column partials, sized for T rows and the widest GEMM after the norm.
struct NormBackwardScratch {
  void* correction = nullptr;
  std::size_t correction_bytes = 0;
  void* weight_partials = nullptr;
  std::size_t weight_partials_bytes = 0;
};

inline NormBackwardScratch carve_norm_backward(Carve& carve, int64_t tokens, int64_t widest_n2, int64_t hidden) {
  NormBackwardScratch s;
  s.correction_bytes = ops::residual_rmsnorm_backward_workspace_bytes(tokens);
  s.correction = carve.take(s.correction_bytes);
  s.weight_partials_bytes = ops::rmsnorm_weight_gradients_workspace_bytes(widest_n2, hidden);
  s.weight_partials = carve.take(s.weight_partials_bytes);
  return s;
}

}  // namespace coda::blocks::detail

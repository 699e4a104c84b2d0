// Internal: what the blocks' workspaces hold besides their own buffers (each block lays its
// workspace out with ops::Carve, ops/workspace_carve.hpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "coda/core/tensor.hpp"
#include "coda/ops/rmsnorm.hpp"
#include "ops/workspace_carve.hpp"

namespace coda::blocks::detail {

/// What one RMSNorm's backward needs besides its gradients (ops/rmsnorm.hpp): the correction c'
/// and the norm weight's column partials, sized for T rows and the widest GEMM after the norm.
struct NormBackwardScratch {
  void* correction = nullptr;
  std::size_t correction_bytes = 0;
  void* weight_partials = nullptr;
  std::size_t weight_partials_bytes = 0;
};

inline NormBackwardScratch carve_norm_backward(ops::Carve& carve, int64_t tokens, int64_t widest_n2, int64_t hidden) {
  NormBackwardScratch s;
  s.correction_bytes = ops::residual_rmsnorm_backward_workspace_bytes(tokens);
  s.correction = carve.take(s.correction_bytes);
  s.weight_partials_bytes = ops::rmsnorm_weight_gradients_workspace_bytes(widest_n2, hidden);
  s.weight_partials = carve.take(s.weight_partials_bytes);
  return s;
}

}  // namespace coda::blocks::detail

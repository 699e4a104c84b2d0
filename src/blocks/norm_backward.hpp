// Internal: one RMSNorm's backward inside a block (docs/kernels.md, "Backward"): the norm's input
// gradient and the gradients of the GEMM after the norm and of the norm's weight.
#pragma once

#include <cuda_runtime_api.h>

#include "blocks/workspace.hpp"
#include "coda/core/tensor.hpp"
#include "coda/ops/rmsnorm.hpp"

namespace coda::blocks::detail {

/// Given dZs = rstd dZ (the gradient of the GEMM after the norm, as the op producing it stores it)
/// and the row partials of <dZ, Z>: grad_h = grad_residual + RMSNorm'(h) (dZs W2), then dW2 and dg
/// from one GEMM dZs^T h.
inline void norm_backward(const TensorView& grad_z_scaled, const TensorView& w2, const TensorView& h,
                          const TensorView& norm_weight, const TensorView& rstd, const TensorView& row_dots,
                          const TensorView& grad_residual, const TensorView& grad_h, const TensorView& grad_w2,
                          const TensorView& grad_norm_weight, const NormBackwardScratch& scratch,
                          cudaStream_t stream) {
  ops::gemm_residual_rmsnorm_backward(grad_z_scaled, w2, h, norm_weight, rstd, row_dots, grad_h, scratch.correction,
                                      scratch.correction_bytes, stream,
                                      {.grad_residual = grad_residual, .grad_output_scaled = true, .gemm = {}});
  ops::gemm_rmsnorm_weight_gradients(grad_z_scaled, h, w2, norm_weight, grad_w2, grad_norm_weight,
                                     scratch.weight_partials, scratch.weight_partials_bytes, stream);
}

}  // namespace coda::blocks::detail

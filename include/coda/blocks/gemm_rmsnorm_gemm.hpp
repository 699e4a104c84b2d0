// coda/blocks/gemm_rmsnorm_gemm.hpp: the GEMM–residual–RMSNorm–GEMM pair (docs/kernels.md), forward
// and backward, as coda's fused ops; the layer block (layer.hpp) is two of these and more.
//
//   h = r + x W1^T,  z = RMSNorm(h; g) W2^T
//
// Forward: one GEMM stores h, U = h g and the row partials of sum h^2; the second scales its rows
// by rstd (the norm moved across the GEMM boundary). Backward, given dz (and the gradient reaching
// h from later layers, if any): dz's row partials of <dz, z> and rstd dz, then one GEMM each for
// dh (the norm's backward in its epilogue), dW2 and dg (one GEMM), dx and dW1. No allocation, one
// stream, capturable in a CUDA graph; the workspace size is known up front:
//
//   coda::blocks::NormPairWeights w{w1, g, w2, /*eps=*/1e-6f};          // H x K, H, N2 x H
//   coda::blocks::NormPairSaved saved{h, rstd};                          // T x H, T (f32)
//   std::size_t bytes = coda::blocks::gemm_rmsnorm_gemm_workspace_bytes(w, tokens);
//   coda::blocks::gemm_rmsnorm_gemm_forward(w, x, r, z, saved, ws, bytes, stream);
//   coda::blocks::gemm_rmsnorm_gemm_backward(w, x, z, saved, dz, /*grad_h=*/{}, grads, ws, bytes, stream);
//
// x, r, z, h, the weights and their gradients are bf16 or f16 (one type; weight gradients may be
// f32); g f32, bf16 or f16; H and N2 multiples of 8, K too; any T >= 1.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "coda/core/api.hpp"
#include "coda/core/status.hpp"
#include "coda/core/tensor.hpp"

namespace coda::blocks {

struct NormPairWeights {
  TensorView w1;    // H x K, nn.Linear layout
  TensorView norm;  // g, H
  TensorView w2;    // N2 x H
  float eps = 1e-6f;
};

/// What the forward keeps for the backward (besides its output z and its input x).
struct NormPairSaved {
  TensorView h;     // T x H, the new residual stream (also the forward's output)
  TensorView rstd;  // f32, T
};

/// Where the backward writes each gradient.
struct NormPairGradients {
  TensorView x;         // T x K
  TensorView residual;  // dr = dh, T x H
  TensorView w1;        // H x K
  TensorView norm;      // H
  TensorView w2;        // N2 x H
};

/// Bytes of the workspace both calls need for `tokens` tokens (any contents). Checks the weights.
CODA_API std::size_t gemm_rmsnorm_gemm_workspace_bytes(const NormPairWeights& weights, int64_t tokens);

/// z (T x N2) and saved.h, saved.rstd from x (T x K) and the residual r (T x H).
CODA_API void gemm_rmsnorm_gemm_forward(const NormPairWeights& weights, const TensorView& x, const TensorView& residual,
                                        const TensorView& z, const NormPairSaved& saved, void* workspace,
                                        std::size_t workspace_bytes, cudaStream_t stream = nullptr);
CODA_API Status try_gemm_rmsnorm_gemm_forward(const NormPairWeights& weights, const TensorView& x,
                                              const TensorView& residual, const TensorView& z,
                                              const NormPairSaved& saved, void* workspace, std::size_t workspace_bytes,
                                              cudaStream_t stream = nullptr);

/// Every gradient from grad_z (T x N2) and, when given (data not null), grad_h: the gradient that
/// reaches h from later layers (T x H), added to dh.
CODA_API void gemm_rmsnorm_gemm_backward(const NormPairWeights& weights, const TensorView& x, const TensorView& z,
                                         const NormPairSaved& saved, const TensorView& grad_z, const TensorView& grad_h,
                                         const NormPairGradients& grads, void* workspace, std::size_t workspace_bytes,
                                         cudaStream_t stream = nullptr);
CODA_API Status try_gemm_rmsnorm_gemm_backward(const NormPairWeights& weights, const TensorView& x, const TensorView& z,
                                               const NormPairSaved& saved, const TensorView& grad_z,
                                               const TensorView& grad_h, const NormPairGradients& grads,
                                               void* workspace, std::size_t workspace_bytes,
                                               cudaStream_t stream = nullptr);

}  // namespace coda::blocks

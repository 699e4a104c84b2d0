// coda/ops/rmsnorm.hpp: the GEMM-residual-RMSNorm-GEMM pattern: GEMM + residual + RMSNorm partials,
// then GEMM + row scale.
//
//   // h = x W1^T + residual (the new residual stream), u = h * g, rstd = rsqrt(mean(h^2) + eps)
//   std::size_t bytes = coda::ops::residual_rmsnorm_workspace_bytes(tokens, hidden);
//   coda::ops::gemm_residual_rmsnorm(x, w1, residual, g, 1e-6f, h, u, rstd, workspace, bytes, stream);
//   // RMSNorm(h) W2^T, without ever normalizing h: rstd is one scalar per row, so it commutes
//   coda::ops::gemm_row_scale(u, w2, rstd, z, stream);
//
// x, w1, residual, h, u share one type (bf16 or f16); g is f32, bf16 or f16; rstd f32. The
// workspace holds the per-part sums of squares: residual_rmsnorm_workspace_bytes(M, N), any
// contents (every byte the op reads, it writes first).
//
// u is optional: g scales along W2's K, so it can be folded into W2 once (W2' = W2 diag(g)) and
// the second GEMM read h itself; with an empty u (data null) U is not stored and g not read (it
// may be empty too), a third less memory traffic in the epilogue:
//
//   coda::ops::gemm_residual_rmsnorm(x, w1, residual, {}, 1e-6f, h, {}, rstd, workspace, bytes, stream);
//   coda::ops::gemm_row_scale(h, w2_times_g, rstd, z, stream);
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "coda/core/api.hpp"
#include "coda/core/status.hpp"
#include "coda/core/tensor.hpp"
#include "coda/gemm.hpp"

namespace coda::ops {

struct ResidualRmsNormOptions {
  GemmOptions gemm;
};

struct RowScaleOptions {
  GemmOptions gemm;
};

/// Bytes of the workspace gemm_residual_rmsnorm needs for M x N outputs (M, N >= 1).
CODA_API std::size_t residual_rmsnorm_workspace_bytes(int64_t m, int64_t n);

/// h = X W^T + residual, u = h * weight, rstd = rsqrt(mean(h^2) + eps). h, u: M x N (u optional:
/// data null, not stored); rstd: M (f32).
CODA_API void gemm_residual_rmsnorm(const TensorView& x, const TensorView& w, const TensorView& residual,
                                    const TensorView& weight, float eps, const TensorView& h, const TensorView& u,
                                    const TensorView& rstd, void* workspace, std::size_t workspace_bytes,
                                    cudaStream_t stream = nullptr, const ResidualRmsNormOptions& options = {});
CODA_API Status try_gemm_residual_rmsnorm(const TensorView& x, const TensorView& w, const TensorView& residual,
                                          const TensorView& weight, float eps, const TensorView& h, const TensorView& u,
                                          const TensorView& rstd, void* workspace, std::size_t workspace_bytes,
                                          cudaStream_t stream = nullptr, const ResidualRmsNormOptions& options = {});

/// out = rstd[m] * (X W^T): the GEMM after an RMSNorm, the normalization moved past it.
CODA_API void gemm_row_scale(const TensorView& x, const TensorView& w, const TensorView& rstd, const TensorView& out,
                             cudaStream_t stream = nullptr, const RowScaleOptions& options = {});
CODA_API Status try_gemm_row_scale(const TensorView& x, const TensorView& w, const TensorView& rstd,
                                   const TensorView& out, cudaStream_t stream = nullptr,
                                   const RowScaleOptions& options = {});

}  // namespace coda::ops

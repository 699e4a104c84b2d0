// coda/ops/cross_entropy.hpp: LM head + cross-entropy without the logits (with a row scale: the LM
// head after the final RMSNorm).
//
//   std::size_t bytes = coda::ops::cross_entropy_workspace_bytes(tokens, vocab, options);
//   coda::ops::gemm_cross_entropy(x, w_lm_head, targets, loss, lse, workspace, bytes, stream, options);
//
// The GEMM's epilogue reduces each tile of logits to per-row partials (log-sum-exp, the target
// logit, the row sum for label smoothing); two tiny kernels finish the loss. The M x V logits are
// never written unless options.logits asks for them. Losses follow PyTorch: with Y the
// (soft-capped) logits, lse = logsumexp(Y), t the target, eps the label smoothing, lambda z_loss:
//   loss[m] = lse - (1 - eps) Y[t] - (eps / V) sum_n Y + lambda lse^2,  0 for ignored rows
// reduction none: loss is M floats; sum: one float; mean: one float, over the non-ignored rows
// (NaN when there are none). A target outside [0, V) other than ignore_index makes its loss NaN.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "coda/core/api.hpp"
#include "coda/core/status.hpp"
#include "coda/core/tensor.hpp"
#include "coda/gemm.hpp"

namespace coda::ops {

enum class LossReduction : uint8_t { none, sum, mean };

struct CrossEntropyOptions {
  int32_t ignore_index = -100;
  float label_smoothing = 0.0f;  // in [0, 1)
  float z_loss = 0.0f;           // >= 0
  float softcap = 0.0f;          // > 0: Y -> cap * tanh(Y / cap) before everything; 0: off
  LossReduction reduction = LossReduction::mean;
  TensorView row_scale;          // optional f32 (M): the final RMSNorm's rstd (rmsnorm.hpp)
  TensorView logits;             // optional: also store the (capped) logits, M x V, x's type
  GemmOptions gemm;
};

/// Bytes of the workspace gemm_cross_entropy needs (M, vocab >= 1); any contents will do.
CODA_API std::size_t cross_entropy_workspace_bytes(int64_t m, int64_t vocab, const CrossEntropyOptions& options = {});

/// x (M x K), w (V x K), targets (M, int32); loss (f32: M for reduction none, else 1); lse (f32,
/// M: log-sum-exp of each row, what the backward recomputes softmax from).
CODA_API void gemm_cross_entropy(const TensorView& x, const TensorView& w, const TensorView& targets,
                                 const TensorView& loss, const TensorView& lse, void* workspace,
                                 std::size_t workspace_bytes, cudaStream_t stream = nullptr,
                                 const CrossEntropyOptions& options = {});
CODA_API Status try_gemm_cross_entropy(const TensorView& x, const TensorView& w, const TensorView& targets,
                                       const TensorView& loss, const TensorView& lse, void* workspace,
                                       std::size_t workspace_bytes, cudaStream_t stream = nullptr,
                                       const CrossEntropyOptions& options = {});

}  // namespace coda::ops

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
//
// The backward, from the forward's lse, with the same options, never holding the M x V logits or
// their gradient (docs/kernels.md "Cross-entropy backward"):
//
//   std::size_t bytes = coda::ops::cross_entropy_backward_workspace_bytes(tokens, vocab, hidden);
//   coda::ops::gemm_cross_entropy_backward(x, w_lm_head, targets, lse, grad_loss, grad_x, grad_w,
//                                          workspace, bytes, stream, options);
//
// It runs over chunks of the vocabulary, three GEMMs each: the chunk's logits recomputed with
// their gradient dZ as the epilogue (stored in the workspace, M x chunk), dW[chunk] = dZ^T x
// (written once, no accumulator), and dX += dZ W[chunk] (an f32 running sum in the workspace,
// in a fixed chunk order: the same bits run after run, no atomics). The work is four GEMMs of the
// forward's size with the forward; the workspace holds 4 floats a row, M x chunk 16-bit values and,
// with more than one chunk, the M x K f32 sum. options.gemm applies to the logits GEMM; the dW and
// dX GEMMs run with the defaults. With backward.skip_below > 0 the dW and dX products leave out
// the blocks of dZ that softmax makes negligible (CrossEntropyBackwardOptions::skip_below, its bound),
// on the m128n256 tile; the workspace then also holds each chunk's row maxima (M x chunk / 128
// floats) and two masks of a few KB:
//
//   coda::ops::CrossEntropyBackwardOptions backward{.skip_below = 0x1p-12f};
//
// Where memory allows, keep the forward's logits and skip the recompute (three GEMMs instead of
// four; CrossEntropyBackwardOptions::logits):
//
//   options.logits = logits;                                   // M x V, x's type
//   coda::ops::gemm_cross_entropy(x, w_lm_head, targets, loss, lse, ws, bytes, stream, options);
//   options.logits = {};
//   coda::ops::CrossEntropyBackwardOptions backward{.logits = logits, .grad_logits = logits};  // in place
//   std::size_t bytes = coda::ops::cross_entropy_backward_workspace_bytes(tokens, vocab, hidden, backward);
//   coda::ops::gemm_cross_entropy_backward(x, w_lm_head, targets, lse, grad_loss, grad_x, grad_w,
//                                          workspace, bytes, stream, options, backward);
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

struct CrossEntropyBackwardOptions {
  // Optional f32, M x row_partial_count(V) (rmsnorm.hpp): row partials of <dZ, Z>, Z the GEMM's
  // output after the row scale (before soft-capping): the statistic of the final RMSNorm's backward
  // (gemm_residual_rmsnorm_backward's row_dots).
  TensorView row_dots{};
  // Vocabulary columns per chunk, a multiple of 128 (the last chunk takes the rest); 0: chosen for
  // the GPU (cross_entropy_backward_chunk_columns). The workspace query takes the same value.
  int64_t chunk_columns = 0;
  // Optional: the forward's stored logits (CrossEntropyOptions::logits of gemm_cross_entropy, M x V,
  // x's type, the same options). With them the backward reads each logit instead of recomputing it:
  // dZ = f(logits) into grad_logits in one pass, then dW = dZ^T x and dX = dZ w over the whole
  // vocabulary: three GEMMs of the forward's size with the forward where recomputing takes four,
  // for M x V 16-bit values of memory (PyTorch's and torch.compile's trade). chunk_columns must be 0.
  // The logits are bf16/f16-rounded, so dZ follows them as PyTorch's bf16 gradient does (the
  // recomputing path reads fp32 accumulators). With a soft-cap, row_dots needs the logits before the
  // cap and is refused.
  TensorView logits{};
  // With logits: where dZ goes (M x V, x's type; times the row scale), logits itself (in place: the
  // logits are consumed) or another buffer; rows 16-byte aligned like the logits'.
  TensorView grad_logits{};
  // Skip threshold tau, in [0, 1) (0: off, every block computed). Above 0 the recomputing backward
  // leaves out of dW = dZ^T x and dX = dZ w every block of dZ (256 rows x 64 columns of the
  // vocabulary, and 256 vocabulary rows x 64 tokens) whose every element is bounded by
  // |dZ[m, n]| <= tau |g[m]| row_scale[m] (g the gradient reaching row m's loss), judged from the
  // largest logit of each 128-column part: softmax below tau and not the target. The error this
  // leaves is bounded element by element (docs/kernels.md, "Skipping"):
  //   |dX[m, k] - exact| <= tau |g[m]| row_scale[m] sum_{n skipped in row m} |w[n, k]|
  //   |dW[n, k] - exact| <= tau sum_{m skipped in column n} |g[m]| row_scale[m] |x[m, k]|
  // Ignored rows (g = 0) are skipped exactly. Deterministic: the masks are integer ORs and the
  // products keep their order. Apple's Cut Cross-Entropy skips at 2^-12 in bf16; its win is the
  // fraction of blocks a peaked softmax leaves out. Not with stored logits.
  float skip_below = 0.0f;
};

/// The chunk width the backward picks for M rows, a vocabulary of V and K columns of x: what fits a
/// workspace of 192 MiB beside the M x K f32 running sum of dX (M x chunk 16-bit values), but at
/// least 1024 columns (so the workspace grows past 192 MiB where M x K x 4 bytes nears it) and at
/// most V rounded up to 128 (one chunk: no running sum).
CODA_API int64_t cross_entropy_backward_chunk_columns(int64_t m, int64_t vocab, int64_t k);

/// Bytes of the workspace gemm_cross_entropy_backward needs (M, vocab, k >= 1); any contents. With
/// backward.logits set (only its address is read): 16 bytes a row.
CODA_API std::size_t cross_entropy_backward_workspace_bytes(int64_t m, int64_t vocab, int64_t k,
                                                            const CrossEntropyBackwardOptions& backward = {});

/// dX (M x K) and dW (V x K) of the loss gemm_cross_entropy computed with the same x, w, targets
/// and options. lse: its f32 output (M). grad_loss: the gradient reaching the loss, f32 on the
/// device (never read on the host): M values for reduction none, else one (sum: every row's; mean:
/// divided by the number of non-ignored rows, counted on the device). grad_x is of x's type or
/// f32, grad_w of w's type or f32. Ignored rows contribute nothing; a target outside [0, V) that is
/// not ignore_index makes its row of dZ NaN (and so dW). options.logits must be empty.
CODA_API void gemm_cross_entropy_backward(const TensorView& x, const TensorView& w, const TensorView& targets,
                                          const TensorView& lse, const TensorView& grad_loss,
                                          const TensorView& grad_x, const TensorView& grad_w, void* workspace,
                                          std::size_t workspace_bytes, cudaStream_t stream = nullptr,
                                          const CrossEntropyOptions& options = {},
                                          const CrossEntropyBackwardOptions& backward = {});
CODA_API Status try_gemm_cross_entropy_backward(const TensorView& x, const TensorView& w, const TensorView& targets,
                                                const TensorView& lse, const TensorView& grad_loss,
                                                const TensorView& grad_x, const TensorView& grad_w, void* workspace,
                                                std::size_t workspace_bytes, cudaStream_t stream = nullptr,
                                                const CrossEntropyOptions& options = {},
                                                const CrossEntropyBackwardOptions& backward = {});

}  // namespace coda::ops

// coda/reference/cross_entropy.hpp: the fp64 reference of GEMM + partial cross-entropy
// (LM head + cross-entropy), its final reduction, the same loss computed directly, and its backward.
//
//   CrossEntropyOptions opt{.label_smoothing = 0.1, .z_loss = 1e-4};
//   CrossEntropyPartials p = coda::reference::cross_entropy_partials(logits, targets, /*bn=*/256, opt);
//   CrossEntropyLoss loss  = coda::reference::cross_entropy_finish(p, targets, vocab, opt);
//   // == coda::reference::cross_entropy(logits, targets, opt), for any bn
//   CrossEntropyBackward g = coda::reference::cross_entropy_backward(logits, targets, loss.lse, {1.0}, 256, opt);
//
// Definitions, with Y the logits after soft-capping (Y = cap*tanh(Z/cap) of the raw GEMM output Z
// when softcap > 0, applied before everything: lse, the target logit and the row sums), V the
// vocabulary, t = target[m], eps the label smoothing and lambda the z-loss weight:
//   lse[m]  = log sum_n exp(Y[m, n])
//   loss[m] = lse - (1 - eps) * Y[m, t] - (eps / V) * sum_n Y[m, n] + lambda * lse^2
// (PyTorch's label smoothing: (1 - eps) * NLL + eps * mean_n(-log p_n), plus PaLM's z-loss).
// Rows whose target is ignore_index have loss 0 and leave the mean. reduction mean divides by the
// number of non-ignored rows; with none left it is NaN (0/0), as PyTorch returns.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "coda/reference/matrix.hpp"

namespace coda::reference {

enum class LossReduction { none, sum, mean };

struct CrossEntropyOptions {
  int32_t ignore_index = -100;   // rows with this target are ignored (it may also be a valid class)
  double label_smoothing = 0.0;  // eps in [0, 1)
  double z_loss = 0.0;           // lambda >= 0
  double softcap = 0.0;          // cap > 0 turns soft-capping on; 0 = off
  LossReduction reduction = LossReduction::mean;
};

/// Kernel 3's per-tile outputs over column tiles of width bn (the last may be narrower).
struct CrossEntropyPartials {
  Matrix lse;           // M x ceil(V/bn): max_b + log sum_{n in b} exp(Y - max_b)
  Matrix row_sums;      // M x ceil(V/bn): sum_{n in b} Y (label smoothing needs sum_n Y)
  Vector target_logit;  // M: Y[m, target[m]] (written by the tile holding it); 0 on ignored rows
};

/// Targets: one per row, each in [0, V) or equal to options.ignore_index.
CrossEntropyPartials cross_entropy_partials(const Matrix& logits, const std::vector<int32_t>& targets, int64_t bn,
                                            const CrossEntropyOptions& options);

struct CrossEntropyLoss {
  Vector per_row;                 // loss[m]; 0 on ignored rows (reduction none's output)
  Vector lse;                     // lse[m] of the (capped) logits, every row; saved for backward
  int64_t valid_rows = 0;         // rows whose target is not ignore_index
  std::optional<double> reduced;  // the sum or the mean of per_row; empty for reduction none
};

/// The final (tiny) reduction: lse[m] = logsumexp_b lse_part[m, b] (tiles in order), then the loss.
CrossEntropyLoss cross_entropy_finish(const CrossEntropyPartials& partials, const std::vector<int32_t>& targets,
                                      int64_t vocab, const CrossEntropyOptions& options);

/// The same loss straight from the logits, one whole row at a time.
CrossEntropyLoss cross_entropy(const Matrix& logits, const std::vector<int32_t>& targets,
                               const CrossEntropyOptions& options);

struct CrossEntropyBackward {
  Matrix grad_logits;   // dL/dZ, M x V, Z the raw (pre-softcap) logits; 0 on ignored rows
  Matrix row_partials;  // M x ceil(V/bn): sum over the tile of Z * dZ, the statistic <dZ, Z> the final
                        // RMSNorm's backward needs (Z is the GEMM output it feeds, so pre-softcap)
};

/// The backward, recomputed from the raw logits and the saved lse. With p = exp(Y - lse) and
/// q = (1 - eps) * onehot(t) + eps / V:
///   dY[m, n] = (p - q + 2 * lambda * lse * p) * dloss[m]
///   dZ = dY * (1 - tanh^2(Z / cap)) when soft-capped, else dZ = dY
/// dloss[m] comes from grad_output: reduction none: grad_output[m] (length M); sum: g; mean:
/// g / valid_rows (grad_output = {g}, length 1); ignored rows get 0.
CrossEntropyBackward cross_entropy_backward(const Matrix& logits, const std::vector<int32_t>& targets,
                                            const Vector& lse, const Vector& grad_output, int64_t bn,
                                            const CrossEntropyOptions& options);

}  // namespace coda::reference

// coda/epilogue/programs/cross_entropy.hpp: GEMM + partial cross-entropy (with a row scale: the LM
// head after the final RMSNorm; docs/kernels.md).
//
// Per row m and part b of the logits Y (M x V), with Y soft-capped first when softcap > 0
// (Y -> cap * tanh(Y / cap)):
//   lse[m, b]      = max_b + log sum_{n in b} exp(Y - max_b)   (online, LogSumExp monoid)
//   target[m]      = Y[m, target[m]]                           (written by the part holding it)
//   row_sums[m, b] = sum_{n in b} Y                            (optional: label smoothing)
// The logits themselves are stored only if asked. The final (tiny) reduction turns these into
// the loss (ops/cross_entropy.hpp).
//
// Backward (CrossEntropyBackward): the gradient of the loss with respect to Z, the GEMM's output
// after the row scale and before soft-capping, recomputed tile by tile from the forward's lse, so
// the logits are never kept. With Y = cap tanh(Z / cap) (or Z), p = exp(Y - lse[m]), t the target,
// eps the label smoothing, lambda the z-loss weight and g[m] the gradient reaching row m's loss:
//   dY = g (1 + 2 lambda lse) p - g ((1 - eps) [n == t] + eps / V)
//   dZ = dY (1 - (Y / cap)^2)   (soft-capped; else dZ = dY)
// The per-row factors come precomputed (RowFactor; 0 on ignored rows); dZ is stored
// times the row scale (rstd: the operand of both GEMMs of the backward), and the row partials of
// <dZ, Z> are the statistic the final RMSNorm's backward needs (docs/kernels.md).
#pragma once

#include <cmath>

#include "coda/epilogue/program.hpp"

namespace coda::epilogue {

struct CrossEntropyPartials {
  ColumnVector targets{};      // int32, M (ignore_index rows simply match no column)
  Partials lse{};              // M x parts along V
  Partials target_logit{};     // M (tile_stride 0: one slot per row)
  Partials row_sums{};         // optional, M x parts
  TileOut logits{};            // optional, M x V
  ColumnVector row_scale{};    // optional: the final RMSNorm's rstd
  float softcap = 0.0f;      // > 0: soft-capping on

  template <class Tile>
  CODA_HD void operator()(Tile& t) const {
    if (row_scale.data) t.map([&](Element& x) { x.value *= t.load(row_scale, x); });
    if (softcap > 0.0f) {
      // One division per tile, not per element: in SASS an IEEE division is a call to its slow
      // path, and with 128 of them the kernel's K loop fell out of the uniform datapath (an R2UR
      // before every wgmma; the loop then competes for issue with the other consumer's epilogue).
      const float inverse_softcap = 1.0f / softcap;
      t.map([&](Element& x) { x.value = softcap * tanhf(x.value * inverse_softcap); });
    }
    if (logits.data) t.store(logits);
    t.row_reduce(lse, LogSumExp{}, [](const Element& x) { return x.value; });
    t.row_reduce(target_logit, Pick{}, [&](const Element& x) {
      return Pick::State{x.value, x.col == t.load_index(targets, x)};
    });
    if (row_sums.data) t.row_reduce(row_sums, Sum{}, [](const Element& x) { return x.value; });
  }
};

/// The per-row factors CrossEntropyBackward reads, one row of its `row_factors` table per row: with g
/// the gradient reaching the row's loss (0 on ignored rows, NaN for a target outside the vocabulary),
/// lse log2(e), g (1 + 2 lambda lse), g eps / V and g (1 - eps).
enum RowFactor : int32_t { kLseLog2 = 0, kSoftmaxScale = 1, kSmoothing = 2, kTarget = 3, kRowFactors = 4 };

/// Row `row` (kRowFactors floats) of that table for a row with log-sum-exp `lse` and gradient `g`
/// reaching its loss (the op's row_factors kernel; the CPU tests and the demo).
CODA_HD void write_row_factors(float* row, float lse, float g, float z_loss, float label_smoothing, int64_t vocab) {
  row[kLseLog2] = lse * kLog2e;
  row[kSoftmaxScale] = g * (1.0f + 2.0f * z_loss * lse);
  row[kSmoothing] = g * (label_smoothing / float(vocab));
  row[kTarget] = g * (1.0f - label_smoothing);
}

/// dY of one logit y from its row's factors (a row of the row_factors table) and whether its column is
/// the row's target: g (1 + 2 lambda lse) p - g eps / V - g (1 - eps) [n == t], p = exp(y - lse).
/// The one home of the formula: CrossEntropyBackward's epilogue and the backward from stored logits
/// (ops/cross_entropy.hpp) both call it.
CODA_HD float cross_entropy_gradient(float y, float lse_log2, float softmax_scale, float smoothing, float target,
                                     bool is_target) {
  const float dy = softmax_scale * exp2_approx(y * kLog2e - lse_log2) - smoothing;
  return is_target ? dy - target : dy;
}

/// dZ through the soft-cap from the capped logit y = cap tanh(z / cap) and its dY: dY (1 - (y / cap)^2).
CODA_HD float softcap_slope(float y, float inverse_softcap) {
  const float tanh_value = y * inverse_softcap;
  return 1.0f - tanh_value * tanh_value;
}

struct CrossEntropyBackward {
  ColumnVector targets{};    // int32, M
  Table row_factors{};       // f32, M x kRowFactors (one batch; the op's row_factors kernel)
  ColumnVector row_scale{};  // optional: Z = rstd[m] * (X W^T), and dZ stored times rstd
  TileOut grad_logits{};     // dZ (times row_scale), M x (this launch's columns)
  Partials row_dots{};       // optional: M x parts, <dZ, Z> over the part (Z after the row scale,
                             // dZ before the stored rstd factor)
  Partials row_max{};        // optional: M x parts, the largest Z of the part (after the row scale,
                             // before the cap): what the op's skip masks bound softmax by
  float softcap = 0.0f;      // > 0: soft-capping on
  int32_t first_column = 0;  // the vocabulary column of this launch's column 0 (a chunk of V)

  // dY at x from the logit y: g (1 + 2 lambda lse) p - g eps / V - g (1 - eps) [n == t], five
  // instructions per element (the code runs once per tile: its length bounds the epilogue).
  template <class Tile>
  CODA_HD float gradient(const Tile& t, const Element& x, float y) const {
    return cross_entropy_gradient(y, t.load(row_factors, x.row, kLseLog2), t.load(row_factors, x.row, kSoftmaxScale),
                                  t.load(row_factors, x.row, kSmoothing), t.load(row_factors, x.row, kTarget),
                                  x.col + first_column == t.load_index(targets, x));
  }

  // dZ at x (whose value is Z) through the soft-cap: dY (1 - (Y / cap)^2), Y = cap tanh(Z / cap).
  template <class Tile>
  CODA_HD float capped_gradient(const Tile& t, const Element& x, float inverse_softcap) const {
    const float tanh_value = tanhf(x.value * inverse_softcap);
    return gradient(t, x, softcap * tanh_value) * (1.0f - tanh_value * tanh_value);
  }

  template <class Tile>
  CODA_HD void operator()(Tile& t) const {
    if (row_scale.data) t.map([&](Element& x) { x.value *= t.load(row_scale, x); });
    if (row_max.data) t.row_reduce(row_max, Max{}, [](const Element& x) { return x.value; });
    if (softcap > 0.0f) {
      const float inverse_softcap = 1.0f / softcap;  // once per tile (CrossEntropyPartials says why)
      if (row_dots.data)
        t.row_reduce(row_dots, Sum{},
                     [&](const Element& x) { return x.value * capped_gradient(t, x, inverse_softcap); });
      t.map([&](Element& x) { x.value = capped_gradient(t, x, inverse_softcap); });
    } else {
      if (row_dots.data)
        t.row_reduce(row_dots, Sum{}, [&](const Element& x) { return x.value * gradient(t, x, x.value); });
      t.map([&](Element& x) { x.value = gradient(t, x, x.value); });
    }
    if (row_scale.data) t.map([&](Element& x) { x.value *= t.load(row_scale, x); });
    t.store(grad_logits);
  }
};

}  // namespace coda::epilogue

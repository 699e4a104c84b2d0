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

}  // namespace coda::epilogue

// coda/epilogue/programs/swiglu.hpp: GEMM + SwiGLU (with a row scale: after an RMSNorm; docs/kernels.md).
//
// The GEMM's weight rows are interleaved (gate_0, up_0, gate_1, up_1, ...), so each gate sits
// next to its up value in the accumulators: O[m, j] = silu(Y[m, 2j]) * Y[m, 2j + 1], a 2 -> 1
// pairwise map with a half-width output. Optionally Y is stored too (for the backward), and
// scaled first by a per-row factor (rstd: the RMSNorm before the MLP).
#pragma once

#include "coda/epilogue/program.hpp"

namespace coda::epilogue {

struct Swiglu {
  TileOut out{};             // M x N/2
  TileOut pre_activation{};  // optional (data null: not stored): Y, M x N
  ColumnVector row_scale{};  // optional: Y = rstd[m] * (X W^T)
  // On a companion SM (program.hpp), against the ping-pong tile: H100, K = 2048, both launches side
  // by side, 142 us per tile row on 12 SMs against 13.1 us on 120 (docs/performance.md).
  static constexpr double companion_speed = 0.92;

  template <class Tile>
  CODA_HD void operator()(Tile& t) const {
    if (row_scale.data) t.map([&](Element& x) { x.value *= t.load(row_scale, x); });
    if (pre_activation.data) t.store(pre_activation);
    t.store_pairs(out, [](const Pair& p) { return silu(p.first) * p.second; });
  }
};

}  // namespace coda::epilogue

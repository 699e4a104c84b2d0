// coda/epilogue/programs/swiglu.hpp: GEMM + SwiGLU (with a row scale: after an RMSNorm) and its
// backward; docs/kernels.md.
//
// Forward: the GEMM's weight rows are interleaved (gate_0, up_0, gate_1, up_1, ...), so each gate
// sits next to its up value in the accumulators: O[m, j] = silu(Y[m, 2j]) * Y[m, 2j + 1], a 2 -> 1
// pairwise map with a half-width output. Optionally Y is stored too (for the backward), and
// scaled first by a per-row factor (rstd: the RMSNorm before the MLP).
//
// Backward: the GEMM dO = dP W_down (M x F; dP the gradient of the down projection's output) feeds
// SwigluBackward, which reads the saved Y (M x 2F) and stores dY interleaved, a 1 -> 2 map:
//   dY[m, 2j] = dO u s (1 + g (1 - s)),  dY[m, 2j + 1] = dO g s,  (g, u) = Y's pair, s = sigmoid(g)
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

/// (dG, dU) for the gradient `d` of silu(g) * u: d u s (1 + g (1 - s)) and d g s, s = sigmoid(g).
CODA_HD Values2 swiglu_gradient(float d, const Values2& gate_up) {
  const float g = gate_up.first, u = gate_up.second;
  const SigmoidAndComplement s = sigmoid_and_complement(g);
  return {d * u * s.value * (1.0f + g * s.complement), d * g * s.value};
}

struct SwigluBackward {
  TileIn pre_activation{};        // Y, M x 2F interleaved (Swiglu's pre_activation)
  TileOut grad_pre_activation{};  // dY, M x 2F interleaved (times row_scale when given)
  Partials row_dots{};            // optional: M x parts, <dY, Y> over the part (before row_scale): the
                                  // statistic of the RMSNorm before the MLP (kernels.md)
  ColumnVector row_scale{};       // optional: dY stored times rstd[m], the A operand of both GEMMs of
                                  // that RMSNorm's backward
  TileOut output{};               // optional: O = silu(g) u recomputed, M x F, for dW_down = dP^T O

  // Y is read at the positions dY is stored: prefetched subtile by subtile (program.hpp).
  static constexpr auto prefetched_input = &SwigluBackward::pre_activation;

  template <class Inputs>
  CODA_HD void tile_inputs(Inputs& in) const {
    in(pre_activation);
  }

  template <class Tile>
  CODA_HD void operator()(Tile& t) const {
    if (output.data)
      t.store(output, [&](const Element& x) {
        const Values2 y = t.load_wide(pre_activation, x);
        return silu(y.first) * y.second;
      });
    if (row_scale.data) store_gradient(t, [&](const Element& x) { return t.load(row_scale, x); });
    else store_gradient(t, [](const Element&) { return 1.0f; });
  }

 private:
  // dY, computed once per element: stored times the row's scale (dY is linear in dO) and, with
  // row_dots, folded into <dY, Y> before the scale in the same pass.
  template <class Tile, class Scale>
  CODA_HD void store_gradient(Tile& t, Scale scale) const {
    const auto gradient = [&](const Element& x) {
      const Values2 y = t.load_wide(pre_activation, x), dy = swiglu_gradient(x.value, y);
      const float s = scale(x);
      return WideAndRowValue{{dy.first * s, dy.second * s}, y.first * dy.first + y.second * dy.second};
    };
    if (row_dots.data) t.store_wide_row_reduce(grad_pre_activation, row_dots, Sum{}, gradient);
    else t.store_wide(grad_pre_activation, [&](const Element& x) { return gradient(x).wide; });
  }
};

}  // namespace coda::epilogue

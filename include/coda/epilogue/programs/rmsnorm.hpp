// coda/epilogue/programs/rmsnorm.hpp: the first GEMM of the GEMM-residual-RMSNorm-GEMM pattern
// (ResidualRmsNorm), the row scale the second GEMM applies (RowScale), and the pattern's backward
// (ResidualRmsNormBackward, RmsNormWeightGradients); docs/kernels.md.
//
//   GEMM 1:    H = X W1^T + R   (store H: the new residual stream)
//              S[m, b] = sum over the part's columns of H^2   (fp32, from H before rounding)
//              U = H * g         (store U: the next GEMM's input; optional, see below)
//   aux:       rstd[m] = rsqrt(sum_b S[m, b] / N + eps)
//   GEMM 2:    Z = rstd[m] * (U W2^T)   == RMSNorm(H) W2^T, since rstd is one scalar per row
//
// g scales along the second GEMM's K, so it can live in that GEMM's weight instead: with
// W2' = W2 diag(g), Z = rstd[m] * (H W2'^T), and U need not exist (out.data null: not stored, a
// third less of the epilogue's memory traffic).
//
// Backward, given dZs = rstd ⊙ dZ (the epilogue producing dZ stores it scaled: SwigluBackward's and
// RopeBackward's row_scale) and the row partials of <dZ, Z> it also emits:
//   aux:       c'[m] = rstd[m]^2 <dZ[m], Z[m]> / N                     (from the partials)
//   GEMM:      D' = dZs W2   ->  ResidualRmsNormBackward:  dH = dH_out + D' ⊙ g - c' ⊙ H
//   GEMM:      G = dZs^T H   ->  RmsNormWeightGradients:  dW2 = G ⊙ g,  dg partials = sum_i G ⊙ W2
// dg comes from the weight-gradient GEMM (K = tokens: its epilogue is a sliver of its time) rather
// than from D' (there it would need H twice and a column reduction beside the dH store).
#pragma once

#include "coda/core/validate.hpp"
#include "coda/epilogue/program.hpp"

namespace coda::epilogue {

struct ResidualRmsNorm {
  TileIn residual{};       // R, M x N
  TileOut residual_out{};  // H, M x N
  Partials sum_squares{};  // S, M x parts along N
  RowVector weight{};      // g, N
  TileOut out{};           // U, M x N; optional (data null: not stored, g unread)

  template <class Inputs>
  CODA_HD void tile_inputs(Inputs& in) const {
    in(residual);
  }
  // Fetched into shared memory during the tile's MMAs (program.hpp): read straight from global
  // memory, the residual's 64 loads per thread were about half of the epilogue's time.
  static constexpr auto staged_input = &ResidualRmsNorm::residual;
  // Read once per part into registers (program.hpp): loaded in each store subtile, the weight's
  // loads were a third of the epilogue's time (coda bench timeline).
  static constexpr auto staged_row_vector = &ResidualRmsNorm::weight;
  // A companion launch (program.hpp) reads the residual from global memory. H100, coda bench ops,
  // the op with and without it side by side: 0.96 / 0.95 of its time alone at H = 4096 (with U /
  // without), 0.99 / 0.96 at H = 2048, sized at 0.7; at 0.6 the gain was half that, at 0.75 the same.
  static constexpr double companion_speed = 0.7;

  /// Host (launch_program and reference::run_epilogue call it): U is the weighted H, so it needs g.
  void check_arguments(ArgumentCheck& check) const {
    check.require(!out.data || weight.data, "weight", "is null, but U (out) is stored and is H * weight");
  }

  template <class Tile>
  CODA_HD void operator()(Tile& t) const {
    t.map([&](Element& x) { x.value += t.load(residual, x); });
    t.store(residual_out);
    t.row_reduce(sum_squares, Sum{}, [](const Element& x) { return x.value * x.value; });
    if (out.data) t.store(out, [&](const Element& x) { return x.value * t.load(weight, x); });
  }
};

struct RowScale {
  ColumnVector scale{};  // rstd, M
  TileOut out{};         // M x N

  template <class Tile>
  CODA_HD void operator()(Tile& t) const {
    t.store(out, [&](const Element& x) { return x.value * t.load(scale, x); });
  }
};

/// kStageResidual: H staged in shared memory (the ping-pong tile only, program.hpp); without it H is
/// read from global memory and the program also runs on the cooperative m128n256 tile, which the op
/// takes from K = kCooperativeProgramMinK (the K of D' = dZs W2 is the width of the GEMM after the
/// norm: 3H for QKV, 2F for gate/up).
template <bool kStageResidual>
struct ResidualRmsNormBackwardOf {
  TileIn residual{};            // H, M x N: the saved residual stream (ResidualRmsNorm's residual_out)
  TileIn grad_residual{};       // optional: dH_out, M x N, the gradient reaching H from later layers
  RowVector weight{};           // g, N
  ColumnVector correction{};    // c' = rstd^2 <dZ, Z> / N, M (f32)
  ColumnVector row_scale{};     // optional: rstd, when the GEMM's A is dZ rather than rstd ⊙ dZ
  TileOut grad_residual_out{};  // dH, M x N

  template <class Inputs>
  CODA_HD void tile_inputs(Inputs& in) const {
    in(residual);
    in(grad_residual);
  }
  using TileInMember = TileIn ResidualRmsNormBackwardOf::*;
  static constexpr TileInMember staged_input =
      kStageResidual ? &ResidualRmsNormBackwardOf::residual : nullptr;  // as ResidualRmsNorm's
  static constexpr auto staged_row_vector = &ResidualRmsNormBackwardOf::weight;

  void check_arguments(ArgumentCheck& check) const {
    check.require(weight.data != nullptr, "weight", "is null, but dH is D' * weight - correction * H")
        .require(correction.data != nullptr, "correction", "is null, but dH is D' * weight - correction * H");
  }

  template <class Tile>
  CODA_HD void operator()(Tile& t) const {
    // Each variant is its own unrolled map rather than a branch per element. dH_out is added in the
    // store, a subtile at a time: read in the map, its 64 words per thread were all in flight beside
    // the 128 accumulators and the staged weight, and the kernel spilled (784 bytes of stack).
    if (row_scale.data) normalize(t, [&](const Element& x) { return t.load(row_scale, x) * t.load(weight, x); });
    else normalize(t, [&](const Element& x) { return t.load(weight, x); });
    if (grad_residual.data)
      t.store(grad_residual_out, [&](const Element& x) { return x.value + t.load(grad_residual, x); });
    else t.store(grad_residual_out);
  }

 private:
  // D' * factor - c' * H; H is the staged input, read in the program's first map (program.hpp).
  template <class Tile, class Factor>
  CODA_HD void normalize(Tile& t, const Factor& factor) const {
    t.map([&](Element& x) { x.value = x.value * factor(x) - t.load(correction, x) * t.load(residual, x); });
  }
};

using ResidualRmsNormBackward = ResidualRmsNormBackwardOf<true>;

struct RmsNormWeightGradients {
  TileIn projection_weight{};        // W2, N2 x N (the output's shape): the weight of the GEMM after the norm
  RowVector norm_weight{};           // g, N
  TileOut grad_projection_weight{};  // dW2 = G ⊙ g, N2 x N
  Partials norm_weight_partials{};   // parts along N2 x N: column partials of dg = sum_i G ⊙ W2

  template <class Inputs>
  CODA_HD void tile_inputs(Inputs& in) const {
    in(projection_weight);
  }
  static constexpr auto staged_row_vector = &RmsNormWeightGradients::norm_weight;

  void check_arguments(ArgumentCheck& check) const {
    check.require(norm_weight.data != nullptr, "norm_weight", "is null, but dW2 is G * norm_weight");
  }

  template <class Tile>
  CODA_HD void operator()(Tile& t) const {
    t.column_reduce(norm_weight_partials, Sum{},
                    [&](const Element& x) { return x.value * t.load(projection_weight, x); });
    t.store(grad_projection_weight, [&](const Element& x) { return x.value * t.load(norm_weight, x); });
  }
};

}  // namespace coda::epilogue

// coda/epilogue/programs/rmsnorm.hpp: the first GEMM of the GEMM-residual-RMSNorm-GEMM pattern
// (ResidualRmsNorm) and the row scale the second GEMM applies (RowScale); docs/kernels.md.
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
  CODA_HD void tile_inputs(Inputs& in) const { in(residual); }
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

}  // namespace coda::epilogue

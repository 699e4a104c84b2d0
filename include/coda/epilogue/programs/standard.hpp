// coda/epilogue/programs/standard.hpp: the standard epilogue set (as CUTLASS's visitor trees
// provide it), each a short program.
//
//   LinearCombination   D = act(alpha * acc + beta * C + gamma * X2 + bias), each term optional;
//                       optionally also the pre-activation (for the backward) and amax
//   ActivationBackward  dX = acc * act'(pre), with the bias gradient as a column (per-column bias)
//                       or row (per-row bias) reduction of dX, like cuBLASLt's DGELU_BGRAD
//   Reductions          row sums / sums of squares / max and column sums of acc, plus the output
#pragma once

#include <cmath>

#include "coda/epilogue/program.hpp"

namespace coda::epilogue {

/// A scalar, per-row or per-column factor.
struct Scale {
  float value = 1.0f;
  ColumnVector per_row{};    // used when set
  RowVector per_column{};    // used when set

  CODA_HD static Scale constant(float v) {
    Scale s;
    s.value = v;
    return s;
  }

  template <class Tile, class At>
  CODA_HD float at(const Tile& t, const At& x) const {
    if (per_row.data) return t.load(per_row, x);
    if (per_column.data) return t.load(per_column, x);
    return value;
  }
  /// A scalar zero: the term is skipped, so a NaN in its tensor cannot leak in (BLAS semantics).
  CODA_HD bool zero() const { return !per_row.data && !per_column.data && value == 0.0f; }
  /// scale * term, or 0 where the scale is exactly 0: the same BLAS rule element by element, for
  /// vector scales with zero entries (as the reference, coda/reference/epilogues.hpp).
  template <class Tile, class At>
  CODA_HD float times(const Tile& t, const At& x, float term) const {
    const float s = at(t, x);
    return s == 0.0f ? 0.0f : s * term;
  }
};

struct LinearCombination {
  Scale alpha{};
  TileIn source{};          // C (optional)
  Scale beta = Scale::constant(0.0f);
  TileIn second_source{};   // X2 (optional)
  Scale gamma = Scale::constant(0.0f);
  RowVector column_bias{};  // optional, N
  ColumnVector row_bias{};  // optional, M
  ActivationFunction activation{};
  TileOut pre_activation{};  // optional
  Partials amax{};           // optional: max |D| per part (before an fp8 output's scale)
  TileOut out{};

  template <class Inputs>
  CODA_HD void tile_inputs(Inputs& in) const {
    if (!beta.zero()) in(source);
    if (!gamma.zero()) in(second_source);
  }

  template <class Tile>
  CODA_HD void operator()(Tile& t) const {
    t.map([&](Element& x) {
      float v = alpha.at(t, x) * x.value;
      if (source.data && !beta.zero()) v += beta.times(t, x, t.load(source, x));
      if (second_source.data && !gamma.zero()) v += gamma.times(t, x, t.load(second_source, x));
      if (column_bias.data) v += t.load(column_bias, x);
      if (row_bias.data) v += t.load(row_bias, x);
      x.value = v;
    });
    if (pre_activation.data) t.store(pre_activation);
    if (activation.kind != Activation::identity) t.map([&](Element& x) { x.value = activation(x.value); });
    if (amax.data) t.reduce(amax, Max{}, [](const Element& x) { return fabsf(x.value); });
    t.store(out);
  }
};

struct ActivationBackward {
  TileIn pre_activation{};  // the saved pre-activation, M x N
  ActivationFunction activation{};
  TileOut out{};            // dX, M x N
  Partials bias_gradient{}; // optional: column sums (per-column bias) or row sums (per-row bias) of dX
  bool bias_per_row = false;

  template <class Inputs>
  CODA_HD void tile_inputs(Inputs& in) const { in(pre_activation); }

  template <class Tile>
  CODA_HD void operator()(Tile& t) const {
    t.map([&](Element& x) { x.value *= activation.derivative(t.load(pre_activation, x)); });
    t.store(out);
    if (!bias_gradient.data) return;
    if (bias_per_row) t.row_reduce(bias_gradient, Sum{}, [](const Element& x) { return x.value; });
    else t.column_reduce(bias_gradient, Sum{}, [](const Element& x) { return x.value; });
  }
};

struct Reductions {
  TileOut out{};                 // optional: acc itself
  Partials row_sums{};           // optional, M x parts
  Partials row_sums_of_squares{};
  Partials row_max{};
  Partials column_sums{};        // optional, parts x N

  template <class Tile>
  CODA_HD void operator()(Tile& t) const {
    if (out.data) t.store(out);
    if (row_sums.data) t.row_reduce(row_sums, Sum{}, [](const Element& x) { return x.value; });
    if (row_sums_of_squares.data) t.row_reduce(row_sums_of_squares, Sum{}, [](const Element& x) { return x.value * x.value; });
    if (row_max.data) t.row_reduce(row_max, Max{}, [](const Element& x) { return x.value; });
    if (column_sums.data) t.column_reduce(column_sums, Sum{}, [](const Element& x) { return x.value; });
  }
};

}  // namespace coda::epilogue

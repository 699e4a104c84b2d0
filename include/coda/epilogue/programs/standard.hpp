// coda/epilogue/programs/standard.hpp: the standard epilogue set (as CUTLASS's visitor trees
// provide it), each a short program.
//
//   LinearCombination   D = act(alpha * acc + beta * C + gamma * X2 + bias), each term optional;
//                       optionally also the pre-activation (for the backward) and amax;
//                       LinearCombinationWith<Activation::k> fixes act at compile time
//   ActivationBackward  dX = acc * act'(pre), with the bias gradient as a column (per-column bias)
//                       or row (per-row bias) reduction of dX, like cuBLASLt's DGELU_BGRAD
//   Reductions          row sums / sums of squares / max and column sums of acc, plus the output
#pragma once

#include <cmath>

#include "coda/epilogue/program.hpp"

namespace coda::epilogue {

/// A scalar, per-row or per-column factor. The helpers take the whole tile and apply a scalar
/// with a map of its own: the GPU executor then reads no vector for it and keeps no per-element
/// branch beside the 128 accumulators.
struct Scale {
  float value = 1.0f;
  ColumnVector per_row{};    // used when set
  RowVector per_column{};    // used when set

  CODA_HD static Scale constant(float v) {
    Scale s;
    s.value = v;
    return s;
  }

  /// A scalar zero: the term is skipped, so a NaN in its tensor cannot leak in (BLAS semantics).
  CODA_HD bool zero() const { return !per_row.data && !per_column.data && value == 0.0f; }
  CODA_HD bool scalar() const { return !per_row.data && !per_column.data; }

  template <class Tile, class At>
  CODA_HD float at(const Tile& t, const At& x) const {
    if (per_row.data) return t.load(per_row, x);
    if (per_column.data) return t.load(per_column, x);
    return value;
  }

  /// x.value = scale * x.value for every element (nothing to do for a scalar 1: 1 * v == v).
  template <class Tile>
  CODA_HD void multiply(Tile& t) const {
    if (!scalar()) t.map([&](Element& x) { x.value = at(t, x) * x.value; });
    else if (value != 1.0f) t.map([&](Element& x) { x.value = value * x.value; });
  }

  /// x.value += scale * in[x], skipped where the scale is exactly 0: the BLAS rule, element by
  /// element for vector scales with zero entries (as the reference, coda/reference/epilogues.hpp).
  template <class Tile>
  CODA_HD void add_times(Tile& t, const TileIn& in) const {
    if (!scalar()) {
      t.map([&](Element& x) {
        const float s = at(t, x);
        x.value += s == 0.0f ? 0.0f : s * t.load(in, x);
      });
    } else if (value != 0.0f) {
      t.map([&](Element& x) { x.value += value * t.load(in, x); });
    }
  }
};

/// D = act(alpha acc + beta C + gamma X2 + column bias + row bias). `LinearCombination` reads the
/// activation's kind at run time; `LinearCombinationWith<Activation::gelu_tanh>` fixes it at
/// compile time (its `activation.kind` starts as that kind and is not read; slope, lo and hi are),
/// a kernel per activation. Both are slow on the GPU yet (`coda bench primitives`, H200, bias + GELU
/// over the plain GEMM at K = 2048 / 4096: 1.73 / 1.38 with the kind at run time, 1.50 / 1.25
/// fixed): every other option is still a run-time argument, and the kernel spills.
template <bool kActivationAtRunTime, Activation kActivation = Activation::identity>
struct LinearCombinationProgram {
  Scale alpha{};
  TileIn source{};          // C (optional)
  Scale beta = Scale::constant(0.0f);
  TileIn second_source{};   // X2 (optional)
  Scale gamma = Scale::constant(0.0f);
  RowVector column_bias{};  // optional, N
  ColumnVector row_bias{};  // optional, M
  ActivationFunction activation{kActivation};
  TileOut pre_activation{};  // optional
  Partials amax{};           // optional: max |D| per part (before an fp8 output's scale)
  TileOut out{};

  template <class Inputs>
  CODA_HD void tile_inputs(Inputs& in) const {
    if (source.data && !beta.zero()) in(source);
    if (second_source.data && !gamma.zero()) in(second_source);
  }

  // One map per term present, in the order alpha acc + beta C + gamma X2 + column bias + row bias,
  // each behind a branch on the arguments (uniform over the tile). Every option is a run-time
  // argument, so the GPU kernel holds every combination's code, and ptxas spills beside the 128
  // accumulators: ~5.4 KB with the activation's kind read at run time (its map chosen once per
  // tile, by visit), ~1 KB with it fixed (each path alone: 0-340 bytes). The fused ops are
  // programs of their own and spill nothing.
  template <class Tile>
  CODA_HD void operator()(Tile& t) const {
    alpha.multiply(t);
    if (source.data) beta.add_times(t, source);
    if (second_source.data) gamma.add_times(t, second_source);
    if (column_bias.data) t.map([&](Element& x) { x.value += t.load(column_bias, x); });
    if (row_bias.data) t.map([&](Element& x) { x.value += t.load(row_bias, x); });
    if (pre_activation.data) t.store(pre_activation);
    if constexpr (kActivationAtRunTime) activation.visit([&](auto kind) { activate<decltype(kind)::value>(t); });
    else activate<kActivation>(t);
    if (amax.data) t.reduce(amax, Max{}, [](const Element& x) { return fabsf(x.value); });
    t.store(out);
  }

 private:
  template <Activation Kind, class Tile>
  CODA_HD void activate(Tile& t) const {
    if constexpr (Kind != Activation::identity)
      t.map([&](Element& x) { x.value = activation.template value_of<Kind>(x.value); });
  }
};

using LinearCombination = LinearCombinationProgram<true>;
template <Activation Kind>
using LinearCombinationWith = LinearCombinationProgram<false, Kind>;

struct ActivationBackward {
  TileIn pre_activation{};  // the saved pre-activation, M x N
  ActivationFunction activation{};
  TileOut out{};            // dX, M x N
  Partials bias_gradient{}; // optional: column sums (per-column bias) or row sums (per-row bias) of dX
  bool bias_per_row = false;

  template <class Inputs>
  CODA_HD void tile_inputs(Inputs& in) const { in(pre_activation); }
  static constexpr auto staged_input = &ActivationBackward::pre_activation;  // program.hpp

  template <class Tile>
  CODA_HD void operator()(Tile& t) const {
    activation.visit([&](auto kind) {
      t.map([&](Element& x) {
        x.value *= activation.template derivative_of<decltype(kind)::value>(t.load(pre_activation, x));
      });
    });
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

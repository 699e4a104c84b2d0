// coda/epilogue/programs/standard.hpp: the standard epilogue set (as CUTLASS's visitor trees
// provide it), each a short program.
//
//   LinearCombination   D = act(alpha * acc + beta * C + gamma * X2 + bias), each term optional;
//                       optionally also the pre-activation (for the backward) and amax;
//                       LinearCombinationOf<LinearCombinationTerms{...}> holds only the terms
//                       named (a kernel per set of terms, as fast as a hand-written program)
//   ActivationBackward  dX = acc * act'(pre), with the bias gradient as a column (per-column bias)
//                       or row (per-row bias) reduction of dX, like cuBLASLt's DGELU_BGRAD;
//                       ActivationBackwardOf<kind> fixes the kind at compile time
//   Reductions          row sums / sums of squares / max and column sums of acc, plus the output
#pragma once

#include <cmath>
#include <type_traits>

#include "coda/core/validate.hpp"
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

/// The rule of a kernel built for one activation kind: `activation.kind` is that kind.
inline void require_kind(ArgumentCheck& check, const ActivationFunction& activation, Activation built_for,
                         const char* kernel, const char* where_chosen) {
  check.require_supported(activation.kind == built_for, "activation.kind", "is ", name(activation.kind), ", but this ",
                          kernel, " kernel is built for ", name(built_for), " (", where_chosen, ")");
}

/// The terms a LinearCombination kernel holds code for, as a template argument (C++20):
///
///   // D = gelu_tanh(acc + bias[n]), and its pre-activation for the backward:
///   using BiasGelu = LinearCombinationOf<LinearCombinationTerms{
///       .column_bias = true, .pre_activation = true, .activation = Activation::gelu_tanh}>;
///
/// A kernel built with only the terms it uses is as lean as a hand-written program of them. A term
/// left out must be left unset in the program's arguments (launch_program and the CPU executor
/// check, naming the argument): it is not computed.
struct LinearCombinationTerms {
  bool alpha = false;           // acc scaled by anything but the scalar 1 (a scalar, per row or per column)
  bool source = false;          // + beta C
  bool second_source = false;   // + gamma X2
  bool column_bias = false;     // + bias[n]
  bool row_bias = false;        // + bias[m]
  bool pre_activation = false;  // also store act's input
  // store it in pre_activation_type (a TileOutOf member, arguments.hpp), not in the launch's type:
  // an fp8 D with a bf16 pre-activation for the backward, in one launch
  bool pre_activation_typed = false;
  DType pre_activation_type = DType::bf16;
  bool amax = false;            // max |D| per part
  bool activation_at_run_time = false;           // read activation.kind at run time: every kind's code
  Activation activation = Activation::identity;  // otherwise the one kind (activation.kind must match)
};

/// Every term, the activation read at run time: one kernel for every use.
inline constexpr LinearCombinationTerms kEveryLinearCombinationTerm{.alpha = true,
                                                                    .source = true,
                                                                    .second_source = true,
                                                                    .column_bias = true,
                                                                    .row_bias = true,
                                                                    .pre_activation = true,
                                                                    .amax = true,
                                                                    .activation_at_run_time = true};

/// D = act(alpha acc + beta C + gamma X2 + column bias + row bias), with the terms of `kTerms`.
/// `LinearCombination` holds every term and reads the activation's kind at run time: one kernel for
/// every use, but a slow one on the GPU (it holds every combination's code, and ptxas spills ~5 KB
/// beside the 128 accumulators). `LinearCombinationOf<terms>` holds only the terms named.
/// `coda bench primitives`, H200, bias + GELU over the plain GEMM at K = 2048 / 4096: 1.30-1.48 /
/// 1.12-1.18 with every term, 1.16-1.23 / 1.07-1.16 with those two terms alone (`coda bench
/// timeline`: CTA span 1.06-1.13 of the plain store kernel's at K = 2048).
template <LinearCombinationTerms kTerms>
struct LinearCombinationProgram {
  Scale alpha{};
  TileIn source{};          // C (optional)
  Scale beta = Scale::constant(0.0f);
  TileIn second_source{};   // X2 (optional)
  Scale gamma = Scale::constant(0.0f);
  RowVector column_bias{};  // optional, N
  ColumnVector row_bias{};  // optional, M
  ActivationFunction activation{kTerms.activation};
  // optional; set it with `p.pre_activation = {tile_out(...)}` (a TileOutOf where the terms fix its type)
  std::conditional_t<kTerms.pre_activation_typed, TileOutOf<kTerms.pre_activation_type>, TileOut> pre_activation{};
  Partials amax{};           // optional: max |D| per part (before an fp8 output's scale)
  TileOut out{};

  // The column bias read once per part into registers (program.hpp): loaded per element in its
  // map, the bias slowed the other consumer's MMAs by 4% (coda bench timeline).
  static constexpr auto staged_row_vector =
      kTerms.column_bias ? &LinearCombinationProgram::column_bias : decltype(&LinearCombinationProgram::column_bias){};

  template <class Inputs>
  CODA_HD void tile_inputs(Inputs& in) const {
    if (kTerms.source && source.data && !beta.zero()) in(source);
    if (kTerms.second_source && second_source.data && !gamma.zero()) in(second_source);
  }

  // One map per term present, in the order alpha acc + beta C + gamma X2 + column bias + row bias,
  // each behind a branch on the arguments (uniform over the tile), and compiled only when kTerms
  // names it.
  template <class Tile>
  CODA_HD void operator()(Tile& t) const {
    if constexpr (kTerms.alpha) alpha.multiply(t);
    if constexpr (kTerms.source) if (source.data) beta.add_times(t, source);
    if constexpr (kTerms.second_source) if (second_source.data) gamma.add_times(t, second_source);
    if constexpr (kTerms.column_bias)
      if (column_bias.data) t.map([&](Element& x) { x.value += t.load(column_bias, x); });
    if constexpr (kTerms.row_bias) if (row_bias.data) t.map([&](Element& x) { x.value += t.load(row_bias, x); });
    if constexpr (kTerms.pre_activation) if (pre_activation.data) t.store(pre_activation);
    if constexpr (kTerms.activation_at_run_time)
      activation.visit([&](auto kind) { activate<decltype(kind)::value>(t); });
    else activate<kTerms.activation>(t);
    if constexpr (kTerms.amax) if (amax.data) t.reduce(amax, Max{}, [](const Element& x) { return fabsf(x.value); });
    t.store(out);
  }

  /// Host (launch_program and reference::run_epilogue call it): every argument set has its term.
  void check_arguments(ArgumentCheck& check) const {
    // An argument and its term have the same name.
    auto term = [&](bool compiled, bool set, const char* name) {
      check.require_supported(compiled || !set, name,
                              "is set, but this LinearCombination kernel is built without its term "
                              "(LinearCombinationTerms::",
                              name, ")");
    };
    term(kTerms.alpha, !(alpha.scalar() && alpha.value == 1.0f), "alpha");
    term(kTerms.source, source.data != nullptr, "source");
    term(kTerms.second_source, second_source.data != nullptr, "second_source");
    term(kTerms.column_bias, column_bias.data != nullptr, "column_bias");
    term(kTerms.row_bias, row_bias.data != nullptr, "row_bias");
    term(kTerms.pre_activation, pre_activation.data != nullptr, "pre_activation");
    term(kTerms.amax, amax.data != nullptr, "amax");
    if constexpr (!kTerms.activation_at_run_time)
      require_kind(check, activation, kTerms.activation, "LinearCombination", "LinearCombinationTerms::activation");
  }

 private:
  template <Activation Kind, class Tile>
  CODA_HD void activate(Tile& t) const {
    if constexpr (Kind != Activation::identity)
      t.map([&](Element& x) { x.value = activation.template value_of<Kind>(x.value); });
  }
};

using LinearCombination = LinearCombinationProgram<kEveryLinearCombinationTerm>;
template <LinearCombinationTerms kTerms>
using LinearCombinationOf = LinearCombinationProgram<kTerms>;

/// dX = dY act'(pre), and the bias gradient. `ActivationBackward` reads the activation's kind at run
/// time (every kind's derivative compiled in); `ActivationBackwardOf<Activation::gelu_tanh>` is the
/// kernel of one kind (activation.kind must be it: check_arguments): for dGELU with the bias
/// gradient, a 6% shorter epilogue and 3% shorter CTA span (coda bench timeline, K = 2048).
template <bool kKindAtRunTime, Activation kKind = Activation::identity>
struct ActivationBackwardProgram {
  TileIn pre_activation{};  // the saved pre-activation, M x N
  ActivationFunction activation{kKind};
  TileOut out{};            // dX, M x N
  Partials bias_gradient{}; // optional: column sums (per-column bias) or row sums (per-row bias) of dX
  bool bias_per_row = false;

  template <class Inputs>
  CODA_HD void tile_inputs(Inputs& in) const { in(pre_activation); }
  static constexpr auto staged_input = &ActivationBackwardProgram::pre_activation;  // program.hpp

  template <class Tile>
  CODA_HD void operator()(Tile& t) const {
    if constexpr (kKindAtRunTime) activation.visit([&](auto kind) { backward<decltype(kind)::value>(t); });
    else backward<kKind>(t);
    t.store(out);
    if (!bias_gradient.data) return;
    if (bias_per_row) t.row_reduce(bias_gradient, Sum{}, [](const Element& x) { return x.value; });
    else t.column_reduce(bias_gradient, Sum{}, [](const Element& x) { return x.value; });
  }

  /// Host (launch_program and reference::run_epilogue call it): the kind is the one built for.
  void check_arguments(ArgumentCheck& check) const {
    if constexpr (!kKindAtRunTime) require_kind(check, activation, kKind, "ActivationBackward", "ActivationBackwardOf");
  }

 private:
  template <Activation Kind, class Tile>
  CODA_HD void backward(Tile& t) const {
    t.map([&](Element& x) { x.value *= activation.template derivative_of<Kind>(t.load(pre_activation, x)); });
  }
};

using ActivationBackward = ActivationBackwardProgram<true>;
template <Activation Kind>
using ActivationBackwardOf = ActivationBackwardProgram<false, Kind>;

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
    if (row_sums_of_squares.data)
      t.row_reduce(row_sums_of_squares, Sum{}, [](const Element& x) { return x.value * x.value; });
    if (row_max.data) t.row_reduce(row_max, Max{}, [](const Element& x) { return x.value; });
    if (column_sums.data) t.column_reduce(column_sums, Sum{}, [](const Element& x) { return x.value; });
  }
};

}  // namespace coda::epilogue

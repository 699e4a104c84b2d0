// coda/epilogue/program.hpp: how an epilogue program is written.
//
// An epilogue program is a struct holding its argument descriptors (arguments.hpp) with a
// CODA_HD call operator templated on the executor's Tile. The executor calls it once per part of
// an output tile (one consumer warpgroup's part on the GPU; the same part shape on the CPU), with
// the fp32 accumulators of that part inside the Tile. The same source runs on both executors:
//
//   // Gated SiLU (SwiGLU), O[m, j] = silu(Y[m, 2j]) * Y[m, 2j + 1]: gate and up interleaved.
//   struct GatedSilu {
//     coda::epilogue::TileOut out;  // M x N/2
//     template <class Tile>
//     CODA_HD void operator()(Tile& t) const {
//       t.store_pairs(out, [](const auto& p) { return coda::epilogue::silu(p.first) * p.second; });
//     }
//   };
//
// The Tile interface (`t`), the five primitive classes (the concept EpilogueTile below states it;
// the GPU executor's GpuTile, the CPU executor's CpuTile and the host's StoreRecorder each meet it):
//
//  0. the part
//     t.part_columns()      {first, end}: the columns of the output this call sees, inside the
//                           problem; a program may skip work no column of the part needs (RoPE:
//                           the heads that pass through)
//
//  1. maps
//     t.map(f)              f(Element& x) for every element: x.value (float&), x.row, x.col, x.batch
//     t.map_pairs(f)        f(Pair& p) for every pair of adjacent columns (2c, 2c+1) of a row:
//                           p.first, p.second (float&), p.row, p.col (= 2c), p.batch
//     t.map_pairs(tables, f)  f(Pair& p, Values2 v) for every pair, with v = the pair's entries of
//                           two tables at a row picked per output row (PairTables, arguments.hpp:
//                           RoPE's cos and sin at the row's position). Prefer it to t.load(Table)
//                           per pair: the GPU executor reads a row's entries with 16-byte loads
//                           shared by the lanes holding the row, a quarter of the load instructions,
//                           and global loads in the epilogue slow the other consumer's MMAs
//  2. vector loads                                   (stores are reductions, 4.)
//     t.load(RowVector, x)        vector[x.col]      t.load(ColumnVector, x)   vector[x.row]
//     t.load_index(ColumnVector, x)   vector[x.row] of an int32 vector, as int32 (positions, targets)
//     t.load(Table, i, j)         table[i][j]        (e.g. i = a position read per row; 32-bit indices)
//  3. tile loads and stores
//     t.load(TileIn, x)           the input at x's position (M x N)
//     t.load_wide(TileIn, x)      {first, second}: columns 2 x.col, 2 x.col + 1 of an M x 2N input
//     t.store(TileOut)            every element's current value (M x N), rounded to out.dtype
//                                 (every TileOut of a launch has one type; a TileOutOf<T> member,
//                                 arguments.hpp, is written in T: an fp8 result and a bf16 aux)
//     t.store(TileOut, f)         f(const Element&) for every element
//     t.store_pairs(TileOut, f)   f(const Pair&) at column p.col / 2: an M x N/2 output
//     t.store_wide(TileOut, f)    f(const Element&) -> {first, second} at columns 2 x.col, 2 x.col + 1
//     t.store_wide_row_reduce(TileOut, Partials, Monoid, f)   f(const Element&) -> {{first, second},
//                                 row_value}: store_wide of the pair and row_reduce of row_value from
//                                 one call of f per element (a SwiGLU backward's gradient and its
//                                 <dY, Y> row statistic computed once, not once per primitive)
//  4. tile reductions, per part (partials; a tiny auxiliary kernel combines them later)
//     t.row_reduce(Partials, Monoid, f)     fold f(x) over the part's columns, one value per row
//     t.column_reduce(Partials, Monoid, f)  fold f(x) over the part's rows, one value per column
//     t.reduce(Partials, Monoid, f)         fold f(x) over the whole part: one value
//     f returns a float (lifted by the monoid) or the monoid's State (monoids.hpp).
//  5. stateful transforms: a monoid's State carries state across the part (online max/sum-exp,
//     pick-one, running top-k); executors fold it across threads, warps and subtiles as they see
//     fit. A running top-k keeps each row's K best (value, column) of the part, written as 2K words
//     per partial slot (TopK, monoids.hpp; row_partials(view, name, TopK<K>::kWords)):
//
//       t.row_reduce(top4, TopK<4>{}, [](const Element& x) { return TopK<4>::one(x.value, x.col); });
//
// A program that reads tile inputs lists them in `tile_inputs`: the GPU executor reads them as the
// operands' 16-bit type, and launch_program checks that they are; the CPU executor refuses a
// program that reads a TileIn it does not list:
//
//   template <class Inputs>
//   CODA_HD void tile_inputs(Inputs& in) const { in(residual); }   // each TileIn read by t.load
//
// A program may also name one tile input for the GPU executor to stage in shared memory:
//
//   static constexpr auto staged_input = &ResidualRmsNorm::residual;   // a TileIn member
//
// A warp of the mainloop's producer then fetches each part of that input by TMA while the part's
// MMAs run, and t.load reads it from shared memory instead of global memory. The two consumer
// warpgroups take one 32 KB buffer in turn for it, and the program's stores and reductions write
// through the same buffer once the input has been read, so launch_program checks that:
//   - the input is read (t.load) before the program's first store, column_reduce or reduce
//     (the host runs the program once on a recorder, calling each primitive's function);
//   - it is given, made by tile_in() on a view TMA can address (16-byte aligned base, row and
//     batch strides multiples of 16 bytes).
// t.load_wide reads it from global memory. The CPU executor runs such programs unchanged.
//
// A program whose wide stores read a tile input at the positions they write (SwiGLU backward's Y,
// read by t.load_wide in store_wide's function) may name it for the GPU executor to prefetch:
//
//   static constexpr auto prefetched_input = &SwigluBackward::pre_activation;   // a TileIn member
//
// While a wide store writes one output subtile, the executor then asks L1 for the input's bytes under
// the next one (prefetch.global.L1, interior parts), so that its loads do not wait for L2 or DRAM
// one subtile at a time behind the staging barriers.
//
// And one row vector for the GPU executor to read once per part, into registers:
//
//   static constexpr auto staged_row_vector = &ResidualRmsNorm::weight;   // a RowVector member
//
// (a null member pointer names none: LinearCombinationOf stages its column bias only where it has
// one). Each thread then reads its 32 columns of it (16 loads, two columns each where the vector's
// alignment allows) as the part's program starts, and t.load of that vector at an element's own
// column takes the value from there. Without it, every t.load of a row vector is a global load of
// its own, repeated in each of the part's four store subtiles (the compiler may not merge loads
// across the stores' barriers). A vector that is not set (data null) is not read.
//
// A program may ask for a companion launch when it runs on the ping-pong tile, stating how fast a
// companion SM runs it against a ping-pong SM (measured; SwiGLU's, programs/swiglu.hpp):
//
//   static constexpr double companion_speed = 0.92;
//
// Its last tile rows then run beside that launch, on the SMs its 4-CTA clusters leave idle (12 of
// an H100's 132), in m128n256 tiles whose consumers run the program with the tensor cores idle
// (plan_companion in epilogue/plan.hpp; GemmOptions::companion turns it off), as many rows as let
// both launches end together at that speed (epilogue/companion.hpp). A staged tile input is read
// from global memory there. The bits do not change. Measured side by side (docs/performance.md):
// at the power limit SwiGLU at K = 2048 ran 2.5-6% faster with it on an H100 and an H200, residual
// + RMSNorm 1-5%, and RoPE took 0.96-1.01 of its time without it; cross-entropy gained nothing
// beyond the noise and does not ask.
//
// A program whose arguments have rules of their own (beyond what each descriptor's builder in
// host_arguments.hpp checks) states them in a host member; launch_program and the CPU executor
// call it before anything runs (LinearCombinationOf: no argument set whose term is compiled out):
//
//   void check_arguments(coda::ArgumentCheck& check) const { check.require(..., "alpha", "..."); }
//
// launch_program (launch.cuh) also runs the call operator once on the host, on a tile that only
// records stores (output_types.hpp), to find the type the tile outputs are written in: so the
// operator is CODA_HD, and which stores a program makes depends on its arguments, not on data.
//
// Rules: operations run in program order; a map changes the values later primitives see. Only
// elements inside the problem (row < M, col < N) are visited. Programs may not depend on the
// order in which elements are visited, only on their (row, col).
//
// Performance: compute x.value from itself (x.value += t.load(in, x), x.value = f(x.value, ...)).
// A map that replaces it outright with a value not computed from it (x.value = t.load(in, x))
// lets ptxas serialize the next tile's wgmmas: the build warns (C7517 "warpgroup.wait is
// injected", C7519) and the MMAs ran twice as long (coda bench timeline). Keep the two in one
// map instead (x.value *= f(t.load(in, x))).
#pragma once

#include <concepts>
#include <cstdint>

#include "coda/core/dtype.hpp"
#include "coda/core/host_device.hpp"
#include "coda/core/validate.hpp"
#include "coda/epilogue/arguments.hpp"
#include "coda/epilogue/math.hpp"
#include "coda/epilogue/monoids.hpp"

namespace coda::epilogue {

struct Element {
  float& value;
  int32_t row;
  int32_t col;
  int32_t batch;
};

struct Pair {
  float& first;
  float& second;
  int32_t row;
  int32_t col;  // column of `first` (even); `second` is col + 1
  int32_t batch;
};

struct Values2 {
  float first;
  float second;
};

/// What store_wide_row_reduce's function gives per element: the pair it stores and the value it folds
/// into the row.
struct WideAndRowValue {
  Values2 wide;
  float row_value;
};

/// Columns [first, end) of the output.
struct ColumnRange {
  int32_t first;
  int32_t end;
};

/// Whether `Program` names a tile input the GPU executor stages in shared memory (above); a null
/// member pointer names none (a program that stages it in one variant only).
template <class Program>
concept StagesAnInput = requires {
  { Program::staged_input } -> std::convertible_to<TileIn Program::*>;
} && (Program::staged_input != nullptr);

/// Whether `Program` names a tile input the GPU executor prefetches under its stores (above).
template <class Program>
concept PrefetchesAnInput = requires {
  { Program::prefetched_input } -> std::convertible_to<TileIn Program::*>;
} && (Program::prefetched_input != nullptr);

/// Whether `Program` names a row vector the GPU executor reads once per part (above); a null
/// member pointer names none (a program whose vector is optional at compile time).
template <class Program>
concept StagesARowVector = requires {
  { Program::staged_row_vector } -> std::convertible_to<RowVector Program::*>;
} && (Program::staged_row_vector != nullptr);

/// Whether `Program` asks for a companion launch on the ping-pong tile (above): a positive
/// `companion_speed`.
template <class Program>
concept AsksForACompanionLaunch = requires { requires double(Program::companion_speed) > 0.0; };

namespace contract {
// Callables of the shapes the primitives take, for the concept below.
struct ElementMap {
  CODA_HD void operator()(Element&) const {}
};
struct PairMap {
  CODA_HD void operator()(Pair&) const {}
};
struct PairTableMap {
  CODA_HD void operator()(Pair&, Values2) const {}
};
struct ElementValue {
  CODA_HD float operator()(const Element&) const { return 0.0f; }
};
struct PairValue {
  CODA_HD float operator()(const Pair&) const { return 0.0f; }
};
struct WideValue {
  CODA_HD Values2 operator()(const Element&) const { return {}; }
};
struct WideAndRow {
  CODA_HD WideAndRowValue operator()(const Element&) const { return {}; }
};
struct EmptyProgram {  // a program, for the executors' own contract checks
  template <class Tile>
  CODA_HD void operator()(Tile&) const {}
};
}  // namespace contract

/// The Tile a program is called with (the interface above): every executor's tile meets it.
template <class T>
concept EpilogueTile = requires(T& t, const T& c, const TileIn& in, const TileOut& out,
                                const TileOutOf<DType::f32>& typed_out, const RowVector& row,
                                const ColumnVector& column, const Table& table, const PairTables& tables,
                                const Partials& partials, const Element& x, const Pair& p, int32_t i) {
  { c.part_columns() } -> std::same_as<ColumnRange>;
  t.map(contract::ElementMap{});
  t.map_pairs(contract::PairMap{});
  t.map_pairs(tables, contract::PairTableMap{});
  { c.load(in, x) } -> std::same_as<float>;
  { c.load(in, p) } -> std::same_as<float>;  // at an Element's or a Pair's position
  { c.load_wide(in, x) } -> std::same_as<Values2>;
  { c.load(row, x) } -> std::same_as<float>;
  { c.load(column, x) } -> std::same_as<float>;
  { c.load_index(column, x) } -> std::same_as<int32_t>;
  { c.load(table, i, i) } -> std::same_as<float>;
  t.store(out);
  t.store(out, contract::ElementValue{});
  t.store_pairs(out, contract::PairValue{});
  t.store_wide(out, contract::WideValue{});
  t.store(typed_out);
  t.store(typed_out, contract::ElementValue{});
  t.store_pairs(typed_out, contract::PairValue{});
  t.store_wide(typed_out, contract::WideValue{});
  t.store_wide_row_reduce(out, partials, Sum{}, contract::WideAndRow{});
  t.row_reduce(partials, Sum{}, contract::ElementValue{});
  t.column_reduce(partials, Sum{}, contract::ElementValue{});
  t.reduce(partials, Sum{}, contract::ElementValue{});
};

/// A program that runs on the executor tile `Tile` (its call operator is templated on the Tile).
template <class Program, class Tile>
concept ProgramFor = EpilogueTile<Tile> && requires(const Program& program, Tile& t) {
  program(t);
};

/// Run `program.check_arguments` (above), if it has one, and throw its first failure.
template <class Program>
void check_arguments(const Program& program, const char* function) {
  if constexpr (requires(ArgumentCheck& check) { program.check_arguments(check); }) {
    ArgumentCheck check(function);
    program.check_arguments(check);
    check.throw_if_error();
  }
}

}  // namespace coda::epilogue

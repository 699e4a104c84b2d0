// coda/epilogue/output_types.hpp: the type a program's tile outputs are written in on the GPU,
// found by running the program once, on the host, on a tile that only records its stores.
//
//   // bf16 operands, an e4m3 output: the launch must be able to write e4m3 (launch.cuh).
//   const DType out = coda::epilogue::output_type(program, DType::bf16, {DType::e4m3}, "my_op");
//
// The GPU executor's output type is a template parameter of the kernel (gpu_executor.cuh), so
// a launch builds one kernel per type it may write, and every TileOut of one launch must share
// it; a TileOutOf<T> (arguments.hpp) is written in its own T. A program's stores depend only on
// its arguments (which outputs are set), never on the data (program.hpp), so one run on the
// recorder finds exactly the stores every part makes.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "coda/core/validate.hpp"
#include "coda/epilogue/program.hpp"

namespace coda::epilogue {

/// A Tile without values: maps, loads and reductions do nothing (loads give 0), its part has no
/// columns, and each store is counted with its TileOut's type. Given a program's staged input
/// (program.hpp), it also calls every function the program hands a primitive, once, on a zero
/// element, to find the first primitive that reads that input after one that writes through
/// shared memory (a store, column_reduce or reduce). Programs are CODA_HD, and so is this (no-op)
/// tile, though it only ever runs on the host.
class StoreRecorder {
 public:
  CODA_HD explicit StoreRecorder(const TileIn* staged = nullptr) : staged_(staged) {}

  CODA_HD ColumnRange part_columns() const { return {0, 0}; }

  template <class F>
  CODA_HD void map(F&& f) { visit<Element&>(false, f); }
  template <class F>
  CODA_HD void map_pairs(F&& f) { visit<Pair&>(false, f); }
  template <class F>
  CODA_HD void map_pairs(const PairTables&, F&& f) {
    map_pairs([&](Pair& p) { f(p, Values2{}); });
  }

  template <class At>
  CODA_HD float load(const TileIn& in, const At&) const {
    if (&in == staged_ && uses_staging_ && late_staged_read_ == 0) late_staged_read_ = primitives_;
    return 0.0f;
  }
  template <class At>
  CODA_HD Values2 load_wide(const TileIn&, const At&) const { return {}; }
  template <class At>
  CODA_HD float load(const RowVector&, const At&) const { return 0.0f; }
  template <class At>
  CODA_HD float load(const ColumnVector&, const At&) const { return 0.0f; }
  template <class At>
  CODA_HD int32_t load_index(const ColumnVector&, const At&) const { return 0; }
  CODA_HD float load(const Table&, int32_t, int32_t) const { return 0.0f; }

  CODA_HD void store(const TileOut& out) { store(out, [](const Element& x) { return x.value; }); }
  template <class F>
  CODA_HD void store(const TileOut& out, F&& f) {
    record(out);
    visit<const Element&>(true, f);
  }
  template <class F>
  CODA_HD void store_pairs(const TileOut& out, F&& f) {
    record(out);
    visit<const Pair&>(true, f);
  }
  template <class F>
  CODA_HD void store_wide(const TileOut& out, F&& f) {
    record(out);
    visit<const Element&>(true, f);
  }
  // A TileOutOf<T> is written in T whatever the launch's type: recorded apart (record_fixed).
  template <DType T>
  CODA_HD void store(const TileOutOf<T>& out) { store(out, [](const Element& x) { return x.value; }); }
  template <DType T, class F>
  CODA_HD void store(const TileOutOf<T>& out, F&& f) {
    record_fixed(out, T);
    visit<const Element&>(true, f);
  }
  template <DType T, class F>
  CODA_HD void store_pairs(const TileOutOf<T>& out, F&& f) {
    record_fixed(out, T);
    visit<const Pair&>(true, f);
  }
  template <DType T, class F>
  CODA_HD void store_wide(const TileOutOf<T>& out, F&& f) {
    record_fixed(out, T);
    visit<const Element&>(true, f);
  }

  template <class Monoid, class F>
  CODA_HD void store_wide_row_reduce(const TileOut& out, const Partials&, Monoid, F&& f) {
    record(out);
    visit<const Element&>(true, f);
  }
  template <class Monoid, class F>
  CODA_HD void row_reduce(const Partials&, Monoid, F&& f) { visit<const Element&>(false, f); }
  template <class Monoid, class F>
  CODA_HD void column_reduce(const Partials&, Monoid, F&& f) { visit<const Element&>(true, f); }
  template <class Monoid, class F>
  CODA_HD void reduce(const Partials&, Monoid, F&& f) { visit<const Element&>(true, f); }

  /// How many stores the program made (to TileOuts and to TileOutOf<T>s).
  CODA_HD int stores() const { return stores_; }
  /// The first store (counted from 1, in program order) to a TileOut, whose type the launch
  /// writes; 0 when there is none.
  CODA_HD int first_launch_typed_store() const { return first_launch_typed_store_; }
  /// The type of that store.
  CODA_HD DType first_type() const { return first_type_; }
  /// The first store to a TileOut of a type other than first_type(); 0 when there is none.
  CODA_HD int first_other_store() const { return first_other_store_; }
  CODA_HD DType other_type() const { return other_type_; }
  /// The first store to a TileOutOf<T> whose tensor is not of type T; 0 when there is none.
  CODA_HD int first_mistyped_store() const { return first_mistyped_store_; }
  CODA_HD DType mistyped_declared() const { return mistyped_declared_; }
  CODA_HD DType mistyped_actual() const { return mistyped_actual_; }
  /// The first primitive (counted from 1, in program order) that reads the staged input after
  /// one that writes through shared memory; 0 when there is none.
  CODA_HD int late_staged_read() const { return late_staged_read_; }

 private:
  // One more primitive; `f` is called on a zero element when there is a staged input to watch
  // (a primitive writing through shared memory counts as writing before its function reads).
  template <class At, class F>
  CODA_HD void visit(bool uses_staging, F& f) {
    ++primitives_;
    uses_staging_ = uses_staging_ || uses_staging;
    if (staged_ == nullptr) return;
    float first = 0.0f, second = 0.0f;
    if constexpr (std::is_same_v<std::remove_cvref_t<At>, Pair>) {
      Pair p{first, second, 0, 0, 0};
      (void)f(p);
    } else {
      Element x{first, 0, 0, 0};
      (void)f(x);
    }
  }

  CODA_HD void record(const TileOut& out) {
    ++stores_;
    if (first_launch_typed_store_ == 0) {
      first_launch_typed_store_ = stores_;
      first_type_ = out.dtype;
    } else if (out.dtype != first_type_ && first_other_store_ == 0) {
      first_other_store_ = stores_;
      other_type_ = out.dtype;
    }
  }
  CODA_HD void record_fixed(const TileOut& out, DType declared) {
    ++stores_;
    if (out.dtype != declared && first_mistyped_store_ == 0) {
      first_mistyped_store_ = stores_;
      mistyped_declared_ = declared;
      mistyped_actual_ = out.dtype;
    }
  }

  const TileIn* staged_;
  int primitives_ = 0;
  bool uses_staging_ = false;
  mutable int late_staged_read_ = 0;
  int stores_ = 0;
  int first_launch_typed_store_ = 0;
  DType first_type_ = DType::f32;
  int first_other_store_ = 0;
  DType other_type_ = DType::f32;
  int first_mistyped_store_ = 0;
  DType mistyped_declared_ = DType::f32;
  DType mistyped_actual_ = DType::f32;
};

static_assert(EpilogueTile<StoreRecorder>);

/// The type a launch writes `program`'s TileOuts in: `operands` (the default when it stores none)
/// or one of `also`. Throws, naming the store by its place in the program, when that type is none
/// of those, when a later TileOut's type differs from the first's, or when a TileOutOf<T>'s tensor
/// is not of type T.
template <class Program>
DType output_type(const Program& program, DType operands, std::initializer_list<DType> also, const char* function) {
  static_assert(ProgramFor<Program, StoreRecorder>, "an epilogue program: a const call operator templated on the Tile");
  StoreRecorder recorder;
  program(recorder);
  ArgumentCheck check(function);
  const int mistyped = recorder.first_mistyped_store();
  check.require(mistyped == 0, phrase("tile output of store ", mistyped, " (program order)"), "is a TileOutOf<",
                name(recorder.mistyped_declared()), "> but its tensor is ", name(recorder.mistyped_actual()));
  const int first = recorder.first_launch_typed_store();
  if (first == 0) {
    check.throw_if_error();
    return operands;
  }
  const DType out = recorder.first_type();
  bool allowed = out == operands;
  for (DType t : also) allowed = allowed || out == t;
  if (!allowed) {
    std::string writable(name(operands));
    for (DType t : also)
      if (t != operands) writable.append(", ").append(name(t));
    check.require_supported(false, phrase("tile output of store ", first, " (program order)"), "is ", name(out),
                            " but this launch writes only ", writable,
                            " (launch_program's OutputTypes add more; a TileOutOf<T> is written in T)");
  }
  check.require_supported(recorder.first_other_store() == 0,
                          phrase("tile output of store ", recorder.first_other_store(), " (program order)"), "is ",
                          name(recorder.other_type()), " but store ", first, " writes ", name(out),
                          ": one launch writes every TileOut in one type (a TileOutOf<T> in T)");
  check.throw_if_error();
  return out;
}

}  // namespace coda::epilogue

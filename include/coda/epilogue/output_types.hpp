// coda/epilogue/output_types.hpp: the type a program's tile outputs are written in on the GPU,
// found by running the program once, on the host, on a tile that only records its stores.
//
//   // bf16 operands, an e4m3 output: the launch must be able to write e4m3 (launch.cuh).
//   const DType out = coda::epilogue::output_type(program, DType::bf16, {DType::e4m3}, "my_op");
//
// The GPU executor's output type is a template parameter of the kernel (gpu_executor.cuh), so
// a launch builds one kernel per type it may write, and every TileOut of one launch must share
// it. A program's stores depend only on its arguments (which outputs are set), never on the data
// (program.hpp), so one run on the recorder finds exactly the stores every part makes.
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

  template <class Monoid, class F>
  CODA_HD void row_reduce(const Partials&, Monoid, F&& f) { visit<const Element&>(false, f); }
  template <class Monoid, class F>
  CODA_HD void column_reduce(const Partials&, Monoid, F&& f) { visit<const Element&>(true, f); }
  template <class Monoid, class F>
  CODA_HD void reduce(const Partials&, Monoid, F&& f) { visit<const Element&>(true, f); }

  /// How many stores the program made.
  CODA_HD int stores() const { return stores_; }
  /// The type of the first store (meaningful when stores() > 0).
  CODA_HD DType first_type() const { return first_type_; }
  /// The first store (counted from 1) of a type other than first_type(); 0 when there is none.
  CODA_HD int first_other_store() const { return first_other_store_; }
  CODA_HD DType other_type() const { return other_type_; }
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
    if (stores_ == 1) first_type_ = out.dtype;
    else if (out.dtype != first_type_ && first_other_store_ == 0) {
      first_other_store_ = stores_;
      other_type_ = out.dtype;
    }
  }

  const TileIn* staged_;
  int primitives_ = 0;
  bool uses_staging_ = false;
  mutable int late_staged_read_ = 0;
  int stores_ = 0;
  DType first_type_ = DType::f32;
  int first_other_store_ = 0;
  DType other_type_ = DType::f32;
};

/// The type every tile output of `program` has: `operands` (the default when it stores nothing)
/// or one of `also`. Throws, naming the store by its place in the program, when the type is none
/// of those or a later store's type differs from the first's.
template <class Program>
DType output_type(const Program& program, DType operands, std::initializer_list<DType> also, const char* function) {
  StoreRecorder recorder;
  program(recorder);
  if (recorder.stores() == 0) return operands;

  const DType out = recorder.first_type();
  bool allowed = out == operands;
  std::string writable(name(operands));
  for (DType t : also) {
    allowed = allowed || out == t;
    if (t != operands) writable += coda::detail::concat(", ", name(t));
  }
  ArgumentCheck check(function);
  check
      .require(allowed, "tile output of store 1 (program order)",
               coda::detail::concat("is ", name(out), " but this launch writes only ", writable,
                                    " (launch_program's OutputTypes add more)"),
               StatusCode::unsupported)
      .require(recorder.first_other_store() == 0,
               coda::detail::concat("tile output of store ", recorder.first_other_store(), " (program order)"),
               coda::detail::concat("is ", name(recorder.other_type()), " but store 1 writes ", name(out),
                                    ": one launch writes every tile output in one type"),
               StatusCode::unsupported);
  check.throw_if_error();
  return out;
}

}  // namespace coda::epilogue

// coda/reference/epilogue_executor.hpp: the CPU executor of epilogue programs.
//
// It runs a program's own code (host-compiled) on the parts of an output tile, with the fp32
// values of a reference GEMM as accumulators, and implements every primitive of
// coda/epilogue/program.hpp plainly: loops over rows and columns in order. CI has no GPU; this is
// how every program's semantics is tested there, and the GPU executor is checked against it.
//
//   coda::reference::Matrix y = coda::reference::gemm(x, Major::k, w, Major::k);   // fp64 accumulators
//   coda::epilogue::Swiglu program{.out = out};                         // host pointers
//   coda::reference::run_epilogue(program, y, /*batch=*/0, {64, 256});       // parts of 64 x 256
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "coda/epilogue/program.hpp"
#include "coda/reference/matrix.hpp"

namespace coda::reference {

/// The shape of the part one program call sees (a GPU consumer warpgroup's part of a tile).
struct PartShape {
  int64_t rows;
  int64_t cols;
};

/// Element `index` of a host input (f32, i32, bf16 or f16) as fp32.
inline float load_input(const void* data, DType dtype, int64_t index) {
  return float(load_element(dtype, static_cast<const unsigned char*>(data) + index * int64_t(size_of(dtype))));
}

/// One element written to a host TileOut at (batch, row, col): fp8 outputs are scaled first.
void store_output(const epilogue::TileOut& out, int32_t batch, int64_t row, int64_t col, float value);

/// The Tile of a CPU program call: one part, row-major fp32 values.
class CpuTile {
 public:
  CpuTile(const Matrix& accumulators, int32_t batch, int64_t tile_m, int64_t tile_n, PartShape part);

  epilogue::ColumnRange part_columns() const { return {col(0), col(cols_)}; }

  template <class F>
  void map(F&& f) {
    for (int64_t r = 0; r < rows_; ++r)
      for (int64_t c = 0; c < cols_; ++c) {
        epilogue::Element x{value(r, c), row(r), col(c), batch_};
        f(x);
      }
  }

  template <class F>
  void map_pairs(F&& f) {
    for (int64_t r = 0; r < rows_; ++r)
      for (int64_t c = 0; c + 1 < cols_; c += 2) {
        epilogue::Pair p{value(r, c), value(r, c + 1), row(r), col(c), batch_};
        f(p);
      }
  }

  template <class F>
  void map_pairs(const epilogue::PairTables& tables, F&& f) {
    check_index_vector(tables.index, "t.map_pairs(PairTables) (its index)");
    const int32_t rows = std::min(tables.first.rows, tables.second.rows);
    map_pairs([&](epilogue::Pair& p) {
      const int32_t index = load_index(tables.index, p), entry = tables.period.remainder(p.col) / 2;
      const bool known = index >= 0 && index < rows;
      f(p, epilogue::Values2{known ? load(tables.first, index, entry) : NAN,
                             known ? load(tables.second, index, entry) : NAN});
    });
  }

  // Loads take the position of an Element or of a Pair (`At`: anything with row, col, batch), as
  // on the GPU: Rope reads a row's position at a Pair.
  template <class At>
  float load(const epilogue::TileIn& in, const At& x) const {
    check_listed(in);
    return load_input(in.data, in.dtype, x.batch * in.batch_stride + int64_t(x.row) * in.ld + x.col);
  }
  template <class At>
  epilogue::Values2 load_wide(const epilogue::TileIn& in, const At& x) const {
    check_listed(in);
    const int64_t at = x.batch * in.batch_stride + int64_t(x.row) * in.ld + 2 * int64_t(x.col);
    return {load_input(in.data, in.dtype, at), load_input(in.data, in.dtype, at + 1)};
  }
  template <class At>
  float load(const epilogue::RowVector& v, const At& x) const {
    return load_input(v.data, v.dtype, x.col);
  }
  template <class At>
  float load(const epilogue::ColumnVector& v, const At& x) const {
    return load_input(v.data, v.dtype, x.batch * v.batch_stride + x.row);
  }
  template <class At>
  int32_t load_index(const epilogue::ColumnVector& v, const At& x) const {
    check_index_vector(v, "t.load_index");
    return static_cast<const int32_t*>(v.data)[x.batch * v.batch_stride + x.row];
  }
  float load(const epilogue::Table& table, int32_t i, int32_t j) const { return table.data[i * table.ld + j]; }

  void store(const epilogue::TileOut& out) {
    map([&](epilogue::Element& x) { store_output(out, x.batch, x.row, x.col, x.value); });
  }
  template <class F>
  void store(const epilogue::TileOut& out, F&& f) {
    map([&](epilogue::Element& x) { store_output(out, x.batch, x.row, x.col, f(x)); });
  }
  template <class F>
  void store_pairs(const epilogue::TileOut& out, F&& f) {
    map_pairs([&](epilogue::Pair& p) { store_output(out, p.batch, p.row, p.col / 2, f(p)); });
  }
  template <class F>
  void store_wide(const epilogue::TileOut& out, F&& f) {
    map([&](epilogue::Element& x) {
      const epilogue::Values2 v = f(x);
      store_output(out, x.batch, x.row, 2 * int64_t(x.col), v.first);
      store_output(out, x.batch, x.row, 2 * int64_t(x.col) + 1, v.second);
    });
  }

  // A TileOutOf<T> (arguments.hpp) is written in T: its tensor must be of that type.
  template <DType T>
  void store(const epilogue::TileOutOf<T>& out) {
    check_fixed_type(out, T);
    store(static_cast<const epilogue::TileOut&>(out));
  }
  template <DType T, class F>
  void store(const epilogue::TileOutOf<T>& out, F&& f) {
    check_fixed_type(out, T);
    store(static_cast<const epilogue::TileOut&>(out), f);
  }
  template <DType T, class F>
  void store_pairs(const epilogue::TileOutOf<T>& out, F&& f) {
    check_fixed_type(out, T);
    store_pairs(static_cast<const epilogue::TileOut&>(out), f);
  }
  template <DType T, class F>
  void store_wide(const epilogue::TileOutOf<T>& out, F&& f) {
    check_fixed_type(out, T);
    store_wide(static_cast<const epilogue::TileOut&>(out), f);
  }

  // The GPU executor calls f once per element; calling it twice here gives the same values.
  template <class Monoid, class F>
  void store_wide_row_reduce(const epilogue::TileOut& out, const epilogue::Partials& partials, Monoid monoid, F&& f) {
    row_reduce(partials, monoid, [&](const epilogue::Element& x) { return f(x).row_value; });
    store_wide(out, [&](const epilogue::Element& x) { return f(x).wide; });
  }

  template <class Monoid, class F>
  void row_reduce(const epilogue::Partials& out, Monoid, F&& f) {
    for (int64_t r = 0; r < rows_; ++r) {
      typename Monoid::State s = Monoid::identity();
      for (int64_t c = 0; c < cols_; ++c) {
        epilogue::Element x{value(r, c), row(r), col(c), batch_};
        s = Monoid::combine(s, epilogue::as_state<Monoid>(f(x)));
      }
      if (Monoid::present(s)) epilogue::write_partial<Monoid>(&partial(out, row(r), tile_n_), s);
    }
  }

  template <class Monoid, class F>
  void column_reduce(const epilogue::Partials& out, Monoid, F&& f) {
    for (int64_t c = 0; c < cols_; ++c) {
      typename Monoid::State s = Monoid::identity();
      for (int64_t r = 0; r < rows_; ++r) {
        epilogue::Element x{value(r, c), row(r), col(c), batch_};
        s = Monoid::combine(s, epilogue::as_state<Monoid>(f(x)));
      }
      if (Monoid::present(s)) epilogue::write_partial<Monoid>(&partial(out, tile_m_, col(c)), s);
    }
  }

  template <class Monoid, class F>
  void reduce(const epilogue::Partials& out, Monoid, F&& f) {
    typename Monoid::State s = Monoid::identity();
    map([&](epilogue::Element& x) { s = Monoid::combine(s, epilogue::as_state<Monoid>(f(x))); });
    if (Monoid::present(s)) epilogue::write_partial<Monoid>(&partial(out, tile_m_, tile_n_), s);
  }

  /// The tile inputs the program lists in tile_inputs() (program.hpp): the GPU executor validates
  /// and reads only those, so reading any other is an error in the program, caught here in CI.
  void list_inputs(std::span<const void* const> listed) { listed_inputs_ = listed; }

 private:
  void check_listed(const epilogue::TileIn& in) const;
  static void check_index_vector(const epilogue::ColumnVector& v, const char* reader);
  static void check_fixed_type(const epilogue::TileOut& out, DType declared);
  float& value(int64_t r, int64_t c) { return values_[std::size_t(r * cols_ + c)]; }
  int32_t row(int64_t r) const { return int32_t(row0_ + r); }
  int32_t col(int64_t c) const { return int32_t(col0_ + c); }
  float& partial(const epilogue::Partials& out, int64_t major, int64_t minor) const {
    return out.data[batch_ * out.batch_stride + major * out.row_stride + minor * out.tile_stride];
  }

  std::vector<float> values_;
  std::span<const void* const> listed_inputs_;  // run_epilogue's list, shared by every part
  int32_t batch_;
  int64_t tile_m_, tile_n_, row0_, col0_, rows_, cols_;
};

static_assert(epilogue::EpilogueTile<CpuTile>);

/// Run `program` over every part of the M x N accumulators of batch `batch`, each rounded to
/// fp32 first (what the GPU's accumulators hold).
template <class Program>
void run_epilogue(const Program& program, const Matrix& accumulators, int32_t batch, PartShape part) {
  static_assert(epilogue::ProgramFor<Program, CpuTile>,
                "an epilogue program: a const call operator templated on the Tile");
  epilogue::check_arguments(program, "coda::reference::run_epilogue");
  std::vector<const void*> listed;
  auto list = [&](const epilogue::TileIn& in) { listed.push_back(in.data); };
  if constexpr (requires { program.tile_inputs(list); }) program.tile_inputs(list);
  for (int64_t tm = 0; tm * part.rows < accumulators.rows; ++tm)
    for (int64_t tn = 0; tn * part.cols < accumulators.cols; ++tn) {
      CpuTile tile(accumulators, batch, tm, tn, part);
      tile.list_inputs(listed);
      program(tile);
    }
}

}  // namespace coda::reference

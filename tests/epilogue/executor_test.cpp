// The CPU executor's primitives (coda/epilogue/program.hpp), each through a small program: which
// elements and pairs the maps visit and with which coordinates, program order, loads of every
// argument kind, stores in every output type and width, row / column / whole-part reductions with
// every monoid (NaN and -inf included), the partials' strides, parts at the problem's edges, and
// batches. Most tests run a 150 x 300 problem of two batches, whose extents are multiples of no
// part's, so every test meets narrower parts at the bottom and right edges.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <utility>

#include "coda/core/status.hpp"
#include "coda/epilogue/host_arguments.hpp"
#include "coda/epilogue/programs/standard.hpp"
#include "coda/reference/cross_entropy.hpp"
#include "coda/reference/epilogues.hpp"
#include "coda/reference/reductions.hpp"
#include "epilogue/support.hpp"

namespace coda::test {
namespace {

using epilogue::Element;
using epilogue::Pair;
using ::testing::Each;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr ProblemShape kShape{150, 300, 2};
// The tolerance of outputs whose every value the test computes exactly as the program does
// (copies, and the same fp32 operations in the same order).
constexpr double kExactly = 0.0;

class EpilogueExecutor : public PartShapeTest {};

INSTANTIATE_TEST_SUITE_P(Parts, EpilogueExecutor, ::testing::ValuesIn(kPartShapes), part_shape_name);

// ---- maps ---------------------------------------------------------------------------------------

// Counts the visits of every element and every pair; a visit outside the problem, or whose value
// is not the fp32 accumulator at its (batch, row, col), counts as wrong instead.
struct CountVisits {
  const std::vector<ref::Matrix>* accumulators;
  std::vector<int>* element_visits;  // batch x rows x cols
  std::vector<int>* pair_visits;     // batch x rows x cols / 2
  int* wrong_visits;

  bool holds(int32_t batch, int32_t row, int32_t col, float value) const {
    const ref::Matrix& acc = (*accumulators)[std::size_t(batch)];
    return row >= 0 && row < acc.rows && col >= 0 && col < acc.cols && value == float(acc(row, col));
  }
  std::size_t flat(int32_t batch, int32_t row, int32_t col) const {
    const ref::Matrix& acc = (*accumulators)[std::size_t(batch)];
    return std::size_t((batch * acc.rows + row) * acc.cols + col);
  }

  template <class Tile>
  void operator()(Tile& t) const {
    t.map([&](Element& x) {
      if (!holds(x.batch, x.row, x.col, x.value)) return void(++*wrong_visits);
      ++(*element_visits)[flat(x.batch, x.row, x.col)];
    });
    t.map_pairs([&](Pair& p) {
      const bool right =
          p.col % 2 == 0 && holds(p.batch, p.row, p.col, p.first) && holds(p.batch, p.row, p.col + 1, p.second);
      if (!right) return void(++*wrong_visits);
      ++(*pair_visits)[flat(p.batch, p.row, p.col) / 2];
    });
  }
};

TEST_P(EpilogueExecutor, MapsVisitEveryElementAndPairOnceWithItsCoordinates) {
  const auto acc = random_accumulators(kShape);
  std::vector<int> element_visits(std::size_t(kShape.batch * kShape.rows * kShape.cols), 0);
  std::vector<int> pair_visits(element_visits.size() / 2, 0);
  int wrong_visits = 0;
  run_batches(CountVisits{&acc, &element_visits, &pair_visits, &wrong_visits}, acc, part());
  EXPECT_EQ(wrong_visits, 0);
  EXPECT_THAT(element_visits, Each(1));
  EXPECT_THAT(pair_visits, Each(1));
}

// A map changes what every later primitive sees, and only those.
struct MapsInProgramOrder {
  epilogue::TileOut before, after;
  epilogue::Partials row_sums_after;

  template <class Tile>
  void operator()(Tile& t) const {
    t.store(before);
    t.map([](Element& x) { x.value = 2.0f * x.value + 1.0f; });
    t.map_pairs([](Pair& p) { std::swap(p.first, p.second); });
    t.store(after);
    t.row_reduce(row_sums_after, epilogue::Sum{}, [](const Element& x) { return x.value; });
  }
};

TEST_P(EpilogueExecutor, MapsChangeWhatLaterPrimitivesSee) {
  const auto acc = random_accumulators(kShape);
  HostTensor before = poisoned_output(DType::f32, kShape.rows, kShape.cols, kShape.batch);
  HostTensor after = poisoned_output(DType::f32, kShape.rows, kShape.cols, kShape.batch);
  PartialsBuffer row_sums(kShape.rows, part_count(kShape.cols, part().cols), kShape.batch);
  run_batches(MapsInProgramOrder{tile_out(before), tile_out(after), row_sums.partials()}, acc, part());

  const auto values = fp32_values(acc);
  const auto transformed = per_batch(values, [](const ref::Matrix& y, int64_t) {
    ref::Matrix out(y.rows, y.cols);
    for (int64_t r = 0; r < y.rows; ++r)
      for (int64_t c = 0; c < y.cols; ++c) out(r, c) = 2.0f * float(y(r, c ^ 1)) + 1.0f;  // pairs swapped
    return out;
  });
  expect_output(before, values, 1.0, kExactly);
  expect_output(after, transformed, 1.0, kExactly);
  expect_partials(row_sums, per_batch(transformed, [&](const ref::Matrix& y, int64_t) {
                    return ref::row_partial_sums(y, part().cols);
                  }));
}

// ---- stores -------------------------------------------------------------------------------------

struct StoreAccumulators {
  epilogue::TileOut out;

  template <class Tile>
  void operator()(Tile& t) const {
    t.store(out);
  }
};

// One rounding to the output type; fp8 scaled in fp32 first and saturating to the largest finite
// value (accumulators up to 600 overflow both fp8 types at these scales).
TEST_P(EpilogueExecutor, StoreRoundsOnceToEveryOutputType) {
  std::vector<ref::Matrix> acc;
  for (int64_t b = 0; b < kShape.batch; ++b) acc.push_back(random_matrix(kShape.rows, kShape.cols, -600, 600));
  const std::pair<DType, float> outputs[] = {
      {DType::f32, 1.0f}, {DType::bf16, 1.0f}, {DType::f16, 1.0f}, {DType::e4m3, 0.75f}, {DType::e5m2, 96.0f}};
  for (const auto& [dtype, scale] : outputs) {
    SCOPED_TRACE(std::string(name(dtype)));
    HostTensor out = poisoned_output(dtype, kShape.rows, kShape.cols, kShape.batch);
    run_batches(StoreAccumulators{tile_out(out, scale)}, acc, part());
    const auto want = per_batch(acc, [&](const ref::Matrix& y, int64_t) {
      ref::Matrix stored(y.rows, y.cols);
      for (std::size_t i = 0; i < y.data.size(); ++i)
        stored.data[i] = rounded(dtype, double(float(y.data[i]) * (is_fp8(dtype) ? scale : 1.0f)));
      return stored;
    });
    expect_output(out, want, 1.0, kExactly);
  }
}

// A TileOutOf<T> (written in T, whatever a launch writes its TileOuts in) beside a TileOut, at
// every width; one whose tensor is not of type T is refused.
struct StoreTypedOutputs {
  epilogue::TileOutOf<DType::f32> exact;  // M x N
  epilogue::TileOutOf<DType::bf16> half;  // M x N/2
  epilogue::TileOutOf<DType::f16> wide;   // M x 2N
  epilogue::TileOut out;                  // M x N

  template <class Tile>
  void operator()(Tile& t) const {
    t.store(exact);
    t.store_pairs(half, [](const Pair& p) { return p.first - p.second; });
    t.store_wide(wide, [](const Element& x) { return epilogue::Values2{x.value, -2.0f * x.value}; });
    t.store(out, [](const Element& x) { return 0.5f * x.value; });
  }
};

TEST_P(EpilogueExecutor, TypedOutputsAreWrittenInTheirOwnType) {
  const auto acc = random_accumulators(kShape);
  const int64_t m = kShape.rows, n = kShape.cols, batch = kShape.batch;
  HostTensor exact = poisoned_output(DType::f32, m, n, batch), half = poisoned_output(DType::bf16, m, n / 2, batch),
             wide = poisoned_output(DType::f16, m, 2 * n, batch), out = poisoned_output(DType::e5m2, m, n, batch);
  StoreTypedOutputs program{{tile_out(exact)}, {tile_out(half)}, {tile_out(wide)}, tile_out(out)};
  run_batches(program, acc, part());
  const auto each = [&](DType dtype, int64_t cols, const std::function<double(const ref::Matrix&, int64_t, int64_t)>& f) {
    return per_batch(acc, [&](const ref::Matrix& y, int64_t) {
      ref::Matrix stored(m, cols);
      for (int64_t r = 0; r < m; ++r)
        for (int64_t c = 0; c < cols; ++c) stored(r, c) = rounded(dtype, f(y, r, c));
      return stored;
    });
  };
  const auto at = [](const ref::Matrix& y, int64_t r, int64_t c) { return float(y(r, c)); };
  expect_output(exact, each(DType::f32, n, [&](const ref::Matrix& y, int64_t r, int64_t c) { return at(y, r, c); }),
                1.0, kExactly);
  expect_output(half, each(DType::bf16, n / 2, [&](const ref::Matrix& y, int64_t r, int64_t c) {
                  return double(at(y, r, 2 * c) - at(y, r, 2 * c + 1));
                }),
                1.0, kExactly);
  expect_output(wide, each(DType::f16, 2 * n, [&](const ref::Matrix& y, int64_t r, int64_t c) {
                  return double(c % 2 == 0 ? at(y, r, c / 2) : -2.0f * at(y, r, c / 2));
                }),
                1.0, kExactly);
  expect_output(out, each(DType::e5m2, n, [&](const ref::Matrix& y, int64_t r, int64_t c) { return double(0.5f * at(y, r, c)); }),
                1.0, kExactly);

  HostTensor wrong = poisoned_output(DType::bf16, m, n, batch);
  program.exact = {tile_out(wrong)};
  try {
    run_batches(program, acc, part());
    FAIL() << "accepted a bf16 tensor as a TileOutOf<f32>";
  } catch (const coda::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("a TileOutOf<f32> is written in f32, but its tensor is bf16"), std::string::npos)
        << e.what();
  }
}

struct StoreEveryWidth {
  epilogue::TileOut full;  // M x N
  epilogue::TileOut half;  // M x N/2
  epilogue::TileOut wide;  // M x 2N

  template <class Tile>
  void operator()(Tile& t) const {
    t.store(full, [](const Element& x) { return 3.0f * x.value - float(x.col); });
    t.store_pairs(half, [](const Pair& p) { return p.first - p.second; });
    t.store_wide(wide, [](const Element& x) { return epilogue::Values2{x.value, -2.0f * x.value}; });
  }
};

TEST_P(EpilogueExecutor, StoresOfAFunctionOfPairsAndWide) {
  const auto acc = random_accumulators(kShape);
  HostTensor full = poisoned_output(DType::f32, kShape.rows, kShape.cols, kShape.batch);
  HostTensor half = poisoned_output(DType::f32, kShape.rows, kShape.cols / 2, kShape.batch);
  HostTensor wide = poisoned_output(DType::f32, kShape.rows, 2 * kShape.cols, kShape.batch);
  run_batches(StoreEveryWidth{tile_out(full), tile_out(half), tile_out(wide)}, acc, part());

  // Each output's element (r, c) as a function of the fp32 accumulators' row r.
  const auto expected = [&](int64_t cols, const std::function<float(const double* row, int64_t c)>& f) {
    return per_batch(fp32_values(acc), [&](const ref::Matrix& y, int64_t) {
      ref::Matrix out(y.rows, cols);
      for (int64_t r = 0; r < y.rows; ++r)
        for (int64_t c = 0; c < cols; ++c) out(r, c) = f(y.row(r), c);
      return out;
    });
  };
  expect_output(full, expected(kShape.cols, [](const double* y, int64_t c) { return 3.0f * float(y[c]) - float(c); }),
                1.0, kExactly);
  expect_output(
      half, expected(kShape.cols / 2, [](const double* y, int64_t c) { return float(y[2 * c]) - float(y[2 * c + 1]); }),
      1.0, kExactly);
  expect_output(
      wide,
      expected(2 * kShape.cols,
               [](const double* y, int64_t c) { return c % 2 == 0 ? float(y[c / 2]) : -2.0f * float(y[c / 2]); }),
      1.0, kExactly);
}

// ---- loads --------------------------------------------------------------------------------------

// Copies every kind of operand into an fp32 output, at elements and at pairs.
struct CopyOperands {
  epilogue::TileIn in;             // M x N
  epilogue::TileIn wide;           // M x 2N
  epilogue::RowVector row;         // N
  epilogue::ColumnVector column;   // M per batch
  epilogue::ColumnVector indices;  // int32, M per batch
  epilogue::Table table;
  int32_t table_cols;
  epilogue::TileOut in_copy, wide_copy, row_copy, column_copy, index_copy, index_as_int_copy, table_copy;
  epilogue::TileOut at_pairs;  // column value at the first of each pair, in + row at the second

  template <class Inputs>
  void tile_inputs(Inputs& list) const {
    list(in);
    list(wide);
  }

  template <class Tile>
  void operator()(Tile& t) const {
    t.store(in_copy, [&](const Element& x) { return t.load(in, x); });
    t.store_wide(wide_copy, [&](const Element& x) { return t.load_wide(wide, x); });
    t.store(row_copy, [&](const Element& x) { return t.load(row, x); });
    t.store(column_copy, [&](const Element& x) { return t.load(column, x); });
    t.store(index_copy, [&](const Element& x) { return t.load(indices, x); });
    t.store(index_as_int_copy, [&](const Element& x) { return float(t.load_index(indices, x) + 3); });
    t.store(table_copy, [&](const Element& x) { return t.load(table, x.row % table.rows, x.col % table_cols); });
    t.map_pairs([&](Pair& p) {
      p.first = t.load(column, p);
      p.second = t.load(in, p) + t.load(row, p);
    });
    t.store(at_pairs);
  }
};

TEST_P(EpilogueExecutor, LoadsReadEveryArgumentKindAtItsPosition) {
  const auto acc = random_accumulators(kShape);
  const int64_t m = kShape.rows, n = kShape.cols, batch = kShape.batch;
  const int64_t table_rows = 7, table_cols = 11;
  // The table: fp32 rows of `table_cols` values, rows `ld` apart (padding poisoned).
  const HostTensor table = random_input(DType::f32, table_rows, table_cols);
  std::vector<ref::Vector> index_values(static_cast<std::size_t>(batch));
  for (auto& v : index_values)
    for (int64_t r = 0; r < m; ++r) v.push_back(double(uniform_int(-100000, 100000)));
  const HostTensor indices = column_vector_of(DType::i32, index_values);

  for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    SCOPED_TRACE(std::string(name(dtype)));
    const HostTensor in = random_input(dtype, m, n, batch), wide = random_input(dtype, m, 2 * n, batch);
    const HostTensor row = random_row_vector(dtype, n), column = random_column_vector(dtype, m, batch);
    HostTensor in_copy = poisoned_output(DType::f32, m, n, batch),
               wide_copy = poisoned_output(DType::f32, m, 2 * n, batch);
    HostTensor row_copy = poisoned_output(DType::f32, m, n, batch),
               column_copy = poisoned_output(DType::f32, m, n, batch);
    HostTensor index_copy = poisoned_output(DType::f32, m, n, batch),
               table_copy = poisoned_output(DType::f32, m, n, batch);
    HostTensor index_as_int_copy = poisoned_output(DType::f32, m, n, batch);
    HostTensor at_pairs = poisoned_output(DType::f32, m, n, batch);
    const CopyOperands program{
        .in = tile_in(in),
        .wide = tile_in(wide),
        .row = row_vector(row),
        .column = column_vector(column),
        .indices = column_vector(indices),
        .table = {.data = static_cast<const float*>(table.view.data), .ld = int32_t(table.view.ld()), .rows = int32_t(table_rows)},
        .table_cols = int32_t(table_cols),
        .in_copy = tile_out(in_copy),
        .wide_copy = tile_out(wide_copy),
        .row_copy = tile_out(row_copy),
        .column_copy = tile_out(column_copy),
        .index_copy = tile_out(index_copy),
        .index_as_int_copy = tile_out(index_as_int_copy),
        .table_copy = tile_out(table_copy),
        .at_pairs = tile_out(at_pairs)};
    run_batches(program, acc, part());

    // An M x N matrix per batch of f(batch, row, col).
    const auto broadcast = [&](const std::function<double(int64_t b, int64_t r, int64_t c)>& f) {
      return per_batch(acc, [&](const ref::Matrix&, int64_t b) {
        ref::Matrix out(m, n);
        for (int64_t r = 0; r < m; ++r)
          for (int64_t c = 0; c < n; ++c) out(r, c) = f(b, r, c);
        return out;
      });
    };
    const ref::Vector row_values = row_vector_values(row);
    const ref::Matrix table_values = table.matrix();
    const auto in_values = per_batch(acc, [&](const ref::Matrix&, int64_t b) { return in.matrix(b); });
    const ref::Matrix column_values = column.matrix();  // batch x M
    expect_output(in_copy, in_values, 1.0, kExactly);
    expect_output(wide_copy, per_batch(acc, [&](const ref::Matrix&, int64_t b) { return wide.matrix(b); }), 1.0,
                  kExactly);
    expect_output(row_copy, broadcast([&](int64_t, int64_t, int64_t c) { return row_values[std::size_t(c)]; }), 1.0,
                  kExactly);
    expect_output(column_copy, broadcast([&](int64_t b, int64_t r, int64_t) { return column_values(b, r); }), 1.0,
                  kExactly);
    expect_output(index_copy, broadcast([&](int64_t b, int64_t r, int64_t) {
                    return index_values[std::size_t(b)][std::size_t(r)];
                  }),
                  1.0, kExactly);
    expect_output(index_as_int_copy, broadcast([&](int64_t b, int64_t r, int64_t) {
                    return index_values[std::size_t(b)][std::size_t(r)] + 3;
                  }),
                  1.0, kExactly);
    expect_output(table_copy, broadcast([&](int64_t, int64_t r, int64_t c) {
                    return table_values(r % table_rows, c % table_cols);
                  }),
                  1.0, kExactly);
    expect_output(at_pairs, broadcast([&](int64_t b, int64_t r, int64_t c) {
                    if (c % 2 == 0) return column_values(b, r);
                    return double(float(in_values[std::size_t(b)](r, c - 1)) + float(row_values[std::size_t(c - 1)]));
                  }),
                  1.0, kExactly);
  }
}

// t.map_pairs(PairTables, f): each pair (c, c + 1) of row m gets entry [index[m]][(c mod period) / 2]
// of both tables (padded rows), NaN from both where the index is outside the tables' rows.
struct CopyPairTables {
  epilogue::PairTables tables;
  epilogue::TileOut out;  // first at column c, second at c + 1

  template <class Tile>
  void operator()(Tile& t) const {
    t.map_pairs(tables, [](Pair& p, const epilogue::Values2& v) {
      p.first = v.first;
      p.second = v.second;
    });
    t.store(out);
  }
};

TEST_P(EpilogueExecutor, PairTablesReadTheIndexedRowAlongEachPeriod) {
  const auto acc = random_accumulators(kShape);
  const int64_t m = kShape.rows, n = kShape.cols, batch = kShape.batch, rows = 7, period = 10;
  const HostTensor first = random_input(DType::f32, rows, period / 2), second = random_input(DType::f32, rows, period / 2);
  std::vector<ref::Vector> index_values(static_cast<std::size_t>(batch));
  for (auto& v : index_values)
    for (int64_t r = 0; r < m; ++r) v.push_back(double(uniform_int(-2, int(rows) + 1)));  // some outside
  const HostTensor indices = column_vector_of(DType::i32, index_values);
  HostTensor out = poisoned_output(DType::f32, m, n, batch);
  run_batches(CopyPairTables{{column_vector(indices), epilogue::table(first.view, "first"),
                              epilogue::table(second.view, "second"), Divisor(int32_t(period))},
                             tile_out(out)},
              acc, part());
  const ref::Matrix first_values = first.matrix(), second_values = second.matrix();
  expect_output(out, per_batch(acc, [&](const ref::Matrix&, int64_t b) {
                  ref::Matrix want(m, n);
                  for (int64_t r = 0; r < m; ++r)
                    for (int64_t c = 0; c < n; ++c) {
                      const int64_t index = int64_t(index_values[std::size_t(b)][std::size_t(r)]);
                      const ref::Matrix& values = c % 2 == 0 ? first_values : second_values;
                      want(r, c) = index >= 0 && index < rows ? values(index, (c - c % 2) % period / 2) : kNaN;
                    }
                  return want;
                }),
                1.0, kExactly);
}

// ---- reductions ---------------------------------------------------------------------------------

// Folds `value` with `Monoid` over each part's rows, its columns and the whole part, into those of
// the three partials that are set.
template <class Monoid, class Value>
struct ReduceEveryWay {
  epilogue::Partials rows, columns, whole;
  Value value;

  template <class Tile>
  void operator()(Tile& t) const {
    if (rows.data) t.row_reduce(rows, Monoid{}, value);
    if (columns.data) t.column_reduce(columns, Monoid{}, value);
    if (whole.data) t.reduce(whole, Monoid{}, value);
  }
};

// What a ReduceEveryWay run wrote, every batch: row partials (M x parts along N), column partials
// (parts along M x N) and one value per part (parts along M x parts along N).
struct Reduced {
  PartialsBuffer rows, columns, whole;
};

template <class Monoid, class Value>
Reduced reduce_every_way(const std::vector<ref::Matrix>& acc, ref::PartShape part, bool minor_major, Value value) {
  const int64_t m = acc[0].rows, n = acc[0].cols, batch = int64_t(acc.size());
  const int64_t parts_m = part_count(m, part.rows), parts_n = part_count(n, part.cols);
  Reduced out{PartialsBuffer(m, parts_n, batch, minor_major), PartialsBuffer(parts_m, n, batch, minor_major),
              PartialsBuffer(parts_m, parts_n, batch, minor_major)};
  run_batches(ReduceEveryWay<Monoid, Value>{out.rows.partials(), out.columns.partials(), out.whole.partials(), value},
              acc, part);
  return out;
}

// The reference of each of the three, every batch.
struct ReducedReference {
  std::vector<ref::Matrix> rows, columns, whole;
};

// `scales`, when given, are each result's scale (see expect_close_to_scale).
void expect_reduced(const Reduced& got, const ReducedReference& want, const ReducedReference* scales = nullptr) {
  const auto expect = [](const char* what, const PartialsBuffer& partials, const std::vector<ref::Matrix>& wanted,
                         const std::vector<ref::Matrix>* scale) {
    SCOPED_TRACE(what);
    if (!scale) return expect_partials(partials, wanted);
    partials.expect_written_exactly();
    for (std::size_t b = 0; b < wanted.size(); ++b)
      expect_close_to_scale(partials.matrix(int64_t(b)), wanted[b], (*scale)[b]);
  };
  expect("row partials", got.rows, want.rows, scales ? &scales->rows : nullptr);
  expect("column partials", got.columns, want.columns, scales ? &scales->columns : nullptr);
  expect("whole-part partials", got.whole, want.whole, scales ? &scales->whole : nullptr);
}

// Runs `check(minor_major)` for both layouts of the partials: row-major slots (tile_stride 1) and
// transposed (tile_stride past the major extent, row_stride 1).
void for_both_layouts(const std::function<void(bool)>& check) {
  for (bool minor_major : {false, true}) {
    SCOPED_TRACE(minor_major ? "partials laid out minor-major" : "partials laid out row-major");
    check(minor_major);
  }
}

// log-sum-exp over column tiles of width bn: the cross-entropy reference's lse partials.
ref::Matrix row_partial_logsumexp(const ref::Matrix& y, int64_t bn) {
  const std::vector<int32_t> no_targets(std::size_t(y.rows), ref::CrossEntropyOptions{}.ignore_index);
  return ref::cross_entropy_partials(y, no_targets, bn, {}).lse;
}
ref::Matrix column_partial_logsumexp(const ref::Matrix& y, int64_t bm) {
  return row_partial_logsumexp(y.transposed(), bm).transposed();
}

// The three references of a statistic from its row and column partial functions: the whole part
// is the column partial of the row partials.
ReducedReference reference_of(const std::vector<ref::Matrix>& values, ref::PartShape part,
                              const std::function<ref::Matrix(const ref::Matrix&, int64_t)>& row_partial,
                              const std::function<ref::Matrix(const ref::Matrix&, int64_t)>& column_partial) {
  ReducedReference out;
  for (const ref::Matrix& y : values) {
    out.rows.push_back(row_partial(y, part.cols));
    out.columns.push_back(column_partial(y, part.rows));
    out.whole.push_back(column_partial(out.rows.back(), part.rows));
  }
  return out;
}

// A program must list the tile inputs it reads (launch_program validates only
// those): the CPU executor refuses one that reads another, naming the rule.
struct ReadsAnUnlistedInput {
  epilogue::TileIn listed{}, unlisted{};
  epilogue::TileOut out{};

  template <class Inputs>
  void tile_inputs(Inputs& list) const { list(listed); }

  template <class Tile>
  void operator()(Tile& t) const {
    t.store(out, [&](const Element& x) { return t.load(listed, x) + t.load(unlisted, x); });
  }
};

TEST_P(EpilogueExecutor, RefusesATileInputTheProgramDoesNotList) {
  const auto acc = random_accumulators(kShape);
  const HostTensor a = random_input(DType::bf16, kShape.rows, kShape.cols, kShape.batch),
                   b = random_input(DType::bf16, kShape.rows, kShape.cols, kShape.batch);
  HostTensor out = poisoned_output(DType::f32, kShape.rows, kShape.cols, kShape.batch);
  const ReadsAnUnlistedInput reads_both{.listed = tile_in(a), .unlisted = tile_in(b), .out = tile_out(out)};
  try {
    run_batches(reads_both, acc, part());
    FAIL() << "no error";
  } catch (const coda::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("tile_inputs()"), std::string::npos) << e.what();
  }
  // The same program reading the listed input twice is valid.
  const ReadsAnUnlistedInput reads_listed{.listed = tile_in(a), .unlisted = tile_in(a), .out = tile_out(out)};
  EXPECT_NO_THROW(run_batches(reads_listed, acc, part()));
}

// t.load_index reads int32 words on the GPU: the CPU executor refuses any other vector, naming it.
struct ReadsAnIndex {
  epilogue::ColumnVector indices;
  epilogue::TileOut out;

  template <class Tile>
  void operator()(Tile& t) const {
    t.store(out, [&](const Element& x) { return float(t.load_index(indices, x)); });
  }
};

TEST_P(EpilogueExecutor, LoadIndexRefusesAVectorThatIsNotInt32) {
  const auto acc = random_accumulators(kShape);
  const HostTensor floats = random_column_vector(DType::f32, kShape.rows, kShape.batch);
  HostTensor out = poisoned_output(DType::f32, kShape.rows, kShape.cols, kShape.batch);
  try {
    run_batches(ReadsAnIndex{.indices = column_vector(floats), .out = tile_out(out)}, acc, part());
    FAIL() << "no error";
  } catch (const coda::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("load_index reads an int32 ColumnVector, this one holds f32"),
              std::string::npos)
        << e.what();
  }
  // The index of PairTables too.
  alignas(16) static const float table[4] = {1, 2, 3, 4};
  try {
    run_batches(CopyPairTables{{column_vector(floats), {table, 2, 2}, {table, 2, 2}, Divisor(4)}, tile_out(out)}, acc,
                part());
    FAIL() << "no error";
  } catch (const coda::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("map_pairs(PairTables) (its index) reads an int32 ColumnVector, this one holds f32"),
              std::string::npos)
        << e.what();
  }
}

// Tables are indexed with 32 bits: table() refuses one of 2^31 elements or more, and a batched one.
TEST(TableArgument, RefusesWhatThirtyTwoBitIndicesCannotAddress) {
  alignas(16) static float storage[16];
  const TensorView fits = TensorView::matrix(storage, DType::f32, 2, 8);
  const epilogue::Table table = epilogue::table(fits, "cos");
  EXPECT_EQ(table.ld, 8);
  EXPECT_EQ(table.rows, 2);
  // Views only: nothing is read at these sizes.
  const TensorView huge = TensorView::matrix(storage, DType::f32, int64_t(1) << 21, 1024);
  try {
    (void)epilogue::table(huge, "cos");
    ADD_FAILURE() << "accepted a table of 2^31 elements";
  } catch (const coda::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("cos"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("< 2^31 elements"), std::string::npos) << e.what();
  }
}

// A program launch's kernels are built for one pair of operand majors (coda::OperandMajors,
// K-major by default): gemm_program and launch_program refuse operands of others, naming them.
TEST(ProgramLaunch, RefusesOperandsOfMajorsItsKernelsAreNotBuiltFor) {
  EXPECT_NO_THROW(epilogue::check_operand_majors(Major::k, Major::k, Major::k, Major::k, "coda::gemm_program"));
  EXPECT_NO_THROW(epilogue::check_operand_majors(Major::mn, Major::mn, Major::mn, Major::mn, "coda::gemm_program"));
  struct Refusal {
    Major a, b, built_a, built_b;
    const char* message;
  };
  const Refusal refusals[] = {
      {Major::k, Major::mn, Major::k, Major::k, "coda::gemm_program: argument 'b': this launch's kernels take a K-major B"},
      {Major::mn, Major::k, Major::k, Major::k, "coda::gemm_program: argument 'a': this launch's kernels take a K-major A"},
      {Major::k, Major::k, Major::k, Major::mn, "coda::gemm_program: argument 'b': this launch's kernels take an MN-major B"}};
  for (const Refusal& r : refusals) {
    try {
      epilogue::check_operand_majors(r.a, r.b, r.built_a, r.built_b, "coda::gemm_program");
      ADD_FAILURE() << "accepted; expected: " << r.message;
    } catch (const coda::Unsupported& e) {
      EXPECT_NE(std::string(e.what()).find(r.message), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("coda::OperandMajors<A, B>"), std::string::npos) << e.what();
    }
  }
}

// launch_program's rule for the tile inputs a program lists (the GPU executor reads them as
// the operands' 16-bit type, column pairs as aligned 32-bit words), each rule named.
TEST(TileInputsOnTheGpu, EachRuleIsCheckedAndNamed) {
  alignas(16) static uint16_t storage[64];
  auto refused = [](const ReadsAnUnlistedInput& program, const char* rule) {
    try {
      epilogue::check_tile_inputs(program, DType::bf16, "coda::launch_program");
      ADD_FAILURE() << "accepted; expected: " << rule;
    } catch (const coda::InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("tile input 0"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(rule), std::string::npos) << e.what();
    }
  };
  const epilogue::TileIn good{.data = storage, .dtype = DType::bf16, .ld = 8, .batch_stride = 32};
  EXPECT_NO_THROW(epilogue::check_tile_inputs(ReadsAnUnlistedInput{.listed = good}, DType::bf16, "f"));
  EXPECT_NO_THROW(epilogue::check_tile_inputs(ReadsAnUnlistedInput{}, DType::bf16, "f"));  // absent: not read
  epilogue::TileIn wrong = good;
  wrong.dtype = DType::f32;
  refused(ReadsAnUnlistedInput{.listed = wrong}, "operands' type bf16");
  wrong = good;
  wrong.data = reinterpret_cast<const uint8_t*>(storage) + 2;
  refused(ReadsAnUnlistedInput{.listed = wrong}, "4-byte aligned");
  wrong = good;
  wrong.ld = 7;
  refused(ReadsAnUnlistedInput{.listed = wrong}, "even row stride");
  wrong = good;
  wrong.batch_stride = 33;
  refused(ReadsAnUnlistedInput{.listed = wrong}, "even row stride and batch stride");
}

// A program's staged input (program.hpp) is fetched by TMA into the shared memory the program's
// stores then write through: launch_program also requires it given, 16-byte alignment, the map
// tile_in() makes, and no read after a store or a reduction through shared memory, each named.
struct StagesItsInput {
  epilogue::TileIn in{};
  epilogue::TileOut out{};
  static constexpr auto staged_input = &StagesItsInput::in;

  template <class Inputs>
  void tile_inputs(Inputs& list) const { list(in); }

  template <class Tile>
  void operator()(Tile& t) const {
    t.map([&](Element& x) { x.value = t.load(in, x); });
    t.store(out);
  }
};
static_assert(epilogue::StagesAnInput<StagesItsInput> && !epilogue::StagesAnInput<ReadsAnUnlistedInput>);
// And a staged row vector is a RowVector member named staged_row_vector; nothing else is one.
struct StagesItsRowVector {
  epilogue::RowVector weight{};
  static constexpr auto staged_row_vector = &StagesItsRowVector::weight;
};
struct NamesAColumnVector {
  epilogue::ColumnVector scale{};
  static constexpr auto staged_row_vector = &NamesAColumnVector::scale;
};
static_assert(epilogue::StagesARowVector<StagesItsRowVector> && !epilogue::StagesARowVector<NamesAColumnVector> &&
              !epilogue::StagesARowVector<StagesItsInput>);
// A null member pointer names none: LinearCombinationOf stages its column bias only with that term.
struct NamesNoRowVector {
  epilogue::RowVector weight{};
  static constexpr epilogue::RowVector NamesNoRowVector::* staged_row_vector = nullptr;
};
static_assert(!epilogue::StagesARowVector<NamesNoRowVector>);
static_assert(epilogue::StagesARowVector<epilogue::LinearCombinationOf<epilogue::LinearCombinationTerms{.column_bias = true}>> &&
              !epilogue::StagesARowVector<epilogue::LinearCombinationOf<epilogue::LinearCombinationTerms{.row_bias = true}>>);

TEST(TileInputsOnTheGpu, AStagedInputNeedsTmaAlignmentAndAMap) {
  alignas(16) static uint16_t storage[64];
  auto refused = [](const epilogue::TileIn& in, const char* rule) {
    try {
      epilogue::check_tile_inputs(StagesItsInput{.in = in}, DType::bf16, "coda::launch_program");
      ADD_FAILURE() << "accepted; expected: " << rule;
    } catch (const coda::InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("staged input (staged_input)"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(rule), std::string::npos) << e.what();
    }
  };
  epilogue::TileIn good{.data = storage, .dtype = DType::bf16, .ld = 8, .batch_stride = 32};
  good.map.opaque[0] = 1;  // stands for the map tile_in() makes (encoding one needs a driver)
  EXPECT_NO_THROW(epilogue::check_tile_inputs(StagesItsInput{.in = good}, DType::bf16, "f"));
  refused({}, "must be given");
  epilogue::TileIn wrong = good;
  wrong.data = storage + 2;  // 4-byte aligned: enough for global loads, not for TMA
  refused(wrong, "16-byte aligned");
  wrong = good;
  wrong.ld = 6;
  refused(wrong, "multiples of 16 bytes");
  wrong = good;
  wrong.batch_stride = 20;
  refused(wrong, "multiples of 16 bytes");
  wrong = good;
  wrong.map = {};
  refused(wrong, "make it with coda::epilogue::tile_in()");
}

// Reads its staged input after a primitive that may write through shared memory (`writer`: 0
// none, 1 a store, 2 a column_reduce, 3 a reduce) or, writer 4, inside a store's function.
struct ReadsItsStagedInputAfter {
  epilogue::TileIn in{};
  epilogue::TileOut out{};
  epilogue::Partials sums{};
  int writer = 0;
  static constexpr auto staged_input = &ReadsItsStagedInputAfter::in;

  template <class Tile>
  void operator()(Tile& t) const {
    auto value = [](const Element& x) { return x.value; };
    t.row_reduce(sums, epilogue::Sum{}, value);  // 1: row reductions write no shared memory
    if (writer == 1) t.store(out);
    if (writer == 2) t.column_reduce(sums, epilogue::Sum{}, value);
    if (writer == 3) t.reduce(sums, epilogue::Sum{}, value);
    if (writer == 4) t.store(out, [&](const Element& x) { return t.load(in, x); });  // 2
    else t.map([&](Element& x) { x.value += t.load(in, x); });                        // 2 or 3
    t.store(out);
  }
};

TEST(TileInputsOnTheGpu, AStagedInputIsReadBeforeAnythingWritesThroughSharedMemory) {
  alignas(16) static uint16_t storage[64];
  epilogue::TileIn in{.data = storage, .dtype = DType::bf16, .ld = 8, .batch_stride = 32};
  in.map.opaque[0] = 1;
  EXPECT_NO_THROW(epilogue::check_tile_inputs(ReadsItsStagedInputAfter{.in = in}, DType::bf16, "f"));
  for (int writer : {1, 2, 3, 4}) {
    SCOPED_TRACE(::testing::Message() << "writer " << writer);
    try {
      epilogue::check_tile_inputs(ReadsItsStagedInputAfter{.in = in, .writer = writer}, DType::bf16, "coda::launch_program");
      ADD_FAILURE() << "accepted a late read";
    } catch (const coda::InvalidArgument& e) {
      const std::string what = e.what(), primitive = writer == 4 ? "2" : "3";
      EXPECT_NE(what.find("staged input (staged_input)"), std::string::npos) << what;
      EXPECT_NE(what.find("is read by primitive " + primitive + " (program order), after a store"), std::string::npos)
          << what;
    }
  }
}

// A whole part sums up to 32768 terms in fp32: its error is judged against the sum of the terms'
// magnitudes.
TEST_P(EpilogueExecutor, SumReductions) {
  const auto acc = random_accumulators(kShape);
  const auto values = fp32_values(acc);
  const auto magnitudes = per_batch(values, [](ref::Matrix y, int64_t) {
    for (double& v : y.data) v = std::abs(v);
    return y;
  });
  const ReducedReference want = reference_of(values, part(), ref::row_partial_sums, ref::column_partial_sums);
  const ReducedReference scales = reference_of(magnitudes, part(), ref::row_partial_sums, ref::column_partial_sums);
  for_both_layouts([&](bool minor_major) {
    expect_reduced(reduce_every_way<epilogue::Sum>(acc, part(), minor_major, [](const Element& x) { return x.value; }),
                   want, &scales);
  });
}

// NaN propagates, wherever it sits in the fold: first, inside, last.
TEST_P(EpilogueExecutor, MaxReductionsPropagateNaN) {
  auto acc = random_accumulators(kShape);
  for (auto [r, c] : {std::pair{0, 0}, std::pair{70, 130}, std::pair{149, 299}, std::pair{64, 255}})
    acc[1](r, c) = kNaN;
  acc[0](5, 17) = kNaN;
  const ReducedReference want = reference_of(fp32_values(acc), part(), ref::row_partial_max, ref::column_partial_max);
  for_both_layouts([&](bool minor_major) {
    expect_reduced(reduce_every_way<epilogue::Max>(acc, part(), minor_major, [](const Element& x) { return x.value; }),
                   want);
  });
}

// Online max / sum-exp, with a row of -inf, a column of -inf and the last part (rows 128.., columns
// 256.. for every part shape) all -inf: log-sum-exp of nothing but -inf is -inf.
TEST_P(EpilogueExecutor, LogSumExpReductionsIncludingAllMinusInfinity) {
  auto acc = random_accumulators(kShape);
  for (ref::Matrix& y : acc) {
    for (int64_t c = 0; c < y.cols; ++c) y(3, c) = -kInf;
    for (int64_t r = 0; r < y.rows; ++r) y(r, 200) = -kInf;
    for (int64_t r = 128; r < y.rows; ++r)
      for (int64_t c = 256; c < y.cols; ++c) y(r, c) = -kInf;
  }
  const auto values = fp32_values(acc);
  const ReducedReference want = reference_of(values, part(), row_partial_logsumexp, column_partial_logsumexp);
  for_both_layouts([&](bool minor_major) {
    expect_reduced(
        reduce_every_way<epilogue::LogSumExp>(acc, part(), minor_major, [](const Element& x) { return x.value; }),
        want);
  });

  // f may return the monoid's State itself: each element counted twice adds log 2 everywhere.
  ReducedReference doubled = want;
  for (auto* results : {&doubled.rows, &doubled.columns, &doubled.whole})
    for (ref::Matrix& y : *results)
      for (double& v : y.data) v += std::log(2.0);
  expect_reduced(reduce_every_way<epilogue::LogSumExp>(acc, part(), false,
                                                       [](const Element& x) {
                                                         return epilogue::LogSumExp::State{x.value, 2.0f};
                                                       }),
                 doubled);
}

// LogSumExp::fold (the GPU executor's way with a row's values) agrees with lifting and combining
// one by one: on random values, and where +inf, -inf or NaN take part.
TEST(LogSumExpFold, AgreesWithCombiningOneByOne) {
  using L = epilogue::LogSumExp;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  auto one_by_one = [](const float (&v)[8]) {
    L::State s = L::identity();
    for (float x : v) s = L::combine(s, L::lift(x));
    return L::finish(s);
  };
  std::vector<std::array<float, 8>> cases = {{-kInf, -kInf, -kInf, -kInf, -kInf, -kInf, -kInf, -kInf},
                                             {1.0f, kInf, -3.0f, 0.5f, kInf, 2.0f, -kInf, 0.0f},
                                             {1.0f, -kInf, 7.0f, 0.5f, -kInf, 2.0f, 7.0f, 0.0f},
                                             {1.0f, 2.0f, std::nanf(""), 0.5f, 3.0f, 2.0f, 4.0f, 0.0f}};
  SCOPED_TRACE(seed_note());
  std::array<float, 8> random{};
  for (float& x : random) x = float(test::uniform(-30.0, 30.0));
  cases.push_back(random);
  for (const auto& c : cases) {
    float v[8];
    std::copy(c.begin(), c.end(), v);
    const float want = one_by_one(v), got = L::finish(L::fold(v));
    if (std::isnan(want)) EXPECT_TRUE(std::isnan(got));
    else if (std::isinf(want)) EXPECT_EQ(got, want);
    else EXPECT_NEAR(got, want, 1e-5f * std::fabs(want) + 1e-6f);
  }
}

// Sum::fold (four running sums) agrees with adding one by one up to fp32 rounding, and carries
// inf and NaN through like the additions do.
TEST(SumFold, AgreesWithAddingOneByOne) {
  using S = epilogue::Sum;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  SCOPED_TRACE(seed_note());
  float random[32];
  double exact = 0.0, magnitude = 0.0;
  for (float& x : random) {
    x = float(test::uniform(-30.0, 30.0));
    exact += x;
    magnitude += std::fabs(x);
  }
  EXPECT_NEAR(S::fold(random), exact, 32 * 6e-8 * magnitude);
  float special[5] = {1.0f, kInf, 2.0f, 3.0f, 4.0f};
  EXPECT_EQ(S::fold(special), kInf);
  special[3] = -kInf;
  EXPECT_TRUE(std::isnan(S::fold(special)));
  special[3] = std::nanf("");
  EXPECT_TRUE(std::isnan(S::fold(special)));
}

// Pick writes the one element its predicate picks, only from the part holding it; segments
// without one stay unwritten. `chosen(row, col)` picks at most one element per segment.
TEST_P(EpilogueExecutor, PickWritesOnlyWhereSomethingIsPicked) {
  const auto acc = random_accumulators(kShape);
  const auto values = fp32_values(acc);
  const int64_t m = kShape.rows, n = kShape.cols;
  // Rows: column (7 r + 3) mod N, none on every fifth row. Columns: the row r with
  // (7 r + 3) mod N == c, if any (7 and 300 are coprime). Parts: their first element, on every
  // other part along N.
  const auto row_pick = [&](int64_t r, int64_t c) { return r % 5 != 4 && c == (7 * r + 3) % n; };
  const auto column_pick = [&](int64_t r, int64_t c) { return c == (7 * r + 3) % n; };
  const auto part_pick = [&](int64_t r, int64_t c) {
    return r % part().rows == 0 && c % part().cols == 0 && (c / part().cols) % 2 == 0;
  };
  // The picked value of each segment, NaN (the poison) where nothing is picked.
  const auto picked = [&](const ref::Matrix& y, const std::function<bool(int64_t, int64_t)>& chosen, int64_t r0,
                          int64_t r1, int64_t c0, int64_t c1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = c0; c < c1; ++c)
        if (chosen(r, c)) return y(r, c);
    return kNaN;
  };
  const auto pick_by = [](std::function<bool(int64_t, int64_t)> chosen) {
    return [chosen](const Element& x) { return epilogue::Pick::State{x.value, chosen(x.row, x.col)}; };
  };

  for_both_layouts([&](bool minor_major) {
    Reduced by_row = reduce_every_way<epilogue::Pick>(acc, part(), minor_major, pick_by(row_pick));
    Reduced by_column = reduce_every_way<epilogue::Pick>(acc, part(), minor_major, pick_by(column_pick));
    Reduced by_part = reduce_every_way<epilogue::Pick>(acc, part(), minor_major, pick_by(part_pick));
    for (int64_t b = 0; b < kShape.batch; ++b) {
      const ref::Matrix& y = values[std::size_t(b)];
      expect_close(by_row.rows.matrix(b), ref::row_partials(m, n, part().cols, [&](int64_t r, int64_t c0, int64_t c1) {
                     return picked(y, row_pick, r, r + 1, c0, c1);
                   }));
      expect_close(by_column.columns.matrix(b),
                   ref::column_partials(m, n, part().rows, [&](int64_t c, int64_t r0, int64_t r1) {
                     return picked(y, column_pick, r0, r1, c, c + 1);
                   }));
      ref::Matrix want_parts(part_count(m, part().rows), part_count(n, part().cols));
      for (int64_t i = 0; i < want_parts.rows; ++i)
        for (int64_t j = 0; j < want_parts.cols; ++j)
          want_parts(i, j) = picked(y, part_pick, i * part().rows, std::min((i + 1) * part().rows, m), j * part().cols,
                                    std::min((j + 1) * part().cols, n));
      expect_close(by_part.whole.matrix(b), want_parts);
    }
    for (const Reduced* run : {&by_row, &by_column, &by_part})
      for (const PartialsBuffer* p : {&run->rows, &run->columns, &run->whole}) p->expect_gaps_untouched();
  });
}

// A partials slot shared by all parts along N (tile_stride 0): the one part that picks writes it.
TEST_P(EpilogueExecutor, PickIntoOneSlotPerRow) {
  const auto acc = random_accumulators(kShape);
  const auto values = fp32_values(acc);
  std::vector<int64_t> target(std::size_t(kShape.rows));
  for (auto& t : target) t = uniform_int(-1, kShape.cols - 1);  // -1: nothing to pick in that row
  PartialsBuffer slots(kShape.rows, 1, kShape.batch);
  epilogue::Partials shared = slots.partials();
  shared.tile_stride = 0;
  const auto pick = [&](const Element& x) {
    return epilogue::Pick::State{x.value, x.col == target[std::size_t(x.row)]};
  };
  run_batches(ReduceEveryWay<epilogue::Pick, decltype(pick)>{shared, {}, {}, pick}, acc, part());
  for (int64_t b = 0; b < kShape.batch; ++b) {
    ref::Matrix want(kShape.rows, 1);
    for (int64_t r = 0; r < kShape.rows; ++r) {
      const int64_t t = target[std::size_t(r)];
      want(r, 0) = t < 0 ? kNaN : values[std::size_t(b)](r, t);
    }
    expect_close(slots.matrix(b), want);
  }
  slots.expect_gaps_untouched();
}

// ---- parts at the edges -------------------------------------------------------------------------

// Counting (a sum of ones) over rows, columns and whole parts gives every part's extent: the
// executor cuts the problem into parts of the given shape, narrower at the bottom and right edges.
TEST_P(EpilogueExecutor, PartsCoverTheProblemNarrowerAtItsEdges) {
  const ProblemShape shapes[] = {{150, 300, 2}, {256, 512, 1}, {5, 6, 1}, {1, 1, 1}, {129, 257, 1}};
  const auto extent = [](int64_t, int64_t begin, int64_t end) { return double(end - begin); };
  for (const ProblemShape& shape : shapes) {
    SCOPED_TRACE(::testing::Message() << shape.rows << " x " << shape.cols);
    const auto acc = random_accumulators(shape);
    ReducedReference want;
    for (int64_t b = 0; b < shape.batch; ++b) {
      want.rows.push_back(ref::row_partials(shape.rows, shape.cols, part().cols, extent));
      want.columns.push_back(ref::column_partials(shape.rows, shape.cols, part().rows, extent));
      want.whole.push_back(ref::column_partial_sums(want.rows.back(), part().rows));
    }
    expect_reduced(reduce_every_way<epilogue::Sum>(acc, part(), false, [](const Element&) { return 1.0f; }), want);
  }
}

// t.part_columns() is the part's columns inside the problem: every element's column lies in it, and
// its ends are the part's (the last part of a row narrower at the problem's edge).
struct RecordPartColumns {
  int64_t part_cols, problem_cols;
  int* wrong;
  int* calls;

  template <class Tile>
  void operator()(Tile& t) const {
    const epilogue::ColumnRange part = t.part_columns();
    ++*calls;
    if (part.first % part_cols != 0 || part.end != std::min<int64_t>(part.first + part_cols, problem_cols)) ++*wrong;
    t.map([&](Element& x) {
      if (x.col < part.first || x.col >= part.end) ++*wrong;
    });
  }
};

TEST_P(EpilogueExecutor, PartColumnsAreThePartsColumnsInsideTheProblem) {
  const auto acc = random_accumulators(kShape);
  int wrong = 0, calls = 0;
  run_batches(RecordPartColumns{part().cols, kShape.cols, &wrong, &calls}, acc, part());
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(calls, kShape.batch * part_count(kShape.rows, part().rows) * part_count(kShape.cols, part().cols));
}

}  // namespace
}  // namespace coda::test

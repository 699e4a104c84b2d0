// The CPU executor's primitives (coda/epilogue/program.hpp), each through a small program: which
// elements and pairs the maps visit and with which coordinates, program order, loads of every
// argument kind, stores in every output type and width, and parts at the problem's edges. Most
// tests run a 150 x 300 problem of two batches, whose extents are multiples of no part's, so every
// test meets narrower parts at the bottom and right edges. (Reductions: executor_reductions_test.cpp;
// the rules a program's arguments are checked by: program_rules_test.cpp.)
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
constexpr ProblemShape kShape = kExecutorShape;

class EpilogueExecutor : public PartShapeTest {};

INSTANTIATE_TEST_SUITE_P(Parts, EpilogueExecutor, ::testing::ValuesIn(kPartShapes), part_shape_name);

// ---- maps ---------------------------------------------------------------------------------------

// Counts the visits of every element and every pair; a visit outside the problem, or whose value
// is not the fp32 accumulator at its (batch, row, col), counts as wrong instead.
struct CountVisits {
  const std::vector<reference::Matrix>* accumulators;
  std::vector<int>* element_visits;  // batch x rows x cols
  std::vector<int>* pair_visits;     // batch x rows x cols / 2
  int* wrong_visits;

  bool holds(int32_t batch, int32_t row, int32_t col, float value) const {
    const reference::Matrix& acc = (*accumulators)[std::size_t(batch)];
    return row >= 0 && row < acc.rows && col >= 0 && col < acc.cols && value == float(acc(row, col));
  }
  std::size_t flat(int32_t batch, int32_t row, int32_t col) const {
    const reference::Matrix& acc = (*accumulators)[std::size_t(batch)];
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
  const auto transformed = per_batch(values, [](const reference::Matrix& y, int64_t) {
    reference::Matrix out(y.rows, y.cols);
    for (int64_t r = 0; r < y.rows; ++r)
      for (int64_t c = 0; c < y.cols; ++c) out(r, c) = 2.0f * float(y(r, c ^ 1)) + 1.0f;  // pairs swapped
    return out;
  });
  expect_output(before, values, 1.0, kExactly);
  expect_output(after, transformed, 1.0, kExactly);
  expect_partials(row_sums, per_batch(transformed, [&](const reference::Matrix& y, int64_t) {
                    return reference::row_partial_sums(y, part().cols);
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
  std::vector<reference::Matrix> acc;
  for (int64_t b = 0; b < kShape.batch; ++b) acc.push_back(random_matrix(kShape.rows, kShape.cols, -600, 600));
  const std::pair<DType, float> outputs[] = {
      {DType::f32, 1.0f}, {DType::bf16, 1.0f}, {DType::f16, 1.0f}, {DType::e4m3, 0.75f}, {DType::e5m2, 96.0f}};
  for (const auto& [dtype, scale] : outputs) {
    SCOPED_TRACE(std::string(name(dtype)));
    HostTensor out = poisoned_output(dtype, kShape.rows, kShape.cols, kShape.batch);
    run_batches(StoreAccumulators{tile_out(out, scale)}, acc, part());
    const auto want = per_batch(acc, [&](const reference::Matrix& y, int64_t) {
      reference::Matrix stored(y.rows, y.cols);
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
  const auto each = [&](DType dtype, int64_t cols,
                        const std::function<double(const reference::Matrix&, int64_t, int64_t)>& f) {
    return per_batch(acc, [&](const reference::Matrix& y, int64_t) {
      reference::Matrix stored(m, cols);
      for (int64_t r = 0; r < m; ++r)
        for (int64_t c = 0; c < cols; ++c) stored(r, c) = rounded(dtype, f(y, r, c));
      return stored;
    });
  };
  const auto at = [](const reference::Matrix& y, int64_t r, int64_t c) { return float(y(r, c)); };
  expect_output(exact,
                each(DType::f32, n, [&](const reference::Matrix& y, int64_t r, int64_t c) { return at(y, r, c); }), 1.0,
                kExactly);
  expect_output(half,
                each(DType::bf16, n / 2,
                     [&](const reference::Matrix& y, int64_t r, int64_t c) {
                       return double(at(y, r, 2 * c) - at(y, r, 2 * c + 1));
                     }),
                1.0, kExactly);
  expect_output(wide,
                each(DType::f16, 2 * n,
                     [&](const reference::Matrix& y, int64_t r, int64_t c) {
                       return double(c % 2 == 0 ? at(y, r, c / 2) : -2.0f * at(y, r, c / 2));
                     }),
                1.0, kExactly);
  expect_output(out,
                each(DType::e5m2, n,
                     [&](const reference::Matrix& y, int64_t r, int64_t c) { return double(0.5f * at(y, r, c)); }),
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
    return per_batch(fp32_values(acc), [&](const reference::Matrix& y, int64_t) {
      reference::Matrix out(y.rows, cols);
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

// A wide store with a row reduction from one function, or as the two primitives apart: the same
// output and the same partials (Sum and Max).
template <bool kFused>
struct WideWithRowSums {
  epilogue::TileOut wide;
  epilogue::Partials sums, maxima;

  template <class Tile>
  void operator()(Tile& t) const {
    const auto f = [](const Element& x) {
      return epilogue::WideAndRowValue{{x.value, 0.5f * x.value}, x.value * x.value - float(x.col)};
    };
    if constexpr (kFused) {
      t.store_wide_row_reduce(wide, sums, epilogue::Sum{}, f);
      t.store_wide_row_reduce(wide, maxima, epilogue::Max{}, f);
    } else {
      t.row_reduce(sums, epilogue::Sum{}, [&](const Element& x) { return f(x).row_value; });
      t.row_reduce(maxima, epilogue::Max{}, [&](const Element& x) { return f(x).row_value; });
      t.store_wide(wide, [&](const Element& x) { return f(x).wide; });
    }
  }
};

TEST_P(EpilogueExecutor, StoreWideRowReduceIsStoreWideAndRowReduce) {
  const auto acc = random_accumulators(kShape);
  const int64_t parts_n = part_count(kShape.cols, part().cols);
  HostTensor fused_out = poisoned_output(DType::f32, kShape.rows, 2 * kShape.cols, kShape.batch);
  HostTensor apart_out = poisoned_output(DType::f32, kShape.rows, 2 * kShape.cols, kShape.batch);
  PartialsBuffer fused_sums(kShape.rows, parts_n, kShape.batch), fused_max(kShape.rows, parts_n, kShape.batch);
  PartialsBuffer apart_sums(kShape.rows, parts_n, kShape.batch), apart_max(kShape.rows, parts_n, kShape.batch);
  run_batches(WideWithRowSums<true>{tile_out(fused_out), fused_sums.partials(), fused_max.partials()}, acc, part());
  run_batches(WideWithRowSums<false>{tile_out(apart_out), apart_sums.partials(), apart_max.partials()}, acc, part());
  EXPECT_EQ(fused_out.bytes, apart_out.bytes);
  fused_sums.expect_written_exactly();
  fused_max.expect_written_exactly();
  for (int64_t b = 0; b < kShape.batch; ++b) {
    EXPECT_EQ(fused_sums.matrix(b).data, apart_sums.matrix(b).data);
    EXPECT_EQ(fused_max.matrix(b).data, apart_max.matrix(b).data);
  }
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
  std::vector<reference::Vector> index_values(static_cast<std::size_t>(batch));
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
      return per_batch(acc, [&](const reference::Matrix&, int64_t b) {
        reference::Matrix out(m, n);
        for (int64_t r = 0; r < m; ++r)
          for (int64_t c = 0; c < n; ++c) out(r, c) = f(b, r, c);
        return out;
      });
    };
    const reference::Vector row_values = row_vector_values(row);
    const reference::Matrix table_values = table.matrix();
    const auto in_values = per_batch(acc, [&](const reference::Matrix&, int64_t b) { return in.matrix(b); });
    const reference::Matrix column_values = column.matrix();  // batch x M
    expect_output(in_copy, in_values, 1.0, kExactly);
    expect_output(wide_copy, per_batch(acc, [&](const reference::Matrix&, int64_t b) { return wide.matrix(b); }), 1.0,
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

// The index of PairTables is read as int32 on the GPU: the CPU executor refuses another type.
TEST_P(EpilogueExecutor, PairTablesRefuseAnIndexThatIsNotInt32) {
  const auto acc = random_accumulators(kShape);
  const HostTensor floats = random_column_vector(DType::f32, kShape.rows, kShape.batch);
  HostTensor out = poisoned_output(DType::f32, kShape.rows, kShape.cols, kShape.batch);
  alignas(16) static const float table[4] = {1, 2, 3, 4};
  try {
    run_batches(CopyPairTables{{column_vector(floats), {table, 2, 2}, {table, 2, 2}, Divisor(4)}, tile_out(out)}, acc,
                part());
    FAIL() << "no error";
  } catch (const coda::InvalidArgument& e) {
    EXPECT_NE(
        std::string(e.what()).find("map_pairs(PairTables) (its index) reads an int32 ColumnVector, this one holds f32"),
        std::string::npos)
        << e.what();
  }
}

TEST_P(EpilogueExecutor, PairTablesReadTheIndexedRowAlongEachPeriod) {
  const auto acc = random_accumulators(kShape);
  const int64_t m = kShape.rows, n = kShape.cols, batch = kShape.batch, rows = 7, period = 10;
  const HostTensor first = random_input(DType::f32, rows, period / 2), second = random_input(DType::f32, rows, period / 2);
  std::vector<reference::Vector> index_values(static_cast<std::size_t>(batch));
  for (auto& v : index_values)
    for (int64_t r = 0; r < m; ++r) v.push_back(double(uniform_int(-2, int(rows) + 1)));  // some outside
  const HostTensor indices = column_vector_of(DType::i32, index_values);
  HostTensor out = poisoned_output(DType::f32, m, n, batch);
  run_batches(CopyPairTables{{column_vector(indices), epilogue::table(first.view, "first"),
                              epilogue::table(second.view, "second"), Divisor(int32_t(period))},
                             tile_out(out)},
              acc, part());
  const reference::Matrix first_values = first.matrix(), second_values = second.matrix();
  expect_output(out,
                per_batch(acc,
                          [&](const reference::Matrix&, int64_t b) {
                            reference::Matrix want(m, n);
                            for (int64_t r = 0; r < m; ++r)
                              for (int64_t c = 0; c < n; ++c) {
                                const int64_t index = int64_t(index_values[std::size_t(b)][std::size_t(r)]);
                                const reference::Matrix& values = c % 2 == 0 ? first_values : second_values;
                                want(r, c) =
                                    index >= 0 && index < rows ? values(index, (c - c % 2) % period / 2) : kNaN;
                              }
                            return want;
                          }),
                1.0, kExactly);
}

// ---- parts at the edges -------------------------------------------------------------------------

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

// The CPU executor's reductions (coda/epilogue/program.hpp): row / column / whole-part reductions
// with every monoid (NaN and -inf included), folds against combining one by one, pick-one, and the
// partials' strides, on a 150 x 300 problem of two batches (narrower parts at its edges).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "coda/epilogue/host_arguments.hpp"
#include "coda/reference/cross_entropy.hpp"
#include "coda/reference/reductions.hpp"
#include "epilogue/support.hpp"

namespace coda::test {
namespace {

using epilogue::Element;
constexpr ProblemShape kShape = kExecutorShape;

class EpilogueExecutorReductions : public PartShapeTest {};

INSTANTIATE_TEST_SUITE_P(Parts, EpilogueExecutorReductions, ::testing::ValuesIn(kPartShapes), part_shape_name);

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
Reduced reduce_every_way(const std::vector<reference::Matrix>& acc, reference::PartShape part, bool minor_major,
                         Value value) {
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
  std::vector<reference::Matrix> rows, columns, whole;
};

// `scales`, when given, are each result's scale (see expect_close_to_scale).
void expect_reduced(const Reduced& got, const ReducedReference& want, const ReducedReference* scales = nullptr) {
  const auto expect = [](const char* what, const PartialsBuffer& partials, const std::vector<reference::Matrix>& wanted,
                         const std::vector<reference::Matrix>* scale) {
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
reference::Matrix row_partial_logsumexp(const reference::Matrix& y, int64_t bn) {
  const std::vector<int32_t> no_targets(std::size_t(y.rows), reference::CrossEntropyOptions{}.ignore_index);
  return reference::cross_entropy_partials(y, no_targets, bn, {}).lse;
}
reference::Matrix column_partial_logsumexp(const reference::Matrix& y, int64_t bm) {
  return row_partial_logsumexp(y.transposed(), bm).transposed();
}

// The three references of a statistic from its row and column partial functions: the whole part
// is the column partial of the row partials.
ReducedReference reference_of(
    const std::vector<reference::Matrix>& values, reference::PartShape part,
    const std::function<reference::Matrix(const reference::Matrix&, int64_t)>& row_partial,
    const std::function<reference::Matrix(const reference::Matrix&, int64_t)>& column_partial) {
  ReducedReference out;
  for (const reference::Matrix& y : values) {
    out.rows.push_back(row_partial(y, part.cols));
    out.columns.push_back(column_partial(y, part.rows));
    out.whole.push_back(column_partial(out.rows.back(), part.rows));
  }
  return out;
}

// A whole part sums up to 32768 terms in fp32: its error is judged against the sum of the terms'
// magnitudes.
TEST_P(EpilogueExecutorReductions, SumReductions) {
  const auto acc = random_accumulators(kShape);
  const auto values = fp32_values(acc);
  const auto magnitudes = per_batch(values, [](reference::Matrix y, int64_t) {
    for (double& v : y.data) v = std::abs(v);
    return y;
  });
  const ReducedReference want =
      reference_of(values, part(), reference::row_partial_sums, reference::column_partial_sums);
  const ReducedReference scales =
      reference_of(magnitudes, part(), reference::row_partial_sums, reference::column_partial_sums);
  for_both_layouts([&](bool minor_major) {
    expect_reduced(reduce_every_way<epilogue::Sum>(acc, part(), minor_major, [](const Element& x) { return x.value; }),
                   want, &scales);
  });
}

// NaN propagates, wherever it sits in the fold: first, inside, last.
TEST_P(EpilogueExecutorReductions, MaxReductionsPropagateNaN) {
  auto acc = random_accumulators(kShape);
  for (auto [r, c] : {std::pair{0, 0}, std::pair{70, 130}, std::pair{149, 299}, std::pair{64, 255}})
    acc[1](r, c) = kNaN;
  acc[0](5, 17) = kNaN;
  const ReducedReference want =
      reference_of(fp32_values(acc), part(), reference::row_partial_max, reference::column_partial_max);
  for_both_layouts([&](bool minor_major) {
    expect_reduced(reduce_every_way<epilogue::Max>(acc, part(), minor_major, [](const Element& x) { return x.value; }),
                   want);
  });
}

// Online max / sum-exp, with a row of -inf, a column of -inf and the last part (rows 128.., columns
// 256.. for every part shape) all -inf: log-sum-exp of nothing but -inf is -inf.
TEST_P(EpilogueExecutorReductions, LogSumExpReductionsIncludingAllMinusInfinity) {
  auto acc = random_accumulators(kShape);
  for (reference::Matrix& y : acc) {
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
    for (reference::Matrix& y : *results)
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
  auto one_by_one = [](const float(&v)[8]) {
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
TEST_P(EpilogueExecutorReductions, PickWritesOnlyWhereSomethingIsPicked) {
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
  const auto picked = [&](const reference::Matrix& y, const std::function<bool(int64_t, int64_t)>& chosen, int64_t r0,
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
      const reference::Matrix& y = values[std::size_t(b)];
      expect_close(by_row.rows.matrix(b),
                   reference::row_partials(m, n, part().cols, [&](int64_t r, int64_t c0, int64_t c1) {
                     return picked(y, row_pick, r, r + 1, c0, c1);
                   }));
      expect_close(by_column.columns.matrix(b),
                   reference::column_partials(m, n, part().rows, [&](int64_t c, int64_t r0, int64_t r1) {
                     return picked(y, column_pick, r0, r1, c, c + 1);
                   }));
      reference::Matrix want_parts(part_count(m, part().rows), part_count(n, part().cols));
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
TEST_P(EpilogueExecutorReductions, PickIntoOneSlotPerRow) {
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
    reference::Matrix want(kShape.rows, 1);
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
TEST_P(EpilogueExecutorReductions, PartsCoverTheProblemNarrowerAtItsEdges) {
  const ProblemShape shapes[] = {{150, 300, 2}, {256, 512, 1}, {5, 6, 1}, {1, 1, 1}, {129, 257, 1}};
  const auto extent = [](int64_t, int64_t begin, int64_t end) { return double(end - begin); };
  for (const ProblemShape& shape : shapes) {
    SCOPED_TRACE(::testing::Message() << shape.rows << " x " << shape.cols);
    const auto acc = random_accumulators(shape);
    ReducedReference want;
    for (int64_t b = 0; b < shape.batch; ++b) {
      want.rows.push_back(reference::row_partials(shape.rows, shape.cols, part().cols, extent));
      want.columns.push_back(reference::column_partials(shape.rows, shape.cols, part().rows, extent));
      want.whole.push_back(reference::column_partial_sums(want.rows.back(), part().rows));
    }
    expect_reduced(reduce_every_way<epilogue::Sum>(acc, part(), false, [](const Element&) { return 1.0f; }), want);
  }
}

}  // namespace
}  // namespace coda::test

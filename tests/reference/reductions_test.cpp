// The reductions' oracle: full row/column reductions by hand, the tile grid's segments, partials
// of every statistic combining to the full result for any tile size, and NaN in max.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <utility>

#include "coda/reference/reductions.hpp"
#include "reference/support.hpp"
#include "support/random.hpp"

namespace coda::reference {
namespace {

using ::testing::HasSubstr;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(ReferenceReductions, FullReductionsHandComputed) {
  Matrix y(2, 3), other(2, 3);
  y.data = {1, -2, 3, 4, 5, -6};
  other.data = {1, 1, 1, 2, 0, 1};
  EXPECT_EQ(row_sums(y), (Vector{2, 3}));                // 1-2+3, 4+5-6
  EXPECT_EQ(row_sums_of_squares(y), (Vector{14, 77}));   // 1+4+9, 16+25+36
  EXPECT_EQ(row_max(y), (Vector{3, 5}));
  EXPECT_EQ(row_dots(y, other), (Vector{2, 2}));         // 1-2+3, 8+0-6
  EXPECT_EQ(column_sums(y), (Vector{5, 3, -3}));
  EXPECT_EQ(abs_max(y), 6.0);
}

TEST(ReferenceReductions, PartialsHandComputed) {
  Matrix y(1, 5);
  y.data = {1, 2, 3, 4, 5};
  // bn = 2: tiles {1, 2}, {3, 4}, {5} (the last one narrower)
  EXPECT_EQ(row_partial_sums(y, 2).data, (std::vector<double>{3, 7, 5}));
  EXPECT_EQ(row_partial_sums_of_squares(y, 2).data, (std::vector<double>{5, 25, 25}));
  EXPECT_EQ(row_partial_max(y, 2).data, (std::vector<double>{2, 4, 5}));
  EXPECT_EQ(row_partial_dots(y, y, 2).data, (std::vector<double>{5, 25, 25}));
  const Matrix t = y.transposed();  // the same along columns: 5 x 1, bm = 2
  const Matrix column = column_partial_sums(t, 2);
  EXPECT_EQ(column.rows, 3);
  EXPECT_EQ(column.data, (std::vector<double>{3, 7, 5}));
  EXPECT_EQ(column_partial_max(t, 2).data, (std::vector<double>{2, 4, 5}));
  EXPECT_EQ(combine_row_partials(row_partial_sums(y, 2), Combine::sum), (Vector{15}));
  EXPECT_EQ(combine_row_partials(row_partial_max(y, 2), Combine::max), (Vector{5}));
}

TEST(ReferenceReductions, TileGridVisitsEverySegmentOnce) {
  std::vector<std::pair<int64_t, int64_t>> seen;
  const Matrix partials = row_partials(2, 7, 3, [&](int64_t row, int64_t begin, int64_t end) {
    if (row == 1) seen.emplace_back(begin, end);
    return double(10 * row + begin);
  });
  EXPECT_EQ(seen, (std::vector<std::pair<int64_t, int64_t>>{{0, 3}, {3, 6}, {6, 7}}));
  EXPECT_EQ(partials.data, (std::vector<double>{0, 3, 6, 10, 13, 16}));
  seen.clear();
  const Matrix column = column_partials(5, 2, 5, [&](int64_t col, int64_t begin, int64_t end) {
    seen.emplace_back(begin, end);
    return double(col);
  });
  EXPECT_EQ(column.rows, 1);  // bm >= M: a single row tile
  EXPECT_EQ(seen, (std::vector<std::pair<int64_t, int64_t>>{{0, 5}, {0, 5}}));
}

// Any tile size, dividing N or not, and at least N, combines to the full reduction.
TEST(ReferenceReductions, PartialsCombineToTheFullReductionForAnyTileSize) {
  SCOPED_TRACE(test::seed_note());
  const int64_t m = 11, n = 23;
  const Matrix y = test::random_matrix(m, n), other = test::random_matrix(m, n);
  const Matrix yt = y.transposed(), other_t = other.transposed();
  for (int64_t tile : {int64_t(1), int64_t(2), int64_t(5), int64_t(8), n - 1, n, n + 9}) {
    SCOPED_TRACE(tile);
    const int64_t tiles = (n + tile - 1) / tile;
    ASSERT_EQ(row_partial_sums(y, tile).cols, tiles);
    ASSERT_EQ(column_partial_sums(yt, tile).rows, tiles);
    EXPECT_LT(relative_error(combine_row_partials(row_partial_sums(y, tile), Combine::sum), row_sums(y)), 1e-14);
    EXPECT_LT(relative_error(combine_row_partials(row_partial_sums_of_squares(y, tile), Combine::sum),
                             row_sums_of_squares(y)),
              1e-14);
    EXPECT_EQ(combine_row_partials(row_partial_max(y, tile), Combine::max), row_max(y));
    EXPECT_LT(relative_error(combine_row_partials(row_partial_dots(y, other, tile), Combine::sum), row_dots(y, other)),
              1e-14);
    // Along columns, on the transposes: the same numbers.
    EXPECT_LT(relative_error(combine_column_partials(column_partial_sums(yt, tile), Combine::sum), row_sums(y)), 1e-14);
    EXPECT_LT(relative_error(combine_column_partials(column_partial_sums_of_squares(yt, tile), Combine::sum),
                             row_sums_of_squares(y)),
              1e-14);
    EXPECT_EQ(combine_column_partials(column_partial_max(yt, tile), Combine::max), row_max(y));
    EXPECT_LT(relative_error(combine_column_partials(column_partial_dots(yt, other_t, tile), Combine::sum),
                             row_dots(y, other)),
              1e-14);
  }
  EXPECT_LT(relative_error(column_sums(y), row_sums(yt)), 1e-14);
}

TEST(ReferenceReductions, MaxPropagatesNaN) {
  Matrix y(2, 4, 1.0);
  y(0, 1) = kNaN;
  y(1, 3) = -7;
  EXPECT_TRUE(std::isnan(row_max(y)[0]));
  EXPECT_EQ(row_max(y)[1], 1.0);
  const Matrix partial = row_partial_max(y, 2);
  EXPECT_TRUE(std::isnan(partial(0, 0)));  // only the tile holding the NaN
  EXPECT_EQ(partial(0, 1), 1.0);
  EXPECT_TRUE(std::isnan(combine_row_partials(partial, Combine::max)[0]));
  EXPECT_TRUE(std::isnan(column_partial_max(y, 2)(0, 1)));
  EXPECT_TRUE(std::isnan(abs_max(y)));
  y(0, 1) = 0;
  EXPECT_EQ(abs_max(y), 7.0);
}

TEST(ReferenceReductions, Validates) {
  const Matrix y = test::random_matrix(3, 4);
  EXPECT_THAT(test::invalid_argument_message([&] { row_partial_sums(y, 0); }),
              HasSubstr("coda::reference::row_partial_sums: argument 'bn': tile size is 0 but must be at least 1"));
  EXPECT_THAT(test::invalid_argument_message([&] { column_partial_max(y, -2); }),
              HasSubstr("coda::reference::column_partial_max: argument 'bm'"));
  EXPECT_THAT(test::invalid_argument_message([&] { row_partial_dots(y, test::random_matrix(3, 5), 2); }),
              HasSubstr("coda::reference::row_partial_dots: argument 'other': is (3 x 5) but must be (3 x 4)"));
  EXPECT_THAT(test::invalid_argument_message([&] { column_partial_dots(y, test::random_matrix(4, 4), 2); }),
              HasSubstr("argument 'other'"));
  EXPECT_THAT(test::invalid_argument_message([&] { row_dots(y, test::random_matrix(2, 4)); }),
              HasSubstr("coda::reference::row_dots: argument 'other'"));
  const SegmentReduction zero = [](int64_t, int64_t, int64_t) { return 0.0; };
  EXPECT_THAT(test::invalid_argument_message([&] { row_partials(2, 2, 0, zero); }),
              HasSubstr("coda::reference::row_partials: argument 'bn'"));
  EXPECT_THAT(test::invalid_argument_message([&] { column_partials(2, 2, 0, zero); }),
              HasSubstr("coda::reference::column_partials: argument 'bm'"));
}

}  // namespace
}  // namespace coda::reference

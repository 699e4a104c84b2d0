// The TopK monoid (running top-k, monoids.hpp) on its own and in the CPU executor's row and
// whole-part reductions: the K largest values best first, equal values lower index first, NaN never
// kept, index -1 (value -inf) where fewer than K values are there; the same result whatever the
// order and grouping in which candidates are combined.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "coda/epilogue/host_arguments.hpp"
#include "coda/epilogue/monoids.hpp"
#include "epilogue/support.hpp"
#include "epilogue/top_k_expectations.hpp"

namespace coda::test {
namespace {

using epilogue::Element;

constexpr float kInf = std::numeric_limits<float>::infinity();

// A state as the slot its reduction writes.
template <int K>
std::vector<float> slot_of(const typename epilogue::TopK<K>::State& s) {
  std::vector<float> slot(epilogue::TopK<K>::kWords);
  epilogue::write_partial<epilogue::TopK<K>>(slot.data(), s);
  return slot;
}

TEST(TopKMonoid, KeepsTheLargestBestFirstLowerIndexOnTiesNeverNaN) {
  using T = epilogue::TopK<5>;
  SCOPED_TRACE(seed_note());
  std::vector<TopKEntry> candidates = {{2.0f, 7},  {kInf, 3},  {2.0f, 1}, {std::nanf(""), 0}, {-kInf, 4},
                                   {2.0f, 5},  {-1.0f, 9}, {3.0f, 8}, {std::nanf(""), 2},  {0.5f, 6}};
  for (int i = 0; i < 20; ++i) candidates.push_back({float(std::round(uniform(-4.0, 4.0))), 10 + i});  // more ties
  const std::vector<TopKEntry> want = expected_top(candidates, 5);
  std::mt19937_64 shuffle(seed());
  for (int trial = 0; trial < 20; ++trial) {
    std::shuffle(candidates.begin(), candidates.end(), shuffle);
    // One by one, and as a tree of partial results (the executors' folds across lanes and parts).
    T::State one_by_one = T::identity();
    for (const TopKEntry& e : candidates) one_by_one = T::combine(one_by_one, T::one(e.value, e.index));
    EXPECT_TRUE(slot_is(slot_of<5>(one_by_one).data(), want));
    std::vector<T::State> level;
    for (const TopKEntry& e : candidates) level.push_back(T::one(e.value, e.index));
    while (level.size() > 1) {
      std::vector<T::State> next;
      for (std::size_t i = 0; i + 1 < level.size(); i += 2) next.push_back(T::combine(level[i], level[i + 1]));
      if (level.size() % 2) next.push_back(level.back());
      level = next;
    }
    EXPECT_TRUE(slot_is(slot_of<5>(level[0]).data(), want));
  }
  // Fewer selectable values than K: the rest stay (-inf, -1); a NaN alone is nothing.
  T::State few = T::combine(T::one(std::nanf(""), 1), T::one(-kInf, 2));
  few = T::combine(few, T::one(1.0f, 3));
  EXPECT_TRUE(slot_is(slot_of<5>(few).data(), {{1.0f, 3}, {-kInf, 2}, {-kInf, -1}, {-kInf, -1}, {-kInf, -1}}));
  // A written slot: the values, then the indices as int32 bits.
  float slot[T::kWords];
  epilogue::write_partial<T>(slot, few);
  int32_t second_index;
  std::memcpy(&second_index, &slot[5 + 1], sizeof(int32_t));
  EXPECT_EQ(slot[0], 1.0f);
  EXPECT_EQ(second_index, 2);
}

class TopKReductions : public PartShapeTest {};

INSTANTIATE_TEST_SUITE_P(Parts, TopKReductions, ::testing::ValuesIn(kPartShapes), part_shape_name);

// Top 4 of each row's part (index: the column) and top 3 of each whole part (index: row * N + col).
struct TopValues {
  epilogue::Partials rows{};
  epilogue::Partials parts{};
  int32_t n = 0;

  template <class Tile>
  void operator()(Tile& t) const {
    using Row = epilogue::TopK<4>;
    using Whole = epilogue::TopK<3>;
    t.row_reduce(rows, Row{}, [](const Element& x) { return Row::one(x.value, x.col); });
    t.reduce(parts, Whole{}, [&](const Element& x) { return Whole::one(x.value, x.row * n + x.col); });
  }
};

TEST_P(TopKReductions, RowsAndWholePartsKeepTheirTopValues) {
  const ProblemShape shape{150, 300, 2};
  auto acc = random_accumulators(shape);
  for (reference::Matrix& y : acc)
    for (double& v : y.data) v = std::round(4.0 * v) / 4.0;  // coarse values: ties in every row
  acc[0](3, 5) = std::nan("");
  acc[1](140, 299) = std::nan("");
  for (int64_t c = 0; c < shape.cols; ++c) acc[0](7, c) = std::nan("");  // a row of nothing but NaN
  const int64_t row_parts = part_count(shape.cols, part().cols), part_rows = part_count(shape.rows, part().rows);
  const float poison = std::numeric_limits<float>::quiet_NaN();
  const int row_words = epilogue::TopK<4>::kWords, part_words = epilogue::TopK<3>::kWords;
  std::vector<float> rows(std::size_t(shape.batch * shape.rows * row_parts * row_words), poison);
  std::vector<float> parts(std::size_t(shape.batch * part_rows * row_parts * part_words), poison);
  TopValues program{
      .rows = epilogue::row_partials(TensorView::matrix(rows.data(), DType::f32, shape.rows, row_parts * row_words),
                                     "rows", row_words),
      .parts = {parts.data(), row_parts * part_words, part_words, part_rows * row_parts * part_words},
      .n = int32_t(shape.cols)};
  EXPECT_EQ(program.rows.tile_stride, row_words);
  program.rows.batch_stride = shape.rows * row_parts * row_words;
  run_batches(program, acc, part());
  for (int64_t b = 0; b < shape.batch; ++b) {
    const reference::Matrix& y = acc[std::size_t(b)];
    for (int64_t pn = 0; pn < row_parts; ++pn) {
      const int64_t c0 = pn * part().cols, c1 = std::min(shape.cols, c0 + part().cols);
      for (int64_t r = 0; r < shape.rows; ++r) {
        std::vector<TopKEntry> candidates;
        for (int64_t c = c0; c < c1; ++c) candidates.push_back({float(y(r, c)), int32_t(c)});
        SCOPED_TRACE(::testing::Message() << "batch " << b << ", row " << r << ", part " << pn);
        EXPECT_TRUE(slot_is(&rows[std::size_t(((b * shape.rows + r) * row_parts + pn) * row_words)],
                            expected_top(candidates, 4)));
      }
      for (int64_t pm = 0; pm < part_rows; ++pm) {
        std::vector<TopKEntry> candidates;
        for (int64_t r = pm * part().rows; r < std::min(shape.rows, (pm + 1) * part().rows); ++r)
          for (int64_t c = c0; c < c1; ++c) candidates.push_back({float(y(r, c)), int32_t(r * shape.cols + c)});
        SCOPED_TRACE(::testing::Message() << "batch " << b << ", part " << pm << ", " << pn);
        EXPECT_TRUE(slot_is(&parts[std::size_t(((b * part_rows + pm) * row_parts + pn) * part_words)],
                            expected_top(candidates, 3)));
      }
    }
  }
}

TEST(TopKPartials, SlotsOfSeveralWordsMustTileTheView) {
  alignas(16) static float storage[64];
  const epilogue::Partials p = epilogue::row_partials(TensorView::matrix(storage, DType::f32, 4, 16), "top", 8);
  EXPECT_EQ(p.tile_stride, 8);
  EXPECT_EQ(p.row_stride, 16);
  try {
    (void)epilogue::row_partials(TensorView::matrix(storage, DType::f32, 4, 12), "top", 8);
    ADD_FAILURE() << "accepted 12 columns for slots of 8 words";
  } catch (const coda::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("argument 'top': has 12 columns: not a whole number of slots of 8 words"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace coda::test

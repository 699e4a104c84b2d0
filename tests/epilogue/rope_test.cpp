// The Rope program (GEMM + RoPE; with a row scale: after an RMSNorm) on the CPU executor against
// reference::rope and reference::row_scale_rope: every part shape, two batches of 150 rows, heads of 128, 64
// and 96 columns (the last straddle parts), unrotated V heads, and positions outside the cache. The
// RopeBackward program against reference::rope_backward, with its row partials of <dY, Y>.
#include "coda/epilogue/programs/rope.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "coda/reference/gemm_rmsnorm_gemm.hpp"
#include "coda/reference/reductions.hpp"
#include "coda/reference/rmsnorm.hpp"
#include "coda/reference/rope.hpp"
#include "epilogue/support.hpp"

namespace coda::test {
namespace {

constexpr int64_t kMaxPosition = 512;

struct RopeCase {
  int64_t head_dim;
  int64_t heads;
  int64_t rotated_heads;
  DType out = DType::bf16;
  bool row_scale = false;
  bool positions_outside_the_cache = false;  // a few rows' positions are -1, max_pos or beyond
  bool row_dots = false;                     // backward: the row partials of <dY_post, Y_post>
};

// Rows whose position lies outside the cache, and those positions, when a case asks for them.
constexpr int64_t kBadRows[] = {0, 7, 64, 149};
constexpr int32_t kBadPositions[] = {-1, int32_t(kMaxPosition), int32_t(kMaxPosition) + 1000, -100000};

class EpilogueRope : public PartShapeTest {
 protected:
  void check(const RopeCase& c) const {
    const ProblemShape shape{150, c.heads * c.head_dim};
    const auto acc = random_accumulators(shape);
    const reference::RopeCache cache = reference::rope_cache(kMaxPosition, c.head_dim);
    const HostTensor cos = host_copy(DType::f32, cache.cos), sin = host_copy(DType::f32, cache.sin);
    std::vector<std::vector<int32_t>> positions(std::size_t(shape.batch));
    for (auto& p : positions)
      for (int64_t r = 0; r < shape.rows; ++r) p.push_back(int32_t(uniform_int(0, kMaxPosition - 1)));
    // The reference rotates in-cache positions only; a bad row's rotated columns are NaN instead.
    const std::vector<std::vector<int32_t>> in_cache = positions;
    if (c.positions_outside_the_cache)
      for (auto& p : positions)
        for (std::size_t i = 0; i < std::size(kBadRows); ++i) p[std::size_t(kBadRows[i])] = kBadPositions[i];
    std::vector<reference::Vector> position_values;
    for (const auto& p : positions) position_values.emplace_back(p.begin(), p.end());
    const HostTensor position_column = column_vector_of(DType::i32, position_values);
    const HostTensor rstd = random_column_vector(DType::f32, shape.rows, shape.batch, 0.5, 2.0);
    HostTensor out = poisoned_output(c.out, shape.rows, shape.cols, shape.batch);

    epilogue::Rope program{.positions = column_vector(position_column),
                           .cos = table(cos),
                           .sin = table(sin),
                           .head_dim = Divisor(int32_t(c.head_dim)),
                           .rotated_heads = int32_t(c.rotated_heads),
                           .out = tile_out(out)};
    if (c.row_scale) program.row_scale = column_vector(rstd);
    run_batches(program, acc, part());

    expect_output(out, per_batch(acc, [&](const reference::Matrix& y, int64_t b) {
                    const auto& p = in_cache[std::size_t(b)];
                    reference::Matrix want = c.row_scale
                                                 ? reference::row_scale_rope(y, column_vector_values(rstd, b), p, cache,
                                                                             c.head_dim, c.rotated_heads)
                                                 : reference::rope(y, p, cache, c.head_dim, c.rotated_heads);
                    if (c.positions_outside_the_cache)
                      for (int64_t r : kBadRows)
                        for (int64_t col = 0; col < c.rotated_heads * c.head_dim; ++col)
                          want(r, col) = std::numeric_limits<double>::quiet_NaN();
                    return want;
                  }));
  }

  // RopeBackward: dY_post in the accumulators, Y_post a saved input.
  void check_backward(const RopeCase& c) const {
    const ProblemShape shape{150, c.heads * c.head_dim};
    const auto grad = random_accumulators(shape);
    const reference::RopeCache cache = reference::rope_cache(kMaxPosition, c.head_dim);
    const HostTensor cos = host_copy(DType::f32, cache.cos), sin = host_copy(DType::f32, cache.sin);
    std::vector<reference::Vector> position_values(std::size_t(shape.batch));
    for (auto& p : position_values)
      for (int64_t r = 0; r < shape.rows; ++r) p.push_back(double(uniform_int(0, kMaxPosition - 1)));
    const HostTensor position_column = column_vector_of(DType::i32, position_values);
    const HostTensor rstd = random_column_vector(DType::f32, shape.rows, shape.batch, 0.5, 2.0);
    const HostTensor output = random_input(DType::bf16, shape.rows, shape.cols, shape.batch);
    HostTensor out = poisoned_output(c.out, shape.rows, shape.cols, shape.batch);
    PartialsBuffer row_dots(shape.rows, part_count(shape.cols, part().cols), shape.batch);

    epilogue::RopeBackward program{.positions = column_vector(position_column),
                                   .cos = table(cos),
                                   .sin = table(sin),
                                   .head_dim = Divisor(int32_t(c.head_dim)),
                                   .rotated_heads = int32_t(c.rotated_heads),
                                   .out = tile_out(out)};
    if (c.row_scale) program.row_scale = column_vector(rstd);
    if (c.row_dots) {
      program.output = tile_in(output);
      program.row_dots = row_dots.partials();
    }
    run_batches(program, grad, part());

    expect_output(out, per_batch(grad, [&](const reference::Matrix& dy, int64_t b) {
                    const auto& p = position_values[std::size_t(b)];
                    return reference::rope_backward(
                        c.row_scale ? reference::row_scale(dy, column_vector_values(rstd, b)) : dy,
                        std::vector<int32_t>(p.begin(), p.end()), cache, c.head_dim, c.rotated_heads);
                  }));
    if (c.row_dots) {
      SCOPED_TRACE("row partials of <dY, Y>");
      expect_partials(row_dots, per_batch(grad, [&](const reference::Matrix& dy, int64_t b) {
                        return reference::row_partial_dots(dy, output.matrix(b), part().cols);
                      }));
    }
  }

  static epilogue::Table table(const HostTensor& t) {
    return {.data = static_cast<const float*>(t.view.data), .ld = int32_t(t.view.ld()), .rows = int32_t(t.view.rows())};
  }
};

INSTANTIATE_TEST_SUITE_P(Parts, EpilogueRope, ::testing::ValuesIn(kPartShapes), part_shape_name);

TEST_P(EpilogueRope, EveryHeadRotated) { check({.head_dim = 128, .heads = 3, .rotated_heads = 3}); }

TEST_P(EpilogueRope, F32Output) { check({.head_dim = 64, .heads = 5, .rotated_heads = 5, .out = DType::f32}); }

// A fused QKV projection: Q and K heads rotated, V heads passed through.
TEST_P(EpilogueRope, VHeadsPassThrough) { check({.head_dim = 64, .heads = 5, .rotated_heads = 3}); }

// Heads of 96 columns straddle parts of 128 and 256: the pair's head comes from its global column.
TEST_P(EpilogueRope, HeadsStraddlingParts) { check({.head_dim = 96, .heads = 4, .rotated_heads = 3}); }

TEST_P(EpilogueRope, RowScale) {
  check({.head_dim = 128, .heads = 3, .rotated_heads = 2, .out = DType::f32, .row_scale = true});
}

TEST_P(EpilogueRope, PositionsOutsideTheCacheGiveNaNRows) {
  check({.head_dim = 64, .heads = 4, .rotated_heads = 2, .positions_outside_the_cache = true});
}

TEST_P(EpilogueRope, BackwardRotatesBack) { check_backward({.head_dim = 128, .heads = 3, .rotated_heads = 3}); }

TEST_P(EpilogueRope, BackwardWithVHeadsAndRowDots) {
  check_backward({.head_dim = 96, .heads = 4, .rotated_heads = 3, .row_dots = true});
}

TEST_P(EpilogueRope, BackwardRowScaleInF32) {
  check_backward(
      {.head_dim = 64, .heads = 5, .rotated_heads = 3, .out = DType::f32, .row_scale = true, .row_dots = true});
}

// Row partials of <dY, Y> need Y: refused without it, naming it.
TEST_P(EpilogueRope, BackwardRowDotsNeedTheOutput) {
  const ProblemShape shape{64, 128};
  const auto grad = random_accumulators(shape);
  const reference::RopeCache cache = reference::rope_cache(kMaxPosition, 64);
  const HostTensor cos = host_copy(DType::f32, cache.cos), sin = host_copy(DType::f32, cache.sin);
  const HostTensor positions = column_vector_of(DType::i32, {reference::Vector(64, 1.0), reference::Vector(64, 2.0)});
  HostTensor out = poisoned_output(DType::bf16, shape.rows, shape.cols, shape.batch);
  PartialsBuffer row_dots(shape.rows, 1, shape.batch);
  const epilogue::RopeBackward program{.positions = column_vector(positions),
                                       .cos = table(cos),
                                       .sin = table(sin),
                                       .head_dim = Divisor(64),
                                       .rotated_heads = 2,
                                       .row_dots = row_dots.partials(),
                                       .out = tile_out(out)};
  try {
    run_batches(program, grad, part());
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("argument 'output': is null"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace coda::test

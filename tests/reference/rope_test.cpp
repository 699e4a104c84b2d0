// RoPE's oracle: a hand-rotated case, the cache, pass-through heads, the inverse and the backward
// (orthogonality and central differences), and the rotate-half weight permutation checked
// against an independently written rotate-half RoPE (the HF/LLaMA form).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "coda/core/layout.hpp"
#include "coda/reference/gemm.hpp"
#include "coda/reference/reductions.hpp"
#include "coda/reference/rope.hpp"
#include "reference/support.hpp"
#include "support/random.hpp"

namespace coda::reference {
namespace {

using ::testing::HasSubstr;

std::vector<int32_t> random_positions(int64_t rows, int64_t max_pos) {
  std::vector<int32_t> p(static_cast<std::size_t>(rows));
  for (int32_t& v : p) v = int32_t(test::uniform_int(0, max_pos - 1));
  return p;
}

TEST(ReferenceRope, HandComputedRotation) {
  // head_dim 4 (two pairs). Position 0: no rotation. Position 1: pair 0 by 90 degrees (c 0, s 1),
  // pair 1 by 180 degrees (c -1, s 0).
  RopeCache cache{Matrix(2, 2), Matrix(2, 2)};
  cache.cos.data = {1, 1, 0, -1};
  cache.sin.data = {0, 0, 1, 0};
  Matrix y(2, 4);
  y.data = {1, 2, 3, 4, 1, 2, 3, 4};
  const Matrix out = rope(y, {0, 1}, cache, 4, 1);
  // row 1: (1, 2) -> (1*0 - 2*1, 1*1 + 2*0) = (-2, 1); (3, 4) -> (3*-1 - 4*0, 3*0 + 4*-1) = (-3, -4)
  EXPECT_EQ(out.data, (std::vector<double>{1, 2, 3, 4, -2, 1, -3, -4}));
  // backward rotates the other way: (-2, 1) by -90 degrees is (1, 2) again
  EXPECT_EQ(rope_backward(out, {0, 1}, cache, 4, 1).data, y.data);
}

TEST(ReferenceRope, CacheHandComputed) {
  // head_dim 4, theta 100: frequencies 100^(-0/4) = 1 and 100^(-2/4) = 0.1
  const RopeCache cache = rope_cache(3, 4, 100.0);
  ASSERT_EQ(cache.cos.rows, 3);
  ASSERT_EQ(cache.cos.cols, 2);
  EXPECT_EQ(cache.cos.row(0)[0], 1.0);
  EXPECT_EQ(cache.sin.row(0)[1], 0.0);
  EXPECT_NEAR(cache.cos(2, 0), std::cos(2.0), 1e-15);
  EXPECT_NEAR(cache.sin(2, 0), std::sin(2.0), 1e-15);
  EXPECT_NEAR(cache.cos(2, 1), std::cos(0.2), 1e-15);
  EXPECT_NEAR(cache.sin(1, 1), std::sin(0.1), 1e-15);
  // default theta 10000, head_dim 8: frequency of pair 3 is 10000^(-6/8) = 0.001
  EXPECT_NEAR(rope_cache(6, 8).sin(5, 3), std::sin(5 * 0.001), 1e-15);
}

TEST(ReferenceRope, HeadsPastRotHeadsPassThrough) {
  SCOPED_TRACE(test::seed_note());
  const int64_t head_dim = 6, heads = 3;
  const RopeCache cache = rope_cache(16, head_dim);
  const Matrix y = test::random_matrix(5, heads * head_dim);
  const std::vector<int32_t> positions{1, 2, 3, 4, 15};
  const Matrix out = rope(y, positions, cache, head_dim, 2);
  for (int64_t m = 0; m < y.rows; ++m) {
    for (int64_t n = 2 * head_dim; n < 3 * head_dim; ++n) EXPECT_EQ(out(m, n), y(m, n));
    EXPECT_NE(out(m, 0), y(m, 0));  // the rotated heads did change (positions are not 0)
  }
  EXPECT_EQ(rope(y, positions, cache, head_dim, 0).data, y.data);
}

TEST(ReferenceRope, InverseRotationUndoesRotation) {
  SCOPED_TRACE(test::seed_note());
  const RopeCache cache = rope_cache(64, 8);
  const Matrix y = test::random_matrix(7, 24);
  const std::vector<int32_t> positions = random_positions(7, 64);
  EXPECT_LT(relative_error(rope_backward(rope(y, positions, cache, 8, 3), positions, cache, 8, 3), y), 1e-15);
  EXPECT_LT(relative_error(rope(rope_backward(y, positions, cache, 8, 2), positions, cache, 8, 2), y), 1e-15);
}

TEST(ReferenceRope, BackwardPreservesTheRowDot) {
  SCOPED_TRACE(test::seed_note());
  const RopeCache cache = rope_cache(64, 8);
  const Matrix y_pre = test::random_matrix(6, 32), grad_post = test::random_matrix(6, 32);
  const std::vector<int32_t> positions = random_positions(6, 64);
  const Matrix y_post = rope(y_pre, positions, cache, 8, 3);
  const Matrix grad_pre = rope_backward(grad_post, positions, cache, 8, 3);
  // <dY_pre, Y_pre> = <dY_post, Y_post>, row by row (each row's rotation is orthogonal)
  EXPECT_LT(relative_error(row_dots(grad_pre, y_pre), row_dots(grad_post, y_post)), 1e-14);
  EXPECT_LT(relative_error(row_sums_of_squares(y_post), row_sums_of_squares(y_pre)), 1e-14);
}

TEST(ReferenceRope, BackwardMatchesCentralDifferences) {
  SCOPED_TRACE(test::seed_note());
  const RopeCache cache = rope_cache(32, 4);
  const Matrix y = test::random_matrix(3, 12), upstream = test::random_matrix(3, 12);
  const std::vector<int32_t> positions = random_positions(3, 32);
  const Matrix numeric = test::numerical_gradient(
      [&](const Matrix& at) { return test::frobenius_dot(upstream, rope(at, positions, cache, 4, 2)); }, y);
  EXPECT_LT(relative_error(rope_backward(upstream, positions, cache, 4, 2), numeric), 1e-8);
}

TEST(ReferenceRope, PermutationHandComputed) {
  // two heads of head_dim 4, one rotated: rotate-half rows (a0 a1 | a2 a3) pair (a0, a2), (a1, a3);
  // interleaved they become a0 a2 a1 a3. The second head stays.
  Matrix w(8, 1);
  w.data = {10, 11, 12, 13, 20, 21, 22, 23};
  const Matrix permuted = permute_rotate_half_to_interleaved(w, 4, 1);
  EXPECT_EQ(permuted.data, (std::vector<double>{10, 12, 11, 13, 20, 21, 22, 23}));
  EXPECT_EQ(permute_interleaved_to_rotate_half_columns(permuted.transposed(), 4, 1).data, w.data);
}

// The host helper's promise: rotate-half RoPE on the original weight equals interleaved RoPE on
// the permuted weight, once the output columns are put back in rotate-half order.
TEST(ReferenceRope, PermutedWeightsReproduceRotateHalfRope) {
  SCOPED_TRACE(test::seed_note());
  const int64_t m = 5, k = 7, head_dim = 8, heads = 3, rot_heads = 2, half = head_dim / 2;
  const Matrix x = test::random_matrix(m, k), w = test::random_matrix(heads * head_dim, k);
  const RopeCache cache = rope_cache(100, head_dim);
  const std::vector<int32_t> positions = random_positions(m, 100);

  // HF/LLaMA: out = q * cos + rotate_half(q) * sin, rotate_half(q) = (-q[d/2:], q[:d/2]), with the
  // cache's cos/sin repeated over both halves.
  const Matrix y = gemm(x, Major::k, w, Major::k);
  Matrix want = y;
  for (int64_t r = 0; r < m; ++r) {
    const int32_t p = positions[std::size_t(r)];
    for (int64_t h = 0; h < rot_heads; ++h) {
      for (int64_t i = 0; i < half; ++i) {
        const double first = y(r, h * head_dim + i), second = y(r, h * head_dim + i + half);
        want(r, h * head_dim + i) = first * cache.cos(p, i) - second * cache.sin(p, i);
        want(r, h * head_dim + i + half) = second * cache.cos(p, i) + first * cache.sin(p, i);
      }
    }
  }

  const Matrix w_interleaved = permute_rotate_half_to_interleaved(w, head_dim, rot_heads);
  const Matrix got = permute_interleaved_to_rotate_half_columns(
      rope(gemm(x, Major::k, w_interleaved, Major::k), positions, cache, head_dim, rot_heads), head_dim, rot_heads);
  EXPECT_LT(relative_error(got, want), 1e-14);
}

TEST(ReferenceRope, Validates) {
  const RopeCache cache = rope_cache(8, 4);
  const Matrix y = test::random_matrix(2, 8);
  EXPECT_THAT(test::invalid_argument_message([&] {
                rope(y, {0, 8}, cache, 4, 2);
              }),
              HasSubstr("coda::reference::rope: argument 'positions': positions[1] = 8 is outside [0, 8)"));
  EXPECT_THAT(test::invalid_argument_message([&] { rope(y, {-1, 0}, cache, 4, 2); }),
              HasSubstr("argument 'positions': positions[0] = -1 is outside [0, 8)"));
  EXPECT_THAT(test::invalid_argument_message([&] {
                rope_backward(y, {0, 1, 2}, cache, 4, 2);
              }),
              HasSubstr("coda::reference::rope_backward: argument 'positions': has 3 entries but must have 2"));
  EXPECT_THAT(test::invalid_argument_message([&] { rope(y, {0, 1}, cache, 3, 1); }),
              HasSubstr("argument 'head_dim': is 3 but must be even"));
  EXPECT_THAT(test::invalid_argument_message([&] { rope(y, {0, 1}, cache, 0, 0); }), HasSubstr("argument 'head_dim'"));
  EXPECT_THAT(test::invalid_argument_message([&] { rope(y, {0, 1}, cache, 6, 1); }),
              HasSubstr("argument 'y': has N = 8, not a multiple of head_dim = 6"));
  EXPECT_THAT(test::invalid_argument_message([&] { rope(y, {0, 1}, cache, 4, 3); }),
              HasSubstr("argument 'rot_heads': is 3 but must lie in [0, 2]"));
  EXPECT_THAT(test::invalid_argument_message([&] { rope(y, {0, 1}, cache, 4, -1); }),
              HasSubstr("argument 'rot_heads'"));
  EXPECT_THAT(test::invalid_argument_message([&] { rope(test::random_matrix(2, 12), {0, 1}, cache, 6, 1); }),
              HasSubstr("argument 'cache': is (8 x 2) but must be (8 x 3)"));
  RopeCache mismatched = cache;
  mismatched.sin = Matrix(7, 2);
  EXPECT_THAT(test::invalid_argument_message([&] { rope(y, {0, 1}, mismatched, 4, 1); }),
              HasSubstr("argument 'cache'"));
  EXPECT_THAT(test::invalid_argument_message([] { rope_cache(8, 5); }),
              HasSubstr("coda::reference::rope_cache: argument 'head_dim': is 5"));
  EXPECT_THAT(test::invalid_argument_message([] { rope_cache(0, 4); }), HasSubstr("argument 'max_pos'"));
  EXPECT_THAT(test::invalid_argument_message([] { rope_cache(8, 4, -1.0); }), HasSubstr("argument 'theta'"));
  const Matrix w = test::random_matrix(6, 2);
  EXPECT_THAT(test::invalid_argument_message([&] { permute_rotate_half_to_interleaved(w, 3, 1); }),
              HasSubstr("coda::reference::permute_rotate_half_to_interleaved: argument 'head_dim'"));
  EXPECT_THAT(test::invalid_argument_message([&] { permute_rotate_half_to_interleaved(w, 4, 1); }),
              HasSubstr("argument 'w': has N = 6, not a multiple of head_dim = 4"));
  EXPECT_THAT(test::invalid_argument_message(
                  [] { permute_interleaved_to_rotate_half_columns(test::random_matrix(2, 8), 4, 5); }),
              HasSubstr("coda::reference::permute_interleaved_to_rotate_half_columns: argument 'rot_heads'"));
}

}  // namespace
}  // namespace coda::reference

// SwiGLU's oracle: hand values forward and backward, the gate/up interleaving, central
// differences of kernel 10, and its row partials (tiles of bn pairs) combining to <Y, dY>.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "coda/core/layout.hpp"
#include "coda/reference/epilogues.hpp"
#include "coda/reference/gemm.hpp"
#include "coda/reference/reductions.hpp"
#include "coda/reference/swiglu.hpp"
#include "reference/support.hpp"
#include "support/random.hpp"

namespace coda::reference {
namespace {

using ::testing::HasSubstr;

TEST(ReferenceSwiglu, HandComputed) {
  const double ln3 = std::log(3.0);
  Matrix y(1, 6);
  y.data = {0, 5, ln3, 2, -ln3, 4};
  // silu(0) * 5 = 0; sigmoid(ln 3) = 3/4 so silu(ln 3) * 2 = 1.5 ln 3;
  // sigmoid(-ln 3) = 1/4 so silu(-ln 3) * 4 = -ln 3
  const Matrix o = swiglu(y);
  ASSERT_EQ(o.cols, 3);
  EXPECT_EQ(o(0, 0), 0.0);
  EXPECT_NEAR(o(0, 1), 1.5 * ln3, 1e-15);
  EXPECT_NEAR(o(0, 2), -ln3, 1e-15);
}

TEST(ReferenceSwiglu, BackwardHandComputed) {
  const double ln3 = std::log(3.0);
  Matrix y(1, 4), grad_a(1, 2);
  y.data = {ln3, 2, 0, 5};
  grad_a.data = {1, 2};
  const SwigluBackward b = swiglu_backward(grad_a, y, 1);
  // pair (ln 3, 2), dA 1, s = 3/4: dG = 1 * 2 * 0.75 * (1 + ln3 * 0.25) = 1.5 + 0.375 ln 3, dU = 0.75 ln 3
  EXPECT_NEAR(b.grad_y(0, 0), 1.5 + 0.375 * ln3, 1e-15);
  EXPECT_NEAR(b.grad_y(0, 1), 0.75 * ln3, 1e-15);
  // pair (0, 5), dA 2, s = 1/2: dG = 2 * 5 * 0.5 * (1 + 0) = 5, dU = 2 * 0 * 0.5 = 0
  EXPECT_EQ(b.grad_y(0, 2), 5.0);
  EXPECT_EQ(b.grad_y(0, 3), 0.0);
  // partials with bn = 1 (one pair per tile): g dG + u dU
  //   ln3 (1.5 + 0.375 ln3) + 2 (0.75 ln3) = 3 ln3 + 0.375 ln3^2;   0 * 5 + 5 * 0 = 0
  ASSERT_EQ(b.row_partials.cols, 2);
  EXPECT_NEAR(b.row_partials(0, 0), 3 * ln3 + 0.375 * ln3 * ln3, 1e-14);
  EXPECT_EQ(b.row_partials(0, 1), 0.0);
  // the recomputed output: silu(ln 3) * 2 = 1.5 ln 3, silu(0) * 5 = 0
  EXPECT_NEAR(b.output(0, 0), 1.5 * ln3, 1e-15);
  EXPECT_EQ(b.output(0, 1), 0.0);
}

TEST(ReferenceSwiglu, InterleavesGateAndUpRows) {
  Matrix gate(2, 2), up(2, 2);
  gate.data = {1, 2, 3, 4};
  up.data = {5, 6, 7, 8};
  const Matrix w = interleave_gate_up(gate, up);
  EXPECT_EQ(w.data, (std::vector<double>{1, 2, 5, 6, 3, 4, 7, 8}));  // gate0, up0, gate1, up1
  const GateUp back = deinterleave_gate_up(w);
  EXPECT_EQ(back.gate.data, gate.data);
  EXPECT_EQ(back.up.data, up.data);
}

TEST(ReferenceSwiglu, InterleavedWeightGivesSiluGateTimesUp) {
  SCOPED_TRACE(test::seed_note());
  const Matrix x = test::random_matrix(6, 9), gate = test::random_matrix(5, 9), up = test::random_matrix(5, 9);
  const Matrix o = swiglu(gemm(x, Major::k, interleave_gate_up(gate, up), Major::k));
  const Matrix g = gemm(x, Major::k, gate, Major::k), u = gemm(x, Major::k, up, Major::k);
  Matrix want(6, 5);
  for (int64_t m = 0; m < 6; ++m)
    for (int64_t j = 0; j < 5; ++j) want(m, j) = Activation::silu()(g(m, j)) * u(m, j);
  EXPECT_LT(relative_error(o, want), 1e-15);
}

TEST(ReferenceSwiglu, BackwardMatchesCentralDifferences) {
  SCOPED_TRACE(test::seed_note());
  const Matrix y = test::random_matrix(4, 10, -3, 3), grad_a = test::random_matrix(4, 5);
  const Matrix numeric = test::numerical_gradient(
      [&](const Matrix& at) { return test::frobenius_dot(grad_a, swiglu(at)); }, y);
  const SwigluBackward b = swiglu_backward(grad_a, y, 2);
  EXPECT_LT(relative_error(b.grad_y, numeric), 1e-8);
  EXPECT_EQ(b.output.data, swiglu(y).data);
}

// bn counts pairs (columns of dA): tile b holds Y columns [2 b bn, 2 (b+1) bn).
TEST(ReferenceSwiglu, RowPartialsCoverTilesOfPairs) {
  SCOPED_TRACE(test::seed_note());
  const int64_t m = 3, f = 7;
  const Matrix y = test::random_matrix(m, 2 * f), grad_a = test::random_matrix(m, f);
  for (int64_t bn : {int64_t(1), int64_t(2), int64_t(3), f, f + 4}) {
    SCOPED_TRACE(bn);
    const SwigluBackward b = swiglu_backward(grad_a, y, bn);
    const int64_t tiles = (f + bn - 1) / bn;
    ASSERT_EQ(b.row_partials.rows, m);
    ASSERT_EQ(b.row_partials.cols, tiles);
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t t = 0; t < tiles; ++t) {
        double want = 0;
        for (int64_t j = t * bn; j < std::min((t + 1) * bn, f); ++j)
          want += y(r, 2 * j) * b.grad_y(r, 2 * j) + y(r, 2 * j + 1) * b.grad_y(r, 2 * j + 1);
        EXPECT_NEAR(b.row_partials(r, t), want, 1e-14);
      }
    }
    EXPECT_LT(relative_error(combine_row_partials(b.row_partials, Combine::sum), row_dots(y, b.grad_y)), 1e-14);
  }
}

TEST(ReferenceSwiglu, Validates) {
  const Matrix y = test::random_matrix(2, 6);
  EXPECT_THAT(test::invalid_argument_message([] { swiglu(test::random_matrix(2, 5)); }),
              HasSubstr("coda::reference::swiglu: argument 'y': has 5 columns but must have an even number"));
  EXPECT_THAT(test::invalid_argument_message([&] { swiglu_backward(test::random_matrix(2, 4), y, 1); }),
              HasSubstr("coda::reference::swiglu_backward: argument 'grad_a': is (2 x 4) but must be (2 x 3)"));
  EXPECT_THAT(test::invalid_argument_message([&] { swiglu_backward(test::random_matrix(2, 3), y, 0); }),
              HasSubstr("argument 'bn'"));
  const Matrix gate = test::random_matrix(3, 2), up = test::random_matrix(2, 2);
  EXPECT_THAT(test::invalid_argument_message([&] { interleave_gate_up(gate, up); }),
              HasSubstr("coda::reference::interleave_gate_up: argument 'w_up': is (2 x 2) but must be (3 x 2)"));
  EXPECT_THAT(test::invalid_argument_message([] { deinterleave_gate_up(test::random_matrix(3, 2)); }),
              HasSubstr("coda::reference::deinterleave_gate_up: argument 'w': has 3 rows"));
}

}  // namespace
}  // namespace coda::reference

// RMSNorm's oracle: kernel 4 and the rstd reduction by hand and for any tile width, the row scale
// (kernel 5) and its backward, the plain RMSNorm backward against central differences, and the
// fused backward (the correction, kernel 9 and GEMM 2's weight gradients) by hand and against the
// plain backward for any tile width and height.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "coda/core/layout.hpp"
#include "coda/reference/gemm.hpp"
#include "coda/reference/reductions.hpp"
#include "coda/reference/rmsnorm.hpp"
#include "reference/support.hpp"
#include "support/random.hpp"

namespace coda::reference {
namespace {

using ::testing::HasSubstr;

TEST(ReferenceRmsNorm, Kernel4HandComputed) {
  // H = Y + R: (0, 4) + (1, 3) = (1, 7) with mean square 25; (3, -1) + (-1, 3) = (2, 2), mean square 4
  Matrix y(2, 2), r(2, 2);
  y.data = {0, 4, 3, -1};
  r.data = {1, 3, -1, 3};
  const Vector g{2, 0.5};
  const ResidualRmsNorm k4 = residual_rmsnorm(y, r, g, 1);
  EXPECT_EQ(k4.residual.data, (std::vector<double>{1, 7, 2, 2}));
  EXPECT_EQ(k4.sum_squares.data, (std::vector<double>{1, 49, 4, 4}));  // one column per tile
  EXPECT_EQ(k4.weighted.data, (std::vector<double>{2, 3.5, 4, 1}));    // H * g
  EXPECT_EQ(residual_rmsnorm(y, r, g, 2).sum_squares.data, (std::vector<double>{50, 8}));
  // rstd = 1 / sqrt(50 / 2) = 1/5 and 1 / sqrt(8 / 2) = 1/2 (eps 0)
  EXPECT_EQ(rstd_from_partials(k4.sum_squares, 2, 0.0), (Vector{0.2, 0.5}));
  // with eps = 0.75 for the second row: 1 / sqrt(4 + 0.75)
  EXPECT_NEAR(rstd_from_partials(k4.sum_squares, 2, 0.75)[1], 1 / std::sqrt(4.75), 1e-15);
}

TEST(ReferenceRmsNorm, PlainHandComputed) {
  Matrix h(1, 2);
  h.data = {1, 7};
  EXPECT_EQ(rmsnorm_rstd(h, 0.0), (Vector{0.2}));
  // N = rstd * H * g = 0.2 * (1 * 2, 7 * 0.5) = (0.4, 0.7)
  const Matrix n = rmsnorm(h, {2, 0.5}, 0.0);
  EXPECT_NEAR(n(0, 0), 0.4, 1e-15);
  EXPECT_NEAR(n(0, 1), 0.7, 1e-15);
  // eps: H = (1, 1), eps = 3: 1 / sqrt(1 + 3) = 1/2
  EXPECT_EQ(rmsnorm_rstd(Matrix(1, 2, 1.0), 3.0), (Vector{0.5}));
}

TEST(ReferenceRmsNorm, PartialRstdEqualsPlainForAnyTileWidth) {
  SCOPED_TRACE(test::seed_note());
  const int64_t m = 7, hidden = 29;
  const Matrix y = test::random_matrix(m, hidden), r = test::random_matrix(m, hidden);
  const Vector g = test::random_vector(hidden);
  for (int64_t bn : {int64_t(1), int64_t(4), int64_t(8), hidden - 1, hidden, 2 * hidden}) {
    SCOPED_TRACE(bn);
    const ResidualRmsNorm k4 = residual_rmsnorm(y, r, g, bn);
    ASSERT_EQ(k4.sum_squares.cols, (hidden + bn - 1) / bn);
    EXPECT_LT(relative_error(rstd_from_partials(k4.sum_squares, hidden, 1e-5), rmsnorm_rstd(k4.residual, 1e-5)), 1e-15);
  }
}

TEST(ReferenceRmsNorm, RowScaleHandComputed) {
  Matrix y(2, 2), dz(2, 2);
  y.data = {1, 2, 3, 4};
  dz.data = {1, 1, 1, 0};
  EXPECT_EQ(row_scale(y, {2, -1}).data, (std::vector<double>{2, 4, -3, -4}));
  const RowScaleBackward b = row_scale_backward(dz, y, {2, -1});
  EXPECT_EQ(b.grad_input.data, (std::vector<double>{2, 2, -1, 0}));  // scale * dZ
  EXPECT_EQ(b.grad_scale, (Vector{3, 3}));                            // 1*1 + 1*2, 1*3 + 0*4
}

TEST(ReferenceRmsNorm, RowScaleBackwardMatchesCentralDifferences) {
  SCOPED_TRACE(test::seed_note());
  const Matrix y = test::random_matrix(4, 6), upstream = test::random_matrix(4, 6);
  const Vector scale = test::random_vector(4);
  const RowScaleBackward b = row_scale_backward(upstream, y, scale);
  EXPECT_LT(relative_error(b.grad_input, test::numerical_gradient(
                                             [&](const Matrix& at) {
                                               return test::frobenius_dot(upstream, row_scale(at, scale));
                                             },
                                             y)),
            1e-8);
  EXPECT_LT(relative_error(b.grad_scale, test::numerical_gradient(
                                             [&](const Vector& at) {
                                               return test::frobenius_dot(upstream, row_scale(y, at));
                                             },
                                             scale)),
            1e-8);
}

TEST(ReferenceRmsNorm, PlainBackwardMatchesCentralDifferences) {
  SCOPED_TRACE(test::seed_note());
  const double eps = 1e-3;
  const Matrix h = test::random_matrix(5, 9), upstream = test::random_matrix(5, 9);
  const Vector g = test::random_vector(9, 0.5, 1.5);
  const RmsNormBackward b = rmsnorm_backward(upstream, h, g, eps);
  EXPECT_LT(relative_error(b.grad_input, test::numerical_gradient(
                                             [&](const Matrix& at) {
                                               return test::frobenius_dot(upstream, rmsnorm(at, g, eps));
                                             },
                                             h)),
            1e-7);
  EXPECT_LT(relative_error(b.grad_weight, test::numerical_gradient(
                                              [&](const Vector& at) {
                                                return test::frobenius_dot(upstream, rmsnorm(h, at, eps));
                                              },
                                              g)),
            1e-7);
}

TEST(ReferenceRmsNorm, BackwardCorrectionHandComputed) {
  Matrix p(2, 3);
  p.data = {1, 2, 3, -4, 0, 2};
  // rstd^2 (sum_b P) / hidden: 4 * 6 / 4 and 0.25 * (-2) / 4
  EXPECT_EQ(rmsnorm_backward_correction(p, {2, 0.5}, 4), (Vector{6, -0.125}));
}

TEST(ReferenceRmsNorm, Kernel9HandComputed) {
  // H (1, 7), g (2, 0.5), D' (1, 1), c' 0.02, dR_in (0.5, 0):
  //   dH0 = 0.5 + 1*2 - 0.02*1 = 2.48,  dH1 = 0 + 1*0.5 - 0.02*7 = 0.36
  Matrix h(1, 2), d(1, 2, 1.0), dr(1, 2);
  h.data = {1, 7};
  dr.data = {0.5, 0};
  const Matrix dh = residual_rmsnorm_backward(d, h, {2, 0.5}, {0.02}, dr);
  EXPECT_NEAR(dh(0, 0), 2.48, 1e-15);
  EXPECT_NEAR(dh(0, 1), 0.36, 1e-15);
}

TEST(ReferenceRmsNorm, WeightGradientsHandComputed) {
  // G (1, 3), W2 (0.5, 2), g (2, 0.5): dW2 = G g = (2, 1.5), dg partials = G W2 = (0.5, 6)
  Matrix product(1, 2), w2(1, 2);
  product.data = {1, 3};
  w2.data = {0.5, 2};
  const RmsNormWeightGradients w = rmsnorm_weight_gradients(product, w2, {2, 0.5}, 1);
  EXPECT_EQ(w.grad_projection_weight.data, (std::vector<double>{2, 1.5}));
  EXPECT_EQ(w.norm_weight_partials.data, (std::vector<double>{0.5, 6}));
}

// The fused route fed dZ and Z = N W2^T, rstd from kernel 4's partials: the correction from the
// partials of <dZ, Z>, kernel 9 on D' = (rstd dZ) W2 and the weight gradients from G = (rstd
// dZ)^T H reproduce the plain backward (dH, dg, dW2 = dZ^T N), for any tile widths and heights.
TEST(ReferenceRmsNorm, FusedBackwardEqualsThePlainBackward) {
  SCOPED_TRACE(test::seed_note());
  const int64_t m = 9, hidden = 12, n2 = 7;
  const double eps = 1e-4;
  const Matrix h = test::random_matrix(m, hidden), dz = test::random_matrix(m, n2), w2 = test::random_matrix(n2, hidden),
               dr_in = test::random_matrix(m, hidden);
  const Vector g = test::random_vector(hidden);
  const Matrix n = rmsnorm(h, g, eps), z = gemm(n, Major::k, w2, Major::k), dn = gemm(dz, Major::k, w2, Major::mn);
  const RmsNormBackward plain = rmsnorm_backward(dn, h, g, eps);
  Matrix want_dh = plain.grad_input;
  for (std::size_t i = 0; i < want_dh.data.size(); ++i) want_dh.data[i] += dr_in.data[i];
  const Matrix want_dw2 = gemm(dz, Major::mn, n, Major::mn);
  for (int64_t tile : {int64_t(1), int64_t(2), int64_t(5), m, m + 4}) {
    SCOPED_TRACE(tile);
    const Vector rstd = rstd_from_partials(row_partial_sums_of_squares(h, tile), hidden, eps);
    const Vector correction = rmsnorm_backward_correction(row_partial_dots(z, dz, tile), rstd, hidden);
    const Matrix scaled = row_scale(dz, rstd);
    const Matrix dh = residual_rmsnorm_backward(gemm(scaled, Major::k, w2, Major::mn), h, g, correction, dr_in);
    EXPECT_LT(relative_error(dh, want_dh), 1e-13);
    const RmsNormWeightGradients w = rmsnorm_weight_gradients(gemm(scaled, Major::mn, h, Major::mn), w2, g, tile);
    ASSERT_EQ(w.norm_weight_partials.rows, (n2 + tile - 1) / tile);
    EXPECT_LT(relative_error(combine_column_partials(w.norm_weight_partials, Combine::sum), plain.grad_weight), 1e-13);
    EXPECT_LT(relative_error(w.grad_projection_weight, want_dw2), 1e-13);
  }
}

TEST(ReferenceRmsNorm, Validates) {
  const Matrix y = test::random_matrix(2, 3), bad = test::random_matrix(3, 3);
  const Vector g{1, 2, 3}, rows{1, 1};
  EXPECT_THAT(test::invalid_argument_message([&] { residual_rmsnorm(y, bad, g, 2); }),
              HasSubstr("coda::reference::residual_rmsnorm: argument 'residual': is (3 x 3) but must be (2 x 3)"));
  EXPECT_THAT(test::invalid_argument_message([&] { residual_rmsnorm(y, y, {1, 2}, 2); }),
              HasSubstr("argument 'weight': has 2 entries but must have 3"));
  EXPECT_THAT(test::invalid_argument_message([&] { residual_rmsnorm(y, y, g, 0); }), HasSubstr("argument 'bn'"));
  EXPECT_THAT(test::invalid_argument_message([&] { rstd_from_partials(y, 0, 1e-6); }),
              HasSubstr("coda::reference::rstd_from_partials: argument 'hidden'"));
  EXPECT_THAT(test::invalid_argument_message([&] { rstd_from_partials(y, 3, -1e-6); }),
              HasSubstr("argument 'eps': is -1e-06 but must be finite and >= 0"));
  EXPECT_THAT(test::invalid_argument_message([&] { rmsnorm_rstd(y, std::nan("")); }),
              HasSubstr("coda::reference::rmsnorm_rstd: argument 'eps'"));
  EXPECT_THAT(test::invalid_argument_message([&] { rmsnorm(y, {1}, 1e-6); }),
              HasSubstr("coda::reference::rmsnorm: argument 'weight'"));
  EXPECT_THAT(test::invalid_argument_message([&] { rmsnorm_backward(bad, y, g, 1e-6); }),
              HasSubstr("coda::reference::rmsnorm_backward: argument 'grad_output'"));
  EXPECT_THAT(test::invalid_argument_message([&] {
                row_scale(y, {1, 2, 3});
              }),
              HasSubstr("coda::reference::row_scale: argument 'scale': has 3 entries but must have 2"));
  EXPECT_THAT(test::invalid_argument_message([&] { row_scale_backward(bad, y, rows); }),
              HasSubstr("coda::reference::row_scale_backward: argument 'grad_output'"));
  EXPECT_THAT(test::invalid_argument_message([&] { rmsnorm_backward_correction(y, rows, 0); }),
              HasSubstr("coda::reference::rmsnorm_backward_correction: argument 'hidden'"));
  EXPECT_THAT(test::invalid_argument_message([&] { rmsnorm_backward_correction(y, g, 3); }),
              HasSubstr("argument 'rstd': has 3 entries but must have 2"));
  const auto kernel9 = [&](const Matrix& h, const Vector& weight, const Vector& correction, const Matrix& dr) {
    residual_rmsnorm_backward(y, h, weight, correction, dr);
  };
  EXPECT_THAT(test::invalid_argument_message([&] { kernel9(bad, g, rows, y); }),
              HasSubstr("coda::reference::residual_rmsnorm_backward: argument 'h'"));
  EXPECT_THAT(test::invalid_argument_message([&] { kernel9(y, rows, rows, y); }), HasSubstr("argument 'weight'"));
  EXPECT_THAT(test::invalid_argument_message([&] { kernel9(y, g, g, y); }), HasSubstr("argument 'correction'"));
  EXPECT_THAT(test::invalid_argument_message([&] { kernel9(y, g, rows, bad); }),
              HasSubstr("argument 'grad_residual_in'"));
  EXPECT_THAT(test::invalid_argument_message([&] { rmsnorm_weight_gradients(y, bad, g, 1); }),
              HasSubstr("coda::reference::rmsnorm_weight_gradients: argument 'projection_weight'"));
  EXPECT_THAT(test::invalid_argument_message([&] { rmsnorm_weight_gradients(y, y, rows, 1); }),
              HasSubstr("argument 'weight'"));
  EXPECT_THAT(test::invalid_argument_message([&] { rmsnorm_weight_gradients(y, y, g, 0); }), HasSubstr("argument 'bm'"));
}

}  // namespace
}  // namespace coda::reference

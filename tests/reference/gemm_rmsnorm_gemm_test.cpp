// The GEMM–residual–RMSNorm–GEMM pattern's oracle: a hand-computed forward, the
// reparameterization identities (normalize-then-GEMM = GEMM-then-row-scale; <dN, N> = <dZ, Z>),
// the fused backward against the plain one, both against central differences of every parameter,
// and compositions 6, 7 and 8 against their unfused forms.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "coda/core/layout.hpp"
#include "coda/reference/gemm.hpp"
#include "coda/reference/gemm_rmsnorm_gemm.hpp"
#include "coda/reference/reductions.hpp"
#include "coda/reference/rmsnorm.hpp"
#include "coda/reference/swiglu.hpp"
#include "reference/support.hpp"
#include "support/random.hpp"

namespace coda::reference {
namespace {

using ::testing::HasSubstr;

GemmRmsNormGemm random_layer(int64_t m, int64_t k, int64_t hidden, int64_t n2) {
  return {test::random_matrix(m, k),           test::random_matrix(hidden, k), test::random_matrix(m, hidden),
          test::random_vector(hidden, 0.5, 1.5), test::random_matrix(n2, hidden), 1e-5};
}

TEST(ReferenceGemmRmsNormGemm, ForwardHandComputed) {
  // X (1, 2), W1 diag(1, 3): Y = (1, 6); R (0, 1): H = (1, 7), mean square 25, rstd 1/5 (eps 0);
  // g (2, 0.5): N = (0.4, 0.7); W2 rows (1, 1), (2, -1): Z = (0.4 + 0.7, 0.8 - 0.7) = (1.1, 0.1)
  GemmRmsNormGemm layer{Matrix(1, 2), Matrix(2, 2), Matrix(1, 2), {2, 0.5}, Matrix(2, 2), 0.0};
  layer.x.data = {1, 2};
  layer.w1.data = {1, 0, 0, 3};
  layer.residual.data = {0, 1};
  layer.w2.data = {1, 1, 2, -1};
  for (const GemmRmsNormGemmForward& f :
       {gemm_rmsnorm_gemm_forward(layer), gemm_rmsnorm_gemm_forward_fused(layer, 1)}) {
    EXPECT_EQ(f.residual_out.data, (std::vector<double>{1, 7}));
    EXPECT_EQ(f.rstd, (Vector{0.2}));
    EXPECT_NEAR(f.output(0, 0), 1.1, 1e-15);
    EXPECT_NEAR(f.output(0, 1), 0.1, 1e-15);
  }
}

// Normalize-then-GEMM equals GEMM-then-row-scale, for any tile width of the S partials.
TEST(ReferenceGemmRmsNormGemm, FusedForwardEqualsPlain) {
  SCOPED_TRACE(test::seed_note());
  const int64_t hidden = 19;
  const GemmRmsNormGemm layer = random_layer(8, 11, hidden, 13);
  const GemmRmsNormGemmForward plain = gemm_rmsnorm_gemm_forward(layer);
  for (int64_t bn : {int64_t(1), int64_t(4), hidden - 1, hidden, hidden + 5}) {
    SCOPED_TRACE(bn);
    const GemmRmsNormGemmForward fused = gemm_rmsnorm_gemm_forward_fused(layer, bn);
    EXPECT_EQ(fused.residual_out.data, plain.residual_out.data);
    EXPECT_LT(relative_error(fused.rstd, plain.rstd), 1e-15);
    EXPECT_LT(relative_error(fused.output, plain.output), 1e-14);
  }
}

// The row statistic crosses the GEMM boundary: <dN, N> = <dZ, Z> row by row, since Z = N W2^T and
// dN = dZ W2.
TEST(ReferenceGemmRmsNormGemm, RowDotCrossesTheGemm) {
  SCOPED_TRACE(test::seed_note());
  const GemmRmsNormGemm layer = random_layer(6, 5, 10, 7);
  const GemmRmsNormGemmForward f = gemm_rmsnorm_gemm_forward(layer);
  const Matrix dz = test::random_matrix(6, 7);
  const Matrix n = rmsnorm(f.residual_out, layer.norm_weight, layer.eps);
  const Matrix dn = gemm(dz, Major::k, layer.w2, Major::mn);
  EXPECT_LT(relative_error(row_dots(dn, n), row_dots(dz, f.output)), 1e-13);
}

void expect_same_gradients(const GemmRmsNormGemmGradients& got, const GemmRmsNormGemmGradients& want, double tol) {
  EXPECT_LT(relative_error(got.x, want.x), tol) << "dX";
  EXPECT_LT(relative_error(got.w1, want.w1), tol) << "dW1";
  EXPECT_LT(relative_error(got.residual, want.residual), tol) << "dR";
  EXPECT_LT(relative_error(got.norm_weight, want.norm_weight), tol) << "dg";
  EXPECT_LT(relative_error(got.w2, want.w2), tol) << "dW2";
}

TEST(ReferenceGemmRmsNormGemm, FusedBackwardEqualsPlain) {
  SCOPED_TRACE(test::seed_note());
  const int64_t m = 9, n2 = 14;
  const GemmRmsNormGemm layer = random_layer(m, 6, 11, n2);
  const GemmRmsNormGemmForward f = gemm_rmsnorm_gemm_forward_fused(layer, 4);
  const Matrix dz = test::random_matrix(m, n2), dh_out = test::random_matrix(m, 11);
  const GemmRmsNormGemmGradients plain = gemm_rmsnorm_gemm_backward(layer, f, dz, dh_out);
  for (auto [bn, bm] : {std::pair<int64_t, int64_t>{1, 1}, {3, 2}, {5, 4}, {n2, m}, {n2 + 2, m + 3}}) {
    SCOPED_TRACE(testing::Message() << "bn " << bn << " bm " << bm);
    expect_same_gradients(gemm_rmsnorm_gemm_backward_fused(layer, f, dz, dh_out, bn, bm), plain, 1e-13);
  }
}

// L = <dZ, Z> + <dH_out, H> as a function of each parameter: its gradient is the backward given
// (dZ, dH_out). Checked for the plain and the fused backward.
TEST(ReferenceGemmRmsNormGemm, BackwardMatchesCentralDifferences) {
  SCOPED_TRACE(test::seed_note());
  const int64_t m = 4, k = 5, hidden = 6, n2 = 3;
  const GemmRmsNormGemm layer = random_layer(m, k, hidden, n2);
  const Matrix dz = test::random_matrix(m, n2), dh_out = test::random_matrix(m, hidden);
  auto loss = [&](const GemmRmsNormGemm& at) {
    const GemmRmsNormGemmForward f = gemm_rmsnorm_gemm_forward(at);
    return test::frobenius_dot(dz, f.output) + test::frobenius_dot(dh_out, f.residual_out);
  };
  // Central differences in one parameter (a member of the layer), the others held fixed.
  auto numeric_in = [&](auto GemmRmsNormGemm::*parameter) {
    auto loss_at = [&](const auto& value) {
      GemmRmsNormGemm moved = layer;
      moved.*parameter = value;
      return loss(moved);
    };
    return test::numerical_gradient(loss_at, layer.*parameter);
  };
  const GemmRmsNormGemmGradients numeric{numeric_in(&GemmRmsNormGemm::x), numeric_in(&GemmRmsNormGemm::w1),
                                         numeric_in(&GemmRmsNormGemm::residual),
                                         numeric_in(&GemmRmsNormGemm::norm_weight), numeric_in(&GemmRmsNormGemm::w2)};

  const GemmRmsNormGemmForward f = gemm_rmsnorm_gemm_forward(layer);
  expect_same_gradients(gemm_rmsnorm_gemm_backward(layer, f, dz, dh_out), numeric, 1e-7);
  expect_same_gradients(gemm_rmsnorm_gemm_backward_fused(layer, f, dz, dh_out, 2, 3), numeric, 1e-7);
}

// Compositions 6-8: GEMM 2 on U = H g, then row scale and the next epilogue, equals the epilogue
// applied to the plain forward's Z.
struct FusedInputs {
  Matrix gemm2_output;  // U W2^T
  Vector rstd;
  Matrix plain_output;  // Z = RMSNorm(H) W2^T
};

FusedInputs fused_inputs(const GemmRmsNormGemm& layer, int64_t bn) {
  const Matrix y = gemm(layer.x, Major::k, layer.w1, Major::k);
  const ResidualRmsNorm k4 = residual_rmsnorm(y, layer.residual, layer.norm_weight, bn);
  return {gemm(k4.weighted, Major::k, layer.w2, Major::k),
          rstd_from_partials(k4.sum_squares, layer.w1.rows, layer.eps), gemm_rmsnorm_gemm_forward(layer).output};
}

TEST(ReferenceGemmRmsNormGemm, Composition6RowScaleSwiglu) {
  SCOPED_TRACE(test::seed_note());
  const FusedInputs in = fused_inputs(random_layer(5, 7, 9, 2 * 6), 4);
  EXPECT_LT(relative_error(row_scale_swiglu(in.gemm2_output, in.rstd), swiglu(in.plain_output)), 1e-14);
}

TEST(ReferenceGemmRmsNormGemm, Composition7RowScaleRope) {
  SCOPED_TRACE(test::seed_note());
  const FusedInputs in = fused_inputs(random_layer(5, 7, 9, 3 * 8), 2);
  const RopeCache cache = rope_cache(32, 8);
  const std::vector<int32_t> positions{0, 31, 7, 7, 12};
  EXPECT_LT(relative_error(row_scale_rope(in.gemm2_output, in.rstd, positions, cache, 8, 2),
                           rope(in.plain_output, positions, cache, 8, 2)),
            1e-14);
}

TEST(ReferenceGemmRmsNormGemm, Composition8RowScaleCrossEntropy) {
  SCOPED_TRACE(test::seed_note());
  const int64_t vocab = 21;
  const FusedInputs in = fused_inputs(random_layer(5, 7, 9, vocab), 3);
  const std::vector<int32_t> targets{0, 20, -100, 4, 13};
  const CrossEntropyOptions options{.label_smoothing = 0.1, .softcap = 3.0};
  const CrossEntropyLoss want = cross_entropy(in.plain_output, targets, options);
  for (int64_t bn : {int64_t(1), int64_t(8), vocab}) {
    const CrossEntropyPartials p = row_scale_cross_entropy_partials(in.gemm2_output, in.rstd, targets, bn, options);
    EXPECT_LT(relative_error(cross_entropy_finish(p, targets, vocab, options).per_row, want.per_row), 1e-13);
  }
}

TEST(ReferenceGemmRmsNormGemm, Validates) {
  const GemmRmsNormGemm good = random_layer(3, 4, 5, 6);
  auto forward_message = [](GemmRmsNormGemm layer) {
    return test::invalid_argument_message([&] { gemm_rmsnorm_gemm_forward(layer); });
  };
  GemmRmsNormGemm bad = good;
  bad.w1 = test::random_matrix(5, 3);
  EXPECT_THAT(forward_message(bad),
              HasSubstr("coda::reference::gemm_rmsnorm_gemm_forward: argument 'layer.w1': is (5 x 3) "
                        "but x is (3 x 4) (they must agree on K)"));
  bad = good;
  bad.residual = test::random_matrix(3, 4);
  EXPECT_THAT(forward_message(bad), HasSubstr("argument 'layer.residual': is (3 x 4) but must be (3 x 5)"));
  bad = good;
  bad.norm_weight = {1, 2};
  EXPECT_THAT(forward_message(bad), HasSubstr("argument 'layer.norm_weight': has 2 entries but must have 5"));
  bad = good;
  bad.w2 = test::random_matrix(6, 4);
  EXPECT_THAT(forward_message(bad), HasSubstr("argument 'layer.w2'"));
  bad = good;
  bad.eps = -1;
  EXPECT_THAT(forward_message(bad), HasSubstr("argument 'layer.eps'"));
  EXPECT_THAT(test::invalid_argument_message([&] { gemm_rmsnorm_gemm_forward_fused(good, 0); }),
              HasSubstr("coda::reference::gemm_rmsnorm_gemm_forward_fused: argument 'bn'"));

  const GemmRmsNormGemmForward f = gemm_rmsnorm_gemm_forward(good);
  const Matrix dz = test::random_matrix(3, 6), dh = test::random_matrix(3, 5);
  EXPECT_THAT(test::invalid_argument_message([&] { gemm_rmsnorm_gemm_backward(good, f, dh, dh); }),
              HasSubstr("coda::reference::gemm_rmsnorm_gemm_backward: argument 'grad_output': is (3 x 5) but must be "
                        "(3 x 6)"));
  EXPECT_THAT(test::invalid_argument_message([&] { gemm_rmsnorm_gemm_backward(good, f, dz, dz); }),
              HasSubstr("argument 'grad_residual_out'"));
  GemmRmsNormGemmForward short_rstd = f;
  short_rstd.rstd.pop_back();
  EXPECT_THAT(test::invalid_argument_message([&] { gemm_rmsnorm_gemm_backward_fused(good, short_rstd, dz, dh, 2, 2); }),
              HasSubstr("coda::reference::gemm_rmsnorm_gemm_backward_fused: argument 'saved.rstd'"));
  EXPECT_THAT(test::invalid_argument_message([&] { gemm_rmsnorm_gemm_backward_fused(good, f, dz, dh, 2, 0); }),
              HasSubstr("argument 'bm'"));
  EXPECT_THAT(test::invalid_argument_message([&] { gemm_rmsnorm_gemm_backward_fused(good, f, dz, dh, 0, 2); }),
              HasSubstr("argument 'bn'"));
}

}  // namespace
}  // namespace coda::reference

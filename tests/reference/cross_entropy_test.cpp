// Cross-entropy's oracle: hand-computed losses for each option, the partial form (any tile width)
// against the direct form, the smoothing formula against its definition, the backward against
// central differences for every option and reduction, and the statistic <dZ, Z>.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "coda/reference/cross_entropy.hpp"
#include "coda/reference/reductions.hpp"
#include "reference/support.hpp"
#include "support/random.hpp"

namespace coda::reference {
namespace {

using ::testing::HasSubstr;

const double ln3 = std::log(3.0), ln4 = std::log(4.0);

// Logits (0, ln 3) twice, then a row that is ignored: softmax (1/4, 3/4), lse = ln 4.
Matrix hand_logits() {
  Matrix y(3, 2);
  y.data = {0, ln3, 0, ln3, 5, 7};
  return y;
}
const std::vector<int32_t> hand_targets{1, 0, -100};

TEST(ReferenceCrossEntropy, HandComputed) {
  CrossEntropyOptions options;
  CrossEntropyLoss loss = cross_entropy(hand_logits(), hand_targets, options);
  // row 0: ln 4 - ln 3; row 1: ln 4 - 0; row 2 ignored
  EXPECT_NEAR(loss.per_row[0], ln4 - ln3, 1e-15);
  EXPECT_NEAR(loss.per_row[1], ln4, 1e-15);
  EXPECT_EQ(loss.per_row[2], 0.0);
  EXPECT_NEAR(loss.lse[0], ln4, 1e-15);
  EXPECT_NEAR(loss.lse[2], 7 + std::log(1 + std::exp(-2.0)), 1e-15);  // lse is computed for every row
  EXPECT_EQ(loss.valid_rows, 2);
  ASSERT_TRUE(loss.reduced.has_value());
  EXPECT_NEAR(*loss.reduced, (2 * ln4 - ln3) / 2, 1e-15);  // mean over the two valid rows
  options.reduction = LossReduction::sum;
  EXPECT_NEAR(*cross_entropy(hand_logits(), hand_targets, options).reduced, 2 * ln4 - ln3, 1e-15);
  options.reduction = LossReduction::none;
  EXPECT_FALSE(cross_entropy(hand_logits(), hand_targets, options).reduced.has_value());
}

TEST(ReferenceCrossEntropy, LabelSmoothingHandComputed) {
  // eps = 0.2, V = 2, row (0, ln 3), target 1:
  //   lse - (1 - eps) y_t - (eps / V) sum y = ln 4 - 0.8 ln 3 - 0.1 ln 3 = ln 4 - 0.9 ln 3
  // and by PyTorch's definition (1 - eps) NLL + eps mean_n(-log p_n):
  //   0.8 (ln 4 - ln 3) + 0.2 ((ln 4 - 0) + (ln 4 - ln 3)) / 2 = ln 4 - 0.9 ln 3
  const CrossEntropyLoss loss = cross_entropy(hand_logits(), hand_targets, {.label_smoothing = 0.2});
  EXPECT_NEAR(loss.per_row[0], ln4 - 0.9 * ln3, 1e-15);
  EXPECT_EQ(loss.per_row[2], 0.0);  // ignored rows stay 0 with every option
}

TEST(ReferenceCrossEntropy, ZLossHandComputed) {
  // lambda = 0.01: ln 4 - ln 3 + 0.01 (ln 4)^2
  const CrossEntropyLoss loss = cross_entropy(hand_logits(), hand_targets, {.z_loss = 0.01});
  EXPECT_NEAR(loss.per_row[0], ln4 - ln3 + 0.01 * ln4 * ln4, 1e-15);
  EXPECT_EQ(loss.per_row[2], 0.0);
}

TEST(ReferenceCrossEntropy, SoftcapAppliesBeforeEverything) {
  // cap 1: logits (0, atanh 0.5) become (0, 0.5); target 1: loss = ln(1 + e^0.5) - 0.5
  Matrix y(1, 2);
  y.data = {0, std::atanh(0.5)};
  const CrossEntropyOptions options{.softcap = 1.0};
  const CrossEntropyLoss loss = cross_entropy(y, {1}, options);
  EXPECT_NEAR(loss.per_row[0], std::log(1 + std::exp(0.5)) - 0.5, 1e-15);
  const CrossEntropyPartials partials = cross_entropy_partials(y, {1}, 1, options);
  EXPECT_NEAR(partials.target_logit[0], 0.5, 1e-15);  // the capped target logit
  EXPECT_NEAR(partials.row_sums(0, 1), 0.5, 1e-15);   // and capped row sums
  // smoothing sees the capped logits too: eps = 0.5 adds -(0.5 / 2) (0 + 0.5) and takes 0.5 * 0.5 back
  EXPECT_NEAR(cross_entropy(y, {1}, {.label_smoothing = 0.5, .softcap = 1.0}).per_row[0],
              std::log(1 + std::exp(0.5)) - 0.25 - 0.125, 1e-15);
}

TEST(ReferenceCrossEntropy, PartialsHandComputed) {
  Matrix y(1, 5);
  y.data = {1, 2, 3, 4, 5};
  const CrossEntropyPartials p = cross_entropy_partials(y, {3}, 2, {});
  // tiles {1, 2}, {3, 4}, {5}: lse parts ln(e + e^2), ln(e^3 + e^4), 5; row sums 3, 7, 5; target y[3] = 4
  ASSERT_EQ(p.lse.cols, 3);
  EXPECT_NEAR(p.lse(0, 0), std::log(std::exp(1.0) + std::exp(2.0)), 1e-15);
  EXPECT_NEAR(p.lse(0, 1), std::log(std::exp(3.0) + std::exp(4.0)), 1e-14);
  EXPECT_EQ(p.lse(0, 2), 5.0);
  EXPECT_EQ(p.row_sums.data, (std::vector<double>{3, 7, 5}));
  EXPECT_EQ(p.target_logit, (Vector{4}));
  // finish: lse = ln(e + ... + e^5), loss = lse - 4
  const double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0) + std::exp(4.0) + std::exp(5.0));
  EXPECT_NEAR(cross_entropy_finish(p, {3}, 5, {}).per_row[0], lse - 4, 1e-14);
}

// Every option the reference supports, alone and together.
struct Case {
  std::string name;
  CrossEntropyOptions options;
  bool ignore_some_rows;
};

std::vector<Case> every_case() {
  return {
      {"mean", {}, false},
      {"sum", {.reduction = LossReduction::sum}, false},
      {"none", {.reduction = LossReduction::none}, false},
      {"ignore_index", {}, true},
      {"ignore_index_is_a_class", {.ignore_index = 2, .reduction = LossReduction::sum}, true},
      {"label_smoothing", {.label_smoothing = 0.1}, false},
      {"z_loss", {.z_loss = 0.02, .reduction = LossReduction::none}, false},
      {"softcap", {.softcap = 3.0}, false},
      {"everything", {.label_smoothing = 0.2, .z_loss = 0.01, .softcap = 2.5, .reduction = LossReduction::sum}, true},
      {"everything_mean", {.label_smoothing = 0.05, .z_loss = 0.03, .softcap = 4.0}, true},
  };
}

// Random targets; with ignore_some_rows, rows 1 and 3 carry ignore_index.
std::vector<int32_t> targets_for(const Case& c, int64_t rows, int64_t vocab) {
  std::vector<int32_t> t(static_cast<std::size_t>(rows));
  for (int32_t& v : t) v = int32_t(test::uniform_int(0, vocab - 1));
  if (c.ignore_some_rows) t[1] = t[3] = c.options.ignore_index;
  return t;
}

TEST(ReferenceCrossEntropy, PartialsAndFinishEqualTheDirectLossForAnyTileWidth) {
  SCOPED_TRACE(test::seed_note());
  const int64_t rows = 6, vocab = 37;
  const Matrix logits = test::random_matrix(rows, vocab, -6, 6);
  for (const Case& c : every_case()) {
    SCOPED_TRACE(c.name);
    const std::vector<int32_t> targets = targets_for(c, rows, vocab);
    const CrossEntropyLoss direct = cross_entropy(logits, targets, c.options);
    for (int64_t bn : {int64_t(1), int64_t(4), int64_t(7), vocab - 1, vocab, vocab + 10}) {
      SCOPED_TRACE(bn);
      const CrossEntropyPartials partials = cross_entropy_partials(logits, targets, bn, c.options);
      ASSERT_EQ(partials.lse.cols, (vocab + bn - 1) / bn);
      const CrossEntropyLoss finished = cross_entropy_finish(partials, targets, vocab, c.options);
      EXPECT_LT(relative_error(finished.per_row, direct.per_row), 1e-14);
      EXPECT_LT(relative_error(finished.lse, direct.lse), 1e-14);
      EXPECT_EQ(finished.valid_rows, direct.valid_rows);
      ASSERT_EQ(finished.reduced.has_value(), direct.reduced.has_value());
      if (direct.reduced) {
        EXPECT_NEAR(*finished.reduced, *direct.reduced, 1e-13);
      }
    }
  }
}

TEST(ReferenceCrossEntropy, SmoothedLossEqualsItsDefinition) {
  SCOPED_TRACE(test::seed_note());
  // loss = sum_n q_n (lse - y_n) with q = (1 - eps) onehot + eps / V
  const int64_t rows = 4, vocab = 11;
  const double eps = 0.3;
  const Matrix logits = test::random_matrix(rows, vocab, -3, 3);
  const std::vector<int32_t> targets{0, 10, 5, 3};
  const CrossEntropyLoss loss = cross_entropy(logits, targets, {.label_smoothing = eps});
  for (int64_t m = 0; m < rows; ++m) {
    double want = 0;
    for (int64_t n = 0; n < vocab; ++n) {
      const double q = (1 - eps) * (n == targets[std::size_t(m)] ? 1 : 0) + eps / double(vocab);
      want += q * (loss.lse[std::size_t(m)] - logits(m, n));
    }
    EXPECT_NEAR(loss.per_row[std::size_t(m)], want, 1e-13);
  }
}

TEST(ReferenceCrossEntropy, EveryRowIgnored) {
  const std::vector<int32_t> ignored{-100, -100, -100};
  const CrossEntropyLoss mean = cross_entropy(hand_logits(), ignored, {});
  EXPECT_EQ(mean.valid_rows, 0);
  EXPECT_TRUE(std::isnan(*mean.reduced));  // 0 / 0, as PyTorch
  EXPECT_EQ(*cross_entropy(hand_logits(), ignored, {.reduction = LossReduction::sum}).reduced, 0.0);
  const CrossEntropyBackward b = cross_entropy_backward(hand_logits(), ignored, mean.lse, {1.0}, 2, {});
  EXPECT_EQ(b.grad_logits.data, std::vector<double>(6, 0.0));
}

TEST(ReferenceCrossEntropy, BackwardHandComputed) {
  Matrix y(1, 2);
  y.data = {0, ln3};
  const Vector lse{ln4};
  // p = (1/4, 3/4), q = onehot(1): dY = p - q = (1/4, -1/4) (mean over one row, g = 1)
  CrossEntropyBackward b = cross_entropy_backward(y, {1}, lse, {1.0}, 1, {});
  EXPECT_NEAR(b.grad_logits(0, 0), 0.25, 1e-15);
  EXPECT_NEAR(b.grad_logits(0, 1), -0.25, 1e-15);
  // statistic: 0 * 0.25 + ln 3 * -0.25, one partial per column with bn = 1
  EXPECT_NEAR(b.row_partials(0, 1), -0.25 * ln3, 1e-15);
  EXPECT_EQ(b.row_partials(0, 0), 0.0);
  // smoothing 0.2: q = (0.1, 0.9): dY = (0.15, -0.15); reduction none with dloss 2 doubles it
  b = cross_entropy_backward(y, {1}, lse, {2.0}, 2, {.label_smoothing = 0.2, .reduction = LossReduction::none});
  EXPECT_NEAR(b.grad_logits(0, 0), 0.3, 1e-15);
  EXPECT_NEAR(b.grad_logits(0, 1), -0.3, 1e-15);
}

// The backward of every option and reduction against central differences of the loss. For
// reduction none the scalar is sum_m w_m loss_m, whose gradient is the backward with dloss = w.
TEST(ReferenceCrossEntropy, BackwardMatchesCentralDifferences) {
  SCOPED_TRACE(test::seed_note());
  const int64_t rows = 5, vocab = 13;
  const Matrix logits = test::random_matrix(rows, vocab, -6, 6);
  for (const Case& c : every_case()) {
    SCOPED_TRACE(c.name);
    const std::vector<int32_t> targets = targets_for(c, rows, vocab);
    const bool per_row = c.options.reduction == LossReduction::none;
    const Vector grad_output = per_row ? test::random_vector(rows) : Vector{test::uniform(0.5, 2.0)};
    auto scalar_loss = [&](const Matrix& z) {
      const CrossEntropyLoss loss = cross_entropy(z, targets, c.options);
      if (!per_row) return grad_output[0] * *loss.reduced;
      double sum = 0;
      for (int64_t m = 0; m < rows; ++m) sum += grad_output[std::size_t(m)] * loss.per_row[std::size_t(m)];
      return sum;
    };
    const Vector lse = cross_entropy(logits, targets, c.options).lse;
    const CrossEntropyBackward b = cross_entropy_backward(logits, targets, lse, grad_output, 4, c.options);
    EXPECT_LT(relative_error(b.grad_logits, test::numerical_gradient(scalar_loss, logits)), 1e-7);
    if (c.ignore_some_rows) {
      for (int64_t m : {1, 3}) {
        for (int64_t n = 0; n < vocab; ++n) EXPECT_EQ(b.grad_logits(m, n), 0.0);
      }
    }
  }
}

// The statistic for the RMSNorm before the LM head: <dZ, Z> with Z the raw GEMM output and dZ the
// gradient with respect to it (through the softcap), as row partials of any tile width.
TEST(ReferenceCrossEntropy, BackwardRowPartialsAreTheRawLogitDot) {
  SCOPED_TRACE(test::seed_note());
  const int64_t rows = 4, vocab = 19;
  const Matrix logits = test::random_matrix(rows, vocab, -8, 8);
  const std::vector<int32_t> targets{3, 0, 18, 7};
  const CrossEntropyOptions options{.label_smoothing = 0.1, .softcap = 5.0};
  const Vector lse = cross_entropy(logits, targets, options).lse;
  for (int64_t bn : {int64_t(1), int64_t(5), vocab, vocab + 3}) {
    const CrossEntropyBackward b = cross_entropy_backward(logits, targets, lse, {1.0}, bn, options);
    ASSERT_EQ(b.row_partials.cols, (vocab + bn - 1) / bn);
    EXPECT_LT(relative_error(combine_row_partials(b.row_partials, Combine::sum), row_dots(logits, b.grad_logits)),
              1e-13);
  }
}

TEST(ReferenceCrossEntropy, ValidatesTargets) {
  const Matrix y = test::random_matrix(2, 5);
  EXPECT_THAT(
      test::invalid_argument_message([&] {
        cross_entropy(y, {0, 5}, {});
      }),
      HasSubstr("coda::reference::cross_entropy: argument 'targets': targets[1] = 5 is outside [0, 5) and is not "
                "ignore_index (-100)"));
  EXPECT_THAT(test::invalid_argument_message([&] {
                cross_entropy_partials(y, {-1, 0}, 2, {});
              }),
              HasSubstr("coda::reference::cross_entropy_partials: argument 'targets': targets[0] = -1"));
  EXPECT_THAT(test::invalid_argument_message([&] { cross_entropy(y, {0}, {}); }),
              HasSubstr("argument 'targets': has 1 entries but must have 2"));
  const CrossEntropyPartials p = cross_entropy_partials(y, {0, 1}, 2, {});
  EXPECT_THAT(test::invalid_argument_message([&] {
                cross_entropy_finish(p, {0, 7}, 5, {});
              }),
              HasSubstr("coda::reference::cross_entropy_finish: argument 'targets': targets[1] = 7"));
  EXPECT_THAT(test::invalid_argument_message([&] {
                cross_entropy_backward(y, {9, 0}, {0, 0}, {1}, 2, {});
              }),
              HasSubstr("coda::reference::cross_entropy_backward: argument 'targets'"));
}

TEST(ReferenceCrossEntropy, ValidatesOptionsAndShapes) {
  const Matrix y = test::random_matrix(2, 5);
  const std::vector<int32_t> t{0, 1};
  EXPECT_THAT(test::invalid_argument_message([&] { cross_entropy(y, t, {.label_smoothing = 1.0}); }),
              HasSubstr("argument 'options.label_smoothing': is 1 but must lie in [0, 1)"));
  EXPECT_THAT(test::invalid_argument_message([&] { cross_entropy(y, t, {.label_smoothing = -0.1}); }),
              HasSubstr("argument 'options.label_smoothing'"));
  EXPECT_THAT(test::invalid_argument_message([&] { cross_entropy(y, t, {.z_loss = -1}); }),
              HasSubstr("argument 'options.z_loss'"));
  EXPECT_THAT(test::invalid_argument_message([&] { cross_entropy(y, t, {.softcap = -2}); }),
              HasSubstr("argument 'options.softcap'"));
  EXPECT_THAT(test::invalid_argument_message([&] { cross_entropy(y, t, {.softcap = std::nan("")}); }),
              HasSubstr("argument 'options.softcap'"));
  EXPECT_THAT(test::invalid_argument_message([&] { cross_entropy_partials(y, t, 0, {}); }),
              HasSubstr("coda::reference::cross_entropy_partials: argument 'bn'"));
  EXPECT_THAT(test::invalid_argument_message([&] { cross_entropy(Matrix(2, 0), t, {}); }),
              HasSubstr("argument 'logits'"));
  const CrossEntropyPartials p = cross_entropy_partials(y, t, 2, {});
  EXPECT_THAT(test::invalid_argument_message([&] { cross_entropy_finish(p, t, 0, {}); }),
              HasSubstr("argument 'vocab'"));
  EXPECT_THAT(test::invalid_argument_message([&] { cross_entropy_finish(p, t, 2, {}); }),
              HasSubstr("argument 'partials.lse': has 3 tiles but a vocabulary of 2"));
  CrossEntropyPartials short_sums = p;
  short_sums.row_sums = Matrix(2, 2);
  EXPECT_THAT(test::invalid_argument_message([&] { cross_entropy_finish(short_sums, t, 5, {}); }),
              HasSubstr("argument 'partials.row_sums'"));
  CrossEntropyPartials short_targets = p;
  short_targets.target_logit = {1};
  EXPECT_THAT(test::invalid_argument_message([&] { cross_entropy_finish(short_targets, t, 5, {}); }),
              HasSubstr("argument 'partials.target_logit'"));
  EXPECT_THAT(test::invalid_argument_message([&] { cross_entropy_backward(y, t, {0}, {1}, 2, {}); }),
              HasSubstr("argument 'lse': has 1 entries but must have 2"));
  EXPECT_THAT(test::invalid_argument_message([&] { cross_entropy_backward(y, t, {0, 0}, {1, 1}, 2, {}); }),
              HasSubstr("argument 'grad_output': has 2 entries but must have 1 (reduction sum or mean"));
  EXPECT_THAT(test::invalid_argument_message(
                  [&] { cross_entropy_backward(y, t, {0, 0}, {1}, 2, {.reduction = LossReduction::none}); }),
              HasSubstr("argument 'grad_output': has 1 entries but must have 2 (reduction none"));
  EXPECT_THAT(test::invalid_argument_message([&] { cross_entropy_backward(y, t, {0, 0}, {1}, 0, {}); }),
              HasSubstr("argument 'bn'"));
}

}  // namespace
}  // namespace coda::reference

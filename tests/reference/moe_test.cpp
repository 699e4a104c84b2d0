// MoE routing's oracle: each mode by hand, tie-breaking, NaN scores, DeepSeek-V3's grouped
// selection, renormalization, the bias that steers selection but not weights, and validation.
#include "coda/reference/moe.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "coda/core/layout.hpp"
#include "coda/reference/epilogues.hpp"
#include "coda/reference/gemm.hpp"
#include "reference/support.hpp"
#include "support/random.hpp"

namespace coda::reference {
namespace {

using ::testing::HasSubstr;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
const double ln2 = std::log(2.0), ln3 = std::log(3.0);

Matrix row(std::vector<double> values) {
  Matrix m(1, int64_t(values.size()));
  m.data = std::move(values);
  return m;
}

std::vector<int32_t> ids_of(const Routing& r, int64_t m = 0) {
  return {r.ids.begin() + m * r.weights.cols, r.ids.begin() + (m + 1) * r.weights.cols};
}

// The raw score whose sigmoid is p.
double logit(double p) { return std::log(p / (1 - p)); }

TEST(ReferenceMoe, SoftmaxTopkHandComputed) {
  // scores (0, ln 3, -1, -2), k 2: experts 1 and 0; softmax over (ln 3, 0) = (3/4, 1/4)
  const Routing r = route(row({0, ln3, -1, -2}), {.mode = RoutingMode::softmax_topk, .k = 2});
  EXPECT_EQ(ids_of(r), (std::vector<int32_t>{1, 0}));
  EXPECT_NEAR(r.weights(0, 0), 0.75, 1e-15);
  EXPECT_NEAR(r.weights(0, 1), 0.25, 1e-15);
}

TEST(ReferenceMoe, TopkSoftmaxHandComputed) {
  // scores (0, ln 3, ln 2, ln 2): softmax over all = (1, 3, 2, 2) / 8; k 2 takes expert 1, then
  // expert 2 (tied with 3, the lower id wins): weights (3/8, 2/8), renormalized (3/5, 2/5)
  const Matrix scores = row({0, ln3, ln2, ln2});
  Routing r = route(scores, {.mode = RoutingMode::topk_softmax, .k = 2});
  EXPECT_EQ(ids_of(r), (std::vector<int32_t>{1, 2}));
  EXPECT_NEAR(r.weights(0, 0), 3.0 / 8, 1e-15);
  EXPECT_NEAR(r.weights(0, 1), 2.0 / 8, 1e-15);
  r = route(scores, {.mode = RoutingMode::topk_softmax, .k = 2, .renormalize = true});
  EXPECT_NEAR(r.weights(0, 0), 3.0 / 5, 1e-15);
  EXPECT_NEAR(r.weights(0, 1), 2.0 / 5, 1e-15);
}

TEST(ReferenceMoe, SigmoidBiasSteersSelectionButNotWeights) {
  // sigmoid of (0, ln 3, -ln 3, 0) = (1/2, 3/4, 1/4, 1/2); bias (0, 0, 0.6, 0.3) makes the selection
  // scores (0.5, 0.75, 0.85, 0.8): experts 2 and 3 win although expert 1 has the largest sigmoid.
  // Weights are the sigmoids without bias, (1/4, 1/2); renormalized (1/3, 2/3); times 2.5: (5/6, 5/3).
  const Matrix scores = row({0, ln3, -ln3, 0});
  RoutingOptions options{.mode = RoutingMode::sigmoid_bias, .k = 2, .expert_bias = {0, 0, 0.6, 0.3}};
  Routing r = route(scores, options);
  EXPECT_EQ(ids_of(r), (std::vector<int32_t>{2, 3}));
  EXPECT_NEAR(r.weights(0, 0), 0.25, 1e-15);
  EXPECT_NEAR(r.weights(0, 1), 0.5, 1e-15);
  options.renormalize = true;
  options.routed_scaling_factor = 2.5;
  r = route(scores, options);
  EXPECT_NEAR(r.weights(0, 0), 5.0 / 6, 1e-15);
  EXPECT_NEAR(r.weights(0, 1), 5.0 / 3, 1e-15);
  // without the bias the largest sigmoids win
  EXPECT_EQ(ids_of(route(scores, {.mode = RoutingMode::sigmoid_bias, .k = 2})), (std::vector<int32_t>{1, 0}));
}

TEST(ReferenceMoe, GroupedSelectionHandComputed) {
  // 8 experts in 4 groups of 2, sigmoid scores p below. Group scores (sum of the two best):
  // 1.1, 1.15, 1.0, 0.95; the best 2 groups are 1 and 0, so experts {0, 1, 2, 3} remain and
  // k = 3 picks 0 (0.9), 2 (0.6), 3 (0.55). Ungrouped, expert 4 (0.95) would have come first.
  const std::vector<double> p{0.9, 0.2, 0.6, 0.55, 0.95, 0.05, 0.5, 0.45};
  Matrix scores(1, 8);
  for (int64_t e = 0; e < 8; ++e) scores(0, e) = logit(p[std::size_t(e)]);
  RoutingOptions options{.mode = RoutingMode::sigmoid_bias, .k = 3, .n_group = 4, .topk_group = 2};
  const Routing r = route(scores, options);
  EXPECT_EQ(ids_of(r), (std::vector<int32_t>{0, 2, 3}));
  EXPECT_NEAR(r.weights(0, 0), 0.9, 1e-15);
  EXPECT_NEAR(r.weights(0, 1), 0.6, 1e-15);
  EXPECT_NEAR(r.weights(0, 2), 0.55, 1e-15);
  options.n_group = 1;
  options.topk_group = 1;
  EXPECT_EQ(ids_of(route(scores, options)), (std::vector<int32_t>{4, 0, 2}));
}

TEST(ReferenceMoe, TiesGoToTheLowerId) {
  EXPECT_EQ(ids_of(route(row({1, 1, 1, 1}), {.k = 2})), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(ids_of(route(row({2, 5, 5, 1}), {.k = 2})), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(ids_of(route(row({2, 5, 5, 1}), {.mode = RoutingMode::topk_softmax, .k = 3})),
            (std::vector<int32_t>{1, 2, 0}));
  // tied groups too: every score equal, so groups 0 and 1 are kept and experts 0, 1, 2 chosen
  const Routing r =
      route(Matrix(1, 8, 0.0), {.mode = RoutingMode::sigmoid_bias, .k = 3, .n_group = 4, .topk_group = 2});
  EXPECT_EQ(ids_of(r), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(r.weights.data, (std::vector<double>{0.5, 0.5, 0.5}));
}

TEST(ReferenceMoe, NaNScoresAreNeverSelected) {
  const Matrix scores = row({kNaN, 1, kNaN, 0});
  // softmax_topk: experts 1 and 3, softmax over (1, 0) = (e, 1) / (e + 1)
  Routing r = route(scores, {.k = 2});
  EXPECT_EQ(ids_of(r), (std::vector<int32_t>{1, 3}));
  EXPECT_NEAR(r.weights(0, 0), std::exp(1.0) / (std::exp(1.0) + 1), 1e-15);
  // topk_softmax leaves NaN out of the softmax as well, so the weights stay finite
  r = route(scores, {.mode = RoutingMode::topk_softmax, .k = 2});
  EXPECT_EQ(ids_of(r), (std::vector<int32_t>{1, 3}));
  EXPECT_NEAR(r.weights(0, 1), 1 / (std::exp(1.0) + 1), 1e-15);
  // fewer selectable experts than k: the last slots hold the lowest unchosen ids at weight 0
  r = route(scores, {.mode = RoutingMode::sigmoid_bias, .k = 4, .renormalize = true});
  EXPECT_EQ(ids_of(r), (std::vector<int32_t>{1, 3, 0, 2}));
  EXPECT_EQ(r.weights(0, 3), 0.0);
  EXPECT_EQ(r.weights(0, 2), 0.0);
  EXPECT_NEAR(r.weights(0, 0) + r.weights(0, 1), 1.0, 1e-15);
  // a group with one selectable expert scores -inf but may still be kept to fill topk_group
  r = route(row({kNaN, 0.5, 1, 2}), {.mode = RoutingMode::sigmoid_bias, .k = 3, .n_group = 2, .topk_group = 2});
  EXPECT_EQ(ids_of(r), (std::vector<int32_t>{3, 2, 1}));
  r = route(row({kNaN, 3, 1, 2}), {.mode = RoutingMode::sigmoid_bias, .k = 2, .n_group = 2, .topk_group = 1});
  EXPECT_EQ(ids_of(r), (std::vector<int32_t>{3, 2}));  // group 0's single expert 1 cannot make it score
}

TEST(ReferenceMoe, TiedGroupsKeepTheLowerGroup) {
  // Groups of two with raw scores (0, 1), (-1, 2), (1, 0), (1, 0): groups 0, 2 and 3 hold the same
  // two selection scores, so their sums are equal bits, above group 1's (0.5 + 0.731 = 1.231 against
  // 0.269 + 0.881 = 1.150). Kept: the lowest of the tied groups first; among the kept, equal scores
  // go to the lower id (experts 1, 4 and 6 all score sigmoid(1)).
  const Matrix scores = row({0, 1, -1, 2, 1, 0, 1, 0});
  auto ids = [&](int64_t topk_group, int64_t k) {
    return ids_of(route(scores, {.mode = RoutingMode::sigmoid_bias, .k = k, .n_group = 4, .topk_group = topk_group}));
  };
  EXPECT_EQ(ids(1, 2), (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(ids(2, 3), (std::vector<int32_t>{1, 4, 0}));
  EXPECT_EQ(ids(3, 4), (std::vector<int32_t>{1, 4, 6, 0}));
  EXPECT_EQ(ids(4, 5), (std::vector<int32_t>{3, 1, 4, 6, 0}));
}

TEST(ReferenceMoe, GroupsWithOneSelectableExpert) {
  // A group of one expert is rejected (Validates); a group of two with one selectable expert (a NaN
  // score or a NaN bias) scores -inf, as does one with none. Groups of two: {0, 1} scores
  // p(0) + p(-1); {2, 3} holds only expert 3 (expert 2's bias is NaN), the best p; {4, 5} nothing;
  // {6, 7} p(1) + p(0.5), the best group. Groups at -inf are kept only to fill topk_group, the
  // lower first.
  const Matrix scores = row({0, -1, 4, 3, kNaN, kNaN, 1, 0.5});
  RoutingOptions options{.mode = RoutingMode::sigmoid_bias,
                         .k = 3,
                         .expert_bias = {0, 0, kNaN, 0, 0, 0, 0, 0},
                         .n_group = 4,
                         .topk_group = 2};
  EXPECT_EQ(ids_of(route(scores, options)), (std::vector<int32_t>{6, 7, 0}));  // expert 3 left out
  options.topk_group = 3;  // group 1 ties group 2 at -inf and is the lower
  options.k = 4;
  Routing r = route(scores, options);
  EXPECT_EQ(ids_of(r), (std::vector<int32_t>{3, 6, 7, 0}));
  EXPECT_NEAR(r.weights(0, 0), 1 / (1 + std::exp(-3.0)), 1e-15);
  options.topk_group = 4;  // five selectable experts, then the lowest unchosen ids at weight 0
  options.k = 8;
  r = route(scores, options);
  EXPECT_EQ(ids_of(r), (std::vector<int32_t>{3, 6, 7, 0, 1, 2, 4, 5}));
  for (int64_t slot = 5; slot < 8; ++slot) EXPECT_EQ(r.weights(0, slot), 0.0);
}

TEST(ReferenceMoe, NonFiniteBiases) {
  // A NaN bias is never selected; +inf ranks before every finite selection score and -inf after
  // (still selectable); equal infinities go to the lower id. Weights stay p = sigmoid(s).
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const Matrix scores = row({0, -2, 5, 4, 1, -3, 2, 6});
  RoutingOptions options{
      .mode = RoutingMode::sigmoid_bias, .k = 8, .expert_bias = {0, kInf, kNaN, -kInf, 0, kInf, -kInf, kNaN}};
  Routing r = route(scores, options);
  EXPECT_EQ(ids_of(r), (std::vector<int32_t>{1, 5, 4, 0, 3, 6, 2, 7}));
  const Activation sigmoid = Activation::sigmoid();
  const std::vector<double> p{
      sigmoid(-2.0), sigmoid(-3.0), sigmoid(1.0), sigmoid(0.0), sigmoid(4.0), sigmoid(2.0), 0, 0};
  for (int64_t slot = 0; slot < 8; ++slot) EXPECT_EQ(r.weights(0, slot), p[std::size_t(slot)]) << slot;
  options.renormalize = true;
  r = route(scores, options);
  double total = 0;
  for (int64_t slot = 0; slot < 8; ++slot) total += r.weights(0, slot);
  EXPECT_NEAR(total, 1.0, 1e-14);
  // Grouped, every p 1/2: group 0's two best are +inf and -inf, a NaN sum, so it scores -inf;
  // groups 1 and 3 tie at +inf (the lower first), group 2 scores 1.
  options = {.mode = RoutingMode::sigmoid_bias,
             .k = 2,
             .expert_bias = {-kInf, kInf, kInf, 0, 0, 0, kInf, kInf},
             .n_group = 4,
             .topk_group = 1};
  EXPECT_EQ(ids_of(route(Matrix(1, 8, 0.0), options)), (std::vector<int32_t>{2, 3}));
  options.topk_group = 2;
  options.k = 4;
  EXPECT_EQ(ids_of(route(Matrix(1, 8, 0.0), options)), (std::vector<int32_t>{2, 6, 7, 3}));
  options.topk_group = 3;  // group 0's +inf expert stays out: its group is last
  options.k = 6;
  EXPECT_EQ(ids_of(route(Matrix(1, 8, 0.0), options)), (std::vector<int32_t>{2, 6, 7, 3, 4, 5}));
  options.topk_group = 4;
  options.k = 8;
  EXPECT_EQ(ids_of(route(Matrix(1, 8, 0.0), options)), (std::vector<int32_t>{1, 2, 6, 7, 3, 4, 5, 0}));
}

TEST(ReferenceMoe, RenormalizedWeightsSumToOneAndSlotsAreOrdered) {
  SCOPED_TRACE(test::seed_note());
  const int64_t m = 16, experts = 64, k = 6;
  const Matrix scores = test::random_matrix(m, experts, -3, 3);
  const Vector bias = test::random_vector(experts, -0.2, 0.2);
  const RoutingOptions cases[] = {
      {.mode = RoutingMode::softmax_topk, .k = k},
      {.mode = RoutingMode::topk_softmax, .k = k, .renormalize = true},
      {.mode = RoutingMode::sigmoid_bias,
       .k = k,
       .renormalize = true,
       .expert_bias = bias,
       .n_group = 8,
       .topk_group = 3},
  };
  const Activation sigmoid = Activation::sigmoid();
  for (const RoutingOptions& options : cases) {
    SCOPED_TRACE(int(options.mode));
    const Routing r = route(scores, options);
    for (int64_t t = 0; t < m; ++t) {
      double total = 0;
      for (int64_t s = 0; s < k; ++s) total += r.weights(t, s);
      EXPECT_NEAR(total, 1.0, 1e-14);
      const std::vector<int32_t> ids = ids_of(r, t);
      EXPECT_EQ(std::set<int32_t>(ids.begin(), ids.end()).size(), std::size_t(k));  // distinct experts
      for (int64_t s = 0; s + 1 < k; ++s) {
        const int32_t a = ids[std::size_t(s)], b = ids[std::size_t(s + 1)];
        const bool sig = options.mode == RoutingMode::sigmoid_bias;
        const double score_a = sig ? sigmoid(scores(t, a)) + bias[std::size_t(a)] : scores(t, a);
        const double score_b = sig ? sigmoid(scores(t, b)) + bias[std::size_t(b)] : scores(t, b);
        EXPECT_GE(score_a, score_b);  // descending selection score
      }
    }
  }
}

TEST(ReferenceMoe, RouteFromActivationsUsesTheRouterGemm) {
  SCOPED_TRACE(test::seed_note());
  const Matrix x = test::random_matrix(7, 12), w = test::random_matrix(16, 12);
  const RoutingOptions options{.mode = RoutingMode::topk_softmax, .k = 4};
  const Routing direct = moe_route(x, w, options);
  const Routing from_scores = route(gemm(x, Major::k, w, Major::k), options);
  EXPECT_EQ(direct.ids, from_scores.ids);
  EXPECT_EQ(direct.weights.data, from_scores.weights.data);
}

TEST(ReferenceMoe, DispatchOutputsHandComputed) {
  // 3 tokens, k 2 over 4 experts; the third token has only one selectable expert (NaN elsewhere)
  Matrix scores(3, 4);
  scores.data = {0, 3, 2, 1, /**/ 5, 4, -1, 0, /**/ kNaN, kNaN, 7, kNaN};
  const Routing r = route(scores, {.mode = RoutingMode::softmax_topk, .k = 2});
  EXPECT_EQ(r.ids, (std::vector<int32_t>{1, 2, 0, 1, 2, 0}));  // the empty slot: lowest unchosen id
  EXPECT_EQ(r.weights(2, 1), 0.0);
  // slot j of token m: j * M + m
  EXPECT_EQ(r.token_expert_indices(), (std::vector<int32_t>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(r.expert_counts(4), (std::vector<int64_t>{2, 2, 2, 0}));
}

TEST(ReferenceMoe, AnyExpertCountUpTo512) {
  // The counts routers without a general path fail on (144, 160: not powers of two) and the widest.
  SCOPED_TRACE(test::seed_note());
  for (int64_t experts : {1, 60, 144, 160, 384, 512}) {
    const Matrix scores = test::random_matrix(5, experts);
    const int64_t k = std::min<int64_t>(experts, 8);
    const Routing r = route(scores, {.mode = RoutingMode::topk_softmax, .k = k});
    for (int64_t m = 0; m < scores.rows; ++m) {
      const std::vector<int32_t> ids = ids_of(r, m);
      EXPECT_EQ(std::set<int32_t>(ids.begin(), ids.end()).size(), std::size_t(k)) << experts;  // no duplicate
      const double* row = scores.row(m);
      EXPECT_EQ(ids[0], int32_t(std::max_element(row, row + experts) - row)) << experts;
    }
    const std::vector<int64_t> counts = r.expert_counts(experts);
    int64_t total = 0;
    for (int64_t c : counts) total += c;
    EXPECT_EQ(total, scores.rows * k) << experts;
  }
}

TEST(ReferenceMoe, Validates) {
  const Matrix scores = test::random_matrix(2, 8);
  auto message = [&](const RoutingOptions& o) { return test::invalid_argument_message([&] { route(scores, o); }); };
  EXPECT_THAT(message({.k = 0}),
              HasSubstr("coda::reference::route: argument 'options.k': is 0 but must lie in [1, 8]"));
  EXPECT_THAT(message({.k = 9}), HasSubstr("argument 'options.k'"));
  EXPECT_THAT(test::invalid_argument_message([] { route(test::random_matrix(1, 513), {}); }),
              HasSubstr("argument 'scores': holds 513 experts but must hold 1 to 512"));
  EXPECT_THAT(message({.mode = RoutingMode::topk_softmax, .expert_bias = Vector(8, 0.1)}),
              HasSubstr("argument 'options.expert_bias': is used only by mode sigmoid_bias"));
  EXPECT_THAT(message({.mode = RoutingMode::softmax_topk, .n_group = 2}),
              HasSubstr("argument 'options.n_group': is 2 but grouped selection exists only in mode sigmoid_bias"));
  EXPECT_THAT(message({.mode = RoutingMode::sigmoid_bias, .expert_bias = Vector(7, 0.1)}),
              HasSubstr("argument 'options.expert_bias': has 7 entries but must have 8"));
  EXPECT_THAT(message({.mode = RoutingMode::sigmoid_bias, .n_group = 3}),
              HasSubstr("argument 'options.n_group': is 3 but must be >= 1 and divide the number of experts (8)"));
  EXPECT_THAT(message({.mode = RoutingMode::sigmoid_bias, .n_group = 0}), HasSubstr("argument 'options.n_group'"));
  EXPECT_THAT(message({.mode = RoutingMode::sigmoid_bias, .n_group = 8, .topk_group = 2}),
              HasSubstr("argument 'options.n_group': gives groups of 1 expert(s)"));
  EXPECT_THAT(message({.mode = RoutingMode::sigmoid_bias, .n_group = 2, .topk_group = 3}),
              HasSubstr("argument 'options.topk_group': is 3 but must lie in [1, n_group = 2]"));
  EXPECT_THAT(message({.mode = RoutingMode::sigmoid_bias, .k = 3, .n_group = 4, .topk_group = 1}),
              HasSubstr("argument 'options.k': is 3 but the 1 kept group(s) hold only 2 experts"));
  EXPECT_THAT(message({.routed_scaling_factor = 0}), HasSubstr("argument 'options.routed_scaling_factor'"));
  const Matrix x = test::random_matrix(2, 3);
  EXPECT_THAT(test::invalid_argument_message([&] { moe_route(x, test::random_matrix(8, 4), {}); }),
              HasSubstr("coda::reference::moe_route: argument 'router_weight': is (8 x 4) but x is (2 x 3)"));
  EXPECT_THAT(test::invalid_argument_message([&] { moe_route(x, test::random_matrix(600, 3), {}); }),
              HasSubstr("coda::reference::moe_route: argument 'router_weight': holds 600 experts"));
}

}  // namespace
}  // namespace coda::reference

// The router's epilogue program (RouterCandidates: per part, each row's best candidates and, for
// topk_softmax, its log-sum-exp) on the CPU executor, against the part's candidates ranked on the
// host and the fp64 log-sum-exp. 150 rows, 300 experts (no multiple of a part's width), two
// batches, planted ties, NaN scores and a row of nothing but NaN.
#include "coda/epilogue/programs/router.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "coda/epilogue/host_arguments.hpp"
#include "epilogue/support.hpp"
#include "epilogue/top_k_expectations.hpp"

namespace coda::test {
namespace {

class EpilogueRouter : public PartShapeTest {
 protected:
  template <int K>
  void check(bool sigmoid, bool with_bias, bool with_lse) const {
    SCOPED_TRACE(::testing::Message() << "K " << K << ", sigmoid " << sigmoid << ", bias " << with_bias);
    const ProblemShape shape{150, 300, 2};
    auto acc = random_accumulators(shape);
    for (reference::Matrix& y : acc)
      for (double& v : y.data) v = std::round(8.0 * v) / 8.0;  // coarse values: ties in every row
    acc[0](3, 5) = kNaN;
    acc[1](140, 299) = kNaN;
    for (int64_t c = 0; c < shape.cols; ++c) acc[0](7, c) = kNaN;  // a padded token's row
    const HostTensor bias = random_row_vector(DType::f32, shape.cols, -0.5, 0.5);
    const int64_t parts = part_count(shape.cols, part().cols);
    const int words = epilogue::TopK<K>::kWords;
    const float poison = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> candidates(std::size_t(shape.batch * shape.rows * parts * words), poison);
    PartialsBuffer lse(shape.rows, parts, shape.batch);

    epilogue::RouterCandidates<K> program;
    program.candidates = epilogue::row_partials(
        TensorView::matrix(candidates.data(), DType::f32, shape.rows, parts * words), "candidates", words);
    program.candidates.batch_stride = shape.rows * parts * words;
    if (with_lse) program.lse = lse.partials();
    program.sigmoid = sigmoid;
    if (with_bias) program.expert_bias = row_vector(bias);
    run_batches(program, acc, part());

    const reference::Vector b = row_vector_values(bias);
    for (int64_t batch = 0; batch < shape.batch; ++batch) {
      const reference::Matrix& y = acc[std::size_t(batch)];
      reference::Matrix want_lse(shape.rows, parts);
      for (int64_t pn = 0; pn < parts; ++pn) {
        const int64_t c0 = pn * part().cols, c1 = std::min(shape.cols, c0 + part().cols);
        for (int64_t r = 0; r < shape.rows; ++r) {
          std::vector<TopKEntry> entries;
          double top = -kInf, sum = 0;
          for (int64_t c = c0; c < c1; ++c) {
            const float s = float(y(r, c));
            // The selection score as the program computes it (the same float operations).
            const float value =
                sigmoid ? epilogue::sigmoid(s) + (with_bias ? float(b[std::size_t(c)]) : 0.0f) : s;
            entries.push_back({value, int32_t(c)});
            if (!std::isnan(s)) top = std::max(top, double(s));
          }
          for (int64_t c = c0; c < c1; ++c)
            if (!std::isnan(y(r, c))) sum += std::exp(double(float(y(r, c))) - top);
          want_lse(r, pn) = top + std::log(sum);  // -inf for a row of NaN
          SCOPED_TRACE(::testing::Message() << "batch " << batch << ", row " << r << ", part " << pn);
          EXPECT_TRUE(slot_is(&candidates[std::size_t(((batch * shape.rows + r) * parts + pn) * words)],
                              expected_top(entries, K)));
        }
      }
      if (with_lse) {
        const reference::Matrix got = lse.matrix(batch);
        if (batch == 0) {
          EXPECT_EQ(got(7, 0), -std::numeric_limits<float>::infinity()) << "a row of NaN: no softmax mass";
        }
        for (int64_t r = 0; r < shape.rows; ++r)
          for (int64_t pn = 0; pn < parts; ++pn)
            if (std::isfinite(want_lse(r, pn))) {
              EXPECT_NEAR(got(r, pn), want_lse(r, pn), 1e-5 * (1 + std::abs(want_lse(r, pn))));
            }
      }
    }
  }
};

INSTANTIATE_TEST_SUITE_P(Parts, EpilogueRouter, ::testing::ValuesIn(kPartShapes), part_shape_name);

TEST_P(EpilogueRouter, SoftmaxModesRankTheScoresAndTopkSoftmaxAddsTheLogSumExp) {
  check<8>(false, false, true);
  check<16>(false, false, false);
}

TEST_P(EpilogueRouter, SigmoidBiasRanksSigmoidPlusBias) {
  check<8>(true, true, false);
  check<16>(true, false, false);
}

}  // namespace
}  // namespace coda::test

// The CrossEntropyPartials program (GEMM + partial cross-entropy; with a row scale: after the
// final RMSNorm) on the CPU executor: its partials against reference::cross_entropy_partials (and
// reference::row_scale_cross_entropy_partials) over parts of the same width, and the loss
// reference::cross_entropy_finish makes of them against reference::cross_entropy straight from the logits, for
// every loss option. A vocabulary of 1000 (no multiple of a part's width), 150 rows, two batches,
// every sixth row ignored.
#include "coda/epilogue/programs/cross_entropy.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "coda/reference/cross_entropy.hpp"
#include "coda/reference/gemm_rmsnorm_gemm.hpp"
#include "coda/reference/rmsnorm.hpp"
#include "epilogue/support.hpp"

namespace coda::test {
namespace {

struct CrossEntropyCase {
  bool row_scale = false;
  float softcap = 0.0f;
  bool row_sums = false;  // needed by label smoothing
  bool store_logits = false;
  DType logits_type = DType::bf16;
  int32_t ignore_index = reference::CrossEntropyOptions{}.ignore_index;  // may be a valid class too
};

class EpilogueCrossEntropy : public PartShapeTest {
 protected:
  void check(const CrossEntropyCase& c) const {
    const ProblemShape shape{150, 1000};
    const int64_t parts_n = part_count(shape.cols, part().cols);
    const auto acc = random_accumulators(shape);
    std::vector<std::vector<int32_t>> targets(std::size_t(shape.batch));
    std::vector<reference::Vector> target_values;
    for (auto& t : targets) {
      for (int64_t r = 0; r < shape.rows; ++r)
        t.push_back(r % 6 == 5 ? c.ignore_index : int32_t(uniform_int(0, shape.cols - 1)));
      target_values.emplace_back(t.begin(), t.end());
    }
    const HostTensor target_column = column_vector_of(DType::i32, target_values);
    const HostTensor rstd = random_column_vector(DType::f32, shape.rows, shape.batch, 0.5, 2.0);
    PartialsBuffer lse(shape.rows, parts_n, shape.batch), row_sums(shape.rows, parts_n, shape.batch);
    PartialsBuffer target_logit(shape.rows, 1, shape.batch);
    HostTensor logits = poisoned_output(c.logits_type, shape.rows, shape.cols, shape.batch);

    epilogue::CrossEntropyPartials program{.targets = column_vector(target_column),
                                           .lse = lse.partials(),
                                           .target_logit = target_logit.partials(),
                                           .softcap = c.softcap};
    program.target_logit.tile_stride = 0;  // one slot per row, written by the part holding the target
    if (c.row_sums) program.row_sums = row_sums.partials();
    if (c.store_logits) program.logits = tile_out(logits);
    if (c.row_scale) program.row_scale = column_vector(rstd);
    run_batches(program, acc, part());

    // The reference's partials with every target inside the vocabulary counted: the program knows
    // nothing of ignore_index, so one that is a valid class gets its logit picked like any other.
    const reference::CrossEntropyOptions partial_options{.ignore_index = std::min(c.ignore_index, -1),
                                                         .softcap = c.softcap};
    for (int64_t b = 0; b < shape.batch; ++b) {
      SCOPED_TRACE(::testing::Message() << "batch " << b);
      const auto& t = targets[std::size_t(b)];
      // The logits the loss is of: rstd-scaled when asked, before soft-capping.
      const reference::Matrix y =
          c.row_scale ? reference::row_scale(acc[std::size_t(b)], column_vector_values(rstd, b)) : acc[std::size_t(b)];
      const reference::CrossEntropyPartials want =
          reference::cross_entropy_partials(y, t, part().cols, partial_options);
      {
        SCOPED_TRACE("lse partials");
        expect_close(lse.matrix(b), want.lse);
      }
      if (c.row_sums) {
        SCOPED_TRACE("row sums");
        expect_close(row_sums.matrix(b), want.row_sums);
      }
      {
        SCOPED_TRACE("target logits (targets outside the vocabulary: never written)");
        reference::Matrix want_target(shape.rows, 1);
        for (int64_t r = 0; r < shape.rows; ++r)
          want_target(r, 0) =
              t[std::size_t(r)] < 0 ? std::numeric_limits<double>::quiet_NaN() : want.target_logit[std::size_t(r)];
        expect_close(target_logit.matrix(b), want_target);
      }
      expect_loss_from_partials(c,
                                program_partials(lse.matrix(b), c.row_sums ? &row_sums : nullptr, b,
                                                 target_logit.matrix(b), t, c.ignore_index),
                                y, t);
    }
    lse.expect_written_exactly();
    target_logit.expect_gaps_untouched();
    if (c.row_sums) row_sums.expect_written_exactly();
    if (c.store_logits) {
      SCOPED_TRACE("logits");
      expect_output(logits, per_batch(acc, [&](const reference::Matrix& a, int64_t b) {
                      reference::Matrix capped =
                          c.row_scale ? reference::row_scale(a, column_vector_values(rstd, b)) : a;
                      if (c.softcap > 0)
                        for (double& v : capped.data) v = c.softcap * std::tanh(v / c.softcap);
                      return capped;
                    }));
    }
  }

  // What the program wrote for batch b, as the reference's partials: no row sums (zeros) when they
  // were not asked for, and 0 for the target logit of ignored rows (which the loss never reads).
  static reference::CrossEntropyPartials program_partials(reference::Matrix lse, const PartialsBuffer* row_sums,
                                                          int64_t b, const reference::Matrix& target_logit,
                                                          const std::vector<int32_t>& targets, int32_t ignore_index) {
    reference::CrossEntropyPartials p{
        .lse = lse,
        .row_sums = row_sums ? row_sums->matrix(b) : reference::Matrix(lse.rows, lse.cols),
        .target_logit = {}};
    for (int64_t r = 0; r < lse.rows; ++r)
      p.target_logit.push_back(targets[std::size_t(r)] == ignore_index ? 0.0 : target_logit(r, 0));
    return p;
  }

  // The loss from the partials equals the loss straight from the logits, for every loss option the
  // partials serve (label smoothing needs the row sums).
  static void expect_loss_from_partials(const CrossEntropyCase& c, const reference::CrossEntropyPartials& partials,
                                        const reference::Matrix& logits, const std::vector<int32_t>& targets) {
    for (double smoothing : {0.0, 0.1}) {
      if (smoothing > 0 && !c.row_sums) continue;
      for (double z_loss : {0.0, 1e-3})
        for (auto reduction :
             {reference::LossReduction::none, reference::LossReduction::sum, reference::LossReduction::mean}) {
          SCOPED_TRACE(::testing::Message()
                       << "label smoothing " << smoothing << ", z-loss " << z_loss << ", reduction " << int(reduction));
          const reference::CrossEntropyOptions options{.ignore_index = c.ignore_index,
                                                       .label_smoothing = smoothing,
                                                       .z_loss = z_loss,
                                                       .softcap = c.softcap,
                                                       .reduction = reduction};
          const reference::CrossEntropyLoss got =
              reference::cross_entropy_finish(partials, targets, logits.cols, options);
          const reference::CrossEntropyLoss want = reference::cross_entropy(logits, targets, options);
          expect_close(got.per_row, want.per_row);
          expect_close(got.lse, want.lse);
          EXPECT_EQ(got.valid_rows, want.valid_rows);
          ASSERT_EQ(got.reduced.has_value(), want.reduced.has_value());
          if (want.reduced) expect_close(reference::Vector{*got.reduced}, reference::Vector{*want.reduced});
        }
    }
  }
};

INSTANTIATE_TEST_SUITE_P(Parts, EpilogueCrossEntropy, ::testing::ValuesIn(kPartShapes), part_shape_name);

TEST_P(EpilogueCrossEntropy, LseAndTargetLogitOnly) { check({}); }

TEST_P(EpilogueCrossEntropy, RowSumsForLabelSmoothing) { check({.row_sums = true}); }

TEST_P(EpilogueCrossEntropy, SoftCapping) { check({.softcap = 3.0f, .row_sums = true}); }

TEST_P(EpilogueCrossEntropy, RowScale) { check({.row_scale = true, .row_sums = true}); }

TEST_P(EpilogueCrossEntropy, StoresTheLogitsWhenAsked) { check({.store_logits = true}); }

TEST_P(EpilogueCrossEntropy, IgnoreIndexThatIsAValidClass) { check({.row_sums = true, .ignore_index = 7}); }

TEST_P(EpilogueCrossEntropy, EveryOptionWithF32Logits) {
  check({.row_scale = true, .softcap = 3.0f, .row_sums = true, .store_logits = true, .logits_type = DType::f32});
}

}  // namespace
}  // namespace coda::test

// The CrossEntropyBackward program (the LM head's logits GEMM + the cross-entropy gradient) and the
// RunningSum program (dX summed over vocabulary chunks) on the CPU executor, against
// reference::cross_entropy_backward (itself checked by central differences): every loss option and
// reduction, a row scale with its <dZ, Z> partials, the vocabulary cut into chunks the way the op
// launches them, logits near +-1e4. A vocabulary of 1000 (no multiple of a part's width), 150
// rows, two batches, every sixth row ignored.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "coda/epilogue/programs/cross_entropy.hpp"
#include "coda/epilogue/programs/running_sum.hpp"
#include "coda/reference/cross_entropy.hpp"
#include "coda/reference/reductions.hpp"
#include "coda/reference/rmsnorm.hpp"
#include "epilogue/support.hpp"

namespace coda::test {
namespace {

using reference::LossReduction;

// The row factors' table before they are written: a slot left unwritten reads NaN.
constexpr float kPoison = std::numeric_limits<float>::quiet_NaN();

struct BackwardCase {
  reference::CrossEntropyOptions options{};
  bool row_scale = false;
  bool row_dots = false;
  bool row_max = false;  // the part maxima of Z the op's skip masks read
  DType out = DType::bf16;
  int64_t chunk = 0;         // vocabulary columns per launch (a multiple of every part's width); 0: one launch
  double logit_scale = 1.0;  // the accumulators times this (1e4-sized logits: 3000)
  double tolerance = kFp32Tolerance;
};

class EpilogueCrossEntropyBackward : public PartShapeTest {
 protected:
  void check(const BackwardCase& c) const {
    const ProblemShape shape{150, 1000};
    const int64_t parts_n = part_count(shape.cols, part().cols);
    auto acc = random_accumulators(shape);
    for (auto& a : acc)
      for (double& v : a.data) v *= c.logit_scale;
    const reference::CrossEntropyOptions& o = c.options;
    const HostTensor rstd = random_column_vector(DType::f32, shape.rows, shape.batch, 0.5, 2.0);

    // Per batch: targets, the logits Z the loss is of, the forward's lse, the gradient reaching the
    // loss, and the row factors (RowFactor) computed from them.
    std::vector<std::vector<int32_t>> targets(std::size_t(shape.batch));
    std::vector<reference::Vector> target_values, lse, grad_output;
    std::vector<reference::Matrix> logits;
    std::vector<std::vector<float>> factors(std::size_t(shape.batch));  // as the op's row_factors kernel writes them
    for (int64_t b = 0; b < shape.batch; ++b) {
      auto& t = targets[std::size_t(b)];
      const reference::Matrix& z = acc[std::size_t(b)];
      for (int64_t r = 0; r < shape.rows; ++r) {
        int32_t target = r % 6 == 5 ? o.ignore_index : int32_t(uniform_int(0, shape.cols - 1));
        // At 1e4-sized logits a row's softmax is one-hot: at its largest logit dZ = g (p - 1) cancels
        // to a few ulps of p, where fp32's 1e-3 on the logit is any relative error of dZ (the
        // element is right to 1e-3 |g|, not to 1e-3 of itself). Such targets are drawn again.
        const double* row = z.data.data() + r * z.cols;
        while (c.logit_scale > 1.0 && target != o.ignore_index && std::max_element(row, row + z.cols) - row == target)
          target = int32_t(uniform_int(0, shape.cols - 1));
        t.push_back(target);
      }
      target_values.emplace_back(t.begin(), t.end());
      const reference::Matrix a = fp32_values({acc[std::size_t(b)]})[0];
      logits.push_back(c.row_scale ? reference::row_scale(a, column_vector_values(rstd, b)) : a);
      reference::Vector l = reference::cross_entropy(logits.back(), t, o).lse;
      for (double& v : l) v = double(float(v));  // saved as f32
      lse.push_back(l);
      grad_output.push_back(o.reduction == LossReduction::none ? random_vector(shape.rows, -2.0, 2.0)
                                                               : reference::Vector{uniform(0.5, 2.0)});
      int64_t valid = 0;
      for (int32_t target : t) valid += target == o.ignore_index ? 0 : 1;
      auto& f = factors[std::size_t(b)];
      f.assign(std::size_t(shape.rows * epilogue::kRowFactors), kPoison);
      for (int64_t r = 0; r < shape.rows; ++r) {
        const std::size_t i = std::size_t(r);
        const float go = float(o.reduction == LossReduction::none ? grad_output.back()[i] : grad_output.back()[0]);
        const float g = t[i] == o.ignore_index ? 0.0f : o.reduction == LossReduction::mean ? go / float(valid) : go;
        epilogue::write_row_factors(f.data() + i * epilogue::kRowFactors, float(l[i]), g, float(o.z_loss),
                                    float(o.label_smoothing), shape.cols);
      }
    }
    const HostTensor target_column = column_vector_of(DType::i32, target_values);
    HostTensor grad_logits = poisoned_output(c.out, shape.rows, shape.cols, shape.batch);
    PartialsBuffer row_dots(shape.rows, parts_n, shape.batch);
    PartialsBuffer row_max(shape.rows, parts_n, shape.batch);

    epilogue::CrossEntropyBackward program{.targets = column_vector(target_column), .softcap = float(o.softcap)};
    if (c.row_scale) program.row_scale = column_vector(rstd);
    // One launch per chunk of columns, as the op runs it: the chunk's accumulators, its first
    // column, and its slice of the outputs.
    const int64_t chunk = c.chunk > 0 ? c.chunk : shape.cols;
    const epilogue::TileOut whole = tile_out(grad_logits);
    const epilogue::Partials all_dots = row_dots.partials(), all_max = row_max.partials();
    for (int64_t first = 0; first < shape.cols; first += chunk) {
      const int64_t cols = std::min(chunk, shape.cols - first);
      ASSERT_EQ(first % part().cols, 0) << "chunks start at a whole part";
      program.first_column = int32_t(first);
      program.grad_logits = whole;
      program.grad_logits.data = static_cast<char*>(whole.data) + first * int64_t(size_of(c.out));
      if (c.row_dots) {
        program.row_dots = all_dots;
        program.row_dots.data += (first / part().cols) * all_dots.tile_stride;
      }
      if (c.row_max) {
        program.row_max = all_max;
        program.row_max.data += (first / part().cols) * all_max.tile_stride;
      }
      std::vector<reference::Matrix> chunk_acc;
      for (const auto& a : acc) {
        reference::Matrix m(a.rows, cols);
        for (int64_t r = 0; r < a.rows; ++r)
          for (int64_t n = 0; n < cols; ++n) m(r, n) = a(r, first + n);
        chunk_acc.push_back(m);
      }
      for (int64_t b = 0; b < shape.batch; ++b) {  // a table has no batch dimension: one per batch
        program.row_factors = {
            .data = factors[std::size_t(b)].data(), .ld = epilogue::kRowFactors, .rows = int32_t(shape.rows)};
        reference::run_epilogue(program, chunk_acc[std::size_t(b)], int32_t(b), part());
      }
    }

    std::vector<reference::CrossEntropyBackward> want;
    for (int64_t b = 0; b < shape.batch; ++b)
      want.push_back(reference::cross_entropy_backward(logits[std::size_t(b)], targets[std::size_t(b)],
                                                       lse[std::size_t(b)], grad_output[std::size_t(b)], part().cols,
                                                       o));
    {
      SCOPED_TRACE("dZ (times rstd with a row scale)");
      expect_output(grad_logits,
                    per_batch(acc,
                              [&](const reference::Matrix&, int64_t b) {
                                const reference::Matrix& g = want[std::size_t(b)].grad_logits;
                                return c.row_scale ? reference::row_scale(g, column_vector_values(rstd, b)) : g;
                              }),
                    1.0, c.tolerance);
      for (int64_t b = 0; b < shape.batch; ++b)
        for (double v : grad_logits.matrix(b).data) ASSERT_TRUE(std::isfinite(v)) << "batch " << b;
    }
    if (c.row_dots) {
      SCOPED_TRACE("row partials of <dZ, Z>");
      expect_partials(
          row_dots,
          per_batch(acc, [&](const reference::Matrix&, int64_t b) { return want[std::size_t(b)].row_partials; }),
          c.tolerance);
    } else {
      row_dots.expect_gaps_untouched();
    }
    if (c.row_max) {
      SCOPED_TRACE("row partials of max Z");
      expect_partials(
          row_max,
          per_batch(acc, [&](const reference::Matrix&,
                             int64_t b) { return reference::row_partial_max(logits[std::size_t(b)], part().cols); }),
          c.tolerance);
    } else {
      row_max.expect_gaps_untouched();
    }
  }
};

INSTANTIATE_TEST_SUITE_P(Parts, EpilogueCrossEntropyBackward, ::testing::ValuesIn(kPartShapes), part_shape_name);

TEST_P(EpilogueCrossEntropyBackward, Mean) { check({}); }

TEST_P(EpilogueCrossEntropyBackward, SumAndNone) {
  check({.options = {.reduction = LossReduction::sum}});
  check({.options = {.reduction = LossReduction::none}, .out = DType::f32});
}

TEST_P(EpilogueCrossEntropyBackward, LabelSmoothing) { check({.options = {.label_smoothing = 0.1}}); }

TEST_P(EpilogueCrossEntropyBackward, ZLoss) { check({.options = {.z_loss = 1e-3}}); }

TEST_P(EpilogueCrossEntropyBackward, Softcap) { check({.options = {.softcap = 3.0}}); }

TEST_P(EpilogueCrossEntropyBackward, IgnoreIndexThatIsAValidClass) { check({.options = {.ignore_index = 7}}); }

TEST_P(EpilogueCrossEntropyBackward, RowScaleWithItsStatistic) { check({.row_scale = true, .row_dots = true}); }

TEST_P(EpilogueCrossEntropyBackward, ChunksOfTheVocabulary) {
  check({.options = {.label_smoothing = 0.2, .softcap = 4.0}, .row_scale = true, .row_dots = true, .chunk = 256});
}

// The part maxima of Z (after the row scale, before the cap) that the skipping backward's masks read.
TEST_P(EpilogueCrossEntropyBackward, PartMaximaForTheSkipMasks) {
  check({.row_max = true});
  check({.options = {.softcap = 4.0}, .row_scale = true, .row_dots = true, .row_max = true, .chunk = 256});
}

TEST_P(EpilogueCrossEntropyBackward, EveryOption) {
  check({.options = {.ignore_index = 3,
                     .label_smoothing = 0.05,
                     .z_loss = 1e-4,
                     .softcap = 5.0,
                     .reduction = LossReduction::none},
         .row_scale = true,
         .row_dots = true,
         .out = DType::f32,
         .chunk = 512});
}

// Logits near +-1e4 without soft-capping: finite gradients everywhere. fp32 holds such a logit to
// 1e-3, so p = exp(Y - lse) is known to 1e-3 relative (the reference reads the same fp32 logits).
TEST_P(EpilogueCrossEntropyBackward, ExtremeLogitsStayFinite) { check({.logit_scale = 3000.0, .tolerance = 2e-3}); }

// RunningSum over three chunks: the first writes the f32 sum, the second adds to it in place, the
// third adds and writes the result in bf16; the sum is formed in fp32 in chunk order.
TEST(EpilogueRunningSum, SumsChunksInOrderInPlace) {
  const ProblemShape shape{150, 300, 1};
  std::vector<std::vector<reference::Matrix>> chunks;
  for (int c = 0; c < 3; ++c) chunks.push_back(random_accumulators(shape));
  HostTensor sum = poisoned_output(DType::f32, shape.rows, shape.cols);
  HostTensor out = poisoned_output(DType::bf16, shape.rows, shape.cols);
  const epilogue::Table sum_table{
      .data = static_cast<const float*>(sum.view.data), .ld = int32_t(sum.view.ld()), .rows = int32_t(shape.rows)};
  const epilogue::TileOutOf<DType::f32> sum_out{tile_out(sum)};
  const reference::PartShape part{64, 128};
  run_batches(epilogue::RunningSum{.sum_out = sum_out}, chunks[0], part);
  run_batches(epilogue::RunningSum{.sum_in = sum_table, .sum_out = sum_out}, chunks[1], part);
  run_batches(epilogue::RunningSum{.sum_in = sum_table, .out = tile_out(out)}, chunks[2], part);
  reference::Matrix want(shape.rows, shape.cols);
  const auto a = fp32_values(chunks[0])[0], b = fp32_values(chunks[1])[0], c = fp32_values(chunks[2])[0];
  for (std::size_t i = 0; i < want.data.size(); ++i)
    want.data[i] = double(float(float(a.data[i]) + float(b.data[i])) + float(c.data[i]));
  expect_output(out, {want}, 1.0, kExactly);
}

TEST(EpilogueRunningSum, WritesExactlyOneOutput) {
  HostTensor out = poisoned_output(DType::bf16, 8, 8);
  HostTensor sum = poisoned_output(DType::f32, 8, 8);
  const auto acc = random_accumulators({8, 8, 1});
  EXPECT_THROW(run_batches(epilogue::RunningSum{}, acc, {64, 128}), InvalidArgument);
  EXPECT_THROW(
      run_batches(epilogue::RunningSum{.sum_out = epilogue::TileOutOf<DType::f32>{tile_out(sum)}, .out = tile_out(out)},
                  acc, {64, 128}),
      InvalidArgument);
}

}  // namespace
}  // namespace coda::test

// The SwigluBackward program (GEMM + SwiGLU backward) on the CPU executor against
// reference::swiglu_backward: every part shape, F = 300 (a narrower part at the right edge) over
// 150 rows in two batches, the saved Y across the sigmoid's range, every option.
#include <gtest/gtest.h>

#include "coda/epilogue/programs/swiglu.hpp"
#include "coda/reference/rmsnorm.hpp"
#include "coda/reference/swiglu.hpp"
#include "epilogue/support.hpp"

namespace coda::test {
namespace {

struct SwigluBackwardCase {
  DType out = DType::bf16;  // dY and O
  bool row_dots = false;
  bool row_scale = false;
  bool output = false;
};

class EpilogueSwigluBackward : public PartShapeTest {
 protected:
  void check(const SwigluBackwardCase& c) const {
    const ProblemShape shape{150, 300};  // dO: M x F
    const auto grad_o = random_accumulators(shape);
    const HostTensor y = random_input(DType::bf16, shape.rows, 2 * shape.cols, shape.batch, -6.0, 6.0);
    const HostTensor rstd = random_column_vector(DType::f32, shape.rows, shape.batch, 0.5, 2.0);
    HostTensor grad_y = poisoned_output(c.out, shape.rows, 2 * shape.cols, shape.batch);
    HostTensor output = poisoned_output(c.out, shape.rows, shape.cols, shape.batch);
    PartialsBuffer row_dots(shape.rows, part_count(shape.cols, part().cols), shape.batch);
    epilogue::SwigluBackward program{.pre_activation = tile_in(y), .grad_pre_activation = tile_out(grad_y)};
    if (c.row_dots) program.row_dots = row_dots.partials();
    if (c.row_scale) program.row_scale = column_vector(rstd);
    if (c.output) program.output = tile_out(output);
    run_batches(program, grad_o, part());

    std::vector<reference::SwigluBackward> want;
    for (int64_t b = 0; b < shape.batch; ++b)
      want.push_back(reference::swiglu_backward(grad_o[std::size_t(b)], y.matrix(b), part().cols));
    const auto each = [&](auto f) {
      return per_batch(grad_o, [&](const reference::Matrix&, int64_t b) { return f(want[std::size_t(b)], b); });
    };
    {
      SCOPED_TRACE("dY");
      expect_output(grad_y, each([&](const reference::SwigluBackward& w, int64_t b) {
                      return c.row_scale ? reference::row_scale(w.grad_y, column_vector_values(rstd, b)) : w.grad_y;
                    }));
    }
    if (c.row_dots) {
      SCOPED_TRACE("row partials of <dY, Y>");
      expect_partials(row_dots, each([](const reference::SwigluBackward& w, int64_t) { return w.row_partials; }));
    } else {
      row_dots.expect_gaps_untouched();
    }
    if (c.output) {
      SCOPED_TRACE("O recomputed");
      expect_output(output, each([](const reference::SwigluBackward& w, int64_t) { return w.output; }));
    }
  }
};

INSTANTIATE_TEST_SUITE_P(Parts, EpilogueSwigluBackward, ::testing::ValuesIn(kPartShapes), part_shape_name);

TEST_P(EpilogueSwigluBackward, Bf16Gradient) { check({}); }

TEST_P(EpilogueSwigluBackward, F32Gradient) { check({.out = DType::f32}); }

TEST_P(EpilogueSwigluBackward, RowDotsOfTheUnscaledGradient) { check({.row_dots = true, .row_scale = true}); }

TEST_P(EpilogueSwigluBackward, RecomputesTheOutput) { check({.output = true}); }

TEST_P(EpilogueSwigluBackward, EveryOption) {
  check({.out = DType::f32, .row_dots = true, .row_scale = true, .output = true});
}

}  // namespace
}  // namespace coda::test

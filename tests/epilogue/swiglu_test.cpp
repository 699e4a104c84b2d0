// The Swiglu program (GEMM + SwiGLU; with a row scale: after an RMSNorm) on the CPU executor
// against reference::swiglu and reference::row_scale_swiglu: every part shape, a 150 x 300 problem (F = 150:
// narrower parts at both edges) of two batches, every option.
#include "coda/epilogue/programs/swiglu.hpp"

#include <gtest/gtest.h>

#include "coda/reference/gemm_rmsnorm_gemm.hpp"
#include "coda/reference/rmsnorm.hpp"
#include "coda/reference/swiglu.hpp"
#include "epilogue/support.hpp"

namespace coda::test {
namespace {

struct SwigluOptions {
  DType out = DType::bf16;
  bool row_scale = false;
  bool store_pre_activation = false;
};

class EpilogueSwiglu : public PartShapeTest {
 protected:
  void check(const SwigluOptions& options) const {
    const ProblemShape shape{150, 300};
    const auto acc = random_accumulators(shape);
    const HostTensor rstd = random_column_vector(DType::f32, shape.rows, shape.batch, 0.5, 2.0);
    HostTensor out = poisoned_output(options.out, shape.rows, shape.cols / 2, shape.batch);
    HostTensor pre_activation = poisoned_output(options.out, shape.rows, shape.cols, shape.batch);
    epilogue::Swiglu program{.out = tile_out(out)};
    if (options.row_scale) program.row_scale = column_vector(rstd);
    if (options.store_pre_activation) program.pre_activation = tile_out(pre_activation);
    run_batches(program, acc, part());

    // Y as the program sees it before the pairs: scaled by rstd when asked.
    const auto y = per_batch(acc, [&](const reference::Matrix& a, int64_t b) {
      return options.row_scale ? reference::row_scale(a, column_vector_values(rstd, b)) : a;
    });
    expect_output(out, per_batch(acc, [&](const reference::Matrix& a, int64_t b) {
                    return options.row_scale ? reference::row_scale_swiglu(a, column_vector_values(rstd, b))
                                             : reference::swiglu(a);
                  }));
    if (options.store_pre_activation) {
      SCOPED_TRACE("pre-activation");
      expect_output(pre_activation, y);
    }
  }
};

INSTANTIATE_TEST_SUITE_P(Parts, EpilogueSwiglu, ::testing::ValuesIn(kPartShapes), part_shape_name);

TEST_P(EpilogueSwiglu, Bf16Output) { check({}); }

TEST_P(EpilogueSwiglu, F32Output) { check({.out = DType::f32}); }

TEST_P(EpilogueSwiglu, RowScale) { check({.row_scale = true}); }

TEST_P(EpilogueSwiglu, StoresThePreActivation) { check({.store_pre_activation = true}); }

TEST_P(EpilogueSwiglu, RowScaleAndPreActivationInF32) {
  check({.out = DType::f32, .row_scale = true, .store_pre_activation = true});
}

}  // namespace
}  // namespace coda::test

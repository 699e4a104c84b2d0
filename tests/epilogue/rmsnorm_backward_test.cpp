// The GEMM-residual-RMSNorm-GEMM backward's programs on the CPU executor: ResidualRmsNormBackward
// against reference::residual_rmsnorm_backward and RmsNormWeightGradients against
// reference::rmsnorm_weight_gradients (every part shape, 150 x 200 in two batches, every option),
// then both chained after the reference's producer of dZ (bf16, as the GPU stores it) against the
// plain backward of reference::gemm_rmsnorm_gemm_backward.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "coda/core/layout.hpp"
#include "coda/epilogue/programs/rmsnorm.hpp"
#include "coda/reference/epilogues.hpp"
#include "coda/reference/gemm.hpp"
#include "coda/reference/gemm_rmsnorm_gemm.hpp"
#include "coda/reference/reductions.hpp"
#include "coda/reference/rmsnorm.hpp"
#include "epilogue/support.hpp"

namespace coda::test {
namespace {

class EpilogueRmsNormBackward : public PartShapeTest {};

INSTANTIATE_TEST_SUITE_P(Parts, EpilogueRmsNormBackward, ::testing::ValuesIn(kPartShapes), part_shape_name);

struct Kernel9Case {
  DType out = DType::bf16;
  bool grad_residual = false;
  bool row_scale = false;
};

TEST_P(EpilogueRmsNormBackward, ResidualRmsNormBackward) {
  const ProblemShape shape{150, 200};
  for (const Kernel9Case c :
       {Kernel9Case{}, Kernel9Case{.grad_residual = true},
        Kernel9Case{.out = DType::f32, .grad_residual = true, .row_scale = true}, Kernel9Case{.row_scale = true}}) {
    SCOPED_TRACE(::testing::Message() << name(c.out) << (c.grad_residual ? ", dH_out" : "")
                                      << (c.row_scale ? ", row scale" : ""));
    const auto d = random_accumulators(shape);
    const HostTensor h = random_input(DType::bf16, shape.rows, shape.cols, shape.batch, -2.0, 2.0);
    const HostTensor dh_out = random_input(DType::bf16, shape.rows, shape.cols, shape.batch);
    const HostTensor weight = random_row_vector(DType::f32, shape.cols, 0.5, 1.5);
    const HostTensor correction = random_column_vector(DType::f32, shape.rows, shape.batch, -0.5, 0.5);
    const HostTensor rstd = random_column_vector(DType::f32, shape.rows, shape.batch, 0.5, 2.0);
    HostTensor dh = poisoned_output(c.out, shape.rows, shape.cols, shape.batch);
    epilogue::ResidualRmsNormBackward program{.residual = tile_in(h),
                                              .weight = row_vector(weight),
                                              .correction = column_vector(correction),
                                              .grad_residual_out = tile_out(dh)};
    if (c.grad_residual) program.grad_residual = tile_in(dh_out);
    if (c.row_scale) program.row_scale = column_vector(rstd);
    run_batches(program, d, part());

    expect_output(dh, per_batch(d, [&](const reference::Matrix& acc, int64_t b) {
                    const reference::Matrix scaled =
                        c.row_scale ? reference::row_scale(acc, column_vector_values(rstd, b)) : acc;
                    return reference::residual_rmsnorm_backward(
                        scaled, h.matrix(b), row_vector_values(weight), column_vector_values(correction, b),
                        c.grad_residual ? dh_out.matrix(b) : reference::Matrix(shape.rows, shape.cols));
                  }));
  }
}

// dH needs g and c': a program without either is refused, naming it.
TEST_P(EpilogueRmsNormBackward, ResidualRmsNormBackwardNeedsWeightAndCorrection) {
  const ProblemShape shape{64, 64};
  const auto d = random_accumulators(shape);
  const HostTensor h = random_input(DType::bf16, shape.rows, shape.cols, shape.batch);
  const HostTensor weight = random_row_vector(DType::f32, shape.cols);
  const HostTensor correction = random_column_vector(DType::f32, shape.rows, shape.batch);
  HostTensor dh = poisoned_output(DType::bf16, shape.rows, shape.cols, shape.batch);
  const epilogue::ResidualRmsNormBackward whole{.residual = tile_in(h),
                                                .weight = row_vector(weight),
                                                .correction = column_vector(correction),
                                                .grad_residual_out = tile_out(dh)};
  epilogue::ResidualRmsNormBackward no_weight = whole, no_correction = whole;
  no_weight.weight = {};
  no_correction.correction = {};
  for (const auto& [program, argument] : {std::pair{no_weight, "argument 'weight': is null"},
                                          std::pair{no_correction, "argument 'correction': is null"}}) {
    try {
      run_batches(program, d, part());
      ADD_FAILURE() << "no error for " << argument;
    } catch (const InvalidArgument& e) {
      EXPECT_THAT(e.what(), ::testing::HasSubstr(argument));
    }
  }
}

TEST_P(EpilogueRmsNormBackward, WeightGradients) {
  const ProblemShape shape{150, 200};  // G: N2 x hidden
  for (const DType out : {DType::bf16, DType::f32}) {
    SCOPED_TRACE(std::string(name(out)));
    const auto product = random_accumulators(shape);
    const HostTensor w2 = random_input(DType::bf16, shape.rows, shape.cols, shape.batch);
    const HostTensor weight = random_row_vector(DType::bf16, shape.cols, 0.5, 1.5);
    HostTensor grad_w2 = poisoned_output(out, shape.rows, shape.cols, shape.batch);
    PartialsBuffer partials(part_count(shape.rows, part().rows), shape.cols, shape.batch);
    run_batches(epilogue::RmsNormWeightGradients{.projection_weight = tile_in(w2),
                                                 .norm_weight = row_vector(weight),
                                                 .grad_projection_weight = tile_out(grad_w2),
                                                 .norm_weight_partials = partials.partials()},
                product, part());

    std::vector<reference::RmsNormWeightGradients> want;
    for (int64_t b = 0; b < shape.batch; ++b)
      want.push_back(reference::rmsnorm_weight_gradients(product[std::size_t(b)], w2.matrix(b),
                                                         row_vector_values(weight), part().rows));
    const auto field = [&](reference::Matrix reference::RmsNormWeightGradients::*member) {
      return per_batch(product, [&](const reference::Matrix&, int64_t b) { return want[std::size_t(b)].*member; });
    };
    {
      SCOPED_TRACE("dW2");
      expect_output(grad_w2, field(&reference::RmsNormWeightGradients::grad_projection_weight));
    }
    SCOPED_TRACE("dg partials");
    expect_partials(partials, field(&reference::RmsNormWeightGradients::norm_weight_partials));
  }
}

// The whole fused backward on the CPU executor: dZs = rstd dZ and the partials of <dZ, Z> as the
// epilogue producing dZ stores them (dZs rounded to bf16, the GEMMs' operand), the correction from
// the partials, ResidualRmsNormBackward on dZs W2 and RmsNormWeightGradients on dZs^T H, against the
// plain backward in fp64. The bf16 roundings of dZs (and of dH, stored in bf16) bound the error.
TEST_P(EpilogueRmsNormBackward, ChainedProgramsReproduceThePlainBackward) {
  const int64_t rows = 150, depth = 40, hidden = 200, n2 = 136;
  const reference::GemmRmsNormGemm layer{reference::round_matrix(random_matrix(rows, depth), DType::bf16),
                                         reference::round_matrix(random_matrix(hidden, depth, -0.2, 0.2), DType::bf16),
                                         reference::round_matrix(random_matrix(rows, hidden), DType::bf16),
                                         random_vector(hidden, 0.5, 1.5),
                                         reference::round_matrix(random_matrix(n2, hidden, -0.1, 0.1), DType::bf16),
                                         1e-6};
  // The saved H as the forward stores it (bf16), and the forward from it.
  reference::GemmRmsNormGemmForward saved = reference::gemm_rmsnorm_gemm_forward(layer);
  saved.residual_out = reference::round_matrix(saved.residual_out, DType::bf16);
  saved.rstd = reference::rmsnorm_rstd(saved.residual_out, layer.eps);
  const reference::Matrix dz = random_matrix(rows, n2),
                          dh_out = reference::round_matrix(random_matrix(rows, hidden), DType::bf16);
  const reference::GemmRmsNormGemmGradients want = reference::gemm_rmsnorm_gemm_backward(layer, saved, dz, dh_out);

  const reference::Vector correction = reference::rmsnorm_backward_correction(
      reference::row_partial_dots(saved.output, dz, part().cols), saved.rstd, hidden);
  const reference::Matrix scaled = reference::round_matrix(reference::row_scale(dz, saved.rstd), DType::bf16);
  reference::Matrix weight_row(1, hidden);
  weight_row.data = layer.norm_weight;
  const HostTensor h = host_copy(DType::bf16, saved.residual_out), w2 = host_copy(DType::bf16, layer.w2),
                   grad_residual = host_copy(DType::bf16, dh_out), weight_values = host_copy(DType::f32, weight_row),
                   correction_column = column_vector_of(DType::f32, {correction});

  HostTensor dh = poisoned_output(DType::bf16, rows, hidden, 1);
  run_batches(epilogue::ResidualRmsNormBackward{.residual = tile_in(h),
                                                .grad_residual = tile_in(grad_residual),
                                                .weight = row_vector(weight_values),
                                                .correction = column_vector(correction_column),
                                                .grad_residual_out = tile_out(dh)},
              {reference::gemm(scaled, Major::k, layer.w2, Major::mn)}, part());
  HostTensor grad_w2 = poisoned_output(DType::f32, n2, hidden, 1);
  PartialsBuffer partials(part_count(n2, part().rows), hidden, 1);
  run_batches(epilogue::RmsNormWeightGradients{.projection_weight = tile_in(w2),
                                               .norm_weight = row_vector(weight_values),
                                               .grad_projection_weight = tile_out(grad_w2),
                                               .norm_weight_partials = partials.partials()},
              {reference::gemm(scaled, Major::mn, saved.residual_out, Major::mn)}, part());

  EXPECT_LT(reference::relative_error(dh.matrix(0), want.residual), 5e-3) << "dH";
  EXPECT_LT(reference::relative_error(grad_w2.matrix(0), want.w2), 5e-3) << "dW2";
  EXPECT_LT(reference::relative_error(reference::combine_column_partials(partials.matrix(0), reference::Combine::sum),
                                      want.norm_weight),
            5e-3)
      << "dg";
}

}  // namespace
}  // namespace coda::test

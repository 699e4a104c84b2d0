// The ResidualRmsNorm program and the RowScale program on the CPU executor
// against reference::residual_rmsnorm and reference::row_scale, and the two chained through
// reference::rstd_from_partials against the GEMM-residual-RMSNorm-GEMM forward, plain and fused.
#include "coda/epilogue/programs/rmsnorm.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "coda/core/layout.hpp"
#include "coda/reference/epilogues.hpp"
#include "coda/reference/gemm.hpp"
#include "coda/reference/gemm_rmsnorm_gemm.hpp"
#include "coda/reference/rmsnorm.hpp"
#include "epilogue/support.hpp"

namespace coda::test {
namespace {

class EpilogueRmsNorm : public PartShapeTest {};

// Kernel 4 over host operands: R in, H and U out, S partials, weight g.
epilogue::ResidualRmsNorm residual_rmsnorm_program(const HostTensor& residual, HostTensor& residual_out,
                                                   PartialsBuffer& sum_squares, const HostTensor& weight,
                                                   HostTensor& out) {
  return {.residual = tile_in(residual),
          .residual_out = tile_out(residual_out),
          .sum_squares = sum_squares.partials(),
          .weight = row_vector(weight),
          .out = tile_out(out)};
}

INSTANTIATE_TEST_SUITE_P(Parts, EpilogueRmsNorm, ::testing::ValuesIn(kPartShapes), part_shape_name);

struct Kernel4Types {
  DType residual;  // R in, H out
  DType weight;    // g
  DType out;       // U
};

// Each type set with U, then (the first) without: g folded into the next GEMM's weight, the weight
// null and never read, H and the sums of squares as before.
TEST_P(EpilogueRmsNorm, ResidualRmsNormStoresHAndUAndSumsOfSquares) {
  const ProblemShape shape{150, 200};
  for (const Kernel4Types types :
       {Kernel4Types{DType::bf16, DType::f32, DType::bf16}, Kernel4Types{DType::f32, DType::bf16, DType::f32},
        Kernel4Types{DType::f16, DType::f32, DType::f16}})
    for (const bool with_u : {true, false}) {
      if (!with_u && types.residual != DType::bf16) continue;
      SCOPED_TRACE(::testing::Message() << "residual " << name(types.residual) << ", weight " << name(types.weight)
                                        << ", out " << name(types.out) << (with_u ? "" : ", without U"));
      const auto acc = random_accumulators(shape);
      const HostTensor residual = random_input(types.residual, shape.rows, shape.cols, shape.batch, -2.0, 2.0);
      const HostTensor weight = random_row_vector(types.weight, shape.cols, 0.5, 1.5);
      HostTensor residual_out = poisoned_output(types.residual, shape.rows, shape.cols, shape.batch);
      HostTensor out = poisoned_output(types.out, shape.rows, shape.cols, shape.batch);
      PartialsBuffer sum_squares(shape.rows, part_count(shape.cols, part().cols), shape.batch);
      epilogue::ResidualRmsNorm program = residual_rmsnorm_program(residual, residual_out, sum_squares, weight, out);
      if (!with_u) {
        program.out = {};
        program.weight = {};
      }
      run_batches(program, acc, part());

      std::vector<reference::ResidualRmsNorm> want;
      for (int64_t b = 0; b < shape.batch; ++b)
        want.push_back(reference::residual_rmsnorm(acc[std::size_t(b)], residual.matrix(b), row_vector_values(weight),
                                                   part().cols));
      const auto field = [&](reference::Matrix reference::ResidualRmsNorm::*member) {
        return per_batch(acc, [&](const reference::Matrix&, int64_t b) { return want[std::size_t(b)].*member; });
      };
      {
        SCOPED_TRACE("H");
        expect_output(residual_out, field(&reference::ResidualRmsNorm::residual));
      }
      if (with_u) {
        SCOPED_TRACE("U");
        expect_output(out, field(&reference::ResidualRmsNorm::weighted));
      } else {
        for (int64_t b = 0; b < shape.batch; ++b)
          for (double v : out.matrix(b).data) ASSERT_TRUE(std::isnan(v)) << "U was written without a descriptor";
      }
      SCOPED_TRACE("sums of squares of H");
      expect_partials(sum_squares, field(&reference::ResidualRmsNorm::sum_squares));
    }
}

// U is H * weight: a program that stores U without a weight is refused, naming the weight.
TEST_P(EpilogueRmsNorm, ResidualRmsNormRefusesUWithoutAWeight) {
  const ProblemShape shape{64, 64};
  const auto acc = random_accumulators(shape);
  const HostTensor residual = random_input(DType::bf16, shape.rows, shape.cols, shape.batch);
  HostTensor residual_out = poisoned_output(DType::bf16, shape.rows, shape.cols, shape.batch);
  HostTensor out = poisoned_output(DType::bf16, shape.rows, shape.cols, shape.batch);
  PartialsBuffer sum_squares(shape.rows, part_count(shape.cols, part().cols), shape.batch);
  const epilogue::ResidualRmsNorm program{.residual = tile_in(residual),
                                          .residual_out = tile_out(residual_out),
                                          .sum_squares = sum_squares.partials(),
                                          .out = tile_out(out)};
  try {
    run_batches(program, acc, part());
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("argument 'weight': is null, but U (out) is stored"));
  }
}

TEST_P(EpilogueRmsNorm, RowScale) {
  const ProblemShape shape{150, 300};
  for (const DType out_type : {DType::bf16, DType::f32}) {
    SCOPED_TRACE(std::string(name(out_type)));
    const auto acc = random_accumulators(shape);
    const HostTensor rstd = random_column_vector(DType::f32, shape.rows, shape.batch, 0.5, 2.0);
    HostTensor out = poisoned_output(out_type, shape.rows, shape.cols, shape.batch);
    run_batches(epilogue::RowScale{.scale = column_vector(rstd), .out = tile_out(out)}, acc, part());
    expect_output(out, per_batch(acc, [&](const reference::Matrix& y, int64_t b) {
                    return reference::row_scale(y, column_vector_values(rstd, b));
                  }));
  }
}

// ResidualRmsNorm, rstd from its partials, RowScale on the GEMM of U: the reparameterized forward.
// Stored in fp32, U gives the plain forward to fp32 accuracy; stored in bf16 (what the next
// GEMM reads in practice) it costs the second GEMM one bf16 rounding of its input, about 1.7e-3
// relative (rms) in Z.
TEST_P(EpilogueRmsNorm, ChainedKernelsReproduceTheGemmRmsNormGemmForward) {
  const int64_t rows = 150, depth = 48, hidden = 200, n2 = 96, batch = 2;
  const double eps = 1e-6;
  const reference::Matrix w1 = reference::round_matrix(random_matrix(hidden, depth), DType::bf16);
  const reference::Matrix w2 = reference::round_matrix(random_matrix(n2, hidden), DType::bf16);
  const HostTensor weight = random_row_vector(DType::f32, hidden, 0.5, 1.5);
  const HostTensor residual = random_input(DType::bf16, rows, hidden, batch);
  std::vector<reference::GemmRmsNormGemm> layers;
  for (int64_t b = 0; b < batch; ++b)
    layers.push_back({reference::round_matrix(random_matrix(rows, depth), DType::bf16), w1, residual.matrix(b),
                      row_vector_values(weight), w2, eps});
  std::vector<reference::Matrix> gemm1;
  for (const auto& layer : layers) gemm1.push_back(reference::gemm(layer.x, Major::k, layer.w1, Major::k));

  for (const auto& [u_type, z_bound] : {std::pair{DType::f32, 1e-6}, std::pair{DType::bf16, 3e-3}}) {
    SCOPED_TRACE(::testing::Message() << "U in " << name(u_type));
    HostTensor h = poisoned_output(DType::bf16, rows, hidden, batch), u = poisoned_output(u_type, rows, hidden, batch);
    PartialsBuffer sum_squares(rows, part_count(hidden, part().cols), batch);
    run_batches(residual_rmsnorm_program(residual, h, sum_squares, weight, u), gemm1, part());

    std::vector<reference::Vector> rstd;
    std::vector<reference::Matrix> gemm2;
    for (int64_t b = 0; b < batch; ++b) {
      rstd.push_back(reference::rstd_from_partials(sum_squares.matrix(b), hidden, eps));
      gemm2.push_back(reference::gemm(u.matrix(b), Major::k, w2, Major::k));
    }
    const HostTensor rstd_column = column_vector_of(DType::f32, rstd);
    HostTensor z = poisoned_output(DType::f32, rows, n2, batch);
    run_batches(epilogue::RowScale{.scale = column_vector(rstd_column), .out = tile_out(z)}, gemm2, part());
    expect_written_exactly(z);

    for (int64_t b = 0; b < batch; ++b) {
      SCOPED_TRACE(::testing::Message() << "batch " << b);
      const reference::GemmRmsNormGemmForward plain = reference::gemm_rmsnorm_gemm_forward(layers[std::size_t(b)]);
      const reference::GemmRmsNormGemmForward fused =
          reference::gemm_rmsnorm_gemm_forward_fused(layers[std::size_t(b)], part().cols);
      expect_stored(h.matrix(b), plain.residual_out, DType::bf16);
      expect_close(column_vector_values(rstd_column, b), plain.rstd);
      EXPECT_LT(reference::relative_error(z.matrix(b), plain.output), z_bound);
      EXPECT_LT(reference::relative_error(z.matrix(b), fused.output), z_bound);
    }
  }
}

}  // namespace
}  // namespace coda::test

// The backward ops' argument rules, through the C++ API and the C ABI. Validation runs before the
// device is touched, so these run in CI: each feeds one bad argument and checks the message; valid
// arguments reach the device check (where there is no Hopper GPU).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "coda/coda.h"
#include "coda/core/device.hpp"
#include "coda/ops/rmsnorm.hpp"
#include "coda/ops/rope.hpp"
#include "coda/ops/swiglu.hpp"
#include "ops/host_views.hpp"

namespace coda {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

using test::memory;
using test::tile;
using test::vec;

// Without a Hopper GPU, valid arguments stop at the device check, which names the op.
void expect_device_check(const Status& s, const char* function) {
  if (hopper_available()) return;  // host memory here: nothing may launch
  EXPECT_EQ(s.code(), StatusCode::unsupported) << s.message();
  EXPECT_THAT(s.message(), StartsWith(std::string(function) + ": no CUDA device"));
}

TEST(BackwardValidation, SwigluBackwardRules) {
  // dP (64 x 32), W_down (32 x 48): F = 48, Y and dY 64 x 96.
  auto status = [](const TensorView& dp, const TensorView& w, const TensorView& y, const TensorView& dy,
                   const ops::SwigluBackwardOptions& o = {}) {
    return ops::try_gemm_swiglu_backward(dp, w, y, dy, nullptr, o);
  };
  EXPECT_THAT(status(tile(64, 32), tile(40, 48), tile(64, 96), tile(64, 96)).message(),
              HasSubstr("coda::ops::gemm_swiglu_backward: argument 'w_down': shape (40, 48) bf16"));
  EXPECT_THAT(status(tile(64, 32), tile(32, 48), tile(64, 48), tile(64, 96)).message(),
              HasSubstr("argument 'pre_activation': shape (64, 48) bf16"));
  EXPECT_THAT(status(tile(64, 32), tile(32, 48), tile(64, 96), tile(64, 96, DType::f16)).message(),
              HasSubstr("argument 'grad_pre_activation': dtype f16 must be bf16"));
  EXPECT_THAT(status(tile(64, 32), tile(32, 48, DType::f16), tile(64, 96), tile(64, 96)).message(),
              HasSubstr("argument 'w_down': dtype f16 must match grad_output's dtype bf16"));
  ops::SwigluBackwardOptions o;
  o.row_dots = tile(64, 2, DType::f32);
  EXPECT_THAT(status(tile(64, 32), tile(32, 48), tile(64, 96), tile(64, 96), o).message(),
              HasSubstr("argument 'options.row_dots': shape (64, 2) f32"));
  o.row_dots = tile(64, 1, DType::f32);  // ceil(48 / 128) parts, any row stride
  o.row_scale = vec(63);
  EXPECT_THAT(status(tile(64, 32), tile(32, 48), tile(64, 96), tile(64, 96), o).message(),
              HasSubstr("argument 'options.row_scale': length 63 must be 64"));
  o.row_scale = vec(64);
  o.output = tile(64, 96);
  EXPECT_THAT(status(tile(64, 32), tile(32, 48), tile(64, 96), tile(64, 96), o).message(),
              HasSubstr("argument 'options.output': shape (64, 96) bf16"));
  o.output = tile(64, 48);
  expect_device_check(status(tile(64, 32), tile(32, 48), tile(64, 96), tile(64, 96), o),
                      "coda::ops::gemm_swiglu_backward");
}

TEST(BackwardValidation, ResidualRmsNormBackwardRules) {
  // dZs (64 x 96), W2 (96 x 32): hidden 32.
  const std::size_t enough = ops::residual_rmsnorm_backward_workspace_bytes(64);
  auto status = [&](const TensorView& w, const TensorView& weight, const TensorView& rstd, const TensorView& row_dots,
                    std::size_t bytes, const ops::ResidualRmsNormBackwardOptions& o = {}) {
    return ops::try_gemm_residual_rmsnorm_backward(tile(64, 96), w, tile(64, 32), weight, rstd, row_dots, tile(64, 32),
                                                   memory, bytes, nullptr, o);
  };
  const TensorView dots = tile(64, 3, DType::f32);
  EXPECT_THAT(status(tile(32, 96), vec(32), vec(64), dots, enough).message(),
              HasSubstr("coda::ops::gemm_residual_rmsnorm_backward: argument 'w': shape (32, 96) bf16"));
  EXPECT_THAT(status(tile(96, 32), vec(31), vec(64), dots, enough).message(),
              HasSubstr("argument 'weight': length 31 must be 32"));
  EXPECT_THAT(status(tile(96, 32), vec(32), vec(64, DType::bf16), dots, enough).message(),
              HasSubstr("argument 'rstd': dtype bf16 is not supported here"));
  EXPECT_THAT(status(tile(96, 32), vec(32), vec(64), tile(63, 3, DType::f32), enough).message(),
              HasSubstr("argument 'row_dots': shape (63, 3) f32"));
  EXPECT_THAT(status(tile(96, 32), vec(32), vec(64), tile(64, 3), enough).message(),
              HasSubstr("argument 'row_dots': dtype bf16 is not supported here"));
  EXPECT_THAT(status(tile(96, 32), vec(32), vec(64), dots, enough - 1).message(),
              HasSubstr("argument 'workspace': holds"));
  ops::ResidualRmsNormBackwardOptions o;
  o.grad_residual = tile(64, 33);
  EXPECT_THAT(status(tile(96, 32), vec(32), vec(64), dots, enough, o).message(),
              HasSubstr("argument 'options.grad_residual'"));
  o.grad_residual = tile(64, 32);
  expect_device_check(status(tile(96, 32), vec(32), vec(64), dots, enough, o),
                      "coda::ops::gemm_residual_rmsnorm_backward");
  // h is staged on the ping-pong tile and read from global memory on m128n256: both run, no other.
  o.gemm.tile = GemmTile::m128n256;
  expect_device_check(status(tile(96, 32), vec(32), vec(64), dots, enough, o),
                      "coda::ops::gemm_residual_rmsnorm_backward");
  o.gemm.tile = GemmTile::m64n256;
  const Status s = status(tile(96, 32), vec(32), vec(64), dots, enough, o);
  EXPECT_EQ(s.code(), StatusCode::unsupported);
  EXPECT_THAT(s.message(), HasSubstr("argument 'options.tile': this epilogue program stages a tile input"));
}

TEST(BackwardValidation, RmsNormWeightGradientsRules) {
  // dZs (256 x 96), h (256 x 32): G and W2 96 x 32.
  const std::size_t enough = ops::rmsnorm_weight_gradients_workspace_bytes(96, 32);
  auto status = [&](const TensorView& h, const TensorView& w, const TensorView& grad_w, const TensorView& grad_weight,
                    std::size_t bytes) {
    return ops::try_gemm_rmsnorm_weight_gradients(tile(256, 96), h, w, vec(32), grad_w, grad_weight, memory, bytes);
  };
  EXPECT_THAT(status(tile(255, 32), tile(96, 32), tile(96, 32), vec(32), enough).message(),
              HasSubstr("coda::ops::gemm_rmsnorm_weight_gradients: argument 'h': shape (255, 32) bf16"));
  EXPECT_THAT(status(tile(256, 32), tile(32, 96), tile(96, 32), vec(32), enough).message(),
              HasSubstr("argument 'w': shape (32, 96) bf16"));
  EXPECT_THAT(status(tile(256, 32), tile(96, 32), tile(96, 32, DType::f16), vec(32), enough).message(),
              HasSubstr("argument 'grad_w': dtype f16 is not supported here"));
  EXPECT_THAT(status(tile(256, 32), tile(96, 32), tile(96, 32), vec(31), enough).message(),
              HasSubstr("argument 'grad_weight': length 31 must be 32"));
  EXPECT_THAT(status(tile(256, 32), tile(96, 32), tile(96, 32), vec(32), 16).message(),
              HasSubstr("argument 'workspace': holds 16 bytes but needs"));
  expect_device_check(status(tile(256, 32), tile(96, 32), tile(96, 32, DType::f32), vec(32, DType::bf16), enough),
                      "coda::ops::gemm_rmsnorm_weight_gradients");
}

TEST(BackwardValidation, RopeBackwardRules) {
  const TensorView cos = tile(16, 32, DType::f32), sin = tile(16, 32, DType::f32);
  auto status = [&](const TensorView& grad, int head_dim, int rotated, const TensorView& grad_input,
                    const ops::RopeBackwardOptions& o = {}) {
    return ops::try_rope_backward(grad, vec(8, DType::i32), cos, sin, head_dim, rotated, grad_input, nullptr, o);
  };
  EXPECT_THAT(status(tile(8, 128), 63, 1, tile(8, 128)).message(),
              HasSubstr("coda::ops::rope_backward: argument 'head_dim': is 63 but must be even"));
  EXPECT_THAT(status(tile(8, 128), 48, 1, tile(8, 128)).message(),
              HasSubstr("argument 'grad_output': has 128 columns, not a whole number of heads of 48"));
  EXPECT_THAT(status(tile(8, 128), 64, 3, tile(8, 128)).message(),
              HasSubstr("argument 'rotated_heads': is 3 but must be in [0, 2]"));
  EXPECT_THAT(status(tile(8, 128, DType::f32), 64, 1, tile(8, 128)).message(),
              HasSubstr("argument 'grad_output': dtype f32 is not supported here"));
  EXPECT_THAT(status(tile(8, 128), 64, 1, tile(8, 128, DType::f16)).message(),
              HasSubstr("argument 'grad_input': dtype f16 must be bf16"));
  ops::RopeBackwardOptions o;
  o.row_dots = tile(8, 1, DType::f32);
  EXPECT_THAT(status(tile(8, 128), 64, 1, tile(8, 128), o).message(),
              HasSubstr("argument 'options.output': is null, but options.row_dots is"));
  o.output = tile(8, 128);
  o.row_dots = tile(8, 2, DType::f32);
  EXPECT_THAT(status(tile(8, 128), 64, 1, tile(8, 128), o).message(),
              HasSubstr("argument 'options.row_dots': shape (8, 2) f32"));
  o.row_dots = tile(8, 1, DType::f32);
  expect_device_check(status(tile(8, 128), 64, 1, tile(8, 128), o), "coda::ops::rope_backward");
}

TEST(BackwardValidation, RowScaleBackwardRules) {
  auto status = [](const TensorView& output, const TensorView& scale, const TensorView& grad_input,
                   const TensorView& row_dots) {
    return ops::try_row_scale_backward(tile(64, 200), output, scale, grad_input, row_dots);
  };
  const TensorView dots = tile(64, 2, DType::f32);
  EXPECT_THAT(status(tile(64, 200), {}, tile(64, 200), dots).message(),
              HasSubstr("coda::ops::row_scale_backward: argument 'scale': is a null pointer"));
  EXPECT_THAT(status({}, vec(64), tile(64, 200), dots).message(),
              HasSubstr("argument 'output': is null, but row_dots is <grad_output, output>"));
  EXPECT_THAT(status(tile(64, 200), vec(64), tile(64, 192), dots).message(),
              HasSubstr("argument 'grad_input': shape (64, 192) bf16"));
  EXPECT_THAT(status(tile(64, 200), vec(63), tile(64, 200), dots).message(),
              HasSubstr("argument 'scale': length 63 must be 64"));
  expect_device_check(status(tile(64, 200), vec(64), tile(64, 200), dots), "coda::ops::row_scale_backward");
  expect_device_check(status({}, vec(64), tile(64, 200), {}), "coda::ops::row_scale_backward");
}

TEST(BackwardValidation, CAbi) {
  coda_tensor dp = {memory, CODA_BF16, 2, {64, 32}, {32, 1}}, w_down = {memory, CODA_BF16, 2, {32, 48}, {48, 1}};
  coda_tensor y = {memory, CODA_BF16, 2, {64, 96}, {96, 1}};
  EXPECT_EQ(coda_gemm_swiglu_backward(&dp, &w_down, &y, nullptr, nullptr, nullptr, nullptr, nullptr),
            CODA_INVALID_ARGUMENT);
  EXPECT_THAT(coda_last_error(), StartsWith("coda_gemm_swiglu_backward: argument 'grad_pre_activation'"));
  coda_tensor dots_1d = {memory, CODA_F32, 1, {64}, {1}};
  EXPECT_EQ(coda_gemm_swiglu_backward(&dp, &w_down, &y, &y, &dots_1d, nullptr, nullptr, nullptr),
            CODA_INVALID_ARGUMENT);
  EXPECT_THAT(coda_last_error(), HasSubstr("argument 'row_dots'"));

  std::size_t bytes = 7;
  EXPECT_EQ(coda_residual_rmsnorm_backward_workspace_bytes(0, &bytes), CODA_INVALID_ARGUMENT);
  EXPECT_EQ(bytes, 0u);
  EXPECT_STREQ(coda_last_error(),
               "coda_residual_rmsnorm_backward_workspace_bytes: argument 'm': M is 0 but must be at least 1");
  ASSERT_EQ(coda_residual_rmsnorm_backward_workspace_bytes(64, &bytes), CODA_OK);
  EXPECT_GE(bytes, 64u * sizeof(float));
  coda_tensor dzs = {memory, CODA_BF16, 2, {64, 96}, {96, 1}}, w2 = {memory, CODA_BF16, 2, {96, 32}, {32, 1}};
  coda_tensor h = {memory, CODA_BF16, 2, {64, 32}, {32, 1}}, g = {memory, CODA_F32, 1, {32}, {1}};
  coda_tensor rstd = {memory, CODA_F32, 1, {64}, {1}}, dots = {memory, CODA_F32, 2, {64, 1}, {1, 1}};
  EXPECT_EQ(
      coda_gemm_residual_rmsnorm_backward(&dzs, &w2, &h, &g, &rstd, nullptr, &h, nullptr, 1, memory, bytes, nullptr),
      CODA_INVALID_ARGUMENT);
  EXPECT_THAT(coda_last_error(), StartsWith("coda_gemm_residual_rmsnorm_backward: argument 'row_dots': is a null"));
  const coda_status valid =
      coda_gemm_residual_rmsnorm_backward(&dzs, &w2, &h, &g, &rstd, &dots, &h, nullptr, 0, memory, bytes, nullptr);
  if (!hopper_available()) {
    EXPECT_EQ(valid, CODA_UNSUPPORTED);
    EXPECT_THAT(coda_last_error(), StartsWith("coda_gemm_residual_rmsnorm_backward: no CUDA device"));
  }

  EXPECT_EQ(coda_rmsnorm_weight_gradients_workspace_bytes(96, -1, &bytes), CODA_INVALID_ARGUMENT);
  EXPECT_THAT(coda_last_error(), HasSubstr("argument 'hidden'"));
  ASSERT_EQ(coda_rmsnorm_weight_gradients_workspace_bytes(300, 32, &bytes), CODA_OK);
  EXPECT_GE(bytes, 3u * 32 * sizeof(float));  // one partial per 128 rows of W2 and column
  coda_tensor tokens_by_n2 = {memory, CODA_BF16, 2, {256, 96}, {96, 1}},
              tokens_by_hidden = {memory, CODA_BF16, 2, {256, 32}, {32, 1}};
  EXPECT_EQ(coda_gemm_rmsnorm_weight_gradients(&tokens_by_n2, &tokens_by_hidden, &w2, &g, &w2, nullptr, memory,
                                               sizeof(memory), nullptr),
            CODA_INVALID_ARGUMENT);
  EXPECT_THAT(coda_last_error(), StartsWith("coda_gemm_rmsnorm_weight_gradients: argument 'grad_weight'"));

  EXPECT_EQ(coda_row_scale_backward(&dzs, &dzs, nullptr, &dzs, &dots, nullptr), CODA_INVALID_ARGUMENT);
  EXPECT_THAT(coda_last_error(), StartsWith("coda_row_scale_backward: argument 'scale'"));

  int64_t count = 0;
  ASSERT_EQ(coda_row_partial_count(300, &count), CODA_OK);
  EXPECT_EQ(count, 3);
  EXPECT_EQ(coda_row_partial_count(0, &count), CODA_INVALID_ARGUMENT);
  EXPECT_EQ(count, 0);
  EXPECT_EQ(coda_row_partial_count(5, nullptr), CODA_INVALID_ARGUMENT);

  coda_tensor grad = {memory, CODA_BF16, 2, {8, 128}, {128, 1}}, positions = {memory, CODA_I32, 1, {8}, {1}};
  coda_tensor cos = {memory, CODA_F32, 2, {16, 32}, {32, 1}};
  EXPECT_EQ(coda_rope_backward(&grad, &positions, &cos, &cos, 64, 5, &grad, nullptr, nullptr, nullptr, nullptr),
            CODA_INVALID_ARGUMENT);
  EXPECT_THAT(coda_last_error(), StartsWith("coda_rope_backward: argument 'rotated_heads'"));
  const coda_status rope =
      coda_rope_backward(&grad, &positions, &cos, &cos, 64, 1, &grad, nullptr, nullptr, nullptr, nullptr);
  if (!hopper_available()) {
    EXPECT_EQ(rope, CODA_UNSUPPORTED);
    EXPECT_THAT(coda_last_error(), Not(HasSubstr("argument")));
  }
}

}  // namespace
}  // namespace coda

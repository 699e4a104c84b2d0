// The fused ops' argument rules, through the C++ API and the C ABI. Validation runs before the
// device is touched, so these run in CI: each feeds one bad argument and checks the message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "coda/coda.h"
#include "coda/core/device.hpp"
#include "coda/ops/cross_entropy.hpp"
#include "coda/ops/rmsnorm.hpp"
#include "coda/ops/rope.hpp"
#include "coda/ops/swiglu.hpp"
#include "ops/host_views.hpp"
#include "coda/reference/rope.hpp"
#include "coda/reference/swiglu.hpp"
#include "support/random.hpp"

namespace coda {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

using test::memory;
using test::tile;
using test::vec;

TEST(OpsValidation, SwigluRules) {
  auto error = [](const TensorView& x, const TensorView& w, const TensorView& out, const ops::SwigluOptions& o = {}) {
    return ops::try_gemm_swiglu(x, w, out, nullptr, o).message();
  };
  EXPECT_THAT(error(tile(64, 32), tile(63, 32), tile(64, 32)),
              HasSubstr("coda::ops::gemm_swiglu: argument 'w': has 63 rows but needs an even number"));
  EXPECT_THAT(error(tile(64, 32), tile(64, 32), tile(64, 64)), HasSubstr("argument 'out': shape (64, 64) bf16"));
  EXPECT_THAT(error(tile(64, 32), tile(64, 32, DType::f16), tile(64, 32)),
              HasSubstr("argument 'w': dtype f16 must match x's dtype bf16"));
  ops::SwigluOptions o;
  o.row_scale = vec(63);
  EXPECT_THAT(error(tile(64, 32), tile(64, 32), tile(64, 32), o), HasSubstr("argument 'options.row_scale': length 63 must be 64"));
  o = {};
  o.pre_activation = tile(64, 32);
  EXPECT_THAT(error(tile(64, 32), tile(64, 32), tile(64, 32), o), HasSubstr("argument 'options.pre_activation'"));
  EXPECT_THAT(error(tile(64, 30), tile(64, 30), tile(64, 32)), HasSubstr("argument 'x': row stride of 30 elements"));
}

TEST(OpsValidation, RopeRules) {
  const TensorView cos = tile(16, 32, DType::f32), sin = tile(16, 32, DType::f32);
  auto error = [&](int head_dim, int rotated, const TensorView& positions, const TensorView& c = TensorView{}) {
    return ops::try_gemm_rope(tile(8, 64), tile(128, 64), positions, c.data ? c : cos, sin, head_dim, rotated, tile(8, 128))
        .message();
  };
  EXPECT_THAT(error(63, 1, vec(8, DType::i32)), HasSubstr("argument 'head_dim': is 63 but must be even"));
  EXPECT_THAT(error(48, 1, vec(8, DType::i32)), HasSubstr("argument 'w': has 128 rows, not a whole number of heads of 48"));
  EXPECT_THAT(error(64, 3, vec(8, DType::i32)), HasSubstr("argument 'rotated_heads': is 3 but must be in [0, 2]"));
  EXPECT_THAT(error(64, 1, vec(8, DType::f32)), HasSubstr("argument 'positions': dtype f32 is not supported here"));
  EXPECT_THAT(error(64, 1, vec(8, DType::i32), tile(16, 16, DType::f32)), HasSubstr("argument 'cos': shape (16, 16)"));
  EXPECT_THAT(error(64, 1, vec(8, DType::i32), tile(0, 32, DType::f32)), HasSubstr("argument 'cos': its rows"));
}

TEST(OpsValidation, ResidualRmsNormRules) {
  auto error = [](float eps, std::size_t bytes, const TensorView& weight) {
    return ops::try_gemm_residual_rmsnorm(tile(64, 32), tile(32, 32), tile(64, 32), weight, eps, tile(64, 32),
                                          tile(64, 32), vec(64), memory, bytes)
        .message();
  };
  const std::size_t enough = ops::residual_rmsnorm_workspace_bytes(64, 32);
  EXPECT_THAT(error(-1.0f, enough, vec(32)), HasSubstr("argument 'eps': is -1 but must be >= 0"));
  EXPECT_THAT(error(1e-6f, enough - 4, vec(32)), HasSubstr("argument 'workspace': holds"));
  EXPECT_THAT(error(1e-6f, enough, vec(31)), HasSubstr("argument 'weight': length 31 must be 32"));
  // u is optional (g folded into the next GEMM's weight); the weight is then optional too, but
  // still checked when given, and required whenever u is stored.
  auto status_with = [&](const TensorView& weight, const TensorView& u) {
    return ops::try_gemm_residual_rmsnorm(tile(64, 32), tile(32, 32), tile(64, 32), weight, 1e-6f, tile(64, 32), u,
                                          vec(64), memory, enough);
  };
  EXPECT_THAT(status_with({}, tile(64, 32)).message(), HasSubstr("argument 'weight': is a null pointer"));
  EXPECT_THAT(status_with(vec(31), {}).message(), HasSubstr("argument 'weight': length 31 must be 32"));
  EXPECT_THAT(status_with({}, tile(64, 31)).message(), HasSubstr("argument 'u'"));
  if (!hopper_available()) {  // valid arguments: on to the device check (host memory here: no launch on a GPU)
    const Status s = status_with({}, {});
    EXPECT_EQ(s.code(), StatusCode::unsupported);
    EXPECT_THAT(s.message(), Not(HasSubstr("argument")));
  }
  EXPECT_THAT(ops::try_gemm_row_scale(tile(64, 32), tile(32, 32), vec(64, DType::bf16), tile(64, 32)).message(),
              HasSubstr("coda::ops::gemm_row_scale: argument 'rstd': dtype bf16 is not supported here"));
}

TEST(OpsValidation, CrossEntropyRules) {
  auto error = [](const ops::CrossEntropyOptions& o, const TensorView& loss = vec(1)) {
    return ops::try_gemm_cross_entropy(tile(64, 32), tile(1000, 32), vec(64, DType::i32), loss, vec(64), memory,
                                       sizeof(memory), nullptr, o)
        .message();
  };
  ops::CrossEntropyOptions o;
  o.label_smoothing = 1.0f;
  EXPECT_THAT(error(o), HasSubstr("argument 'options.label_smoothing': is 1 but must be in [0, 1)"));
  o = {};
  o.z_loss = -1.0f;
  EXPECT_THAT(error(o), HasSubstr("argument 'options.z_loss'"));
  o = {};
  o.reduction = ops::LossReduction::none;
  EXPECT_THAT(error(o), HasSubstr("argument 'loss': length 1 must be 64"));  // none: one loss per row
  o = {};
  EXPECT_THAT(ops::try_gemm_cross_entropy(tile(64, 32), tile(1000, 32), vec(64, DType::i32), vec(1), vec(64), memory, 16)
                  .message(),
              HasSubstr("argument 'workspace': holds 16 bytes but needs"));
}

TEST(OpsValidation, CAbiChecksTensorsAndCodes) {
  coda_tensor x = {memory, CODA_BF16, 2, {64, 32}, {32, 1}};
  coda_tensor w = {memory, CODA_BF16, 2, {64, 32}, {32, 1}};
  coda_tensor out = {memory, CODA_BF16, 2, {64, 32}, {32, 1}};
  EXPECT_EQ(coda_gemm_swiglu(&x, nullptr, &out, nullptr, nullptr, nullptr), CODA_INVALID_ARGUMENT);
  EXPECT_THAT(coda_last_error(), HasSubstr("coda_gemm_swiglu: argument 'w'"));
  coda_tensor vector2d = {memory, CODA_F32, 2, {1, 64}, {64, 1}};
  EXPECT_EQ(coda_gemm_swiglu(&x, &w, &out, nullptr, &vector2d, nullptr), CODA_INVALID_ARGUMENT);
  EXPECT_THAT(coda_last_error(), HasSubstr("argument 'row_scale'"));
  coda_tensor targets = {memory, CODA_I32, 1, {64}, {1}};
  coda_tensor loss = {memory, CODA_F32, 1, {1}, {1}};
  coda_tensor lse = {memory, CODA_F32, 1, {64}, {1}};
  coda_cross_entropy_options options = {-100, 0.0f, 0.0f, 0.0f, static_cast<coda_loss_reduction>(7)};
  EXPECT_EQ(coda_gemm_cross_entropy(&x, &w, &targets, &loss, &lse, &options, nullptr, nullptr, memory, sizeof(memory),
                                    nullptr),
            CODA_INVALID_ARGUMENT);
  EXPECT_THAT(coda_last_error(), HasSubstr("argument 'options.reduction'"));
  EXPECT_EQ(coda_gemm_row_scale(&x, &w, &lse, &out, nullptr), CODA_INVALID_ARGUMENT);  // out must be 64 x 64
  EXPECT_THAT(coda_last_error(), HasSubstr("argument 'out'"));
  // Residual + RMSNorm: u and the weight may be NULL together (the weight folded into the next GEMM).
  std::size_t bytes = 0;
  ASSERT_EQ(coda_residual_rmsnorm_workspace_bytes(64, 64, &bytes), CODA_OK);
  ASSERT_LE(bytes, sizeof(memory));
  coda_tensor square = {memory, CODA_BF16, 2, {64, 64}, {64, 1}};
  EXPECT_EQ(coda_gemm_residual_rmsnorm(&x, &w, &square, nullptr, 1e-6f, &square, &square, &lse, memory, bytes, nullptr),
            CODA_INVALID_ARGUMENT);
  EXPECT_THAT(coda_last_error(), HasSubstr("argument 'weight': is a null pointer"));
  if (!hopper_available()) {  // valid: on to the device check (host memory here: no launch on a GPU)
    EXPECT_EQ(coda_gemm_residual_rmsnorm(&x, &w, &square, nullptr, 1e-6f, &square, nullptr, &lse, memory, bytes, nullptr),
              CODA_UNSUPPORTED);
    EXPECT_THAT(coda_last_error(), Not(HasSubstr("argument")));
  }
}

// Fused ops run on the tiles their programs are built for (ping-pong; cooperative m128n256 unless
// the program stages a tile input): another tile is refused by name.
TEST(OpsValidation, FusedOpsRefuseOtherTiles) {
  ops::SwigluOptions options;
  options.gemm.tile = GemmTile::m256n128;
  const Status s = ops::try_gemm_swiglu(tile(64, 32), tile(64, 32), tile(64, 32), nullptr, options);
  EXPECT_EQ(s.code(), StatusCode::unsupported);
  EXPECT_THAT(s.message(),
              HasSubstr("argument 'options.tile': epilogue programs run on pingpong_m128n128, m128n256 or "
                        "(M <= 64) swap_m64n128"));
  const Status rmsnorm = ops::try_gemm_residual_rmsnorm(tile(64, 32), tile(32, 32), tile(64, 32), vec(32), 1e-6f,
                                                        tile(64, 32), tile(64, 32), vec(64), memory, sizeof(memory),
                                                        nullptr, {.gemm = {.tile = GemmTile::m128n256}});
  EXPECT_EQ(rmsnorm.code(), StatusCode::unsupported);
  EXPECT_THAT(rmsnorm.message(), HasSubstr("argument 'options.tile': this epilogue program stages a tile input: it runs "
                                           "on pingpong_m128n128 (or swap_m64n128 at M <= 64) only"));
}

// Valid arguments reach the device check, whose message names the op, not the GEMM underneath.
// (Host memory stands in for device memory here, so this only runs where no Hopper GPU would launch.)
TEST(OpsValidation, DeviceCheckNamesTheOp) {
  if (hopper_available()) GTEST_SKIP() << "a Hopper GPU is present: the device check passes";
  const Status s = ops::try_gemm_swiglu(tile(64, 32), tile(64, 32), tile(64, 32));
  EXPECT_EQ(s.code(), StatusCode::unsupported);
  EXPECT_THAT(s.message(), StartsWith("coda::ops::gemm_swiglu: no CUDA device"));
  EXPECT_EQ(coda_gemm_row_scale(nullptr, nullptr, nullptr, nullptr, nullptr), CODA_INVALID_ARGUMENT);
  coda_tensor x = {memory, CODA_BF16, 2, {64, 32}, {32, 1}}, w = x, out = {memory, CODA_BF16, 2, {64, 64}, {64, 1}};
  coda_tensor rstd = {memory, CODA_F32, 1, {64}, {1}};
  EXPECT_EQ(coda_gemm_row_scale(&x, &w, &rstd, &out, nullptr), CODA_UNSUPPORTED);
  EXPECT_THAT(coda_last_error(), StartsWith("coda_gemm_row_scale: no CUDA device"));  // the C name, not the C++ one
}

// Every message of a C call starts with the C function's name, whatever layer below raised it: its
// own tensor checks, the op's rules, the GEMM's.
TEST(OpsValidation, OneCCallOnePrefix) {
  coda_tensor x = {memory, CODA_BF16, 2, {64, 32}, {32, 1}};
  coda_tensor w = {memory, CODA_BF16, 2, {63, 32}, {32, 1}};
  coda_tensor out = {memory, CODA_BF16, 2, {64, 32}, {32, 1}};
  EXPECT_EQ(coda_gemm_swiglu(&x, &w, &out, nullptr, nullptr, nullptr), CODA_INVALID_ARGUMENT);
  EXPECT_THAT(coda_last_error(), StartsWith("coda_gemm_swiglu: argument 'w': has 63 rows but needs an even number"));
  coda_tensor x_unaligned = {memory, CODA_BF16, 2, {64, 30}, {30, 1}}, w30 = {memory, CODA_BF16, 2, {64, 30}, {30, 1}};
  EXPECT_EQ(coda_gemm_swiglu(&x_unaligned, &w30, &out, nullptr, nullptr, nullptr), CODA_INVALID_ARGUMENT);
  EXPECT_THAT(coda_last_error(), StartsWith("coda_gemm_swiglu: argument 'x': row stride of 30 elements"));
}

// The size queries check their arguments: a negative or zero size is an error, never a huge size.
TEST(OpsValidation, WorkspaceQueriesCheckTheirArguments) {
  EXPECT_THROW((void)ops::residual_rmsnorm_workspace_bytes(0, 64), InvalidArgument);
  EXPECT_THROW((void)ops::cross_entropy_workspace_bytes(-5, 100), InvalidArgument);
  ops::CrossEntropyOptions smoothing;
  smoothing.label_smoothing = 1.5f;
  try {
    (void)ops::cross_entropy_workspace_bytes(64, 100, smoothing);
    ADD_FAILURE() << "label smoothing 1.5 accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("argument 'options.label_smoothing': is 1.5 but must be in [0, 1)"));
  }
  std::size_t bytes = 123;
  EXPECT_EQ(coda_cross_entropy_workspace_bytes(-5, 100, nullptr, &bytes), CODA_INVALID_ARGUMENT);
  EXPECT_STREQ(coda_last_error(), "coda_cross_entropy_workspace_bytes: argument 'm': M is -5 but must be at least 1");
  EXPECT_EQ(bytes, 0u);
  EXPECT_EQ(coda_cross_entropy_workspace_bytes(64, 0, nullptr, &bytes), CODA_INVALID_ARGUMENT);
  EXPECT_THAT(coda_last_error(), HasSubstr("argument 'vocab': the vocabulary is 0 but must be at least 1"));
  EXPECT_EQ(coda_cross_entropy_workspace_bytes(64, 100, nullptr, nullptr), CODA_INVALID_ARGUMENT);
  EXPECT_STREQ(coda_last_error(), "coda_cross_entropy_workspace_bytes: argument 'bytes': is a null pointer");
  coda_cross_entropy_options options = {-100, 0.0f, 0.0f, 0.0f, static_cast<coda_loss_reduction>(5)};
  EXPECT_EQ(coda_cross_entropy_workspace_bytes(64, 100, &options, &bytes), CODA_INVALID_ARGUMENT);
  EXPECT_THAT(coda_last_error(), HasSubstr("argument 'options.reduction': code 5 is not a coda_loss_reduction"));
  EXPECT_EQ(coda_residual_rmsnorm_workspace_bytes(64, -1, &bytes), CODA_INVALID_ARGUMENT);
  EXPECT_STREQ(coda_last_error(),
               "coda_residual_rmsnorm_workspace_bytes: argument 'n': N is -1 but must be at least 1");
  ASSERT_EQ(coda_residual_rmsnorm_workspace_bytes(64, 300, &bytes), CODA_OK);
  EXPECT_EQ(bytes, 64u * 3 * sizeof(float));  // one partial per row and 128-column part
  EXPECT_STREQ(coda_last_error(), "");
}

// The host weight helpers against their fp64-reference twins (bf16 rows, padded leading dimension).
TEST(OpsHostHelpers, InterleaveGateUpMatchesReference) {
  test::HostTensor gate(DType::bf16, 6, 20, 24), up(DType::bf16, 6, 20, 24), out(DType::bf16, 12, 20, 24);
  gate.fill_random();
  up.fill_random();
  ops::interleave_gate_up(gate.view, up.view, out.view);
  EXPECT_EQ(reference::max_abs_difference(out.matrix(), reference::interleave_gate_up(gate.matrix(), up.matrix())),
            0.0);
}

TEST(OpsHostHelpers, PermuteRotateHalfMatchesReference) {
  test::HostTensor w(DType::bf16, 3 * 16, 24), out(DType::bf16, 3 * 16, 24);
  w.fill_random();
  ops::permute_rotate_half_to_interleaved(w.view, 16, 2, out.view);  // the third head passes through
  EXPECT_EQ(
      reference::max_abs_difference(out.matrix(), reference::permute_rotate_half_to_interleaved(w.matrix(), 16, 2)),
      0.0);
  EXPECT_THROW(ops::permute_rotate_half_to_interleaved(w.view, 15, 1, out.view), InvalidArgument);
}

}  // namespace
}  // namespace coda

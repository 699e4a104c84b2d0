// The cross-entropy backward's argument rules and workspace, through the C++ API and the C ABI.
// Validation runs before the device is touched, so these run in CI: each feeds one bad argument
// and checks the message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "coda/coda.h"
#include "coda/core/device.hpp"
#include "coda/ops/cross_entropy.hpp"
#include "ops/host_views.hpp"

namespace coda {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

using test::memory;
using test::tile;
using test::vec;

constexpr int64_t kM = 64, kV = 1000, kK = 32;

struct Arguments {
  TensorView x = tile(kM, kK), w = tile(kV, kK), targets = vec(kM, DType::i32), lse = vec(kM), grad_loss = vec(1),
             grad_x = tile(kM, kK), grad_w = tile(kV, kK);
  std::size_t bytes = ops::cross_entropy_backward_workspace_bytes(kM, kV, kK);
  ops::CrossEntropyOptions options{};
  ops::CrossEntropyBackwardOptions backward{};

  Status run() const {
    return ops::try_gemm_cross_entropy_backward(x, w, targets, lse, grad_loss, grad_x, grad_w, memory, bytes, nullptr,
                                                options, backward);
  }
  std::string error() const { return run().message(); }
};

// Arguments' tensors as the C ABI's structs.
struct CTensors {
  coda_tensor x = {memory, CODA_BF16, 2, {kM, kK}, {kK, 1}};
  coda_tensor w = {memory, CODA_BF16, 2, {kV, kK}, {kK, 1}};
  coda_tensor targets = {memory, CODA_I32, 1, {kM}, {1}};
  coda_tensor lse = {memory, CODA_F32, 1, {kM}, {1}};
  coda_tensor grad_loss = {memory, CODA_F32, 1, {1}, {1}};
  coda_tensor grad_x = {memory, CODA_BF16, 2, {kM, kK}, {kK, 1}};
  coda_tensor grad_w = {memory, CODA_BF16, 2, {kV, kK}, {kK, 1}};
};

TEST(CrossEntropyBackwardValidation, TensorRules) {
  Arguments a;
  a.w = tile(kV, kK + 8);
  EXPECT_THAT(a.error(), HasSubstr("coda::ops::gemm_cross_entropy_backward: argument 'w'"));
  a = {};
  a.targets = vec(kM, DType::f32);
  EXPECT_THAT(a.error(), HasSubstr("argument 'targets': dtype f32 is not supported here"));
  a = {};
  a.lse = vec(kM - 1);
  EXPECT_THAT(a.error(), HasSubstr("argument 'lse': length 63 must be 64"));
  a = {};
  a.grad_loss = vec(kM);  // mean: one scalar
  EXPECT_THAT(a.error(), HasSubstr("argument 'grad_loss': length 64 must be 1"));
  a.options.reduction = ops::LossReduction::none;  // none: one per row
  EXPECT_THAT(a.error(), Not(HasSubstr("grad_loss")));
  a = {};
  a.grad_x = tile(kM, kK + 8);
  EXPECT_THAT(a.error(), HasSubstr("argument 'grad_x'"));
  a = {};
  a.grad_x = tile(kM, kK, DType::f16);  // x's type or f32
  EXPECT_THAT(a.error(), HasSubstr("argument 'grad_x': dtype f16 must be x's (bf16) or f32"));
  a = {};
  a.grad_w = tile(kV, kK, DType::f16);
  EXPECT_THAT(a.error(), HasSubstr("argument 'grad_w': dtype f16 must be x's (bf16) or f32"));
  a = {};
  a.grad_w = tile(kV - 1, kK);
  EXPECT_THAT(a.error(), HasSubstr("argument 'grad_w'"));
}

TEST(CrossEntropyBackwardValidation, OptionRules) {
  Arguments a;
  a.options.label_smoothing = 1.0f;
  EXPECT_THAT(a.error(), HasSubstr("argument 'options.label_smoothing': is 1 but must be in [0, 1)"));
  a = {};
  a.options.softcap = -1.0f;
  EXPECT_THAT(a.error(), HasSubstr("argument 'options.softcap'"));
  a = {};
  a.options.row_scale = vec(kM - 1);
  EXPECT_THAT(a.error(), HasSubstr("argument 'options.row_scale': length 63 must be 64"));
  a = {};
  a.options.logits = tile(kM, kV);
  EXPECT_THAT(a.error(), HasSubstr("argument 'options.logits': is set, but the backward stores no logits"));
  a = {};
  a.backward.row_dots = tile(kM, 7, DType::f32);  // ceil(1000 / 128) = 8
  EXPECT_THAT(a.error(), HasSubstr("argument 'backward.row_dots'"));
  a = {};
  a.backward.chunk_columns = 100;
  EXPECT_THAT(a.error(), HasSubstr("argument 'backward.chunk_columns': is 100 but must be 0 (chosen) or a positive "
                                   "multiple of 128"));
  a = {};
  a.bytes -= 4;
  EXPECT_THAT(a.error(), HasSubstr("argument 'workspace': holds"));
  a = {};
  EXPECT_THAT(ops::try_gemm_cross_entropy_backward(a.x, a.w, a.targets, a.lse, a.grad_loss, a.grad_x, a.grad_w,
                                                   memory + 8, a.bytes)
                  .message(),
              HasSubstr("argument 'workspace': must be 16-byte aligned"));
}

TEST(CrossEntropyBackwardValidation, ValidArgumentsReachTheDeviceCheck) {
  if (hopper_available()) GTEST_SKIP() << "a Hopper GPU is present: host memory would be launched on";
  Arguments a;
  a.grad_x = tile(kM, kK, DType::f32);
  a.grad_w = tile(kV, kK, DType::f32);
  a.backward.row_dots = tile(kM, 8, DType::f32);
  a.backward.chunk_columns = 256;
  a.bytes = ops::cross_entropy_backward_workspace_bytes(kM, kV, kK, a.backward);
  const Status s = a.run();
  EXPECT_EQ(s.code(), StatusCode::unsupported);
  EXPECT_THAT(s.message(), Not(HasSubstr("argument")));
}

// Stored logits (backward.logits): M x V of x's type, grad_logits the same or a buffer apart, no chunk
// width, no row_dots with a soft-cap.
TEST(CrossEntropyBackwardValidation, StoredLogitsRules) {
  const TensorView logits = tile(kM, kV);
  const TensorView apart = TensorView::matrix(memory + (512 << 10), DType::bf16, kM, kV);
  const auto stored = [&](TensorView in, TensorView out) {
    Arguments a;
    a.backward.logits = in;
    a.backward.grad_logits = out;
    a.bytes = ops::cross_entropy_backward_workspace_bytes(kM, kV, kK, a.backward);
    return a;
  };
  Arguments a = stored(tile(kM, kV - 8), logits);
  EXPECT_THAT(a.error(), HasSubstr("argument 'backward.logits'"));
  a = stored(tile(kM, kV, DType::f16), logits);
  EXPECT_THAT(a.error(), HasSubstr("argument 'backward.logits': dtype f16 must be bf16"));
  a = stored(logits, {});
  EXPECT_THAT(a.error(), HasSubstr("argument 'backward.grad_logits'"));
  a = stored(logits, tile(kM - 1, kV));
  EXPECT_THAT(a.error(), HasSubstr("argument 'backward.grad_logits'"));
  // Half a row further on: overlapping without being in place.
  a = stored(logits, TensorView::matrix(memory + 1024, DType::bf16, kM, kV));
  EXPECT_THAT(a.error(), HasSubstr("argument 'backward.grad_logits': overlaps backward.logits without being it"));
  a = stored(logits, logits);
  a.backward.chunk_columns = 256;
  EXPECT_THAT(a.error(), HasSubstr("argument 'backward.chunk_columns': is 256 but must be 0 with stored logits"));
  a = stored(logits, logits);
  a.options.softcap = 30.0f;
  a.backward.row_dots = tile(kM, 8, DType::f32);
  EXPECT_THAT(a.error(), HasSubstr("argument 'backward.row_dots': cannot be computed from soft-capped stored logits"));
  a = {};
  a.backward.grad_logits = logits;
  EXPECT_THAT(a.error(), HasSubstr("argument 'backward.grad_logits': is set without backward.logits"));
  // The workspace: the row factors alone (16 bytes a row, rounded up to 256).
  EXPECT_EQ(ops::cross_entropy_backward_workspace_bytes(kM, kV, kK, {.logits = logits, .grad_logits = logits}),
            std::size_t(kM * 16 + 255) / 256 * 256);
  a = stored(logits, logits);
  a.bytes -= 4;
  EXPECT_THAT(a.error(), HasSubstr("argument 'workspace': holds"));
  // Valid, in place or apart, with a soft-cap (no row_dots) or a row scale and row_dots: only the device is left.
  if (!hopper_available()) {
    for (const TensorView& out : {logits, apart}) {
      a = stored(logits, out);
      a.options.row_scale = vec(kM);
      a.backward.row_dots = tile(kM, 8, DType::f32);
      EXPECT_EQ(a.run().code(), StatusCode::unsupported) << a.error();
      a = stored(logits, out);
      a.options.softcap = 30.0f;
      EXPECT_EQ(a.run().code(), StatusCode::unsupported) << a.error();
    }
  }
}

TEST(CrossEntropyBackwardValidation, ChunkWidthAndWorkspace) {
  // T = 8192, H = 2048, V = 128256: 8192-column chunks (128 MiB of dZ) beside the 64 MiB sum of dX.
  EXPECT_EQ(ops::cross_entropy_backward_chunk_columns(8192, 128256, 2048), 8192);
  EXPECT_LE(ops::cross_entropy_backward_workspace_bytes(8192, 128256, 2048), std::size_t(193) << 20);
  // A small vocabulary is one chunk (V rounded up to 128): no running sum of dX.
  EXPECT_EQ(ops::cross_entropy_backward_chunk_columns(64, 1000, 32), 1024);
  EXPECT_LT(ops::cross_entropy_backward_workspace_bytes(64, 1000, 32), std::size_t(64 * 1024 * 2 + 4096));
  // Many tokens: never below 1024 columns.
  EXPECT_EQ(ops::cross_entropy_backward_chunk_columns(int64_t(1) << 20, 128256, 4096), 1024);
  // More chunks: the running sum joins the workspace, its rows padded to 16 bytes (K = 30: 32 floats).
  EXPECT_GE(ops::cross_entropy_backward_workspace_bytes(64, 1000, 32, {.row_dots = {}, .chunk_columns = 256}),
            std::size_t(64 * 256 * 2 + 64 * 32 * 4));
  EXPECT_GE(ops::cross_entropy_backward_workspace_bytes(64, 1000, 30, {.row_dots = {}, .chunk_columns = 256}),
            std::size_t(64 * 256 * 2 + 64 * 32 * 4));
  EXPECT_THROW((void)ops::cross_entropy_backward_workspace_bytes(0, 1000, 32), InvalidArgument);
  EXPECT_THROW((void)ops::cross_entropy_backward_workspace_bytes(64, 1000, 32, {.row_dots = {}, .chunk_columns = -128}),
               InvalidArgument);
}

TEST(CrossEntropyBackwardValidation, CAbi) {
  std::size_t bytes = 1;
  EXPECT_EQ(coda_cross_entropy_backward_workspace_bytes(64, 0, 32, 0, &bytes), CODA_INVALID_ARGUMENT);
  EXPECT_EQ(bytes, 0u);
  EXPECT_STREQ(coda_last_error(),
               "coda_cross_entropy_backward_workspace_bytes: argument 'vocab': the vocabulary is 0 but must be at "
               "least 1");
  EXPECT_EQ(coda_cross_entropy_backward_workspace_bytes(64, 1000, 32, 0, nullptr), CODA_INVALID_ARGUMENT);
  EXPECT_THAT(coda_last_error(), HasSubstr("argument 'bytes': is a null pointer"));
  ASSERT_EQ(coda_cross_entropy_backward_workspace_bytes(kM, kV, kK, 0, &bytes), CODA_OK);
  EXPECT_EQ(bytes, ops::cross_entropy_backward_workspace_bytes(kM, kV, kK));

  auto [x, w, targets, lse, grad_loss, grad_x, grad_w] = CTensors{};
  EXPECT_EQ(coda_gemm_cross_entropy_backward(&x, &w, &targets, &lse, nullptr, &grad_x, &grad_w, nullptr, nullptr,
                                             nullptr, 0, memory, bytes, nullptr),
            CODA_INVALID_ARGUMENT);
  EXPECT_THAT(coda_last_error(), HasSubstr("coda_gemm_cross_entropy_backward: argument 'grad_loss'"));
  coda_cross_entropy_options options = {-100, 0.0f, 0.0f, 0.0f, static_cast<coda_loss_reduction>(9)};
  EXPECT_EQ(coda_gemm_cross_entropy_backward(&x, &w, &targets, &lse, &grad_loss, &grad_x, &grad_w, &options, nullptr,
                                             nullptr, 0, memory, bytes, nullptr),
            CODA_INVALID_ARGUMENT);
  EXPECT_THAT(coda_last_error(), HasSubstr("argument 'options.reduction'"));
  EXPECT_EQ(coda_gemm_cross_entropy_backward(&x, &w, &targets, &lse, &grad_loss, &grad_x, &grad_w, nullptr, nullptr,
                                             nullptr, 200, memory, bytes, nullptr),
            CODA_INVALID_ARGUMENT);
  EXPECT_THAT(coda_last_error(), HasSubstr("coda_gemm_cross_entropy_backward: argument 'chunk_columns'"));
  coda_tensor row_dots = {memory, CODA_F32, 2, {kM, 7}, {8, 1}};  // ceil(1000 / 128) = 8 partials a row
  EXPECT_EQ(coda_gemm_cross_entropy_backward(&x, &w, &targets, &lse, &grad_loss, &grad_x, &grad_w, nullptr, nullptr,
                                             &row_dots, 0, memory, bytes, nullptr),
            CODA_INVALID_ARGUMENT);
  EXPECT_THAT(coda_last_error(), HasSubstr("coda_gemm_cross_entropy_backward: argument 'row_dots'"));
  EXPECT_EQ(coda_cross_entropy_backward_workspace_bytes(kM, kV, kK, 100, &bytes), CODA_INVALID_ARGUMENT);
  EXPECT_THAT(coda_last_error(), HasSubstr("argument 'chunk_columns'"));
}

TEST(CrossEntropyBackwardValidation, CAbiFromLogits) {
  std::size_t bytes = 1;
  EXPECT_EQ(coda_cross_entropy_backward_from_logits_workspace_bytes(0, kV, kK, &bytes), CODA_INVALID_ARGUMENT);
  EXPECT_EQ(bytes, 0u);
  EXPECT_THAT(coda_last_error(), HasSubstr("coda_cross_entropy_backward_from_logits_workspace_bytes: argument 'm'"));
  EXPECT_EQ(coda_cross_entropy_backward_from_logits_workspace_bytes(kM, kV, kK, nullptr), CODA_INVALID_ARGUMENT);
  EXPECT_THAT(coda_last_error(), HasSubstr("argument 'bytes': is a null pointer"));
  ASSERT_EQ(coda_cross_entropy_backward_from_logits_workspace_bytes(kM, kV, kK, &bytes), CODA_OK);
  EXPECT_EQ(bytes, std::size_t(kM * 16 + 255) / 256 * 256);

  auto [x, w, targets, lse, grad_loss, grad_x, grad_w] = CTensors{};
  coda_tensor logits = {memory, CODA_BF16, 2, {kM, kV}, {kV, 1}};
  coda_tensor narrow = {memory, CODA_BF16, 2, {kM, kV - 8}, {kV, 1}};
  const auto call = [&](const coda_tensor* in, const coda_tensor* out, const coda_cross_entropy_options* o,
                        const coda_tensor* row_dots) {
    return coda_gemm_cross_entropy_backward_from_logits(&x, &w, &targets, &lse, &grad_loss, in, out, &grad_x, &grad_w,
                                                        o, nullptr, row_dots, memory, bytes, nullptr);
  };
  EXPECT_EQ(call(nullptr, &logits, nullptr, nullptr), CODA_INVALID_ARGUMENT);
  EXPECT_THAT(coda_last_error(), HasSubstr("coda_gemm_cross_entropy_backward_from_logits: argument 'logits'"));
  EXPECT_EQ(call(&logits, &narrow, nullptr, nullptr), CODA_INVALID_ARGUMENT);
  EXPECT_THAT(coda_last_error(), HasSubstr("argument 'grad_logits'"));
  const coda_cross_entropy_options capped = {-100, 0.0f, 0.0f, 30.0f, CODA_REDUCTION_MEAN};
  coda_tensor row_dots = {memory, CODA_F32, 2, {kM, 8}, {8, 1}};
  EXPECT_EQ(call(&logits, &logits, &capped, &row_dots), CODA_INVALID_ARGUMENT);
  EXPECT_THAT(coda_last_error(), HasSubstr("argument 'row_dots': cannot be computed from soft-capped stored logits"));
  if (!hopper_available()) {
    EXPECT_EQ(call(&logits, &logits, &capped, nullptr), CODA_UNSUPPORTED);
    EXPECT_THAT(coda_last_error(), Not(HasSubstr("argument")));
  }
}

// skip_below in [0, 1), not with stored logits; the workspace grows by the row maxima and the masks.
TEST(CrossEntropyBackwardValidation, SkipRules) {
  for (const float bad : {-0.5f, 1.0f, std::nanf("")}) {
    Arguments a;
    a.backward.skip_below = bad;
    EXPECT_THAT(a.error(), HasSubstr("argument 'backward.skip_below': is "));
    EXPECT_THAT(a.error(), HasSubstr("but must lie in [0, 1) (0: no skipping)"));
    EXPECT_THROW((void)ops::cross_entropy_backward_workspace_bytes(kM, kV, kK, a.backward), InvalidArgument);
  }
  Arguments a;
  a.backward.logits = tile(kM, kV);
  a.backward.grad_logits = a.backward.logits;
  a.backward.skip_below = 0x1p-12f;
  a.bytes = 1 << 20;
  EXPECT_THAT(a.error(), HasSubstr("argument 'backward.skip_below': is set with backward.logits"));
  // 8192 tokens, 8192-column chunks: 2 MiB of row maxima and a few KB of masks beside the rest.
  const std::size_t plain = ops::cross_entropy_backward_workspace_bytes(8192, 128256, 2048);
  const std::size_t skipping =
      ops::cross_entropy_backward_workspace_bytes(8192, 128256, 2048, {.row_dots = {}, .skip_below = 0x1p-12f});
  EXPECT_GE(skipping, plain + (std::size_t(2) << 20));
  EXPECT_LE(skipping, plain + (std::size_t(2) << 20) + (64 << 10));
  if (!hopper_available()) {  // valid arguments reach the device check
    Arguments valid;
    valid.backward.skip_below = 0x1p-12f;
    valid.bytes = ops::cross_entropy_backward_workspace_bytes(kM, kV, kK, valid.backward);
    EXPECT_EQ(valid.run().code(), StatusCode::unsupported);
  }
}

TEST(CrossEntropyBackwardValidation, CAbiSkipping) {
  std::size_t bytes = 1;
  EXPECT_EQ(coda_cross_entropy_backward_skipping_workspace_bytes(kM, kV, kK, 0, -1.0f, &bytes), CODA_INVALID_ARGUMENT);
  EXPECT_EQ(bytes, 0u);
  EXPECT_THAT(coda_last_error(),
              HasSubstr("coda_cross_entropy_backward_skipping_workspace_bytes: argument 'skip_below': is -1"));
  ASSERT_EQ(coda_cross_entropy_backward_skipping_workspace_bytes(kM, kV, kK, 0, 0x1p-12f, &bytes), CODA_OK);
  EXPECT_EQ(bytes, ops::cross_entropy_backward_workspace_bytes(kM, kV, kK, {.row_dots = {}, .skip_below = 0x1p-12f}));
  auto [x, w, targets, lse, grad_loss, grad_x, grad_w] = CTensors{};
  const auto call = [&](float skip, int64_t chunk) {
    return coda_gemm_cross_entropy_backward_skipping(&x, &w, &targets, &lse, &grad_loss, &grad_x, &grad_w, nullptr,
                                                     nullptr, nullptr, chunk, skip, memory, bytes, nullptr);
  };
  EXPECT_EQ(call(1.5f, 0), CODA_INVALID_ARGUMENT);
  EXPECT_THAT(coda_last_error(), HasSubstr("coda_gemm_cross_entropy_backward_skipping: argument 'skip_below': is 1.5"));
  EXPECT_EQ(call(0x1p-12f, 100), CODA_INVALID_ARGUMENT);
  EXPECT_THAT(coda_last_error(), HasSubstr("argument 'chunk_columns'"));
  if (!hopper_available()) {
    EXPECT_EQ(call(0x1p-12f, 0), CODA_UNSUPPORTED);
    EXPECT_THAT(coda_last_error(), Not(HasSubstr("argument")));
  }
}

}  // namespace
}  // namespace coda

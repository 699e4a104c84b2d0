// The router's argument rules through the C++ API and the C ABI. Validation runs before the device
// is touched, so these run in CI: each feeds one bad argument and checks the message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "coda/coda.h"
#include "coda/ops/router.hpp"
#include "ops/host_views.hpp"

namespace coda {
namespace {

using ::testing::HasSubstr;

using test::memory;
using test::tile;
using test::vec;

constexpr int64_t kM = 100, kE = 64, kK = 32;

struct Arguments {
  TensorView x = tile(kM, kK), w = tile(kE, kK), weights = tile(kM, 8, DType::f32), ids = tile(kM, 8, DType::i32);
  ops::RouterOptions options = [] {
    ops::RouterOptions o;
    o.mode = ops::RoutingMode::topk_softmax;
    o.k = 8;
    return o;
  }();

  std::string error() const {
    return ops::try_gemm_router(x, w, weights, ids, memory, sizeof(memory), nullptr, options).message();
  }
};

TEST(RouterValidation, OperandRules) {
  Arguments a;
  a.w = tile(kE, kK + 8);
  EXPECT_THAT(a.error(), HasSubstr("coda::ops::gemm_router: argument 'w'"));
  a = {};
  a.w = tile(513, kK);
  EXPECT_THAT(a.error(), HasSubstr("argument 'w': holds 513 experts (rows) but the router takes 1 to 512"));
  a = {};
  a.x = tile(kM, kK, DType::f32);
  EXPECT_THAT(a.error(), HasSubstr("argument 'x'"));
}

TEST(RouterValidation, OutputRules) {
  Arguments a;
  a.weights = tile(kM, 8, DType::bf16);
  EXPECT_THAT(a.error(), HasSubstr("argument 'weights'"));
  a = {};
  a.weights = tile(kM - 1, 8, DType::f32);
  EXPECT_THAT(a.error(), HasSubstr("argument 'weights'"));
  a = {};
  a.ids = tile(kM, 8, DType::f32);
  EXPECT_THAT(a.error(), HasSubstr("argument 'ids': dtype f32 is not supported here"));
  a = {};
  a.ids = TensorView::matrix(memory, DType::i32, kM, 8, 12);
  EXPECT_THAT(a.error(), HasSubstr("argument 'ids': must be contiguous (row stride k)"));
  a = {};
  a.options.token_expert_indices = tile(kM, 7, DType::i32);
  EXPECT_THAT(a.error(), HasSubstr("argument 'options.token_expert_indices'"));
  a = {};
  a.options.expert_counts = vec(kE - 1, DType::i32);
  EXPECT_THAT(a.error(), HasSubstr("argument 'options.expert_counts': length 63 must be 64"));
  a = {};
  a.options.scores = tile(kM, kE, DType::bf16);
  EXPECT_THAT(a.error(), HasSubstr("argument 'options.scores'"));
}

TEST(RouterValidation, OptionRules) {
  Arguments a;
  a.options.k = 0;
  EXPECT_THAT(a.error(), HasSubstr("argument 'options.k': is 0 but must lie in [1, min(E, 32)] with E = 64"));
  a.options.k = 33;
  EXPECT_THAT(a.error(), HasSubstr("argument 'options.k': is 33"));
  a = {};
  a.w = tile(4, kK);
  EXPECT_THAT(a.error(), HasSubstr("argument 'options.k': is 8 but must lie in [1, min(E, 32)] with E = 4"));
  a = {};
  a.options.expert_bias = vec(kE);
  EXPECT_THAT(a.error(), HasSubstr("argument 'options.expert_bias': is used only by mode sigmoid_bias"));
  a = {};
  a.options.n_group = 8;
  EXPECT_THAT(a.error(), HasSubstr("argument 'options.n_group': is 8 but grouped selection exists only in mode sigmoid_bias"));
  a.options.mode = ops::RoutingMode::sigmoid_bias;
  a.options.n_group = 3;
  EXPECT_THAT(a.error(), HasSubstr("argument 'options.n_group': is 3 but must be >= 1 and divide the number of experts (64)"));
  a.options.n_group = 64;
  EXPECT_THAT(a.error(), HasSubstr("gives groups of 1 expert(s), but a group scores its two best experts"));
  a.options.n_group = 8;
  a.options.topk_group = 9;
  EXPECT_THAT(a.error(), HasSubstr("argument 'options.topk_group': is 9 but must lie in [1, n_group = 8]"));
  a.options.topk_group = 1;
  a.options.k = 9;
  EXPECT_THAT(a.error(), HasSubstr("argument 'options.k': is 9 but the 1 kept group(s) hold only 8 experts"));
  a = {};
  a.options.mode = ops::RoutingMode::sigmoid_bias;
  a.options.expert_bias = vec(kE - 1);
  EXPECT_THAT(a.error(), HasSubstr("argument 'options.expert_bias': length 63 must be 64"));
  a = {};
  a.options.routed_scaling_factor = 0.0f;
  EXPECT_THAT(a.error(), HasSubstr("argument 'options.routed_scaling_factor': is 0 but must be finite and > 0"));
  a = {};
  a.options.mode = ops::RoutingMode(7);
  EXPECT_THAT(a.error(), HasSubstr("argument 'options.mode': is 7, not a RoutingMode"));
}

// A decode batch (M <= 16): its workspace needs no GPU to size (the GEMM paths ask the GEMM's plan).
constexpr int64_t kDecodeM = 8;

TEST(RouterValidation, WorkspaceRules) {
  Arguments a;
  a.x = tile(kDecodeM, kK);
  a.weights = tile(kDecodeM, 8, DType::f32);
  a.ids = tile(kDecodeM, 8, DType::i32);
  const std::size_t needed = ops::router_workspace_bytes(a.x, a.w, a.options);
  EXPECT_GT(needed, 0u);
  EXPECT_THAT(ops::try_gemm_router(a.x, a.w, a.weights, a.ids, memory, needed - 1, nullptr, a.options).message(),
              HasSubstr("argument 'workspace': holds"));
  EXPECT_THAT(ops::try_gemm_router(a.x, a.w, a.weights, a.ids, nullptr, needed, nullptr, a.options).message(),
              HasSubstr("argument 'workspace'"));
  EXPECT_THAT(ops::try_gemm_router(a.x, a.w, a.weights, a.ids, memory + 8, needed, nullptr, a.options).message(),
              HasSubstr("argument 'workspace': must be 16-byte aligned"));
}

// The C ABI: what only C can get wrong, and the C++ rules reaching C under the C function's name.
struct CRouterCall {
  coda_tensor x{memory, CODA_BF16, 2, {kM, kK}, {kK, 1}};
  coda_tensor w{memory, CODA_BF16, 2, {kE, kK}, {kK, 1}};
  coda_tensor weights{memory, CODA_F32, 2, {kM, 8}, {8, 1}};
  coda_tensor ids{memory, CODA_I32, 2, {kM, 8}, {8, 1}};
  coda_router_options options{CODA_ROUTING_TOPK_SOFTMAX, 8, 1, nullptr, 1, 1, 1.0f, 0};
  bool null_options = false;

  std::string error(coda_status expected = CODA_INVALID_ARGUMENT) const {
    EXPECT_EQ(coda_gemm_router(&x, &w, &weights, &ids, null_options ? nullptr : &options, nullptr, nullptr, nullptr, memory, sizeof(memory),
                               nullptr),
              expected)
        << coda_last_error();
    return coda_last_error();
  }
};

TEST(RouterValidation, CAbi) {
  CRouterCall c;
  c.null_options = true;
  EXPECT_EQ(c.error(), "coda_gemm_router: argument 'options': is a null pointer");
  c = {};
  c.options.mode = static_cast<coda_routing_mode>(5);
  EXPECT_THAT(c.error(), HasSubstr("coda_gemm_router: argument 'options.mode': code 5 is not a coda_routing_mode"));
  c = {};
  c.options.k = 40;
  EXPECT_THAT(c.error(), HasSubstr("coda_gemm_router: argument 'options.k': is 40"));
  c = {};
  c.ids.dtype = CODA_F32;
  EXPECT_THAT(c.error(CODA_UNSUPPORTED), HasSubstr("coda_gemm_router: argument 'ids': dtype f32 is not supported here"));
  c = {};
  c.options.mode = CODA_ROUTING_SIGMOID_BIAS;
  c.options.n_group = 5;
  EXPECT_THAT(c.error(), HasSubstr("argument 'options.n_group': is 5 but must be >= 1 and divide"));

  c = {};
  c.x.shape[0] = kDecodeM;
  c.weights.shape[0] = c.ids.shape[0] = kDecodeM;
  EXPECT_EQ(coda_gemm_router(&c.x, &c.w, &c.weights, &c.ids, &c.options, nullptr, nullptr, nullptr, memory + 4,
                             sizeof(memory) - 4, nullptr),
            CODA_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(coda_last_error()), "coda_gemm_router: argument 'workspace': must be 16-byte aligned");

  size_t bytes = 1;
  EXPECT_EQ(coda_router_workspace_bytes(&c.x, &c.w, nullptr, nullptr, &bytes), CODA_INVALID_ARGUMENT);
  EXPECT_EQ(bytes, 0u);
  EXPECT_EQ(std::string(coda_last_error()), "coda_router_workspace_bytes: argument 'options': is a null pointer");
  CRouterCall ok;
  ok.x.shape[0] = kDecodeM;
  EXPECT_EQ(coda_router_workspace_bytes(&ok.x, &ok.w, &ok.options, nullptr, &bytes), CODA_OK) << coda_last_error();
  Arguments decode;
  decode.x = tile(kDecodeM, kK);
  EXPECT_EQ(bytes, ops::router_workspace_bytes(decode.x, decode.w, decode.options));
  EXPECT_GT(bytes, 0u);
}

}  // namespace
}  // namespace coda

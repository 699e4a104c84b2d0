// The blocks' argument rules (coda/blocks/layer.hpp, gemm_rmsnorm_gemm.hpp): each bad argument is
// named by the block, not by an op inside it; valid arguments reach the device check. Runs in CI (no launch: host
// memory stands in for device memory).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "coda/blocks/gemm_rmsnorm_gemm.hpp"
#include "coda/blocks/layer.hpp"
#include "coda/core/device.hpp"
#include "ops/host_views.hpp"

namespace coda {
namespace {

using test::memory;
using test::tile;
using test::vec;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr int64_t kTokens = 16, kHidden = 64, kFfn = 96, kHeads = 6, kHeadDim = 16, kQkv = kHeads * kHeadDim;

blocks::LayerWeights weights() {
  return {.wo = tile(kHidden, kHidden),
          .norm1 = vec(kHidden),
          .w_gate_up = tile(2 * kFfn, kHidden),
          .w_down = tile(kHidden, kFfn),
          .norm2 = vec(kHidden),
          .w_qkv = tile(kQkv, kHidden),
          .cos = tile(32, kHeadDim / 2, DType::f32),
          .sin = tile(32, kHeadDim / 2, DType::f32),
          .head_dim = int(kHeadDim),
          .rotated_heads = 4,
          .eps = 1e-6f};
}

blocks::LayerSaved saved() {
  return {tile(kTokens, kHidden), vec(kTokens), tile(kTokens, 2 * kFfn), tile(kTokens, kFfn), vec(kTokens)};
}

blocks::LayerGradients gradients() {
  return {tile(kTokens, kHidden),  tile(kTokens, kHidden), tile(kHidden, kHidden), vec(kHidden),
          tile(2 * kFfn, kHidden), tile(kHidden, kFfn),    vec(kHidden),           tile(kQkv, kHidden, DType::f32)};
}

Status forward(const blocks::LayerWeights& w, const blocks::LayerSaved& s, std::size_t bytes) {
  return blocks::try_layer_forward(w, tile(kTokens, kHidden), tile(kTokens, kHidden), vec(kTokens, DType::i32),
                                   tile(kTokens, kHidden), tile(kTokens, kQkv), s, memory, bytes);
}

Status backward(const blocks::LayerWeights& w, const blocks::LayerGradients& g, std::size_t bytes,
                const TensorView& grad_qkv = tile(kTokens, kQkv)) {
  return blocks::try_layer_backward(w, tile(kTokens, kHidden), vec(kTokens, DType::i32), tile(kTokens, kHidden),
                                    tile(kTokens, kQkv), saved(), tile(kTokens, kHidden), grad_qkv, g, memory, bytes);
}

TEST(LayerValidation, WorkspaceBytes) {
  const std::size_t bytes = blocks::layer_workspace_bytes(weights(), kTokens);
  EXPECT_GT(bytes, std::size_t(kTokens * (kHidden + kFfn) * 2));
  EXPECT_LE(bytes, sizeof(memory));
  EXPECT_GT(blocks::layer_workspace_bytes(weights(), 4 * kTokens), bytes);
  try {
    (void)blocks::layer_workspace_bytes(weights(), 0);
    ADD_FAILURE() << "0 tokens accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), StartsWith("coda::blocks::layer_workspace_bytes: argument 'tokens'"));
  }
}

TEST(LayerValidation, ForwardRules) {
  const std::size_t bytes = blocks::layer_workspace_bytes(weights(), kTokens);
  blocks::LayerWeights w = weights();
  w.w_down = tile(kHidden, kFfn + 8);
  EXPECT_THAT(forward(w, saved(), bytes).message(),
              HasSubstr("coda::blocks::layer_forward: argument 'weights.w_gate_up': shape (192, 64) bf16"));
  w = weights();
  w.w_qkv = tile(kQkv - 4, kHidden);
  EXPECT_THAT(forward(w, saved(), bytes).message(), HasSubstr("the QKV width 92 must be multiples of 8"));
  w = weights();
  w.rotated_heads = 7;
  EXPECT_THAT(forward(w, saved(), bytes).message(),
              HasSubstr("argument 'weights.rotated_heads': is 7 but must be in [0, 6]"));
  w = weights();
  w.eps = -1.0f;
  EXPECT_THAT(forward(w, saved(), bytes).message(), HasSubstr("argument 'weights.eps'"));
  w = weights();
  w.norm2 = vec(kHidden, DType::i32);
  EXPECT_THAT(forward(w, saved(), bytes).message(), HasSubstr("argument 'weights.norm2'"));
  blocks::LayerSaved s = saved();
  s.pre_activation = tile(kTokens, kFfn);
  EXPECT_THAT(forward(weights(), s, bytes).message(), HasSubstr("argument 'saved.pre_activation'"));
  s = saved();
  s.activation = tile(kTokens + 1, kFfn);
  EXPECT_THAT(forward(weights(), s, bytes).message(), HasSubstr("argument 'saved.activation'"));
  s = saved();
  s.rstd2 = vec(kTokens, DType::bf16);
  EXPECT_THAT(forward(weights(), s, bytes).message(), HasSubstr("argument 'saved.rstd2'"));
  EXPECT_THAT(forward(weights(), saved(), bytes - 1).message(), HasSubstr("argument 'workspace': holds"));
  const Status valid = forward(weights(), saved(), bytes);
  if (!hopper_available()) {
    EXPECT_EQ(valid.code(), StatusCode::unsupported);
    EXPECT_THAT(valid.message(), StartsWith("coda::blocks::layer_forward: no CUDA device"));
  }
}

TEST(LayerValidation, BackwardRules) {
  const std::size_t bytes = blocks::layer_workspace_bytes(weights(), kTokens);
  blocks::LayerGradients g = gradients();
  g.w_down = tile(kHidden, kFfn, DType::f16);
  EXPECT_THAT(backward(weights(), g, bytes).message(),
              HasSubstr("coda::blocks::layer_backward: argument 'grads.w_down': dtype f16 is not supported here"));
  g = gradients();
  g.norm1 = vec(kHidden - 1);
  EXPECT_THAT(backward(weights(), g, bytes).message(), HasSubstr("argument 'grads.norm1': length 63 must be 64"));
  g = gradients();
  g.attn_out = {};
  EXPECT_THAT(backward(weights(), g, bytes).message(), HasSubstr("argument 'grads.attn_out': is a null pointer"));
  EXPECT_THAT(backward(weights(), gradients(), bytes, tile(kTokens, kHidden)).message(),
              HasSubstr("argument 'grad_qkv': shape (16, 64) bf16"));
  const Status valid = backward(weights(), gradients(), bytes);
  if (!hopper_available()) {
    EXPECT_EQ(valid.code(), StatusCode::unsupported);
    EXPECT_THAT(valid.message(), StartsWith("coda::blocks::layer_backward: no CUDA device"));
  }
}

// ---- the pair: h = r + x W1^T, z = RMSNorm(h) W2^T, K = 48, H = 64, N2 = 80.
constexpr int64_t kK = 48, kN2 = 80;

blocks::NormPairWeights pair_weights() { return {tile(kHidden, kK), vec(kHidden), tile(kN2, kHidden), 1e-6f}; }
blocks::NormPairSaved pair_saved() { return {tile(kTokens, kHidden), vec(kTokens)}; }
blocks::NormPairGradients pair_gradients() {
  return {tile(kTokens, kK), tile(kTokens, kHidden), tile(kHidden, kK), vec(kHidden), tile(kN2, kHidden, DType::f32)};
}

Status pair_forward(const blocks::NormPairWeights& w, const blocks::NormPairSaved& saved, std::size_t bytes,
                    const TensorView& z = tile(kTokens, kN2)) {
  return blocks::try_gemm_rmsnorm_gemm_forward(w, tile(kTokens, kK), tile(kTokens, kHidden), z, saved, memory, bytes);
}

Status pair_backward(const blocks::NormPairGradients& g, std::size_t bytes, const TensorView& grad_h = {}) {
  return blocks::try_gemm_rmsnorm_gemm_backward(pair_weights(), tile(kTokens, kK), tile(kTokens, kN2), pair_saved(),
                                                tile(kTokens, kN2), grad_h, g, memory, bytes);
}

TEST(NormPairValidation, ForwardRules) {
  const std::size_t bytes = blocks::gemm_rmsnorm_gemm_workspace_bytes(pair_weights(), kTokens);
  EXPECT_GT(bytes, 0u);
  EXPECT_THAT(blocks::try_gemm_rmsnorm_gemm_forward(pair_weights(), tile(kTokens, kK), tile(kTokens, kHidden),
                                                    tile(kTokens, kN2), pair_saved(), nullptr, bytes)
                  .message(),
              HasSubstr("argument 'workspace': is a null pointer"));
  blocks::NormPairWeights w = pair_weights();
  w.w2 = tile(kN2, kHidden + 8);
  EXPECT_THAT(pair_forward(w, pair_saved(), bytes).message(),
              HasSubstr("coda::blocks::gemm_rmsnorm_gemm_forward: argument 'weights.w2'"));
  w = pair_weights();
  w.norm = vec(kHidden + 1);
  EXPECT_THAT(pair_forward(w, pair_saved(), bytes).message(), HasSubstr("argument 'weights.norm'"));
  w = pair_weights();
  w.eps = std::nanf("");
  EXPECT_THAT(pair_forward(w, pair_saved(), bytes).message(), HasSubstr("argument 'weights.eps'"));
  blocks::NormPairSaved s = pair_saved();
  s.rstd = vec(kTokens, DType::bf16);
  EXPECT_THAT(pair_forward(pair_weights(), s, bytes).message(), HasSubstr("argument 'saved.rstd'"));
  EXPECT_THAT(pair_forward(pair_weights(), pair_saved(), bytes, tile(kTokens, kN2 - 8)).message(),
              HasSubstr("argument 'z'"));
  EXPECT_THAT(pair_forward(pair_weights(), pair_saved(), bytes - 1).message(),
              HasSubstr("argument 'workspace': holds"));
  EXPECT_THAT((blocks::try_gemm_rmsnorm_gemm_forward(pair_weights(), {}, tile(kTokens, kHidden), tile(kTokens, kN2),
                                                     pair_saved(), memory, bytes))
                  .message(),
              HasSubstr("argument 'x'"));
  const Status valid = pair_forward(pair_weights(), pair_saved(), bytes);
  if (!hopper_available()) {
    EXPECT_EQ(valid.code(), StatusCode::unsupported);
    EXPECT_THAT(valid.message(), StartsWith("coda::blocks::gemm_rmsnorm_gemm_forward: no CUDA device"));
  }
}

TEST(NormPairValidation, BackwardRules) {
  const std::size_t bytes = blocks::gemm_rmsnorm_gemm_workspace_bytes(pair_weights(), kTokens);
  blocks::NormPairGradients g = pair_gradients();
  g.w1 = tile(kK, kHidden);
  EXPECT_THAT(pair_backward(g, bytes).message(),
              HasSubstr("coda::blocks::gemm_rmsnorm_gemm_backward: argument 'grads.w1'"));
  g = pair_gradients();
  g.norm = {};
  EXPECT_THAT(pair_backward(g, bytes).message(), HasSubstr("argument 'grads.norm'"));
  EXPECT_THAT(pair_backward(pair_gradients(), bytes, tile(kTokens, kHidden + 8)).message(),
              HasSubstr("argument 'grad_h'"));
  for (const TensorView& grad_h : {TensorView{}, tile(kTokens, kHidden)}) {
    const Status valid = pair_backward(pair_gradients(), bytes, grad_h);
    if (!hopper_available()) {
      EXPECT_EQ(valid.code(), StatusCode::unsupported);
      EXPECT_THAT(valid.message(), StartsWith("coda::blocks::gemm_rmsnorm_gemm_backward: no CUDA device"));
    }
  }
}

}  // namespace
}  // namespace coda

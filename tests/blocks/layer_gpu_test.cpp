// The layer block on the GPU against the fp64 reference layer (reference/layer.hpp) computed from
// the same bf16 inputs and weights: T = 1, 7, 129 and 4095, every output and gradient, outputs
// poisoned, a garbage workspace, bitwise repeatability, and every gradient in f32 as well.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "coda/blocks/layer.hpp"
#include "coda/reference/layer.hpp"
#include "coda/reference/rope.hpp"
#include "support/device_tensor.hpp"

namespace coda::test {
namespace {

// bf16 roundings of every saved tensor and of each gradient on its way: the tolerance of the whole
// chain against fp64 (relative, over a whole tensor).
constexpr double kForwardTolerance = 1e-2;
constexpr double kGradientTolerance = 3e-2;

struct Sizes {
  int64_t tokens, hidden, ffn, heads, head_dim, rotated_heads;
};

reference::Vector values_of(const DeviceTensor& t) { return t.host.matrix().data; }

int64_t unwritten(const DeviceTensor& t) {
  int64_t count = 0;
  for (double v : t.host.matrix().data) count += std::isnan(v) ? 1 : 0;
  return count;
}

struct Fixture {
  explicit Fixture(const Sizes& s, DType weight_gradients)
      : s(s),
        wo(DType::bf16, s.hidden, s.hidden),
        norm1(DType::f32, 1, s.hidden),
        w_gate_up(DType::bf16, 2 * s.ffn, s.hidden),
        w_down(DType::bf16, s.hidden, s.ffn),
        norm2(DType::f32, 1, s.hidden),
        w_qkv(DType::bf16, s.heads * s.head_dim, s.hidden),
        cos(DType::f32, kMaxPosition, s.head_dim / 2),
        sin(DType::f32, kMaxPosition, s.head_dim / 2),
        attn_out(DType::bf16, s.tokens, s.hidden),
        residual(DType::bf16, s.tokens, s.hidden),
        positions(DType::i32, 1, s.tokens),
        h2(DType::bf16, s.tokens, s.hidden),
        qkv(DType::bf16, s.tokens, s.heads * s.head_dim),
        h1(DType::bf16, s.tokens, s.hidden),
        rstd1(DType::f32, 1, s.tokens),
        pre_activation(DType::bf16, s.tokens, 2 * s.ffn),
        activation(DType::bf16, s.tokens, s.ffn),
        rstd2(DType::f32, 1, s.tokens),
        grad_h2(DType::bf16, s.tokens, s.hidden),
        grad_qkv(DType::bf16, s.tokens, s.heads * s.head_dim),
        d_attn_out(DType::bf16, s.tokens, s.hidden),
        d_residual(DType::bf16, s.tokens, s.hidden),
        d_wo(weight_gradients, s.hidden, s.hidden),
        d_norm1(DType::f32, 1, s.hidden),
        d_w_gate_up(weight_gradients, 2 * s.ffn, s.hidden),
        d_w_down(weight_gradients, s.hidden, s.ffn),
        d_norm2(DType::f32, 1, s.hidden),
        d_w_qkv(weight_gradients, s.heads * s.head_dim, s.hidden) {
    const double scale = 1.0 / std::sqrt(double(s.hidden));
    wo.random(-scale, scale);
    w_gate_up.random(-scale, scale);
    w_down.random(-1.0 / std::sqrt(double(s.ffn)), 1.0 / std::sqrt(double(s.ffn)));
    w_qkv.random(-scale, scale);
    norm1.random(0.5, 1.5);
    norm2.random(0.5, 1.5);
    const reference::RopeCache cache = reference::rope_cache(kMaxPosition, s.head_dim);
    reference::store(cache.cos, cos.host.view);
    reference::store(cache.sin, sin.host.view);
    cos.upload();
    sin.upload();
    attn_out.random();
    residual.random(-2.0, 2.0);
    std::vector<int32_t> p(std::size_t(s.tokens));
    for (auto& v : p) v = int32_t(uniform_int(0, kMaxPosition - 1));
    std::memcpy(positions.host.bytes.data(), p.data(), p.size() * 4);
    positions.upload();
    grad_h2.random();
    grad_qkv.random();
    for (DeviceTensor* t : outputs()) t->poison();
  }

  static constexpr int64_t kMaxPosition = 512;

  std::vector<DeviceTensor*> outputs() {
    return {&h2,         &qkv,  &h1,      &rstd1,       &pre_activation, &activation, &rstd2,  &d_attn_out,
            &d_residual, &d_wo, &d_norm1, &d_w_gate_up, &d_w_down,       &d_norm2,    &d_w_qkv};
  }

  blocks::LayerWeights weights() const {
    return {wo.view(),    norm1.vector_view(), w_gate_up.view(), w_down.view(),   norm2.vector_view(),
            w_qkv.view(), cos.view(),          sin.view(),       int(s.head_dim), int(s.rotated_heads),
            1e-6f};
  }
  blocks::LayerSaved saved() const {
    return {h1.view(), rstd1.vector_view(), pre_activation.view(), activation.view(), rstd2.vector_view()};
  }
  blocks::LayerGradients gradients() const {
    return {d_attn_out.view(),  d_residual.view(), d_wo.view(),           d_norm1.vector_view(),
            d_w_gate_up.view(), d_w_down.view(),   d_norm2.vector_view(), d_w_qkv.view()};
  }

  void run(DeviceBuffer& workspace) {
    blocks::layer_forward(weights(), attn_out.view(), residual.view(), positions.vector_view(), h2.view(), qkv.view(),
                          saved(), workspace.get(), workspace.bytes());
    blocks::layer_backward(weights(), attn_out.view(), positions.vector_view(), h2.view(), qkv.view(), saved(),
                           grad_h2.view(), grad_qkv.view(), gradients(), workspace.get(), workspace.bytes());
    CODA_CUDA_CHECK(cudaDeviceSynchronize());
    for (DeviceTensor* t : outputs()) t->download();
  }

  reference::Layer reference_layer() const {
    reference::Layer l;
    l.wo = wo.host.matrix();
    l.norm1 = values_of(norm1);
    l.w_gate_up = w_gate_up.host.matrix();
    l.w_down = w_down.host.matrix();
    l.norm2 = values_of(norm2);
    l.w_qkv = w_qkv.host.matrix();
    l.head_dim = s.head_dim;
    l.rotated_heads = s.rotated_heads;
    l.cache = {cos.host.matrix(), sin.host.matrix()};
    l.eps = 1e-6;
    return l;
  }
  reference::LayerInputs reference_inputs() const {
    reference::LayerInputs in{attn_out.host.matrix(), residual.host.matrix(), {}};
    const reference::Vector p = values_of(positions);
    for (double v : p) in.positions.push_back(int32_t(v));
    return in;
  }

  Sizes s;
  DeviceTensor wo, norm1, w_gate_up, w_down, norm2, w_qkv, cos, sin;
  DeviceTensor attn_out, residual, positions;
  DeviceTensor h2, qkv, h1, rstd1, pre_activation, activation, rstd2;
  DeviceTensor grad_h2, grad_qkv;
  DeviceTensor d_attn_out, d_residual, d_wo, d_norm1, d_w_gate_up, d_w_down, d_norm2, d_w_qkv;
};

void expect_close(const char* what, const reference::Matrix& got, const reference::Matrix& want, double tolerance) {
  const double error = reference::relative_error(got, want);
  EXPECT_LT(error, tolerance) << what;
  ::testing::Test::RecordProperty(std::string("error ") + what, std::to_string(error));
}

TEST(LayerGpu, ForwardAndBackwardMatchTheReference) {
  CODA_REQUIRE_HOPPER();
  const Sizes sizes[] = {
      {1, 256, 512, 6, 64, 4}, {7, 256, 512, 6, 64, 4}, {129, 512, 1376, 12, 64, 8}, {4095, 256, 688, 6, 64, 4}};
  for (const Sizes& s : sizes)
    for (const DType weight_gradients : {DType::bf16, DType::f32}) {
      if (weight_gradients == DType::f32 && s.tokens != 129) continue;
      SCOPED_TRACE(::testing::Message() << "T=" << s.tokens << " H=" << s.hidden << " F=" << s.ffn << " heads "
                                        << s.heads << " x " << s.head_dim << ", weight gradients "
                                        << name(weight_gradients) << ", " << seed_note());
      Fixture f(s, weight_gradients);
      DeviceBuffer workspace(blocks::layer_workspace_bytes(f.weights(), s.tokens));
      workspace.garbage(11);
      f.run(workspace);
      for (DeviceTensor* t : f.outputs()) EXPECT_EQ(unwritten(*t), 0);

      const reference::Layer layer = f.reference_layer();
      const reference::LayerInputs in = f.reference_inputs();
      const reference::LayerForward want = reference::layer_forward(layer, in);
      expect_close("h1", f.h1.host.matrix(), want.h1, kForwardTolerance);
      expect_close("pre-activation", f.pre_activation.host.matrix(), want.pre_activation, kForwardTolerance);
      expect_close("activation", f.activation.host.matrix(), want.activation, kForwardTolerance);
      expect_close("h2", f.h2.host.matrix(), want.h2, kForwardTolerance);
      expect_close("qkv", f.qkv.host.matrix(), want.qkv, kForwardTolerance);
      EXPECT_LT(reference::relative_error(values_of(f.rstd1), want.rstd1), 1e-3);
      EXPECT_LT(reference::relative_error(values_of(f.rstd2), want.rstd2), 1e-2);

      const reference::LayerGradients g =
          reference::layer_backward(layer, in, want, f.grad_h2.host.matrix(), f.grad_qkv.host.matrix());
      expect_close("d attn_out", f.d_attn_out.host.matrix(), g.attn_out, kGradientTolerance);
      expect_close("dr", f.d_residual.host.matrix(), g.residual, kGradientTolerance);
      expect_close("dWo", f.d_wo.host.matrix(), g.wo, kGradientTolerance);
      expect_close("dWgu", f.d_w_gate_up.host.matrix(), g.w_gate_up, kGradientTolerance);
      expect_close("dWd", f.d_w_down.host.matrix(), g.w_down, kGradientTolerance);
      expect_close("dWqkv", f.d_w_qkv.host.matrix(), g.w_qkv, kGradientTolerance);
      EXPECT_LT(reference::relative_error(values_of(f.d_norm1), g.norm1), kGradientTolerance) << "dg1";
      EXPECT_LT(reference::relative_error(values_of(f.d_norm2), g.norm2), kGradientTolerance) << "dg2";

      // The same bits again, over new garbage in the workspace.
      std::vector<std::vector<unsigned char>> first;
      for (DeviceTensor* t : f.outputs()) first.push_back(t->host.bytes);
      workspace.garbage(12);
      f.run(workspace);
      for (std::size_t i = 0; i < first.size(); ++i)
        EXPECT_EQ(f.outputs()[i]->host.bytes, first[i]) << "output " << i << " changed between two runs";
    }
}

}  // namespace
}  // namespace coda::test

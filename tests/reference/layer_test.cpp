// The layer's oracle: the fused forward and backward (as coda's kernels compute them) equal the
// plain ones for any part sizes, the plain backward equals central differences of the forward in
// every input and parameter, and bad shapes are refused by name.
#include "coda/reference/layer.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "reference/support.hpp"
#include "support/random.hpp"

namespace coda::reference {
namespace {

using ::testing::HasSubstr;

struct Sizes {
  int64_t tokens, hidden, ffn, heads, head_dim, rotated_heads;
};

Layer random_layer(const Sizes& s) {
  Layer layer;
  layer.wo = test::random_matrix(s.hidden, s.hidden, -0.5, 0.5);
  layer.norm1 = test::random_vector(s.hidden, 0.5, 1.5);
  layer.w_gate_up = test::random_matrix(2 * s.ffn, s.hidden);
  layer.w_down = test::random_matrix(s.hidden, s.ffn, -0.5, 0.5);
  layer.norm2 = test::random_vector(s.hidden, 0.5, 1.5);
  layer.w_qkv = test::random_matrix(s.heads * s.head_dim, s.hidden);
  layer.head_dim = s.head_dim;
  layer.rotated_heads = s.rotated_heads;
  layer.cache = rope_cache(32, s.head_dim);
  layer.eps = 1e-5;
  return layer;
}

LayerInputs random_inputs(const Sizes& s) {
  LayerInputs in{test::random_matrix(s.tokens, s.hidden), test::random_matrix(s.tokens, s.hidden), {}};
  for (int64_t t = 0; t < s.tokens; ++t) in.positions.push_back(int32_t(test::uniform_int(0, 31)));
  return in;
}

void expect_same_forward(const LayerForward& got, const LayerForward& want, double tolerance) {
  EXPECT_LT(relative_error(got.h1, want.h1), tolerance) << "h1";
  EXPECT_LT(relative_error(got.rstd1, want.rstd1), tolerance) << "rstd1";
  EXPECT_LT(relative_error(got.pre_activation, want.pre_activation), tolerance) << "pre-activation";
  EXPECT_LT(relative_error(got.activation, want.activation), tolerance) << "a";
  EXPECT_LT(relative_error(got.h2, want.h2), tolerance) << "h2";
  EXPECT_LT(relative_error(got.rstd2, want.rstd2), tolerance) << "rstd2";
  EXPECT_LT(relative_error(got.qkv, want.qkv), tolerance) << "qkv";
}

void expect_same_gradients(const LayerGradients& got, const LayerGradients& want, double tolerance) {
  EXPECT_LT(relative_error(got.attn_out, want.attn_out), tolerance) << "d attn_out";
  EXPECT_LT(relative_error(got.residual, want.residual), tolerance) << "dr";
  EXPECT_LT(relative_error(got.wo, want.wo), tolerance) << "dWo";
  EXPECT_LT(relative_error(got.norm1, want.norm1), tolerance) << "dg1";
  EXPECT_LT(relative_error(got.w_gate_up, want.w_gate_up), tolerance) << "dWgu";
  EXPECT_LT(relative_error(got.w_down, want.w_down), tolerance) << "dWd";
  EXPECT_LT(relative_error(got.norm2, want.norm2), tolerance) << "dg2";
  EXPECT_LT(relative_error(got.w_qkv, want.w_qkv), tolerance) << "dWqkv";
}

TEST(ReferenceLayer, FusedForwardAndBackwardEqualPlain) {
  SCOPED_TRACE(test::seed_note());
  const Sizes s{9, 12, 10, 5, 4, 3};  // 3 rotated heads (Q, K), 2 passing through (V)
  const Layer layer = random_layer(s);
  const LayerInputs in = random_inputs(s);
  const LayerForward plain = layer_forward(layer, in);
  const Matrix grad_h2 = test::random_matrix(s.tokens, s.hidden), grad_qkv = test::random_matrix(s.tokens, 20);
  const LayerGradients want = layer_backward(layer, in, plain, grad_h2, grad_qkv);
  for (auto [bn, bm] : {std::pair<int64_t, int64_t>{1, 1}, {3, 2}, {4, 7}, {20, 20}, {128, 128}}) {
    SCOPED_TRACE(::testing::Message() << "bn " << bn << " bm " << bm);
    const LayerForward fused = layer_forward_fused(layer, in, bn);
    expect_same_forward(fused, plain, 1e-13);
    expect_same_gradients(layer_backward_fused(layer, in, fused, grad_h2, grad_qkv, bn, bm), want, 1e-12);
  }
}

// L = <dh2, h2> + <dqkv, qkv> as a function of each input and parameter: its gradient is the
// backward given (dh2, dqkv).
TEST(ReferenceLayer, BackwardMatchesCentralDifferences) {
  SCOPED_TRACE(test::seed_note());
  const Sizes s{3, 8, 6, 4, 4, 3};
  const Layer layer = random_layer(s);
  const LayerInputs in = random_inputs(s);
  const Matrix grad_h2 = test::random_matrix(s.tokens, s.hidden), grad_qkv = test::random_matrix(s.tokens, 16);
  auto loss = [&](const Layer& l, const LayerInputs& i) {
    const LayerForward f = layer_forward(l, i);
    return test::frobenius_dot(grad_h2, f.h2) + test::frobenius_dot(grad_qkv, f.qkv);
  };
  auto in_parameter = [&](auto Layer::*parameter) {
    return test::numerical_gradient(
        [&](const auto& value) {
          Layer moved = layer;
          moved.*parameter = value;
          return loss(moved, in);
        },
        layer.*parameter);
  };
  auto in_input = [&](Matrix LayerInputs::*input) {
    return test::numerical_gradient(
        [&](const Matrix& value) {
          LayerInputs moved = in;
          moved.*input = value;
          return loss(layer, moved);
        },
        in.*input);
  };
  const LayerGradients numeric{in_input(&LayerInputs::attn_out), in_input(&LayerInputs::residual),
                               in_parameter(&Layer::wo),         in_parameter(&Layer::norm1),
                               in_parameter(&Layer::w_gate_up),  in_parameter(&Layer::w_down),
                               in_parameter(&Layer::norm2),      in_parameter(&Layer::w_qkv)};
  const LayerForward f = layer_forward(layer, in);
  expect_same_gradients(layer_backward(layer, in, f, grad_h2, grad_qkv), numeric, 1e-7);
  expect_same_gradients(layer_backward_fused(layer, in, f, grad_h2, grad_qkv, 2, 3), numeric, 1e-7);
}

TEST(ReferenceLayer, Validates) {
  const Sizes s{4, 8, 6, 4, 4, 3};
  const Layer good = random_layer(s);
  const LayerInputs in = random_inputs(s);
  Layer bad = good;
  bad.w_down = test::random_matrix(8, 5);
  EXPECT_THAT(test::invalid_argument_message([&] { layer_forward(bad, in); }),
              HasSubstr("coda::reference::layer_forward: argument 'layer.w_down': is (8 x 5) but must be (8 x 6)"));
  bad = good;
  bad.w_gate_up = test::random_matrix(11, 8);
  EXPECT_THAT(test::invalid_argument_message([&] { layer_forward_fused(bad, in, 4); }),
              HasSubstr("argument 'layer.w_gate_up': is (11 x 8) but must be 2F x H"));
  bad = good;
  bad.norm2.pop_back();
  EXPECT_THAT(test::invalid_argument_message([&] { layer_forward(bad, in); }), HasSubstr("argument 'layer.norm2'"));
  LayerInputs short_residual = in;
  short_residual.residual = test::random_matrix(3, 8);
  EXPECT_THAT(test::invalid_argument_message([&] { layer_forward(good, short_residual); }),
              HasSubstr("argument 'in.residual'"));
  const LayerForward f = layer_forward(good, in);
  const Matrix grad_h2 = test::random_matrix(4, 8);
  EXPECT_THAT(test::invalid_argument_message([&] { layer_backward(good, in, f, grad_h2, grad_h2); }),
              HasSubstr("coda::reference::layer_backward: argument 'grad_qkv': is (4 x 8) but must be (4 x 16)"));
  EXPECT_THAT(test::invalid_argument_message(
                  [&] { layer_backward_fused(good, in, f, grad_h2, test::random_matrix(4, 16), 0, 1); }),
              HasSubstr("argument 'bn'"));
}

}  // namespace
}  // namespace coda::reference

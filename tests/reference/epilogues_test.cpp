// The standard epilogues' oracle: activations and their derivatives (hand values, PyTorch's kink
// conventions, central differences), broadcast scales, linear combination, bias, output
// conversion, fp8 quantization, and the backward helpers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "coda/reference/epilogues.hpp"
#include "reference/support.hpp"
#include "support/random.hpp"

namespace coda::reference {
namespace {

using ::testing::HasSubstr;
using Kind = Activation::Kind;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<Activation> every_activation() {
  return {Activation::identity(),  Activation::relu(),     Activation::gelu_erf(),
          Activation::gelu_tanh(), Activation::silu(),     Activation::sigmoid(),
          Activation::tanh(),      Activation::hardswish(), Activation::leaky_relu(0.2),
          Activation::clamp(-1.5, 2.0)};
}

TEST(ReferenceActivation, HandComputedValues) {
  const double ln3 = std::log(3.0), ln2 = std::log(2.0);
  EXPECT_EQ(Activation::identity()(1.5), 1.5);
  EXPECT_EQ(Activation::relu()(-2.0), 0.0);
  EXPECT_EQ(Activation::relu()(1.5), 1.5);
  // gelu_erf(1) = 1 * Phi(1); gelu_erf(-1) = -Phi(-1) = -(1 - Phi(1))
  EXPECT_NEAR(Activation::gelu_erf()(1.0), 0.8413447460685429, 1e-15);
  EXPECT_NEAR(Activation::gelu_erf()(-1.0), -0.15865525393145707, 1e-15);
  // gelu_tanh(1): u = sqrt(2/pi) * (1 + 0.044715) = 0.8335619689391656, tanh(u) = 0.6823839812165535,
  // 0.5 * 1 * (1 + tanh u) = 0.8411919906082768
  EXPECT_NEAR(Activation::gelu_tanh()(1.0), 0.8411919906082768, 1e-15);
  // sigmoid(ln 3) = 1 / (1 + 1/3) = 3/4, so silu(ln 3) = 0.75 ln 3
  EXPECT_NEAR(Activation::sigmoid()(ln3), 0.75, 1e-15);
  EXPECT_NEAR(Activation::silu()(ln3), 0.75 * ln3, 1e-15);
  EXPECT_EQ(Activation::sigmoid()(0.0), 0.5);
  // tanh(ln 2) = (2 - 1/2) / (2 + 1/2) = 0.6
  EXPECT_NEAR(Activation::tanh()(ln2), 0.6, 1e-15);
  // hardswish: 1 * relu6(4) / 6 = 2/3; -1.5 * relu6(1.5) / 6 = -0.375; 4 * relu6(7) / 6 = 4
  EXPECT_NEAR(Activation::hardswish()(1.0), 2.0 / 3.0, 1e-15);
  EXPECT_EQ(Activation::hardswish()(-1.5), -0.375);
  EXPECT_EQ(Activation::hardswish()(4.0), 4.0);
  EXPECT_EQ(Activation::hardswish()(-4.0), 0.0);
  EXPECT_NEAR(Activation::leaky_relu(0.2)(-3.0), -0.6, 1e-15);
  EXPECT_EQ(Activation::leaky_relu(0.2)(2.0), 2.0);
  EXPECT_EQ(Activation::clamp(-1, 2)(-5.0), -1.0);
  EXPECT_EQ(Activation::clamp(-1, 2)(3.0), 2.0);
  EXPECT_EQ(Activation::clamp(-1, 2)(0.5), 0.5);
}

TEST(ReferenceActivation, HandComputedDerivatives) {
  const double ln3 = std::log(3.0), ln2 = std::log(2.0);
  // silu' = s (1 + x (1 - s)) with s = 3/4 at ln 3: 0.75 + 0.1875 ln 3
  EXPECT_NEAR(Activation::silu().derivative(ln3), 0.75 + 0.1875 * ln3, 1e-15);
  EXPECT_NEAR(Activation::sigmoid().derivative(ln3), 0.75 * 0.25, 1e-15);
  EXPECT_NEAR(Activation::tanh().derivative(ln2), 1 - 0.36, 1e-15);
  // gelu'(0) = Phi(0) + 0 = 1/2 for both forms; gelu_erf'(1) = Phi(1) + phi(1) = 0.8413... + 0.2419...
  EXPECT_EQ(Activation::gelu_erf().derivative(0.0), 0.5);
  EXPECT_EQ(Activation::gelu_tanh().derivative(0.0), 0.5);
  EXPECT_NEAR(Activation::gelu_erf().derivative(1.0), 1.0833154705876864, 1e-15);
  EXPECT_EQ(Activation::hardswish().derivative(1.0), 1.0 / 3.0 + 0.5);
  EXPECT_EQ(Activation::identity().derivative(7.0), 1.0);
}

TEST(ReferenceActivation, KinksFollowPyTorch) {
  EXPECT_EQ(Activation::relu().derivative(0.0), 0.0);  // threshold_backward: x <= 0 gives 0
  EXPECT_EQ(Activation::relu().derivative(1e-300), 1.0);
  EXPECT_EQ(Activation::leaky_relu(0.2).derivative(0.0), 0.2);  // x > 0 ? 1 : slope
  // hardswish_backward: x < -3 -> 0, -3 <= x <= 3 -> x/3 + 1/2, x > 3 -> 1
  EXPECT_EQ(Activation::hardswish().derivative(-3.0), -0.5);
  EXPECT_EQ(Activation::hardswish().derivative(3.0), 1.5);
  EXPECT_EQ(Activation::hardswish().derivative(-3.5), 0.0);
  EXPECT_EQ(Activation::hardswish().derivative(3.5), 1.0);
  // clamp: 1 strictly inside (lo, hi), 0 at and beyond the bounds (F.hardtanh's convention)
  const Activation clamp = Activation::clamp(-1, 2);
  EXPECT_EQ(clamp.derivative(-1.0), 0.0);
  EXPECT_EQ(clamp.derivative(2.0), 0.0);
  EXPECT_EQ(clamp.derivative(1.999), 1.0);
  EXPECT_EQ(clamp.derivative(-7.0), 0.0);
  // so clamp(0, +inf) is relu, derivative included
  const Activation relu_as_clamp = Activation::clamp(0, std::numeric_limits<double>::infinity());
  for (double x : {-1.0, 0.0, 2.0}) {
    EXPECT_EQ(relu_as_clamp(x), Activation::relu()(x));
    EXPECT_EQ(relu_as_clamp.derivative(x), Activation::relu().derivative(x));
  }
}

TEST(ReferenceActivation, DerivativesMatchCentralDifferences) {
  SCOPED_TRACE(test::seed_note());
  const double h = 1e-6;
  for (const Activation& act : every_activation()) {
    for (int i = 0; i < 400; ++i) {
      const double x = test::uniform(-6.0, 6.0);
      const double numeric = (act(x + h) - act(x - h)) / (2 * h);
      EXPECT_NEAR(act.derivative(x), numeric, 1e-7 * std::max(1.0, std::fabs(numeric)))
          << "activation kind " << int(act.kind) << " at x = " << x;
    }
  }
}

TEST(ReferenceActivation, NaNPropagates) {
  for (const Activation& act : every_activation()) {
    EXPECT_TRUE(std::isnan(act(kNaN))) << "kind " << int(act.kind);
    EXPECT_TRUE(std::isnan(act.derivative(kNaN))) << "kind " << int(act.kind);
  }
}

TEST(ReferenceActivation, ConstructorsValidate) {
  EXPECT_THAT(test::invalid_argument_message([] { Activation::leaky_relu(kNaN); }),
              HasSubstr("coda::reference::Activation::leaky_relu: argument 'slope'"));
  EXPECT_THAT(test::invalid_argument_message([] { Activation::clamp(2, 1); }),
              HasSubstr("coda::reference::Activation::clamp: argument 'hi': is 1 but must be >= lo = 2"));
  EXPECT_THAT(test::invalid_argument_message([] { Activation::clamp(kNaN, 1); }), HasSubstr("argument 'hi'"));
  EXPECT_EQ(Activation::clamp(1, 1)(5.0), 1.0);  // lo == hi is allowed
}

TEST(ReferenceScale, BroadcastsScalarRowAndColumn) {
  const Scale scalar = 2.5, per_row = Scale::per_row({1, 2}), per_column = Scale::per_column({7, 8, 9});
  EXPECT_EQ(scalar.at(1, 2), 2.5);
  EXPECT_EQ(per_row.at(1, 2), 2.0);
  EXPECT_EQ(per_row.at(0, 2), 1.0);
  EXPECT_EQ(per_column.at(1, 2), 9.0);
  EXPECT_EQ(per_column.at(0, 0), 7.0);
}

TEST(ReferenceLinearCombination, HandComputed) {
  Matrix y(2, 2), c(2, 2), x2(2, 2, 1.0);
  y.data = {1, 2, 3, 4};
  c.data = {10, 20, 30, 40};
  // alpha per row (2, -1), beta per column (0.5, 0.25), gamma scalar 3:
  //   D00 = 2*1 + 0.5*10 + 3 = 10    D01 = 2*2 + 0.25*20 + 3 = 12
  //   D10 = -3 + 0.5*30 + 3 = 15     D11 = -4 + 0.25*40 + 3 = 9
  const Matrix d = linear_combination(y, Scale::per_row({2, -1}), &c, Scale::per_column({0.5, 0.25}), &x2, 3.0);
  EXPECT_EQ(d.data, (std::vector<double>{10, 12, 15, 9}));
  // Without sources: alpha * Y
  EXPECT_EQ(linear_combination(y, 0.5).data, (std::vector<double>{0.5, 1, 1.5, 2}));
}

TEST(ReferenceLinearCombination, ZeroScaleDoesNotReadTheSource) {
  SCOPED_TRACE(test::seed_note());
  const Matrix y = test::random_matrix(3, 4);
  const Matrix poisoned(3, 4, kNaN);
  EXPECT_EQ(linear_combination(y, 2.0, &poisoned, 0.0, &poisoned, 0.0).data, linear_combination(y, 2.0).data);
  // per element: only row 1 reads C
  const Matrix d = linear_combination(y, 1.0, &poisoned, Scale::per_row({0, 1, 0}));
  for (int64_t n = 0; n < 4; ++n) {
    EXPECT_EQ(d(0, n), y(0, n));
    EXPECT_TRUE(std::isnan(d(1, n)));
    EXPECT_EQ(d(2, n), y(2, n));
  }
}

TEST(ReferenceLinearCombination, ValidatesShapes) {
  const Matrix y = test::random_matrix(3, 4), c = test::random_matrix(3, 4), wrong = test::random_matrix(4, 3);
  EXPECT_THAT(test::invalid_argument_message([&] {
                linear_combination(y, Scale::per_row({1, 2}));
              }),
              HasSubstr("coda::reference::linear_combination: argument 'alpha': has 2 entries but must have 3"));
  EXPECT_THAT(test::invalid_argument_message([&] { linear_combination(y, 1.0, &c, Scale::per_column({1, 2, 3})); }),
              HasSubstr("argument 'beta': has 3 entries but must have 4"));
  EXPECT_THAT(test::invalid_argument_message([&] { linear_combination(y, 1.0, &c, 1.0, &c, Scale::per_row({})); }),
              HasSubstr("argument 'gamma'"));
  EXPECT_THAT(test::invalid_argument_message([&] { linear_combination(y, 1.0, &wrong, 1.0); }),
              HasSubstr("argument 'c': is (4 x 3) but must be (3 x 4)"));
  EXPECT_THAT(test::invalid_argument_message([&] { linear_combination(y, 1.0, &c, 1.0, &wrong, 1.0); }),
              HasSubstr("argument 'x2'"));
}

TEST(ReferenceBias, HandComputed) {
  Matrix y(2, 3);
  y.data = {1, 2, 3, 4, 5, 6};
  EXPECT_EQ(add_bias(y, Bias::per_column({10, 20, 30})).data, (std::vector<double>{11, 22, 33, 14, 25, 36}));
  EXPECT_EQ(add_bias(y, Bias::per_row({-1, 1})).data, (std::vector<double>{0, 1, 2, 5, 6, 7}));
  EXPECT_EQ(add_bias(y, 0.5).data, (std::vector<double>{1.5, 2.5, 3.5, 4.5, 5.5, 6.5}));
  EXPECT_THAT(test::invalid_argument_message([&] {
                add_bias(y, Bias::per_column({1, 2}));
              }),
              HasSubstr("coda::reference::add_bias: argument 'bias': has 2 entries but must have 3"));
}

TEST(ReferenceBias, BiasActivationKeepsThePreActivation) {
  Matrix y(1, 3);
  y.data = {-3, 1, 0.5};
  // pre = y + (1, 1, -1) = (-2, 2, -0.5); post = relu(pre) = (0, 2, 0)
  const BiasActivation out = bias_activation(y, Bias::per_column({1, 1, -1}), Activation::relu());
  EXPECT_EQ(out.pre_activation.data, (std::vector<double>{-2, 2, -0.5}));
  EXPECT_EQ(out.output.data, (std::vector<double>{0, 2, 0}));
}

TEST(ReferenceBias, GradientHandComputed) {
  Matrix g(2, 2);
  g.data = {1, 2, 3, 4};
  EXPECT_EQ(bias_gradient(g, Bias::Kind::per_column), (Vector{4, 6}));  // 1+3, 2+4
  EXPECT_EQ(bias_gradient(g, Bias::Kind::per_row), (Vector{3, 7}));     // 1+2, 3+4
  EXPECT_EQ(bias_gradient(g, Bias::Kind::scalar), (Vector{10}));
}

// A bias's free parameters as a vector, and the same bias with other values.
Vector values_of(const Bias& b) { return b.kind == Bias::Kind::scalar ? Vector{b.value} : b.values; }
Bias with_values(Bias b, const Vector& v) {
  if (b.kind == Bias::Kind::scalar) return Bias(v[0]);
  b.values = v;
  return b;
}

// act(Y + bias) differentiated against Y and against the bias, for every activation and bias kind.
TEST(ReferenceBias, ActivationAndBiasBackwardMatchCentralDifferences) {
  SCOPED_TRACE(test::seed_note());
  const int64_t m = 4, n = 5;
  const Matrix y = test::random_matrix(m, n, -4, 4), upstream = test::random_matrix(m, n);
  const Bias biases[] = {Bias::per_column(test::random_vector(n)), Bias::per_row(test::random_vector(m)),
                         Bias(test::uniform(-1, 1))};
  for (const Activation& act : every_activation()) {
    for (const Bias& bias : biases) {
      const BiasActivation forward = bias_activation(y, bias, act);
      const Matrix grad_pre = activation_backward(upstream, forward.pre_activation, act);
      const Matrix numeric_y = test::numerical_gradient(
          [&](const Matrix& at) { return test::frobenius_dot(upstream, bias_activation(at, bias, act).output); }, y);
      EXPECT_LT(relative_error(grad_pre, numeric_y), 1e-6) << "kind " << int(act.kind);

      auto loss_at_bias = [&](const Vector& v) {
        return test::frobenius_dot(upstream, bias_activation(y, with_values(bias, v), act).output);
      };
      const Vector numeric_bias = test::numerical_gradient(loss_at_bias, values_of(bias));
      EXPECT_LT(relative_error(bias_gradient(grad_pre, bias.kind), numeric_bias), 1e-6) << "kind " << int(act.kind);
    }
  }
}

TEST(ReferenceBias, ActivationBackwardValidatesShapes) {
  EXPECT_THAT(
      test::invalid_argument_message(
          [] { activation_backward(test::random_matrix(2, 3), test::random_matrix(3, 2), Activation::relu()); }),
      HasSubstr("coda::reference::activation_backward: argument 'pre_activation': is (3 x 2) but must be (2 x 3)"));
}

TEST(ReferenceOutputConversion, RoundsOnceFromDouble) {
  Matrix y(1, 4);
  // 1/3 in bf16 is 0x3EAB = 0.333984375; in f16 0x3555 = 0.333251953125; in f32 0.3333333432674408.
  // 1 + 2^-8 lies halfway between bf16 neighbours 1 and 1 + 2^-7: ties to even gives 1.
  // 1 + 2^-8 + 2^-30 lies just above that midpoint: one rounding from fp64 gives 1 + 2^-7 (rounding
  // to f32 first would land on the midpoint and then give 1).
  // 1e5 = 1.52587890625 * 2^16: bf16 keeps 1 + 67/128 (0.3125 of a step rounds down) = 99840;
  // in f16 it is past the largest finite 65504 and becomes inf.
  y.data = {1.0 / 3.0, 1 + std::ldexp(1, -8), 1 + std::ldexp(1, -8) + std::ldexp(1, -30), 1e5};
  const Matrix bf16 = round_matrix(y, DType::bf16);
  EXPECT_EQ(bf16.data, (std::vector<double>{0.333984375, 1.0, 1.0078125, 99840.0}));
  EXPECT_EQ(round_matrix(y, DType::f16)(0, 0), 0.333251953125);
  EXPECT_TRUE(std::isinf(round_matrix(y, DType::f16)(0, 3)));
  EXPECT_EQ(round_matrix(y, DType::f32)(0, 0), 0.3333333432674408);
  EXPECT_THAT(test::invalid_argument_message([&] { round_matrix(y, DType::e4m3); }),
              HasSubstr("coda::reference::round_matrix: argument 'type': is e4m3 but must be f32, f16 or bf16"));
  EXPECT_THAT(test::invalid_argument_message([&] { round_matrix(y, DType::i32); }), HasSubstr("argument 'type'"));
}

TEST(ReferenceOutputConversion, Fp8HandComputed) {
  Matrix y(2, 2);
  y.data = {1, -1000, 0.1, 0.3};
  // e4m3 with scale 1: 1 -> 1 (0.0111.000 = 0x38); -1000 saturates to -448 (1.1111.110 = 0xFE);
  // 0.1 = 1.6 * 2^-4 -> 1.625 * 2^-4 = 0.1015625 (0.0011.101 = 0x1D);
  // 0.3 = 1.2 * 2^-2 -> 1.25 * 2^-2 = 0.3125 (0.0101.010 = 0x2A)
  Fp8Output q = quantize_fp8(y, DType::e4m3, 1.0);
  EXPECT_EQ(q.values.data, (std::vector<double>{1, -448, 0.1015625, 0.3125}));
  EXPECT_EQ(q.bits, (std::vector<uint8_t>{0x38, 0xFE, 0x1D, 0x2A}));
  EXPECT_EQ(q.amax, 1000.0);
  // scale 2: 2, -2000 -> -448, 0.2 = 1.6 * 2^-3 -> 0.203125, 0.6 = 1.2 * 2^-1 -> 0.625; amax is
  // taken before scaling, so it stays 1000
  q = quantize_fp8(y, DType::e4m3, 2.0);
  EXPECT_EQ(q.values.data, (std::vector<double>{2, -448, 0.203125, 0.625}));
  EXPECT_EQ(q.amax, 1000.0);
  // e5m2 saturates to 57344 (0.11110.11 = 0x7B) instead of overflowing to inf
  q = quantize_fp8(Matrix(1, 1, 1e6), DType::e5m2, 1.0);
  EXPECT_EQ(q.values(0, 0), 57344.0);
  EXPECT_EQ(q.bits[0], 0x7B);
}

TEST(ReferenceOutputConversion, Fp8NaNReachesValuesAndAmax) {
  Matrix y(1, 3);
  y.data = {1, kNaN, -5};
  const Fp8Output q = quantize_fp8(y, DType::e4m3, 1.0);
  EXPECT_TRUE(std::isnan(q.values(0, 1)));
  EXPECT_EQ(q.bits[1] & 0x7F, 0x7F);  // S.1111.111, e4m3's NaN
  EXPECT_TRUE(std::isnan(q.amax));
  EXPECT_EQ(q.values(0, 2), -5.0);
}

TEST(ReferenceOutputConversion, Fp8Validates) {
  const Matrix y = test::random_matrix(2, 2);
  EXPECT_THAT(test::invalid_argument_message([&] { quantize_fp8(y, DType::bf16, 1.0); }),
              HasSubstr("coda::reference::quantize_fp8: argument 'type': is bf16 but must be e4m3 or e5m2"));
  for (double scale : {0.0, -1.0, kNaN, std::numeric_limits<double>::infinity()})
    EXPECT_THAT(test::invalid_argument_message([&] { quantize_fp8(y, DType::e4m3, scale); }),
                HasSubstr("argument 'scale'"));
}

}  // namespace
}  // namespace coda::reference

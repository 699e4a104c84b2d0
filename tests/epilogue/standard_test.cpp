// The standard programs (LinearCombination, ActivationBackward, Reductions) on the CPU executor
// against the reference of the EVT set (coda/reference/epilogues.hpp, reductions.hpp): every scale
// kind of every term, biases per row and per column, every activation, the pre-activation output,
// fp8 outputs with a scale and the amax partials, bias gradients per column and per row, and every
// reduction; LinearCombinationOf (terms chosen at compile time) against LinearCombination. A 150 x 300 problem (narrower parts at both edges) of two batches.
#include "coda/epilogue/programs/standard.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "coda/reference/epilogues.hpp"
#include "coda/reference/reductions.hpp"
#include "epilogue/activation_cases.hpp"
#include "epilogue/support.hpp"

namespace coda::test {
namespace {

constexpr ProblemShape kShape{150, 300};

// ---- operands both ways -------------------------------------------------------------------------

/// An activation as the program and as the reference write it.
struct ActivationPair {
  std::string name;
  epilogue::ActivationFunction program;
  reference::Activation reference;
};

std::vector<ActivationPair> every_activation() {
  std::vector<ActivationPair> pairs;
  for (const epilogue::ActivationFunction& f : activation_cases::every_function())
    pairs.push_back({epilogue::name(f.kind), f, activation_cases::reference_of(f)});
  return pairs;
}

enum class ScaleKind { scalar, per_row, per_column };

std::string kind_name(ScaleKind kind) {
  return kind == ScaleKind::scalar ? "scalar" : kind == ScaleKind::per_row ? "per row" : "per column";
}

/// A scale (or a bias) as the program and as the reference see it, over random host data in
/// [0.5, 2): a scalar, one value per row of every batch, or one value per column.
class ScaleOperand {
 public:
  explicit ScaleOperand(ScaleKind kind)
      : kind_(kind),
        scalar_(float(uniform(0.5, 2.0))),
        per_row_(random_column_vector(DType::f32, kShape.rows, kShape.batch, 0.5, 2.0)),
        per_column_(random_row_vector(DType::bf16, kShape.cols, 0.5, 2.0)) {}

  epilogue::Scale program() const {
    epilogue::Scale s{.value = scalar_};
    if (kind_ == ScaleKind::per_row) s.per_row = column_vector(per_row_);
    if (kind_ == ScaleKind::per_column) s.per_column = row_vector(per_column_);
    return s;
  }
  reference::Scale reference(int64_t batch) const {
    switch (kind_) {
      case ScaleKind::scalar:
        return scalar_;
      case ScaleKind::per_row:
        return reference::Scale::per_row(column_vector_values(per_row_, batch));
      case ScaleKind::per_column:
        return reference::Scale::per_column(row_vector_values(per_column_));
    }
    return scalar_;
  }

 private:
  ScaleKind kind_;
  float scalar_;
  HostTensor per_row_, per_column_;
};

// ---- LinearCombination --------------------------------------------------------------------------

struct LinearCombinationCase {
  ScaleKind alpha = ScaleKind::scalar;
  bool source = false;  // C, with beta
  ScaleKind beta = ScaleKind::scalar;
  bool second_source = false;  // X2, with gamma
  ScaleKind gamma = ScaleKind::scalar;
  bool column_bias = false;
  bool row_bias = false;
  ActivationPair activation = every_activation().front();
  bool store_pre_activation = false;
  bool amax = false;
  DType out = DType::bf16;
  float out_scale = 1.0f;  // fp8 outputs
};

class EpilogueLinearCombination : public PartShapeTest {
 protected:
  void check(const LinearCombinationCase& c) const {
    const int64_t m = kShape.rows, n = kShape.cols, batch = kShape.batch;
    const auto acc = random_accumulators(kShape);
    const ScaleOperand alpha(c.alpha), beta(c.beta), gamma(c.gamma), column_bias(ScaleKind::per_column),
        row_bias(ScaleKind::per_row);
    const HostTensor source = random_input(DType::bf16, m, n, batch),
                     second_source = random_input(DType::f32, m, n, batch);
    HostTensor out = poisoned_output(c.out, m, n, batch), pre_activation = poisoned_output(DType::f32, m, n, batch);
    PartialsBuffer amax(part_count(m, part().rows), part_count(n, part().cols), batch);

    epilogue::LinearCombination program{
        .alpha = alpha.program(), .activation = c.activation.program, .out = tile_out(out, c.out_scale)};
    if (c.source) program.source = tile_in(source), program.beta = beta.program();
    if (c.second_source) program.second_source = tile_in(second_source), program.gamma = gamma.program();
    if (c.column_bias) program.column_bias = column_bias.program().per_column;
    if (c.row_bias) program.row_bias = row_bias.program().per_row;
    if (c.store_pre_activation) program.pre_activation = tile_out(pre_activation);
    if (c.amax) program.amax = amax.partials();
    run_batches(program, acc, part());

    const auto pre = per_batch(acc, [&](const reference::Matrix& y, int64_t b) {
      const reference::Matrix c_b = source.matrix(b), x2_b = second_source.matrix(b);
      reference::Matrix d =
          reference::linear_combination(y, alpha.reference(b), c.source ? &c_b : nullptr, beta.reference(b),
                                        c.second_source ? &x2_b : nullptr, gamma.reference(b));
      if (c.column_bias) d = reference::add_bias(d, column_bias.reference(b));
      if (c.row_bias) d = reference::add_bias(d, row_bias.reference(b));
      return d;
    });
    const auto post = per_batch(pre, [&](const reference::Matrix& d, int64_t) {
      return reference::apply_activation(d, c.activation.reference);
    });
    expect_output(out, post, is_fp8(c.out) ? c.out_scale : 1.0);
    if (is_fp8(c.out)) {
      // reference::quantize_fp8 of the exact values, but where the fp32 value and the exact one straddle
      // a rounding midpoint (about one element in 10^5; expect_output has checked that those hold
      // the neighbouring fp8 value).
      for (int64_t b = 0; b < batch; ++b) {
        const reference::Matrix stored = out.matrix(b);
        const reference::Fp8Output want = reference::quantize_fp8(post[std::size_t(b)], c.out, c.out_scale);
        int64_t differing = 0;
        for (std::size_t i = 0; i < stored.data.size(); ++i) differing += stored.data[i] != want.values.data[i];
        EXPECT_LE(differing, int64_t(stored.data.size()) / 1000) << "elements off reference::quantize_fp8, batch " << b;
      }
    }
    if (c.store_pre_activation) {
      SCOPED_TRACE("pre-activation");
      expect_output(pre_activation, pre);
    }
    if (c.amax) {
      SCOPED_TRACE("amax");
      // One max |D| per part, and all of them together the amax the fp8 quantization reports.
      expect_partials(amax, per_batch(post, [&](const reference::Matrix& d, int64_t) {
                        reference::Matrix magnitude = d;
                        for (double& v : magnitude.data) v = std::abs(v);
                        return reference::column_partial_max(reference::row_partial_max(magnitude, part().cols),
                                                             part().rows);
                      }));
      for (int64_t b = 0; b < batch; ++b) {
        const double whole = reference::abs_max(amax.matrix(b));  // the parts' maxima are magnitudes already
        const double want = is_fp8(c.out) ? reference::quantize_fp8(post[std::size_t(b)], c.out, c.out_scale).amax
                                          : reference::abs_max(post[std::size_t(b)]);
        expect_close(reference::Vector{whole}, reference::Vector{want});
      }
    }
  }
};

INSTANTIATE_TEST_SUITE_P(Parts, EpilogueLinearCombination, ::testing::ValuesIn(kPartShapes), part_shape_name);

TEST_P(EpilogueLinearCombination, AlphaOnly) { check({.out = DType::f32}); }

TEST_P(EpilogueLinearCombination, EveryTermWithEachScaleKind) {
  for (ScaleKind kind : {ScaleKind::scalar, ScaleKind::per_row, ScaleKind::per_column}) {
    SCOPED_TRACE(kind_name(kind));
    check({.alpha = kind, .source = true, .beta = kind, .second_source = true, .gamma = kind});
  }
}

TEST_P(EpilogueLinearCombination, MixedScaleKinds) {
  check({.alpha = ScaleKind::per_column,
         .source = true,
         .beta = ScaleKind::per_row,
         .second_source = true,
         .gamma = ScaleKind::scalar,
         .out = DType::f16});
}

TEST_P(EpilogueLinearCombination, EachSourceAlone) {
  check({.source = true, .beta = ScaleKind::per_row});
  check({.second_source = true, .gamma = ScaleKind::per_column, .out = DType::f32});
}

TEST_P(EpilogueLinearCombination, BiasPerColumnPerRowAndBoth) {
  check({.column_bias = true});
  check({.row_bias = true});
  check({.source = true, .column_bias = true, .row_bias = true, .out = DType::f32});
}

TEST_P(EpilogueLinearCombination, EveryActivationWithItsPreActivation) {
  for (const ActivationPair& activation : every_activation()) {
    SCOPED_TRACE(activation.name);
    check({.source = true, .column_bias = true, .activation = activation, .store_pre_activation = true});
  }
}

TEST_P(EpilogueLinearCombination, AmaxOfEveryPart) {
  check({.source = true, .activation = every_activation()[2], .amax = true, .out = DType::f32});
}

// Scaled, saturating fp8 (|D| reaches about 10: scale 100 saturates e4m3 past 4.48, scale 8000
// e5m2 past 7.2), with the amax the next step's scale comes from.
TEST_P(EpilogueLinearCombination, Fp8OutputsWithScaleAndAmax) {
  for (const auto& [type, scale] : {std::pair{DType::e4m3, 100.0f}, std::pair{DType::e5m2, 8000.0f}}) {
    SCOPED_TRACE(std::string(name(type)));
    check({.source = true, .row_bias = true, .amax = true, .out = type, .out_scale = scale});
  }
}

// LinearCombinationOf<terms> (only those terms compiled, the activation fixed) computes what
// LinearCombination computes from the same arguments, bit for bit: the same fp32 operations in the
// same order.
TEST_P(EpilogueLinearCombination, TermsChosenAtCompileTimeGiveTheSameBits) {
  using epilogue::Activation;
  using epilogue::LinearCombinationTerms;
  const auto acc = random_accumulators(kShape);
  const HostTensor source = random_input(DType::bf16, kShape.rows, kShape.cols, kShape.batch);
  const ScaleOperand bias(ScaleKind::per_column);
  // Each program with gelu_tanh, a column bias and, when it has those terms, alpha, C and the
  // pre-activation.
  auto run = [&](auto program, bool every_term) {
    HostTensor out = poisoned_output(DType::bf16, kShape.rows, kShape.cols, kShape.batch);
    HostTensor pre = poisoned_output(DType::f32, kShape.rows, kShape.cols, kShape.batch);
    if (every_term) {
      program.alpha = {.value = 1.5f};
      program.source = tile_in(source);
      program.beta = {.value = -0.5f};
      program.pre_activation = {tile_out(pre)};  // braces: a TileOut or a TileOutOf
    }
    program.activation.kind = Activation::gelu_tanh;
    program.column_bias = bias.program().per_column;
    program.out = tile_out(out);
    run_batches(program, acc, part());
    return std::pair{out.bytes, pre.bytes};
  };
  const epilogue::LinearCombinationOf<LinearCombinationTerms{.alpha = true,
                                                             .source = true,
                                                             .column_bias = true,
                                                             .pre_activation = true,
                                                             .activation = Activation::gelu_tanh}>
      four_terms;
  EXPECT_EQ(four_terms.activation.kind, Activation::gelu_tanh);  // the kind it is built for, from the start
  const auto [want_out, want_pre] = run(epilogue::LinearCombination{}, true);
  const auto [got_out, got_pre] = run(four_terms, true);
  EXPECT_TRUE(got_out == want_out);
  EXPECT_TRUE(got_pre == want_pre);

  const epilogue::LinearCombinationOf<LinearCombinationTerms{.column_bias = true, .activation = Activation::gelu_tanh}>
      bias_gelu;
  const auto want_bias_gelu = run(epilogue::LinearCombination{}, false).first;
  EXPECT_TRUE(run(bias_gelu, false).first == want_bias_gelu);
  EXPECT_FALSE(want_bias_gelu == want_out);  // alpha and C changed the bits

  // The pre-activation in a type the terms fix (a TileOutOf<f32> member): the same bits, and a
  // tensor of another type refused.
  using TypedPre = epilogue::LinearCombinationOf<LinearCombinationTerms{.alpha = true,
                                                                        .source = true,
                                                                        .column_bias = true,
                                                                        .pre_activation = true,
                                                                        .pre_activation_typed = true,
                                                                        .pre_activation_type = DType::f32,
                                                                        .activation = Activation::gelu_tanh}>;
  static_assert(std::is_same_v<decltype(TypedPre::pre_activation), epilogue::TileOutOf<DType::f32>>);
  const auto [typed_out, typed_pre] = run(TypedPre{}, true);
  EXPECT_TRUE(typed_out == want_out);
  EXPECT_TRUE(typed_pre == want_pre);
  TypedPre mistyped;
  HostTensor bf16_pre = poisoned_output(DType::bf16, kShape.rows, kShape.cols, kShape.batch);
  HostTensor out = poisoned_output(DType::bf16, kShape.rows, kShape.cols, kShape.batch);
  mistyped.pre_activation = {tile_out(bf16_pre)};
  mistyped.out = tile_out(out);
  mistyped.column_bias = bias.program().per_column;
  EXPECT_THROW(run_batches(mistyped, acc, part()), coda::InvalidArgument);
}

// An argument whose term a LinearCombinationOf kernel lacks would be silently ignored: the CPU
// executor (and launch_program, through the same check) refuses it, naming the argument and the term.
TEST(EpilogueLinearCombinationTerms, AnArgumentWithoutItsTermIsRefusedByName) {
  using epilogue::Activation;
  using Bare = epilogue::LinearCombinationOf<epilogue::LinearCombinationTerms{}>;  // D = acc
  const auto acc = random_accumulators({64, 128});
  const HostTensor in = random_input(DType::bf16, 64, 128);
  const HostTensor row = random_row_vector(DType::f32, 128, 0.5, 2.0);
  const HostTensor column = random_column_vector(DType::f32, 64, 1, 0.5, 2.0);
  HostTensor out = poisoned_output(DType::bf16, 64, 128), pre = poisoned_output(DType::bf16, 64, 128);
  PartialsBuffer amax(1, 1, 1);
  const std::vector<std::pair<std::string, Bare>> cases = {
      {"alpha", {.alpha = {.value = 2.0f}}},
      {"alpha", {.alpha = {.per_row = column_vector(column)}}},
      {"source", {.source = tile_in(in), .beta = {.value = 1.0f}}},
      {"second_source", {.second_source = tile_in(in), .gamma = {.value = 1.0f}}},
      {"column_bias", {.column_bias = row_vector(row)}},
      {"row_bias", {.row_bias = column_vector(column)}},
      {"pre_activation", {.pre_activation = tile_out(pre)}},
      {"amax", {.amax = amax.partials()}},
  };
  for (const auto& [argument, arguments] : cases) {
    SCOPED_TRACE(argument);
    Bare program = arguments;
    program.out = tile_out(out);
    try {
      reference::run_epilogue(program, acc[0], 0, {64, 128});
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("'" + argument + "'"), std::string::npos) << message;
      EXPECT_NE(message.find("LinearCombinationTerms::" + (argument == "alpha" ? std::string("alpha") : argument)),
                std::string::npos)
          << message;
      EXPECT_EQ(e.code(), StatusCode::unsupported);
    }
  }
  Bare gelu;
  gelu.activation.kind = Activation::gelu_tanh;
  gelu.out = tile_out(out);
  try {
    reference::run_epilogue(gelu, acc[0], 0, {64, 128});
    ADD_FAILURE() << "a kind other than the one built for was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is gelu_tanh, but this LinearCombination kernel is built for identity"),
              std::string::npos)
        << e.what();
  }
  // The terms it has may be left unset, and a scalar alpha of 1 is no term at all.
  Bare plain{.alpha = {.value = 1.0f}};
  plain.out = tile_out(out);
  reference::run_epilogue(plain, acc[0], 0, {64, 128});
  expect_output(out, {acc[0]});
}

// As in BLAS, a source whose scale is a scalar zero is never read: NaN in it does not reach D.
TEST_P(EpilogueLinearCombination, ZeroScalarScaleNeverReadsItsSource) {
  const auto acc = random_accumulators(kShape);
  const HostTensor nan_source = poisoned_output(DType::bf16, kShape.rows, kShape.cols, kShape.batch);
  HostTensor out = poisoned_output(DType::f32, kShape.rows, kShape.cols, kShape.batch);
  const epilogue::LinearCombination program{.alpha = {.value = 2.0f},
                                            .source = tile_in(nan_source),
                                            .beta = {.value = 0.0f},
                                            .second_source = tile_in(nan_source),
                                            .gamma = {.value = 0.0f},
                                            .out = tile_out(out)};
  run_batches(program, acc, part());
  expect_output(
      out, per_batch(acc, [](const reference::Matrix& y, int64_t) { return reference::linear_combination(y, 2.0); }));
}

// The same element by element for vector scales: where beta (per row) or gamma (per column) is
// 0, a NaN source is not read into D; where they are not, it is.
TEST_P(EpilogueLinearCombination, ZeroEntriesOfAScaleVectorNeverReadTheirSource) {
  const auto acc = random_accumulators(kShape);
  const HostTensor nan_source = poisoned_output(DType::bf16, kShape.rows, kShape.cols, kShape.batch);
  std::vector<reference::Vector> beta_values(std::size_t(kShape.batch),
                                             reference::Vector(std::size_t(kShape.rows), 0.0));
  for (reference::Vector& beta : beta_values) beta[7] = 0.5;  // row 7 of every batch reads C
  reference::Matrix gamma_values(1, kShape.cols);             // column 11 reads X2
  gamma_values(0, 11) = 0.25;
  const HostTensor beta = column_vector_of(DType::f32, beta_values), gamma = host_copy(DType::f32, gamma_values);
  HostTensor out = poisoned_output(DType::f32, kShape.rows, kShape.cols, kShape.batch);
  const epilogue::LinearCombination program{.source = tile_in(nan_source),
                                            .beta = {.per_row = column_vector(beta)},
                                            .second_source = tile_in(nan_source),
                                            .gamma = {.per_column = row_vector(gamma)},
                                            .out = tile_out(out)};
  run_batches(program, acc, part());
  const reference::Matrix nan_matrix = nan_source.matrix();
  expect_output(out, per_batch(acc, [&](const reference::Matrix& y, int64_t b) {
                  return reference::linear_combination(y, 1.0, &nan_matrix,
                                                       reference::Scale::per_row(beta_values[std::size_t(b)]),
                                                       &nan_matrix, reference::Scale::per_column(gamma_values.data));
                }));
}

// ---- ActivationBackward -------------------------------------------------------------------------

class EpilogueActivationBackward : public PartShapeTest {
 protected:
  // dX = dY * act'(pre) for every activation, with the bias gradient of a per-column or a
  // per-row bias: column partials over the part's rows, or row partials over its columns.
  void check(bool bias_per_row, DType out_type) const {
    const int64_t m = kShape.rows, n = kShape.cols, batch = kShape.batch;
    for (const ActivationPair& activation : every_activation()) {
      SCOPED_TRACE(activation.name);
      const auto grad_output = random_accumulators(kShape);
      // Pre-activations across every kink: hardswish's at -3 and 3, clamp's at -1.5 and 2.
      const HostTensor pre = random_input(DType::bf16, m, n, batch, -4.0, 4.0);
      HostTensor out = poisoned_output(out_type, m, n, batch);
      PartialsBuffer bias_gradient = bias_per_row ? PartialsBuffer(m, part_count(n, part().cols), batch)
                                                  : PartialsBuffer(part_count(m, part().rows), n, batch);
      run_batches(epilogue::ActivationBackward{.pre_activation = tile_in(pre),
                                               .activation = activation.program,
                                               .out = tile_out(out),
                                               .bias_gradient = bias_gradient.partials(),
                                               .bias_per_row = bias_per_row},
                  grad_output, part());

      const auto grad_input = per_batch(grad_output, [&](const reference::Matrix& dy, int64_t b) {
        return reference::activation_backward(dy, pre.matrix(b), activation.reference);
      });
      expect_output(out, grad_input);
      SCOPED_TRACE("bias gradient");
      expect_partials(bias_gradient, per_batch(grad_input, [&](const reference::Matrix& dx, int64_t) {
                        return bias_per_row ? reference::row_partial_sums(dx, part().cols)
                                            : reference::column_partial_sums(dx, part().rows);
                      }));
      for (int64_t b = 0; b < batch; ++b) {
        const reference::Matrix partials = bias_gradient.matrix(b);
        const reference::Vector combined = bias_per_row
                                               ? reference::combine_row_partials(partials, reference::Combine::sum)
                                               : reference::combine_column_partials(partials, reference::Combine::sum);
        expect_close(combined, reference::bias_gradient(
                                   grad_input[std::size_t(b)],
                                   bias_per_row ? reference::Bias::Kind::per_row : reference::Bias::Kind::per_column));
      }
    }
  }
};

INSTANTIATE_TEST_SUITE_P(Parts, EpilogueActivationBackward, ::testing::ValuesIn(kPartShapes), part_shape_name);

TEST_P(EpilogueActivationBackward, BiasGradientPerColumn) { check(false, DType::bf16); }

TEST_P(EpilogueActivationBackward, BiasGradientPerRow) { check(true, DType::f32); }

TEST_P(EpilogueActivationBackward, WithoutBiasGradient) {
  const auto grad_output = random_accumulators(kShape);
  const HostTensor pre = random_input(DType::bf16, kShape.rows, kShape.cols, kShape.batch, -4.0, 4.0);
  HostTensor out = poisoned_output(DType::bf16, kShape.rows, kShape.cols, kShape.batch);
  const ActivationPair gelu = every_activation()[2];
  run_batches(
      epilogue::ActivationBackward{.pre_activation = tile_in(pre), .activation = gelu.program, .out = tile_out(out)},
      grad_output, part());
  expect_output(out, per_batch(grad_output, [&](const reference::Matrix& dy, int64_t b) {
                  return reference::activation_backward(dy, pre.matrix(b), gelu.reference);
                }));
}

// ActivationBackwardOf<kind> (the kind fixed at compile time) computes what ActivationBackward
// computes with that kind, bit for bit, and refuses any other kind by name.
TEST_P(EpilogueActivationBackward, KindFixedAtCompileTimeGivesTheSameBits) {
  using epilogue::Activation;
  const auto grad_output = random_accumulators(kShape);
  const HostTensor pre = random_input(DType::bf16, kShape.rows, kShape.cols, kShape.batch, -4.0, 4.0);
  PartialsBuffer want_gradient(part_count(kShape.rows, part().rows), kShape.cols, kShape.batch),
      got_gradient(part_count(kShape.rows, part().rows), kShape.cols, kShape.batch);
  auto run = [&](auto program, PartialsBuffer& gradient) {
    HostTensor out = poisoned_output(DType::bf16, kShape.rows, kShape.cols, kShape.batch);
    program.pre_activation = tile_in(pre);
    program.activation.kind = Activation::gelu_tanh;
    program.out = tile_out(out);
    program.bias_gradient = gradient.partials();
    run_batches(program, grad_output, part());
    return out.bytes;
  };
  const auto want = run(epilogue::ActivationBackward{}, want_gradient);
  EXPECT_TRUE(run(epilogue::ActivationBackwardOf<Activation::gelu_tanh>{}, got_gradient) == want);
  for (int64_t b = 0; b < kShape.batch; ++b) {
    const reference::Matrix got = got_gradient.matrix(b), expected = want_gradient.matrix(b);
    EXPECT_TRUE(got.data == expected.data) << "bias gradient, batch " << b;
  }

  HostTensor out = poisoned_output(DType::bf16, kShape.rows, kShape.cols, kShape.batch);
  epilogue::ActivationBackwardOf<Activation::gelu_tanh> silu_in_a_gelu_kernel{.pre_activation = tile_in(pre),
                                                                             .out = tile_out(out)};
  silu_in_a_gelu_kernel.activation.kind = Activation::silu;
  try {
    run_batches(silu_in_a_gelu_kernel, grad_output, part());
    ADD_FAILURE() << "a kind other than the one built for was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'activation.kind': is silu, but this ActivationBackward kernel is built for gelu_tanh"),
              std::string::npos)
        << e.what();
  }
}

// ---- Reductions ---------------------------------------------------------------------------------

class EpilogueReductions : public PartShapeTest {};

INSTANTIATE_TEST_SUITE_P(Parts, EpilogueReductions, ::testing::ValuesIn(kPartShapes), part_shape_name);

TEST_P(EpilogueReductions, EveryReductionAndTheOutput) {
  const int64_t m = kShape.rows, n = kShape.cols, batch = kShape.batch;
  const int64_t parts_m = part_count(m, part().rows), parts_n = part_count(n, part().cols);
  const auto acc = random_accumulators(kShape);
  HostTensor out = poisoned_output(DType::bf16, m, n, batch);
  PartialsBuffer row_sums(m, parts_n, batch), row_squares(m, parts_n, batch), row_max(m, parts_n, batch);
  PartialsBuffer column_sums(parts_m, n, batch, /*minor_major=*/true);
  run_batches(epilogue::Reductions{.out = tile_out(out),
                                   .row_sums = row_sums.partials(),
                                   .row_sums_of_squares = row_squares.partials(),
                                   .row_max = row_max.partials(),
                                   .column_sums = column_sums.partials()},
              acc, part());

  expect_output(out, acc);
  const auto partials_of = [&](reference::Matrix (*partial)(const reference::Matrix&, int64_t), int64_t tile) {
    return per_batch(acc, [&](const reference::Matrix& y, int64_t) { return partial(y, tile); });
  };
  expect_partials(row_sums, partials_of(reference::row_partial_sums, part().cols));
  expect_partials(row_squares, partials_of(reference::row_partial_sums_of_squares, part().cols));
  expect_partials(row_max, partials_of(reference::row_partial_max, part().cols));
  expect_partials(column_sums, partials_of(reference::column_partial_sums, part().rows));
  for (int64_t b = 0; b < batch; ++b) {  // combined: the full reductions
    const reference::Matrix& y = acc[std::size_t(b)];
    expect_close(reference::combine_row_partials(row_sums.matrix(b), reference::Combine::sum), reference::row_sums(y));
    expect_close(reference::combine_row_partials(row_squares.matrix(b), reference::Combine::sum),
                 reference::row_sums_of_squares(y));
    expect_close(reference::combine_row_partials(row_max.matrix(b), reference::Combine::max), reference::row_max(y));
    expect_close(reference::combine_column_partials(column_sums.matrix(b), reference::Combine::sum),
                 reference::column_sums(y));
  }
}

// Each reduction is optional: with the output alone, or one reduction alone, nothing else is written.
TEST_P(EpilogueReductions, OnlyWhatIsAsked) {
  const auto acc = random_accumulators(kShape);
  HostTensor out = poisoned_output(DType::f32, kShape.rows, kShape.cols, kShape.batch);
  run_batches(epilogue::Reductions{.out = tile_out(out)}, acc, part());
  expect_output(out, acc);

  PartialsBuffer row_max(kShape.rows, part_count(kShape.cols, part().cols), kShape.batch);
  run_batches(epilogue::Reductions{.row_max = row_max.partials()}, acc, part());
  expect_partials(row_max, per_batch(acc, [&](const reference::Matrix& y, int64_t) {
                    return reference::row_partial_max(y, part().cols);
                  }));
}

}  // namespace
}  // namespace coda::test

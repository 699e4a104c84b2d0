// coda demo's CPU path: each kernel's section runs its epilogue program on the CPU executor first
// (demo_cpu_programs.cpp), then checks the fp64 reference itself by an identity that an independent
// route must reproduce (fused == plain, backward == a finite difference along a random direction).
#include "demo_cpu.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "coda/core/layout.hpp"
#include "coda/reference/cross_entropy.hpp"
#include "coda/reference/epilogues.hpp"
#include "coda/reference/gemm.hpp"
#include "coda/reference/gemm_rmsnorm_gemm.hpp"
#include "coda/reference/moe.hpp"
#include "coda/reference/reductions.hpp"
#include "coda/reference/rmsnorm.hpp"
#include "coda/reference/rope.hpp"
#include "coda/reference/swiglu.hpp"
#include "demo.hpp"

namespace coda::cli {
namespace cpu {
namespace {

std::mt19937_64& generator() {
  static std::mt19937_64 g(20240601);
  return g;
}

}  // namespace

double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(generator()); }

reference::Vector random_vector(int64_t n, double lo, double hi) {
  reference::Vector v(static_cast<std::size_t>(n));
  for (double& x : v) x = uniform(lo, hi);
  return v;
}

reference::Matrix random_matrix(int64_t rows, int64_t cols, double lo, double hi) {
  reference::Matrix m(rows, cols);
  m.data = random_vector(rows * cols, lo, hi);
  return m;
}

std::vector<int32_t> random_indices(int64_t rows, int64_t classes) {
  std::vector<int32_t> t(static_cast<std::size_t>(rows));
  for (int32_t& x : t) x = int32_t(std::uniform_int_distribution<int64_t>(0, classes - 1)(generator()));
  return t;
}

reference::Matrix random_gemm_output(int64_t rows, int64_t cols, int64_t depth) {
  return reference::gemm(random_matrix(rows, depth), Major::k, random_matrix(cols, depth), Major::k);
}

reference::GemmRmsNormGemm random_layer(int64_t m, int64_t k, int64_t hidden, int64_t n2) {
  reference::Matrix norm_weight(1, hidden);
  norm_weight.data = random_vector(hidden, 0.5, 1.5);
  return {random_matrix(m, k),
          random_matrix(hidden, k),
          reference::round_matrix(random_matrix(m, hidden), DType::bf16),
          reference::round_matrix(norm_weight, DType::f32).data,
          random_matrix(n2, hidden),
          1e-5};
}

reference::CrossEntropyOptions full_loss_options() {
  return {.label_smoothing = 0.1, .z_loss = 1e-3, .softcap = 20.0, .reduction = reference::LossReduction::mean};
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double sum = 0;
  for (std::size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

double max_abs_difference(const reference::Vector& a, const reference::Vector& b) {
  reference::Matrix row_a(1, int64_t(a.size())), row_b(1, int64_t(b.size()));
  row_a.data = a;
  row_b.data = b;
  return reference::max_abs_difference(row_a, row_b);
}

}  // namespace cpu

namespace {

using namespace coda::reference;
using cpu::full_loss_options;
using cpu::random_indices;
using cpu::random_layer;
using cpu::random_matrix;
using cpu::random_vector;
using cpu::uniform;

using cpu::backward_error;
using cpu::dot;
using cpu::kExact;
using cpu::kFiniteDifference;
using cpu::max_abs_difference;

void gemm_section(SectionChecks& t) {
  const Matrix a = random_matrix(13, 21), b = random_matrix(17, 21);
  const Matrix product = gemm(a, Major::k, b, Major::k);
  double majors = 0;
  for (Major a_major : {Major::k, Major::mn})
    for (Major b_major : {Major::k, Major::mn}) {
      const Matrix& a_stored = a_major == Major::k ? a : a.transposed();
      const Matrix& b_stored = b_major == Major::k ? b : b.transposed();
      majors = std::max(majors, max_abs_difference(gemm(a_stored, a_major, b_stored, b_major), product));
    }
  t.add("every operand major gives the same A*B^T", majors, kExact);
  const std::vector<int64_t> rows{12, 0, 5};
  Matrix selected(3, product.cols);
  for (std::size_t i = 0; i < rows.size(); ++i)
    for (int64_t n = 0; n < product.cols; ++n) selected(int64_t(i), n) = product(rows[i], n);
  t.add("sampled rows == those rows of the product",
        max_abs_difference(gemm_rows(a, Major::k, b, Major::k, rows), selected), kExact);
}

void bias_activation_section(SectionChecks& t) {
  cpu::bias_activation_programs(t);
  const Matrix y = random_matrix(9, 14), upstream = random_matrix(9, 14);
  const Vector bias = random_vector(14);
  const Activation act = Activation::gelu_tanh();
  const auto loss = [&](const Matrix& y_, const Vector& bias_) {
    return dot(upstream, bias_activation(y_, Bias::per_column(bias_), act).output);
  };
  const auto loss_of_y = [&](const Matrix& y_) { return loss(y_, bias); };
  const auto loss_of_bias = [&](const Vector& bias_) { return loss(y, bias_); };
  const Matrix pre = bias_activation(y, Bias::per_column(bias), act).pre_activation;
  const Matrix grad_y = activation_backward(upstream, pre, act);
  t.add("dY from the saved pre-activation == finite difference", backward_error(loss_of_y, y, grad_y),
        kFiniteDifference);
  t.add("bias gradient (column sums of dY) == finite difference",
        backward_error(loss_of_bias, bias, bias_gradient(grad_y, Bias::Kind::per_column)), kFiniteDifference);
}

void rope_section(SectionChecks& t) {
  cpu::rope_program(t);
  const int64_t head_dim = 8, heads = 3, rot_heads = 2, max_pos = 64;
  const RopeCache cache = rope_cache(max_pos, head_dim);
  const Matrix y = random_matrix(5, heads * head_dim), upstream = random_matrix(5, heads * head_dim);
  const std::vector<int32_t> positions = random_indices(5, max_pos);
  const Matrix rotated = rope(y, positions, cache, head_dim, rot_heads);
  t.add("backward (inverse rotation) undoes the forward",
        max_abs_difference(rope_backward(rotated, positions, cache, head_dim, rot_heads), y), kExact);
  const auto loss = [&](const Matrix& y_) { return dot(upstream, rope(y_, positions, cache, head_dim, rot_heads)); };
  t.add("backward == finite difference",
        backward_error(loss, y, rope_backward(upstream, positions, cache, head_dim, rot_heads)), kFiniteDifference);
}

void swiglu_section(SectionChecks& t) {
  cpu::swiglu_program(t);
  const Matrix x = random_matrix(6, 10), w_gate = random_matrix(7, 10), w_up = random_matrix(7, 10);
  const Matrix y = gemm(x, Major::k, interleave_gate_up(w_gate, w_up), Major::k);
  const Matrix gate = gemm(x, Major::k, w_gate, Major::k), up = gemm(x, Major::k, w_up, Major::k);
  Matrix separate(gate.rows, gate.cols);
  for (std::size_t i = 0; i < separate.data.size(); ++i)
    separate.data[i] = Activation::silu()(gate.data[i]) * up.data[i];
  t.add("interleaved weight == silu(X Wg^T) * (X Wu^T)", max_abs_difference(swiglu(y), separate), kExact);

  const Matrix grad_a = random_matrix(6, 7);
  const SwigluBackward back = swiglu_backward(grad_a, y, /*bn=*/3);
  const auto loss = [&](const Matrix& y_) { return dot(grad_a, swiglu(y_)); };
  t.add("backward (10): dY == finite difference", backward_error(loss, y, back.grad_y), kFiniteDifference);
  t.add("backward (10): row partials combine to <Y, dY>",
        max_abs_difference(combine_row_partials(back.row_partials, Combine::sum), row_dots(y, back.grad_y)), kExact);
}

void cross_entropy_section(SectionChecks& t) {
  cpu::cross_entropy_program(t);
  const int64_t vocab = 37, bn = 8;  // bn does not divide the vocabulary: the last tile is narrow
  const CrossEntropyOptions options = full_loss_options();
  const Matrix logits = random_matrix(6, vocab, -6, 6);
  std::vector<int32_t> targets = random_indices(6, vocab);
  targets[1] = options.ignore_index;
  const auto loss = [&](const Matrix& z) { return *cross_entropy(z, targets, options).reduced; };
  const Vector saved_lse = cross_entropy(logits, targets, options).lse;
  const Matrix grad = cross_entropy_backward(logits, targets, saved_lse, {1.0}, bn, options).grad_logits;
  t.add("backward from the saved lse == finite difference", backward_error(loss, logits, grad), kFiniteDifference);
}

void rmsnorm_section(SectionChecks& t) {
  cpu::rmsnorm_programs(t);
  const int64_t bn = 5, bm = 4;  // tile sizes that divide neither the rows nor the columns
  const GemmRmsNormGemm layer = random_layer(7, 9, 12, 10);
  const GemmRmsNormGemmForward plain = gemm_rmsnorm_gemm_forward(layer);
  const GemmRmsNormGemmForward fused = gemm_rmsnorm_gemm_forward_fused(layer, bn);
  t.add("fused forward (4 -> rstd -> 5) == normalize, then GEMM",
        std::max(max_abs_difference(fused.output, plain.output), max_abs_difference(fused.rstd, plain.rstd)), kExact);

  const Matrix grad_z = random_matrix(7, 10), grad_h = random_matrix(7, 12);
  const GemmRmsNormGemmGradients want = gemm_rmsnorm_gemm_backward(layer, plain, grad_z, grad_h);
  const GemmRmsNormGemmGradients got = gemm_rmsnorm_gemm_backward_fused(layer, plain, grad_z, grad_h, bn, bm);
  t.add("fused backward (<dZ, Z> -> c' -> 9, dW2 and dg from (rstd dZ)^T H) == plain backward",
        std::max({max_abs_difference(got.x, want.x), max_abs_difference(got.w1, want.w1),
                  max_abs_difference(got.residual, want.residual),
                  max_abs_difference(got.norm_weight, want.norm_weight), max_abs_difference(got.w2, want.w2)}),
        kExact);
  const auto loss = [&](const Matrix& x) {
    GemmRmsNormGemm changed = layer;
    changed.x = x;
    const GemmRmsNormGemmForward f = gemm_rmsnorm_gemm_forward(changed);
    return dot(grad_z, f.output) + dot(grad_h, f.residual_out);
  };
  t.add("backward: dX == finite difference", backward_error(loss, layer.x, want.x), kFiniteDifference);
}

// The LM head after the final norm: residual + RMSNorm partials, the rstd reduction, then row scale + cross-entropy on
// the raw GEMM output, against the loss of the plainly normalized logits.
void lm_head_section(SectionChecks& t) {
  const int64_t bn = 8, vocab = 29;
  const GemmRmsNormGemm layer = random_layer(6, 9, 12, vocab);
  const CrossEntropyOptions options = full_loss_options();
  const std::vector<int32_t> targets = random_indices(6, vocab);
  const ResidualRmsNorm first =
      residual_rmsnorm(gemm(layer.x, Major::k, layer.w1, Major::k), layer.residual, layer.norm_weight, bn);
  const Vector rstd = rstd_from_partials(first.sum_squares, int64_t(layer.norm_weight.size()), layer.eps);
  const CrossEntropyPartials loss_partials =
      row_scale_cross_entropy_partials(gemm(first.weighted, Major::k, layer.w2, Major::k), rstd, targets, bn, options);
  const CrossEntropyLoss fused = cross_entropy_finish(loss_partials, targets, vocab, options);
  const CrossEntropyLoss plain = cross_entropy(gemm_rmsnorm_gemm_forward(layer).output, targets, options);
  t.add("4 -> rstd -> 8 -> finish == CE of the normalized logits", max_abs_difference(fused.per_row, plain.per_row),
        kExact);
}

void moe_section(SectionChecks& t) {
  const int64_t experts = 6;
  const Matrix x = random_matrix(8, 16), router = random_matrix(experts, 16);
  const Matrix scores = gemm(x, Major::k, router, Major::k);
  // With k = E, topk_softmax's weights are the full softmax: exp(score - lse), lse taken from the
  // cross-entropy reference (an independent route to the same normalizer).
  const Routing all = moe_route(x, router, {.mode = RoutingMode::topk_softmax, .k = experts});
  const Vector lse = cross_entropy(scores, random_indices(8, experts), {.reduction = LossReduction::none}).lse;
  double softmax = 0;
  for (int64_t m = 0; m < scores.rows; ++m)
    for (int64_t slot = 0; slot < experts; ++slot)
      softmax = std::max(softmax,
                         std::abs(all.weights(m, slot) - std::exp(scores(m, all.id(m, slot)) - lse[std::size_t(m)])));
  t.add("top-k softmax with k = E == softmax of X Wr^T", softmax, kExact);

  const Routing top2 = moe_route(x, router, {.mode = RoutingMode::softmax_topk, .k = 2});
  double sums = 0;
  for (int64_t m = 0; m < scores.rows; ++m)
    sums = std::max(sums, std::abs(top2.weights(m, 0) + top2.weights(m, 1) - 1));
  t.add("softmax over the top 2 sums to 1", sums, kExact);
}

}  // namespace

const std::vector<DemoSection>& cpu_sections() {
  static const std::vector<DemoSection> sections{
      {"GEMM", gemm_section},
      {"bias + GELU", bias_activation_section},
      {"RoPE", rope_section},
      {"SwiGLU", swiglu_section},
      {"cross-entropy", cross_entropy_section},
      {"RMSNorm GEMM", rmsnorm_section},
      {"LM head + CE", lm_head_section},
      {"MoE routing", moe_section},
      {"layer", cpu::layer_section},
  };
  return sections;
}

}  // namespace coda::cli

// coda demo's CPU path, first part of each kernel's section: the kernel's epilogue program (the
// same source the GPU runs) on the CPU executor, reference::run_epilogue: fp32 math on the accumulators
// of an fp64 reference GEMM rounded to fp32, over parts of the GPU's part shape. Its outputs go
// to host arrays of the types the GPU writes, poisoned until written, and are checked against the
// fp64 reference function.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "coda/core/dtype.hpp"
#include "coda/core/layout.hpp"
#include "coda/core/tensor.hpp"
#include "coda/epilogue/parts.hpp"
#include "coda/epilogue/programs/cross_entropy.hpp"
#include "coda/epilogue/programs/rmsnorm.hpp"
#include "coda/epilogue/programs/rope.hpp"
#include "coda/epilogue/programs/standard.hpp"
#include "coda/epilogue/programs/swiglu.hpp"
#include "coda/reference/cross_entropy.hpp"
#include "coda/reference/epilogue_executor.hpp"
#include "coda/reference/epilogues.hpp"
#include "coda/reference/gemm.hpp"
#include "coda/reference/gemm_rmsnorm_gemm.hpp"
#include "coda/reference/reductions.hpp"
#include "coda/reference/rmsnorm.hpp"
#include "coda/reference/rope.hpp"
#include "coda/reference/swiglu.hpp"
#include "demo_cpu.hpp"
#include "demo_host_array.hpp"

namespace coda::cli::cpu {

using reference::relative_error;

// The standard set's bias + GELU forward, saving the pre-activation (f32), and its backward from
// it: dX and the bias gradient as column partials, as cuBLASLt's DGELU_BGRAD.
void bias_activation_programs(SectionChecks& t) {
  const int64_t cols = 300;
  const reference::Activation gelu = reference::Activation::gelu_tanh();
  const epilogue::ActivationFunction program_gelu{.kind = epilogue::Activation::gelu_tanh};
  const reference::Matrix y = random_gemm_output(kRows, cols);
  const HostArray bias = HostArray::of(random_vector(cols), DType::f32);
  HostArray pre(DType::f32, kRows, cols), out(DType::bf16, kRows, cols);
  reference::run_epilogue(epilogue::LinearCombination{.column_bias = bias.row_vector(),
                                                      .activation = program_gelu,
                                                      .pre_activation = pre.tile_out(),
                                                      .out = out.tile_out()},
                          y, 0, kPart);
  const reference::BiasActivation want =
      reference::bias_activation(y, reference::Bias::per_column(bias.values()), gelu);
  t.add("LinearCombination program: gelu(Y + b) == fp64, bf16", relative_error(out.matrix(), want.output), kBf16Output);

  const reference::Matrix grad_out = random_gemm_output(kRows, cols);  // dOut W: the backward GEMM's output
  HostArray grad(DType::bf16, kRows, cols), bias_grad(DType::f32, part_count(kRows, kPartRows), cols);
  reference::run_epilogue(epilogue::ActivationBackward{.pre_activation = pre.tile_in(),
                                                       .activation = program_gelu,
                                                       .out = grad.tile_out(),
                                                       .bias_gradient = bias_grad.partials()},
                          grad_out, 0, kPart);
  const reference::Matrix want_grad = reference::activation_backward(grad_out, want.pre_activation, gelu);
  t.add("ActivationBackward program: dY == fp64, bf16", relative_error(grad.matrix(), want_grad), kBf16Output);
  t.add("its bias-gradient partials, combined == fp64",
        relative_error(reference::combine_column_partials(bias_grad.matrix(), reference::Combine::sum),
                       reference::bias_gradient(want_grad, reference::Bias::Kind::per_column)),
        kF32);
}

// Q and K heads rotated, the V head passing through (a fused QKV projection).
void rope_program(SectionChecks& t) {
  const int64_t head_dim = 64, heads = 5, rotated_heads = 4, max_pos = 512;
  const reference::RopeCache cache = reference::rope_cache(max_pos, head_dim);
  const HostArray cos = HostArray::of(cache.cos, DType::f32), sin = HostArray::of(cache.sin, DType::f32);
  const std::vector<int32_t> positions = random_indices(kRows, max_pos);
  const HostArray position_column = HostArray::of(as_values(positions), DType::i32);
  const reference::Matrix y = random_gemm_output(kRows, heads * head_dim);
  HostArray out(DType::bf16, kRows, heads * head_dim);
  reference::run_epilogue(epilogue::Rope{.positions = position_column.column_vector(),
                                         .cos = cos.table(),
                                         .sin = sin.table(),
                                         .head_dim = Divisor(int32_t(head_dim)),
                                         .rotated_heads = int32_t(rotated_heads),
                                         .out = out.tile_out()},
                          y, 0, kPart);
  t.add("Rope program (4 of 5 heads rotated) == fp64, bf16",
        relative_error(out.matrix(), reference::rope(y, positions, cache, head_dim, rotated_heads)), kBf16Output);
}

void swiglu_program(SectionChecks& t) {
  const int64_t f = 300;
  const reference::Matrix y = random_gemm_output(kRows, 2 * f);  // gate and up interleaved
  HostArray out(DType::bf16, kRows, f), pre(DType::bf16, kRows, 2 * f);
  reference::run_epilogue(epilogue::Swiglu{.out = out.tile_out(), .pre_activation = pre.tile_out()}, y, 0, kPart);
  t.add("Swiglu program: out and the saved Y == fp64, bf16",
        std::max(relative_error(out.matrix(), reference::swiglu(y)), relative_error(pre.matrix(), y)), kBf16Output);
}

// The partials of every part, then the reference's finish, against the loss straight from the
// logits, with every loss option on and an ignored row.
void cross_entropy_program(SectionChecks& t) {
  const int64_t vocab = 1000;
  const reference::CrossEntropyOptions options = full_loss_options();
  const reference::Matrix logits = random_gemm_output(kRows, vocab);
  std::vector<int32_t> targets = random_indices(kRows, vocab);
  targets[1] = options.ignore_index;
  const HostArray target_column = HostArray::of(as_values(targets), DType::i32);
  const int64_t parts = part_count(vocab, kPartCols);
  HostArray lse(DType::f32, kRows, parts), row_sums(DType::f32, kRows, parts), target_logit(DType::f32, kRows, 1);
  epilogue::CrossEntropyPartials program{.targets = target_column.column_vector(),
                                         .lse = lse.partials(),
                                         .target_logit = target_logit.partials(),
                                         .row_sums = row_sums.partials(),
                                         .softcap = float(options.softcap)};
  program.target_logit.tile_stride = 0;  // one slot per row, written by the part holding the target
  reference::run_epilogue(program, logits, 0, kPart);

  const reference::CrossEntropyPartials want = reference::cross_entropy_partials(logits, targets, kPartCols, options);
  t.add("CrossEntropyPartials program: lse, row sums == fp64",
        std::max(relative_error(lse.matrix(), want.lse), relative_error(row_sums.matrix(), want.row_sums)), kF32);
  // The ignored row's target slot stays unwritten (NaN): the finish skips ignored rows.
  const reference::CrossEntropyLoss finished = reference::cross_entropy_finish(
      {.lse = lse.matrix(), .row_sums = row_sums.matrix(), .target_logit = target_logit.values()}, targets, vocab,
      options);
  const reference::CrossEntropyLoss direct = reference::cross_entropy(logits, targets, options);
  t.add("its partials + finish == direct loss",
        std::max(relative_error(finished.per_row, direct.per_row),
                 relative_error(reference::Vector{*finished.reduced}, reference::Vector{*direct.reduced})),
        kF32);

  // The backward program over two chunks of the vocabulary (as gemm_cross_entropy_backward launches
  // it), from the saved lse and the per-row factors of the mean's gradient 1 / (non-ignored rows).
  HostArray factors(DType::f32, kRows, epilogue::kRowFactors), grad(DType::bf16, kRows, vocab);
  for (int64_t m = 0; m < kRows; ++m) {
    const float g = targets[std::size_t(m)] == options.ignore_index ? 0.0f : 1.0f / float(direct.valid_rows);
    epilogue::write_row_factors(factors.partials().data + m * epilogue::kRowFactors, float(direct.lse[std::size_t(m)]),
                                g, float(options.z_loss), float(options.label_smoothing), vocab);
  }
  const int64_t chunk = 512;
  for (int64_t first = 0; first < vocab; first += chunk) {
    const int64_t cols = std::min(chunk, vocab - first);
    epilogue::TileOut out = grad.tile_out();
    out.data = static_cast<uint16_t*>(out.data) + first;
    reference::Matrix z(kRows, cols);
    for (int64_t m = 0; m < kRows; ++m)
      for (int64_t n = 0; n < cols; ++n) z(m, n) = logits(m, first + n);
    reference::run_epilogue(epilogue::CrossEntropyBackward{.targets = target_column.column_vector(),
                                                           .row_factors = factors.table(),
                                                           .grad_logits = out,
                                                           .softcap = float(options.softcap),
                                                           .first_column = int32_t(first)},
                            z, 0, kPart);
  }
  const reference::Matrix want_grad =
      reference::cross_entropy_backward(logits, targets, direct.lse, {1.0}, kPartCols, options).grad_logits;
  t.add("CrossEntropyBackward program, two chunks: dZ == fp64, bf16", relative_error(grad.matrix(), want_grad),
        kBf16Output);
}

// Kernel 4 (H = X W1^T + R, its sum-of-squares partials, U = H g), the rstd reduction, then
// the row scale (Z = rstd (U W2^T)) on the U it stored: RMSNorm(H) W2^T without normalizing H.
void rmsnorm_programs(SectionChecks& t) {
  const int64_t k = 64, hidden = 300, n2 = 200;
  const reference::GemmRmsNormGemm layer = random_layer(kRows, k, hidden, n2);
  const HostArray residual = HostArray::of(layer.residual, DType::bf16);
  const HostArray weight = HostArray::of(layer.norm_weight, DType::f32);
  HostArray h(DType::bf16, kRows, hidden), u(DType::bf16, kRows, hidden);
  HostArray sum_squares(DType::f32, kRows, part_count(hidden, kPartCols));
  const reference::Matrix y = reference::gemm(layer.x, Major::k, layer.w1, Major::k);
  reference::run_epilogue(epilogue::ResidualRmsNorm{.residual = residual.tile_in(),
                                                    .residual_out = h.tile_out(),
                                                    .sum_squares = sum_squares.partials(),
                                                    .weight = weight.row_vector(),
                                                    .out = u.tile_out()},
                          y, 0, kPart);
  const reference::ResidualRmsNorm first = reference::residual_rmsnorm(y, layer.residual, layer.norm_weight, kPartCols);
  t.add("ResidualRmsNorm program: H, U == fp64, bf16",
        std::max(relative_error(h.matrix(), first.residual), relative_error(u.matrix(), first.weighted)), kBf16Output);

  const reference::GemmRmsNormGemmForward want = reference::gemm_rmsnorm_gemm_forward_fused(layer, kPartCols);
  const reference::Vector rstd = reference::rstd_from_partials(sum_squares.matrix(), hidden, layer.eps);
  t.add("rstd from its sum-of-squares partials == fp64", relative_error(rstd, want.rstd), kF32);
  const HostArray rstd_column = HostArray::of(rstd, DType::f32);
  HostArray z(DType::bf16, kRows, n2);
  reference::run_epilogue(epilogue::RowScale{.scale = rstd_column.column_vector(), .out = z.tile_out()},
                          reference::gemm(u.matrix(), Major::k, layer.w2, Major::k), 0, kPart);
  // U was stored as bf16 before the second GEMM: two roundings reach Z, each ~1e-3.
  t.add("RowScale program on U W2^T: Z == reparameterized forward", relative_error(z.matrix(), want.output),
        kBf16Output);
}

}  // namespace coda::cli::cpu

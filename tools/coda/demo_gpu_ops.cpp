// coda demo's GPU suite, the fused ops: each on a moderately sized problem (1024 tokens of width
// 1024), its outputs poisoned first, checked against the fp64 reference on sampled rows (every
// step is row by row, so those rows' reference needs only those rows of the activations), then
// timed: the fused op against cuBLAS and coda's own GEMM computing its GEMMs alone.
#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "coda/core/layout.hpp"
#include "coda/ops/cross_entropy.hpp"
#include "coda/ops/rmsnorm.hpp"
#include "coda/ops/rope.hpp"
#include "coda/ops/swiglu.hpp"
#include "coda/reference/cross_entropy.hpp"
#include "coda/reference/epilogues.hpp"
#include "coda/reference/gemm.hpp"
#include "coda/reference/gemm_rmsnorm_gemm.hpp"
#include "coda/reference/rope.hpp"
#include "coda/reference/swiglu.hpp"
#include "demo_gpu.hpp"

namespace coda::cli::gpu {
namespace {

constexpr DType kBf16 = DType::bf16;
constexpr int64_t kTokens = 1024, kWidth = 1024;  // M and K of every op's first GEMM
// Small graphs, few replays: a note, not a benchmark (`coda bench ops` is one).
constexpr TimingPlan kFusedTiming{3, 10};
// f32 results of fp32 reductions (rstd over 2048 columns, log-sum-exp over 32000): ~1e-6.
constexpr double kF32ReductionLimit = 1e-5;
// A loss is lse - Y[target] - ..., a difference of terms ~10 times its own size: 10x the above.
constexpr double kLossLimit = 1e-4;

// The row label of a fused op: its (first) GEMM's M x N x K, then what is checked.
std::string label(int64_t m, int64_t n, int64_t k, const char* what) {
  const std::string shape = formatted("%lldx%lldx%lld", (long long)m, (long long)n, (long long)k);
  return formatted("%-15s  %s", shape.c_str(), what);
}

// One index in [0, classes) per row, reproducibly: positions, targets.
std::vector<int32_t> random_indices(int64_t rows, int64_t classes, uint64_t seed) {
  std::mt19937_64 generator(seed);
  std::vector<int32_t> indices(static_cast<std::size_t>(rows));
  for (int32_t& i : indices) i = int32_t(std::uniform_int_distribution<int64_t>(0, classes - 1)(generator));
  return indices;
}

reference::Matrix one_row(const std::vector<int32_t>& values) {
  reference::Matrix row(1, int64_t(values.size()));
  row.data.assign(values.begin(), values.end());
  return row;
}

std::vector<int32_t> at_rows(const std::vector<int32_t>& values, const std::vector<int64_t>& rows) {
  std::vector<int32_t> selected;
  for (int64_t r : rows) selected.push_back(values[std::size_t(r)]);
  return selected;
}

// A per-row vector (rstd, losses) as a column, so that sampled_error picks its sampled rows.
reference::Matrix as_column(const reference::Vector& values) {
  reference::Matrix column(int64_t(values.size()), 1);
  column.data = values;
  return column;
}

// The fp64 X W^T on the sampled rows: the accumulators of an op's GEMM.
reference::Matrix reference_gemm(const DeviceMatrix& x, const DeviceMatrix& w, const std::vector<int64_t>& rows) {
  return reference::gemm_rows(x.download(), Major::k, w.download(), Major::k, rows);
}

// X W^T into `y` (bf16): a fused op's GEMM alone, for its timing.
GemmCall plain_gemm(const DeviceMatrix& x, const DeviceMatrix& w, const DeviceMatrix& y) {
  return {{x.view(), Major::k}, {w.view(), Major::k}, y.view()};
}

}  // namespace

void swiglu_section(SectionChecks& checks) {
  GpuContext gpu;
  const int64_t f = 2048;  // W is 2F x K: gate and up rows interleaved
  const DeviceMatrix x = DeviceMatrix::random(kBf16, kTokens, kWidth, 1, gpu.stream());
  const DeviceMatrix w = DeviceMatrix::random(kBf16, 2 * f, kWidth, 2, gpu.stream());
  const DeviceMatrix out = DeviceMatrix::poisoned(kBf16, kTokens, f, gpu.stream());
  const DeviceMatrix y = DeviceMatrix::poisoned(kBf16, kTokens, 2 * f, gpu.stream());  // the GEMM alone's
  const auto fused = [&] { ops::gemm_swiglu(x.view(), w.view(), out.view(), gpu.stream()); };
  fused();
  gpu.synchronize();

  const std::vector<int64_t> rows = sampled_rows(kTokens);
  checks.add(label(kTokens, 2 * f, kWidth, "O = silu(gate) * up"),
             sampled_error(out.download(), rows, reference::swiglu(reference_gemm(x, w, rows))), kBf16OutputLimit,
             gpu.timing_note(fused, {plain_gemm(x, w, y)}, kFusedTiming, /*fused=*/true));
}

// A fused QKV projection with grouped KV heads: 16 Q and 4 K heads rotated, 4 V heads passing.
void rope_section(SectionChecks& checks) {
  GpuContext gpu;
  const int head_dim = 128, heads = 24, rotated_heads = 20, max_pos = 4096;
  const int64_t n = heads * head_dim;
  const reference::RopeCache cache = reference::rope_cache(max_pos, head_dim);
  const DeviceMatrix cos = DeviceMatrix::of(cache.cos, DType::f32, gpu.stream());
  const DeviceMatrix sin = DeviceMatrix::of(cache.sin, DType::f32, gpu.stream());
  const std::vector<int32_t> positions = random_indices(kTokens, max_pos, 3);
  const DeviceMatrix position_row = DeviceMatrix::of(one_row(positions), DType::i32, gpu.stream());
  const DeviceMatrix x = DeviceMatrix::random(kBf16, kTokens, kWidth, 4, gpu.stream());
  const DeviceMatrix w = DeviceMatrix::random(kBf16, n, kWidth, 5, gpu.stream());
  const DeviceMatrix out = DeviceMatrix::poisoned(kBf16, kTokens, n, gpu.stream());
  const DeviceMatrix y = DeviceMatrix::poisoned(kBf16, kTokens, n, gpu.stream());  // the GEMM alone's
  const auto fused = [&] {
    ops::gemm_rope(x.view(), w.view(), position_row.vector_view(), cos.view(), sin.view(), head_dim, rotated_heads,
                   out.view(), gpu.stream());
  };
  fused();
  gpu.synchronize();

  const std::vector<int64_t> rows = sampled_rows(kTokens);
  const reference::Matrix want =
      reference::rope(reference_gemm(x, w, rows), at_rows(positions, rows), cache, head_dim, rotated_heads);
  checks.add(label(kTokens, n, kWidth, formatted("%d of %d heads rotated", rotated_heads, heads).c_str()),
             sampled_error(out.download(), rows, want), kBf16OutputLimit,
             gpu.timing_note(fused, {plain_gemm(x, w, y)}, kFusedTiming, /*fused=*/true));
}

// Residual + RMSNorm (H = X W1^T + R, U = H g, rstd), then the row scale (Z = rstd (U W2^T)), against the plain
// forward: RMSNorm(H) g, then the GEMM.
void rmsnorm_section(SectionChecks& checks) {
  GpuContext gpu;
  const int64_t hidden = 2048, n2 = 4096;
  const float eps = 1e-6f;
  const DeviceMatrix x = DeviceMatrix::random(kBf16, kTokens, kWidth, 6, gpu.stream());
  const DeviceMatrix w1 = DeviceMatrix::random(kBf16, hidden, kWidth, 7, gpu.stream());
  const DeviceMatrix residual = DeviceMatrix::random(kBf16, kTokens, hidden, 8, gpu.stream());
  const DeviceMatrix weight = DeviceMatrix::random(DType::f32, 1, hidden, 9, gpu.stream());
  const DeviceMatrix w2 = DeviceMatrix::random(kBf16, n2, hidden, 10, gpu.stream());
  const DeviceMatrix h = DeviceMatrix::poisoned(kBf16, kTokens, hidden, gpu.stream());
  const DeviceMatrix u = DeviceMatrix::poisoned(kBf16, kTokens, hidden, gpu.stream());
  const DeviceMatrix rstd = DeviceMatrix::poisoned(DType::f32, 1, kTokens, gpu.stream());
  const DeviceMatrix z = DeviceMatrix::poisoned(kBf16, kTokens, n2, gpu.stream());
  // The GEMMs alone's outputs, for the timing.
  const DeviceMatrix y1 = DeviceMatrix::poisoned(kBf16, kTokens, hidden, gpu.stream());
  const DeviceMatrix y2 = DeviceMatrix::poisoned(kBf16, kTokens, n2, gpu.stream());
  const std::size_t workspace_bytes = ops::residual_rmsnorm_workspace_bytes(kTokens, hidden);
  const DeviceMemory workspace = allocate(workspace_bytes);
  const auto fused = [&] {
    ops::gemm_residual_rmsnorm(x.view(), w1.view(), residual.view(), weight.vector_view(), eps, h.view(), u.view(),
                               rstd.vector_view(), workspace.get(), workspace_bytes, gpu.stream());
    ops::gemm_row_scale(u.view(), w2.view(), rstd.vector_view(), z.view(), gpu.stream());
  };
  fused();
  gpu.synchronize();

  const std::vector<int64_t> rows = sampled_rows(kTokens);
  const reference::Vector g = weight.download().data;
  const reference::GemmRmsNormGemmForward want = reference::gemm_rmsnorm_gemm_forward(
      {rows_of(x.download(), rows), w1.download(), rows_of(residual.download(), rows), g, w2.download(), eps});
  const reference::Matrix want_u =
      reference::linear_combination(want.residual_out, reference::Scale::per_column(g));  // H g
  checks.add(label(kTokens, hidden, kWidth, "H = X W1^T + R, U = H g"),
             std::max(sampled_error(h.download(), rows, want.residual_out), sampled_error(u.download(), rows, want_u)),
             kBf16OutputLimit);
  checks.add(label(kTokens, hidden, kWidth, "rstd from the tile partials"),
             sampled_error(as_column(rstd.download().data), rows, as_column(want.rstd)), kF32ReductionLimit);
  // Z carries two bf16 roundings (U, then Z), ~1e-3 each.
  checks.add(label(kTokens, n2, hidden, "then Z = rstd (U W2^T)"), sampled_error(z.download(), rows, want.output),
             kBf16OutputLimit,
             gpu.timing_note(fused, {plain_gemm(x, w1, y1), plain_gemm(u, w2, y2)}, kFusedTiming, /*fused=*/true));
}

// The LM head's loss without the logits: label smoothing, z-loss, every tenth row ignored.
void cross_entropy_section(SectionChecks& checks) {
  GpuContext gpu;
  const int64_t vocab = 32000;
  ops::CrossEntropyOptions options;
  options.label_smoothing = 0.1f;
  options.z_loss = 1e-4f;
  options.reduction = ops::LossReduction::none;  // per-row losses: the sampled rows can be checked
  std::vector<int32_t> targets = random_indices(kTokens, vocab, 11);
  for (std::size_t m = 0; m < targets.size(); m += 10) targets[m] = options.ignore_index;
  const DeviceMatrix target_row = DeviceMatrix::of(one_row(targets), DType::i32, gpu.stream());
  const DeviceMatrix x = DeviceMatrix::random(kBf16, kTokens, kWidth, 12, gpu.stream());
  const DeviceMatrix w = DeviceMatrix::random(kBf16, vocab, kWidth, 13, gpu.stream());
  const DeviceMatrix loss = DeviceMatrix::poisoned(DType::f32, 1, kTokens, gpu.stream());
  const DeviceMatrix lse = DeviceMatrix::poisoned(DType::f32, 1, kTokens, gpu.stream());
  const DeviceMatrix logits = DeviceMatrix::poisoned(kBf16, kTokens, vocab, gpu.stream());  // the GEMM alone's
  const std::size_t workspace_bytes = ops::cross_entropy_workspace_bytes(kTokens, vocab, options);
  const DeviceMemory workspace = allocate(workspace_bytes);
  const auto fused = [&] {
    ops::gemm_cross_entropy(x.view(), w.view(), target_row.vector_view(), loss.vector_view(), lse.vector_view(),
                            workspace.get(), workspace_bytes, gpu.stream(), options);
  };
  fused();
  gpu.synchronize();

  const std::vector<int64_t> rows = sampled_rows(kTokens);
  const reference::CrossEntropyLoss want = reference::cross_entropy(reference_gemm(x, w, rows), at_rows(targets, rows),
                                                                    {.label_smoothing = options.label_smoothing,
                                                                     .z_loss = options.z_loss,
                                                                     .reduction = reference::LossReduction::none});
  const std::string what = formatted("loss per row (smoothing %g, z-loss %g)", options.label_smoothing, options.z_loss);
  checks.add(label(kTokens, vocab, kWidth, what.c_str()),
             sampled_error(as_column(loss.download().data), rows, as_column(want.per_row)), kLossLimit,
             gpu.timing_note(fused, {plain_gemm(x, w, logits)}, kFusedTiming, /*fused=*/true));
  checks.add(label(kTokens, vocab, kWidth, "lse per row (for the backward)"),
             sampled_error(as_column(lse.download().data), rows, as_column(want.lse)), kF32ReductionLimit);
}

}  // namespace coda::cli::gpu

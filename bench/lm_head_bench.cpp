#include "lm_head_bench.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "arena.hpp"
#include "coda/core/device.hpp"
#include "coda/gemm.hpp"
#include "coda/ops/cross_entropy.hpp"
#include "coda/ops/rmsnorm.hpp"
#include "cublas_gemm.hpp"
#include "timing.hpp"

namespace coda::bench {
namespace {

// How the backward gets the logits: recomputed (four GEMMs), kept by the forward and read (three
// GEMMs, M x V held), or recomputed with the blocks of dZ below 2^-12 |g| left out of dW and dX.
enum class Backward { recompute, kept, skip };
constexpr float kSkipBelow = 0x1p-12f;

// The inputs. uniform: x in [-1, 1), w in [-1, 1): logits of standard deviation about sqrt(H) / 3
// (~15 at H = 2048), a peaked softmax whose few large entries fall anywhere in the vocabulary.
// wide: x in [-0.2, 0.2), logits of std ~3, a softmax spread over hundreds of columns a row. zipf: a
// model of a trained head, whose vocabulary is ordered roughly by frequency (BPE merge order):
// logits -ln(v + 1) (a Zipf(1) unigram distribution) plus noise of std ~1.2, targets drawn from the
// same Zipf(1), so the entries above 2^-12 gather in the frequent first columns.
enum class Inputs { uniform, wide, zipf };

struct LmHeadRow {
  int64_t t, h, v;
  bool final_norm;  // after the final RMSNorm: its rstd as the row scale, and the <dZ, Z> partials
  float softcap;
  Backward mode;
  Inputs inputs;
  double fused_ms, forward_ms, backward_ms, gemms_ms, cublas_ms;
  double extra_gib;  // the workspaces and lse: everything beyond inputs, loss and gradients
  int64_t chunk;
};

// Targets 0..v-1 drawn from Zipf(1), P(v) proportional to 1 / (v + 1), by inverting its CDF.
std::vector<int32_t> zipf_targets(int64_t t, int64_t v) {
  std::vector<double> cdf(static_cast<std::size_t>(v));
  double sum = 0.0;
  for (int64_t i = 0; i < v; ++i) cdf[std::size_t(i)] = sum += 1.0 / double(i + 1);
  std::vector<int32_t> targets(static_cast<std::size_t>(t));
  uint64_t state = 0x5DEECE66Dull;
  for (auto& target : targets) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;  // Knuth's MMIX LCG
    const double u = double(state >> 11) * 0x1p-53 * sum;
    target = int32_t(std::lower_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
  }
  return targets;
}

LmHeadRow measure(int64_t t, int64_t h, int64_t v, bool final_norm, float softcap, Backward mode, CublasGemm& cublas,
                  cudaStream_t stream, Inputs inputs = Inputs::uniform) {
  const bool kept_logits = mode == Backward::kept;
  Arena arena;
  const DType bf = DType::bf16;
  const TensorView x = arena.matrix(bf, t, h, stream, true, inputs == Inputs::wide ? 0.2f : 1.0f);
  const TensorView w = arena.matrix(bf, v, h, stream);
  const TensorView grad_x = arena.matrix(bf, t, h, stream, false), grad_w = arena.matrix(bf, v, h, stream, false);
  std::vector<int32_t> zipf;
  if (inputs == Inputs::zipf) {
    // x: noise uniform in +-3 / sqrt(H) plus 0.02 along a direction; w: noise in [-1, 1) plus
    // -ln(v + 1) / (0.02 H) along it. Logits: x.w noise of std ~1, -ln(v + 1), and two smaller terms.
    constexpr float kAlong = 0.02f;
    const uint64_t direction = 99;
    fill_along_direction(x.data, t, h, 101, 3.0f / std::sqrt(float(h)), direction, kAlong, 0.0f, stream);
    fill_along_direction(w.data, v, h, 102, 1.0f, direction, 0.0f, -1.0f / (kAlong * float(h)), stream);
    zipf = zipf_targets(t, v);
  }
  const TensorView targets = arena.int32_vector(
      t, [&](int64_t i) { return inputs == Inputs::zipf ? zipf[std::size_t(i)] : int32_t((i * 7919) % v); });
  const TensorView loss = arena.vector(DType::f32, 1, stream, false), lse = arena.vector(DType::f32, t, stream, false);
  const TensorView grad_loss = arena.vector(DType::f32, 1, stream, false);
  const float one = 1.0f;  // d loss / d loss
  CODA_CUDA_CHECK(cudaMemcpy(grad_loss.data, &one, sizeof(one), cudaMemcpyHostToDevice));
  ops::CrossEntropyOptions options;
  options.softcap = softcap;
  ops::CrossEntropyBackwardOptions backward_options;
  if (final_norm) {
    options.row_scale = arena.vector(DType::f32, t, stream);
    backward_options.row_dots = arena.matrix(DType::f32, t, ops::row_partial_count(v), stream, false);
  }
  // The three plain GEMMs of the same shapes: logits X W^T, dX = dY W, dW = dY^T X.
  const TensorView y = arena.matrix(bf, t, v, stream);
  const TensorView logits = kept_logits ? arena.matrix(bf, t, v, stream, false) : TensorView{};
  if (kept_logits) backward_options.logits = backward_options.grad_logits = logits;  // dZ in place
  if (mode == Backward::skip) backward_options.skip_below = kSkipBelow;
  const std::size_t forward_bytes = ops::cross_entropy_workspace_bytes(t, v);
  const std::size_t backward_bytes = ops::cross_entropy_backward_workspace_bytes(t, v, h, backward_options);
  void* forward_ws = arena.allocate(forward_bytes);
  void* backward_ws = arena.allocate(backward_bytes);
  ops::CrossEntropyOptions forward_options = options;
  forward_options.logits = logits;

  const auto forward = [&](int) {
    ops::gemm_cross_entropy(x, w, targets, loss, lse, forward_ws, forward_bytes, stream, forward_options);
  };
  const auto backward = [&](int) {
    ops::gemm_cross_entropy_backward(x, w, targets, lse, grad_loss, grad_x, grad_w, backward_ws, backward_bytes, stream,
                                     options, backward_options);
  };
  const std::vector<Timing> times = time_side_by_side({[&](int i) {
                                                         forward(i);
                                                         backward(i);
                                                       },
                                                       forward, backward,
                                                       [&](int) {
                                                         gemm({x, Major::k}, {w, Major::k}, y, stream);
                                                         gemm({y, Major::k}, {w, Major::mn}, grad_x, stream);
                                                         gemm({y, Major::mn}, {x, Major::mn}, grad_w, stream);
                                                       },
                                                       [&](int) {
                                                         cublas.run({x, Major::k}, {w, Major::k}, y);
                                                         cublas.run({y, Major::k}, {w, Major::mn}, grad_x);
                                                         cublas.run({y, Major::mn}, {x, Major::mn}, grad_w);
                                                       }},
                                                      stream, 3, 1, 5);
  const double gib = double(1 << 30);
  return {
      t,
      h,
      v,
      final_norm,
      softcap,
      mode,
      inputs,
      times[0].median_ms,
      times[1].median_ms,
      times[2].median_ms,
      times[3].median_ms,
      times[4].median_ms,
      double(forward_bytes + backward_bytes + std::size_t(t) * 4 + (kept_logits ? std::size_t(t * v) * 2 : 0)) / gib,
      kept_logits ? v : ops::cross_entropy_backward_chunk_columns(t, v, h)};
}

}  // namespace

void lm_head_training_benchmark(std::ostream& json) {
  cudaStream_t stream = nullptr;
  CODA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CublasGemm cublas(stream);
  std::vector<LmHeadRow> rows;
  for (const int64_t v : {128256, 32000})
    for (const int64_t h : {2048, 4096})
      rows.push_back(measure(8192, h, v, false, 0.0f, Backward::recompute, cublas, stream));
  rows.push_back(measure(8192, 2048, 128256, true, 0.0f, Backward::recompute, cublas, stream));
  rows.push_back(measure(8192, 2048, 128256, false, 30.0f, Backward::recompute, cublas, stream));
  for (const Backward mode : {Backward::kept, Backward::skip})
    for (const int64_t v : {128256, 32000}) rows.push_back(measure(8192, 2048, v, false, 0.0f, mode, cublas, stream));
  rows.push_back(measure(8192, 4096, 128256, true, 0.0f, Backward::skip, cublas, stream));
  // A softmax spread over hundreds of columns a row, above 2^-12 in most blocks of 256 tokens:
  // skipping finds little to leave out.
  rows.push_back(measure(8192, 2048, 128256, false, 0.0f, Backward::skip, cublas, stream, Inputs::wide));
  for (const Backward mode : {Backward::recompute, Backward::skip})
    rows.push_back(measure(8192, 2048, 128256, false, 0.0f, mode, cublas, stream, Inputs::zipf));

  std::printf(
      "\nLM head + cross-entropy, forward + backward (bf16, mean; options where the shape says): coda's two ops "
      "against coda's three "
      "plain GEMMs of the same shapes (X W^T, dY W, dY^T X; what the fused ops replace, without the logits) and "
      "cuBLAS's; TF/s counts 6 T V H. Extra memory: both workspaces and lse (coda allocates nothing else; inputs, "
      "loss and gradients not counted). +norm: after the final RMSNorm (its rstd as the row scale, the <dZ, Z> "
      "partials for its backward); +softcap: soft-capping at 30; +kept: the forward stores the logits and the backward "
      "reads them (three GEMMs; the logits counted as extra); +skip: the recomputing backward leaves out the blocks of "
      "dZ below 2^-12 |g| (skip_below). Inputs uniform in [-1, 1): logits of std ~15 at H = 2048, a peaked softmax; "
      "wide: x in [-0.2, 0.2), logits of std ~3, a softmax spread wide; zipf: a model of a trained head, logits "
      "-ln(v + 1) plus noise of std ~1.2, targets drawn from Zipf(1). "
      "torch.compile at T=8192 H=2048 V=128256: 20.45 ms, 2.5 GiB (an H100, not this run: docs/performance.md, "
      "\"The PyTorch package\")\n");
  std::printf("%-32s %9s %9s %9s %9s %7s %9s %8s %9s %6s\n", "shape", "fwd+bwd", "forward", "backward", "3 GEMMs",
              "fused/", "cuBLAS", "TF/s", "extra", "chunk");
  std::printf("%-32s %9s %9s %9s %9s %7s %9s %8s %9s %6s\n", "", "ms", "ms", "ms", "ms (coda)", "GEMMs", "3 ms",
              "fused", "GiB", "cols");
  json << "  \"lm_head_training\": [\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const LmHeadRow& r = rows[i];
    const std::string shape = "T=" + std::to_string(r.t) + " H=" + std::to_string(r.h) + " V=" + std::to_string(r.v) +
                              (r.final_norm ? " +norm" : "") + (r.softcap > 0 ? " +softcap" : "") +
                              (r.mode == Backward::kept   ? " +kept"
                               : r.mode == Backward::skip ? " +skip"
                                                          : "") +
                              (r.inputs == Inputs::wide   ? " wide"
                               : r.inputs == Inputs::zipf ? " zipf"
                                                          : "");
    const double flops = 6.0 * double(r.t) * double(r.v) * double(r.h);
    std::printf("%-32s %9.3f %9.3f %9.3f %9.3f %7.3f %9.3f %8.1f %9.3f %6lld\n", shape.c_str(), r.fused_ms,
                r.forward_ms, r.backward_ms, r.gemms_ms, r.fused_ms / r.gemms_ms, r.cublas_ms,
                flops / (r.fused_ms * 1e9), r.extra_gib, static_cast<long long>(r.chunk));
    json << "    {\"shape\": \"" << shape << "\", \"fused_ms\": " << r.fused_ms << ", \"forward_ms\": " << r.forward_ms
         << ", \"backward_ms\": " << r.backward_ms << ", \"coda_three_gemms_ms\": " << r.gemms_ms
         << ", \"cublas_three_gemms_ms\": " << r.cublas_ms << ", \"extra_gib\": " << r.extra_gib
         << ", \"chunk_columns\": " << r.chunk << "}" << (i + 1 < rows.size() ? "," : "") << "\n";
  }
  json << "  ]\n";
  cudaStreamDestroy(stream);
}

}  // namespace coda::bench

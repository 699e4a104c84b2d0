#include "layer_bench.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "arena.hpp"
#include "coda/blocks/layer.hpp"
#include "coda/core/device.hpp"
#include "coda/epilogue/parts.hpp"
#include "coda/gemm.hpp"
#include "coda/ops/rmsnorm.hpp"
#include "coda/ops/rope.hpp"
#include "coda/ops/swiglu.hpp"
#include "device_fill.hpp"
#include "timing.hpp"
#include "unfused.cuh"

namespace coda::bench {
namespace {

constexpr DType kBf16 = DType::bf16;
constexpr float kEps = 1e-6f;
constexpr int kHeadDim = 128;
constexpr int kMaxPosition = 4096;

using Work = std::function<void(int)>;

__nv_bfloat16* bf16(const TensorView& t) { return static_cast<__nv_bfloat16*>(t.data); }
float* f32(const TensorView& t) { return static_cast<float*>(t.data); }
std::size_t bytes_of(const TensorView& t) { return std::size_t(t.numel()) * size_of(t.dtype); }

struct Shape {
  int64_t tokens, hidden, ffn;
  int64_t qkv() const { return 3 * hidden; }
  int rotated_heads() const { return int(2 * hidden / kHeadDim); }  // Q and K; V passes through
};

struct Step {
  std::string name;
  double fused_ms = 0;
  double gemm_ms = 0;  // its GEMM alone; the step itself where it is a plain GEMM; 0 where it has none
  bool plain_gemm = false;
};

struct Result {
  Shape shape;
  double fused_forward = 0, fused_backward = 0, fused_step = 0;
  double unfused_forward = 0, unfused_backward = 0, unfused_step = 0;
  double gemm_forward = 0, gemm_backward = 0;
  double fused_mib = 0, unfused_mib = 0;  // activations, saved tensors and workspace (no weights, no gradients)
  double agreement = 0;                   // largest relative difference, fused against unfused
  std::vector<Step> steps;
};

// Everything one shape needs, on the device: the layer's weights and inputs, the fused block's
// outputs, saved tensors, workspace and gradients, the unfused sequence's own buffers and gradients,
// and the buffers of the backward timed step by step.
struct Buffers {
  Buffers(const Shape& s, cudaStream_t stream) : s(s) {
    const int64_t t = s.tokens, h = s.hidden, f = s.ffn, n = s.qkv();
    auto tile = [&](int64_t rows, int64_t cols, bool fill = false) {
      return arena.matrix(kBf16, rows, cols, stream, fill);
    };
    auto row_vector = [&](int64_t count) { return arena.vector(DType::f32, count, stream, false); };
    w = {tile(h, h, true),
         arena.vector(DType::f32, h, stream),
         tile(2 * f, h, true),
         tile(h, f, true),
         arena.vector(DType::f32, h, stream),
         tile(n, h, true),
         arena.matrix(DType::f32, kMaxPosition, kHeadDim / 2, stream),
         arena.matrix(DType::f32, kMaxPosition, kHeadDim / 2, stream),
         kHeadDim,
         s.rotated_heads(),
         kEps};
    attn_out = tile(t, h, true);
    residual = tile(t, h, true);
    positions = arena.int32_vector(t, [](int64_t i) { return int32_t(i % kMaxPosition); });
    grad_h2 = tile(t, h, true);
    grad_qkv = tile(t, n, true);
    h2 = tile(t, h);
    qkv = tile(t, n);
    saved = {tile(t, h), row_vector(t), tile(t, 2 * f), tile(t, f), row_vector(t)};
    grads = {tile(t, h), tile(t, h), tile(h, h), row_vector(h), tile(2 * f, h), tile(h, f), row_vector(h), tile(n, h)};
    workspace_bytes = blocks::layer_workspace_bytes(w, t);
    workspace = arena.allocate(workspace_bytes);

    // The unfused sequence: W_gate_up with gate and up as halves (torch.chunk), the same rows.
    w_gate_up_halves = tile(2 * f, h);
    const std::size_t row = std::size_t(h) * 2;
    CODA_CUDA_CHECK(cudaMemcpy2DAsync(w_gate_up_halves.data, row, w.w_gate_up.data, 2 * row, row, std::size_t(f),
                                      cudaMemcpyDeviceToDevice, stream));
    CODA_CUDA_CHECK(cudaMemcpy2DAsync(static_cast<char*>(w_gate_up_halves.data) + std::size_t(f) * row, row,
                                      static_cast<char*>(w.w_gate_up.data) + row, 2 * row, row, std::size_t(f),
                                      cudaMemcpyDeviceToDevice, stream));
    y = tile(t, h);
    h1 = tile(t, h);
    n1 = tile(t, h);
    rstd1 = row_vector(t);
    p = tile(t, 2 * f);
    act = tile(t, f);
    uh2 = tile(t, h);
    n2 = tile(t, h);
    rstd2 = row_vector(t);
    uqkv = tile(t, n);
    dz = tile(t, n);
    dn = tile(t, h);
    dh2 = tile(t, h);
    da = tile(t, f);
    dp = tile(t, 2 * f);
    norm_partials = arena.matrix(DType::f32, (t + 255) / 256, h, stream, false);
    ugrads = {tile(t, h), tile(t, h), tile(h, h), row_vector(h), tile(2 * f, h), tile(h, f), row_vector(h), tile(n, h)};

    // The backward step by step (the block's sequence, on buffers of its own).
    dots_qkv = arena.matrix(DType::f32, t, epilogue::parts_along(n), stream, false);
    dots_ffn = arena.matrix(DType::f32, t, epilogue::parts_along(f), stream, false);
    correction_bytes = ops::residual_rmsnorm_backward_workspace_bytes(t);
    correction = arena.allocate(correction_bytes);
    weight_partials_bytes = std::max(ops::rmsnorm_weight_gradients_workspace_bytes(n, h),
                                     ops::rmsnorm_weight_gradients_workspace_bytes(2 * f, h));
    weight_partials = arena.allocate(weight_partials_bytes);
  }

  std::size_t fused_bytes() const {
    return bytes_of(h2) + bytes_of(qkv) + bytes_of(saved.h1) + bytes_of(saved.rstd1) + bytes_of(saved.pre_activation) +
           bytes_of(saved.activation) + bytes_of(saved.rstd2) + workspace_bytes;
  }
  std::size_t unfused_bytes() const {
    std::size_t total = bytes_of(norm_partials);
    for (const TensorView* t : {&y, &h1, &n1, &rstd1, &p, &act, &uh2, &n2, &rstd2, &uqkv, &dz, &dn, &dh2, &da, &dp})
      total += bytes_of(*t);
    return total;
  }

  Shape s;
  Arena arena;
  blocks::LayerWeights w;
  TensorView attn_out, residual, positions, grad_h2, grad_qkv, h2, qkv;
  blocks::LayerSaved saved;
  blocks::LayerGradients grads, ugrads;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  TensorView w_gate_up_halves, y, h1, n1, rstd1, p, act, uh2, n2, rstd2, uqkv, dz, dn, dh2, da, dp, norm_partials;
  TensorView dots_qkv, dots_ffn;
  void* correction = nullptr;
  std::size_t correction_bytes = 0;
  void* weight_partials = nullptr;
  std::size_t weight_partials_bytes = 0;
};

void fused_forward(Buffers& b, cudaStream_t stream) {
  blocks::layer_forward(b.w, b.attn_out, b.residual, b.positions, b.h2, b.qkv, b.saved, b.workspace, b.workspace_bytes,
                        stream);
}

void fused_backward(Buffers& b, cudaStream_t stream) {
  blocks::layer_backward(b.w, b.attn_out, b.positions, b.h2, b.qkv, b.saved, b.grad_h2, b.grad_qkv, b.grads,
                         b.workspace, b.workspace_bytes, stream);
}

// The layer as autograd runs it: coda's GEMMs, then plain kernels (bench/unfused.cuh).
void unfused_forward(Buffers& b, cudaStream_t stream) {
  const Shape& s = b.s;
  const int64_t t = s.tokens;
  gemm({b.attn_out, Major::k}, {b.w.wo, Major::k}, b.y, stream);
  residual_rmsnorm(bf16(b.y), bf16(b.residual), f32(b.w.norm1), bf16(b.h1), bf16(b.n1), t, s.hidden, kEps, stream,
                   f32(b.rstd1));
  gemm({b.n1, Major::k}, {b.w_gate_up_halves, Major::k}, b.p, stream);
  silu_mul(bf16(b.p), bf16(b.act), t, s.ffn, stream);
  gemm({b.act, Major::k}, {b.w.w_down, Major::k}, b.y, stream);
  residual_rmsnorm(bf16(b.y), bf16(b.h1), f32(b.w.norm2), bf16(b.uh2), bf16(b.n2), t, s.hidden, kEps, stream,
                   f32(b.rstd2));
  gemm({b.n2, Major::k}, {b.w.w_qkv, Major::k}, b.uqkv, stream);
  rope(bf16(b.uqkv), static_cast<int32_t*>(b.positions.data), f32(b.w.cos), f32(b.w.sin), t, s.qkv(), kHeadDim,
       s.rotated_heads(), stream);
}

void unfused_backward(Buffers& b, cudaStream_t stream) {
  const Shape& s = b.s;
  const int64_t t = s.tokens;
  const blocks::LayerGradients& g = b.ugrads;
  rope_backward(bf16(b.grad_qkv), bf16(b.dz), static_cast<int32_t*>(b.positions.data), f32(b.w.cos), f32(b.w.sin), t,
                s.qkv(), kHeadDim, s.rotated_heads(), stream);
  gemm({b.dz, Major::mn}, {b.n2, Major::mn}, g.w_qkv, stream);
  gemm({b.dz, Major::k}, {b.w.w_qkv, Major::mn}, b.dn, stream);
  rmsnorm_backward(bf16(b.dn), bf16(b.uh2), f32(b.w.norm2), f32(b.rstd2), bf16(b.grad_h2), bf16(b.dh2), f32(g.norm2),
                   f32(b.norm_partials), t, s.hidden, stream);
  gemm({b.dh2, Major::k}, {b.w.w_down, Major::mn}, b.da, stream);
  gemm({b.dh2, Major::mn}, {b.act, Major::mn}, g.w_down, stream);
  silu_mul_backward(bf16(b.da), bf16(b.p), bf16(b.dp), t, s.ffn, stream);
  gemm({b.dp, Major::mn}, {b.n1, Major::mn}, g.w_gate_up, stream);
  gemm({b.dp, Major::k}, {b.w_gate_up_halves, Major::mn}, b.dn, stream);
  rmsnorm_backward(bf16(b.dn), bf16(b.h1), f32(b.w.norm1), f32(b.rstd1), bf16(b.dh2), bf16(g.residual), f32(g.norm1),
                   f32(b.norm_partials), t, s.hidden, stream);
  gemm({g.residual, Major::k}, {b.w.wo, Major::mn}, g.attn_out, stream);
  gemm({g.residual, Major::mn}, {b.attn_out, Major::mn}, g.wo, stream);
}

// The GEMMs of the fused layer alone: the same shapes and majors, plain epilogues.
void gemms_forward(Buffers& b, cudaStream_t stream) {
  gemm({b.attn_out, Major::k}, {b.w.wo, Major::k}, b.y, stream);
  gemm({b.n1, Major::k}, {b.w.w_gate_up, Major::k}, b.p, stream);
  gemm({b.act, Major::k}, {b.w.w_down, Major::k}, b.y, stream);
  gemm({b.n2, Major::k}, {b.w.w_qkv, Major::k}, b.uqkv, stream);
}

void gemms_backward(Buffers& b, cudaStream_t stream) {
  const blocks::LayerGradients& g = b.ugrads;
  gemm({b.dz, Major::k}, {b.w.w_qkv, Major::mn}, b.dn, stream);
  gemm({b.dz, Major::mn}, {b.uh2, Major::mn}, g.w_qkv, stream);
  gemm({b.dh2, Major::k}, {b.w.w_down, Major::mn}, b.da, stream);
  gemm({b.dh2, Major::mn}, {b.act, Major::mn}, g.w_down, stream);
  gemm({b.dp, Major::k}, {b.w.w_gate_up, Major::mn}, b.dn, stream);
  gemm({b.dp, Major::mn}, {b.h1, Major::mn}, g.w_gate_up, stream);
  gemm({g.residual, Major::k}, {b.w.wo, Major::mn}, g.attn_out, stream);
  gemm({g.residual, Major::mn}, {b.attn_out, Major::mn}, g.wo, stream);
}

// The block's backward one op at a time (src/blocks/layer.cpp's sequence), each beside the plain
// GEMM it is built on. Runs in order once first, so that every step reads what its predecessor wrote.
enum class StepKind { fused, plain_gemm, no_gemm };

struct StepWork {
  std::string name;
  StepKind kind;
  Work fused, gemm_alone;  // gemm_alone: for fused steps only
};

std::vector<StepWork> backward_steps(Buffers& b, cudaStream_t stream) {
  const blocks::LayerWeights& w = b.w;
  const blocks::LayerSaved& saved = b.saved;
  const blocks::LayerGradients& g = b.grads;
  // The block's workspace tensors, here on the unfused sequence's buffers of the same shapes.
  const TensorView gz2 = b.dz, gh2 = b.dh2, gp = b.dp, a = saved.activation, scratch = b.act;
  return {
      {"RoPE backward (rstd2 dZ2, <dqkv, qkv>)",
       StepKind::no_gemm,
       [&b, &w, &saved, gz2, stream](int) {
         ops::rope_backward(b.grad_qkv, b.positions, w.cos, w.sin, w.head_dim, w.rotated_heads, gz2, stream,
                            {.output = b.qkv, .row_dots = b.dots_qkv, .row_scale = saved.rstd2});
       },
       {}},
      {"dh2: norm 2 backward (dZ2s Wqkv)", StepKind::fused,
       [&b, &w, &saved, gz2, gh2, stream](int) {
         ops::gemm_residual_rmsnorm_backward(gz2, w.w_qkv, b.h2, w.norm2, saved.rstd2, b.dots_qkv, gh2, b.correction,
                                             b.correction_bytes, stream,
                                             {.grad_residual = b.grad_h2, .grad_output_scaled = true, .gemm = {}});
       },
       [&w, gz2, gh2, stream](int) {
         gemm({gz2, Major::k}, {w.w_qkv, Major::mn}, gh2, stream);
       }},
      {"dWqkv, dg2 (dZ2s^T h2)", StepKind::fused,
       [&b, &w, &g, gz2, stream](int) {
         ops::gemm_rmsnorm_weight_gradients(gz2, b.h2, w.w_qkv, w.norm2, g.w_qkv, g.norm2, b.weight_partials,
                                            b.weight_partials_bytes, stream);
       },
       [&b, &g, gz2, stream](int) {
         gemm({gz2, Major::mn}, {b.h2, Major::mn}, g.w_qkv, stream);
       }},
      {"SwiGLU backward (dh2 Wd)", StepKind::fused,
       [&b, &w, &saved, gh2, gp, stream](int) {
         ops::gemm_swiglu_backward(gh2, w.w_down, saved.pre_activation, gp, stream,
                                   {.row_dots = b.dots_ffn, .row_scale = saved.rstd1, .output = {}, .gemm = {}});
       },
       [&w, gh2, scratch, stream](int) {
         gemm({gh2, Major::k}, {w.w_down, Major::mn}, scratch, stream);
       }},
      {"dWd (dh2^T a)",
       StepKind::plain_gemm,
       [&g, gh2, a, stream](int) {
         gemm({gh2, Major::mn}, {a, Major::mn}, g.w_down, stream);
       },
       {}},
      {"dh1: norm 1 backward (dPs Wgu)", StepKind::fused,
       [&b, &w, &saved, &g, gp, gh2, stream](int) {
         ops::gemm_residual_rmsnorm_backward(gp, w.w_gate_up, saved.h1, w.norm1, saved.rstd1, b.dots_ffn, g.residual,
                                             b.correction, b.correction_bytes, stream,
                                             {.grad_residual = gh2, .grad_output_scaled = true, .gemm = {}});
       },
       [&w, &g, gp, stream](int) {
         gemm({gp, Major::k}, {w.w_gate_up, Major::mn}, g.residual, stream);
       }},
      {"dWgu, dg1 (dPs^T h1)", StepKind::fused,
       [&b, &w, &saved, &g, gp, stream](int) {
         ops::gemm_rmsnorm_weight_gradients(gp, saved.h1, w.w_gate_up, w.norm1, g.w_gate_up, g.norm1, b.weight_partials,
                                            b.weight_partials_bytes, stream);
       },
       [&saved, &g, gp, stream](int) {
         gemm({gp, Major::mn}, {saved.h1, Major::mn}, g.w_gate_up, stream);
       }},
      {"d attn_out (dr Wo)",
       StepKind::plain_gemm,
       [&w, &g, stream](int) {
         gemm({g.residual, Major::k}, {w.wo, Major::mn}, g.attn_out, stream);
       },
       {}},
      {"dWo (dr^T attn_out)",
       StepKind::plain_gemm,
       [&b, &g, stream](int) {
         gemm({g.residual, Major::mn}, {b.attn_out, Major::mn}, g.wo, stream);
       },
       {}},
  };
}

// Largest relative difference between the fused and the unfused results that do not depend on
// the gate/up row order.
double agreement(Buffers& b, cudaStream_t stream) {
  const std::pair<TensorView, TensorView> pairs[] = {{b.h2, b.uh2},
                                                     {b.qkv, b.uqkv},
                                                     {b.grads.attn_out, b.ugrads.attn_out},
                                                     {b.grads.residual, b.ugrads.residual},
                                                     {b.grads.wo, b.ugrads.wo},
                                                     {b.grads.w_down, b.ugrads.w_down},
                                                     {b.grads.w_qkv, b.ugrads.w_qkv},
                                                     {b.grads.norm1, b.ugrads.norm1},
                                                     {b.grads.norm2, b.ugrads.norm2}};
  double worst = 0;
  for (const auto& [fused, unfused] : pairs)
    worst =
        std::max(worst, relative_difference(fused.data, unfused.data, fused.dtype, std::size_t(fused.numel()), stream));
  return worst;
}

Result measure(const Shape& s, cudaStream_t stream) {
  Buffers b(s, stream);
  Result r;
  r.shape = s;
  // Once in order: every buffer holds what its consumers expect before anything is timed.
  fused_forward(b, stream);
  fused_backward(b, stream);
  unfused_forward(b, stream);
  unfused_backward(b, stream);
  r.agreement = agreement(b, stream);
  r.fused_mib = double(b.fused_bytes()) / (1 << 20);
  r.unfused_mib = double(b.unfused_bytes()) / (1 << 20);

  const std::vector<Timing> t =
      time_side_by_side({[&](int) { fused_forward(b, stream); }, [&](int) { fused_backward(b, stream); },
                         [&](int) {
                           fused_forward(b, stream);
                           fused_backward(b, stream);
                         },
                         [&](int) { unfused_forward(b, stream); }, [&](int) { unfused_backward(b, stream); },
                         [&](int) {
                           unfused_forward(b, stream);
                           unfused_backward(b, stream);
                         },
                         [&](int) { gemms_forward(b, stream); }, [&](int) { gemms_backward(b, stream); }},
                        stream);
  r.fused_forward = t[0].median_ms;
  r.fused_backward = t[1].median_ms;
  r.fused_step = t[2].median_ms;
  r.unfused_forward = t[3].median_ms;
  r.unfused_backward = t[4].median_ms;
  r.unfused_step = t[5].median_ms;
  r.gemm_forward = t[6].median_ms;
  r.gemm_backward = t[7].median_ms;

  fused_forward(b, stream);
  const std::vector<StepWork> steps = backward_steps(b, stream);
  std::vector<Work> pieces;
  for (const StepWork& step : steps) {
    step.fused(0);
    pieces.push_back(step.fused);
    if (step.gemm_alone) pieces.push_back(step.gemm_alone);
  }
  const std::vector<Timing> st = time_side_by_side(pieces, stream);
  std::size_t next = 0;
  for (const StepWork& step : steps) {
    Step out{step.name, st[next++].median_ms, 0, step.kind == StepKind::plain_gemm};
    if (step.gemm_alone) out.gemm_ms = st[next++].median_ms;
    if (out.plain_gemm) out.gemm_ms = out.fused_ms;
    r.steps.push_back(out);
  }
  return r;
}

void write_json(const std::string& path, const std::vector<Result>& results) {
  std::ofstream f(path);
  f << "{\n  \"device\": \"" << current_device().name << "\",\n  \"rows\": [\n";
  for (std::size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    f << "    {\"tokens\": " << r.shape.tokens << ", \"hidden\": " << r.shape.hidden << ", \"ffn\": " << r.shape.ffn
      << ", \"fused_forward_ms\": " << r.fused_forward << ", \"fused_backward_ms\": " << r.fused_backward
      << ", \"fused_forward_backward_ms\": " << r.fused_step << ", \"unfused_forward_ms\": " << r.unfused_forward
      << ", \"unfused_backward_ms\": " << r.unfused_backward << ", \"unfused_forward_backward_ms\": " << r.unfused_step
      << ", \"gemm_forward_ms\": " << r.gemm_forward << ", \"gemm_backward_ms\": " << r.gemm_backward
      << ", \"fused_mib\": " << r.fused_mib << ", \"unfused_mib\": " << r.unfused_mib
      << ", \"agreement\": " << r.agreement << ", \"steps\": [";
    for (std::size_t j = 0; j < r.steps.size(); ++j)
      f << (j ? ", " : "") << "{\"step\": \"" << r.steps[j].name << "\", \"fused_ms\": " << r.steps[j].fused_ms
        << ", \"gemm_ms\": " << r.steps[j].gemm_ms << ", \"plain_gemm\": " << (r.steps[j].plain_gemm ? "true" : "false")
        << "}";
    f << "]}" << (i + 1 < results.size() ? "," : "") << "\n";
  }
  f << "  ]\n}\n";
}

}  // namespace

int layer_benchmark(const LayerBenchOptions& options) {
  if (!hopper_available()) {
    std::fprintf(stderr, "coda bench layer: no Hopper GPU here; the benchmark needs one (see `coda info`)\n");
    return 1;
  }
  cudaStream_t stream = nullptr;
  CODA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::vector<Result> results;
  for (const auto& [h, f] : {std::pair<int64_t, int64_t>{2048, 5632}, {4096, 11008}})
    results.push_back(measure({options.tokens, h, f}, stream));

  std::printf(
      "coda bench layer: %s, bf16, median of CUDA-graph replays side by side. fused: coda::blocks::layer_forward / "
      "layer_backward; unfused: coda's GEMMs + plain CUDA kernels (autograd's sequence); GEMMs: the layer's 4 + 8 "
      "GEMMs alone (same shapes and majors). MiB: activations, saved tensors and workspace (unfused: every buffer, no "
      "reuse); agree: largest relative difference fused vs unfused.\n",
      current_device().name.c_str());
  std::printf("%-22s %9s %9s %9s %9s %9s %9s %9s %9s %7s %8s %8s %8s\n", "shape", "fused", "fused", "fused", "unfused",
              "unfused", "GEMMs", "GEMMs", "bwd /", "TF/s", "fused", "unfused", "agree");
  std::printf("%-22s %9s %9s %9s %9s %9s %9s %9s %9s %7s %8s %8s %8s\n", "", "fwd ms", "bwd ms", "fwd+bwd", "fwd ms",
              "fwd+bwd", "fwd ms", "bwd ms", "GEMMs", "fwd+bwd", "MiB", "MiB", "");
  for (const Result& r : results) {
    const Shape& s = r.shape;
    // The GEMMs' 2 M N K, forward (4 GEMMs) and backward (twice as much).
    const double flops = 3 * 2.0 * double(s.tokens) * double(s.hidden) * double(s.hidden + 3 * s.ffn + s.qkv());
    const std::string shape =
        "T=" + std::to_string(s.tokens) + " H=" + std::to_string(s.hidden) + " F=" + std::to_string(s.ffn);
    std::printf("%-22s %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %7.0f %8.0f %8.0f %8.1e\n", shape.c_str(),
                r.fused_forward, r.fused_backward, r.fused_step, r.unfused_forward, r.unfused_step, r.gemm_forward,
                r.gemm_backward, r.fused_backward / r.gemm_backward, flops / (r.fused_step * 1e9), r.fused_mib,
                r.unfused_mib, r.agreement);
  }
  for (const Result& r : results) {
    std::printf("\nthe backward step by step, T=%lld H=%lld F=%lld (fused op / its GEMM alone):\n",
                static_cast<long long>(r.shape.tokens), static_cast<long long>(r.shape.hidden),
                static_cast<long long>(r.shape.ffn));
    double fused = 0, gemm = 0;
    for (const Step& step : r.steps) {
      fused += step.fused_ms;
      gemm += step.gemm_ms;
      if (step.plain_gemm) std::printf("  %-40s %8.3f ms  (a plain GEMM)\n", step.name.c_str(), step.fused_ms);
      else if (step.gemm_ms > 0)
        std::printf("  %-40s %8.3f ms  GEMM %8.3f ms  %6.3f\n", step.name.c_str(), step.fused_ms, step.gemm_ms,
                    step.fused_ms / step.gemm_ms);
      else std::printf("  %-40s %8.3f ms  (no GEMM)\n", step.name.c_str(), step.fused_ms);
    }
    std::printf("  %-40s %8.3f ms  GEMM %8.3f ms  %6.3f\n", "sum", fused, gemm, fused / gemm);
  }
  write_json(options.json, results);
  std::printf("wrote %s\n", options.json.c_str());
  cudaStreamDestroy(stream);
  return 0;
}

}  // namespace coda::bench

#include "ops_bench.hpp"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "arena.hpp"
#include "coda/core/device.hpp"
#include "coda/gemm.hpp"
#include "coda/ops/cross_entropy.hpp"
#include "coda/ops/rmsnorm.hpp"
#include "coda/ops/rope.hpp"
#include "coda/ops/swiglu.hpp"
#include "cublas_gemm.hpp"
#include "device_fill.hpp"
#include "lm_head_bench.hpp"
#include "timing.hpp"
#include "unfused.cuh"

namespace coda::bench {
namespace {


struct Row {
  std::string op, shape;
  double flops;
  double fused_ms, gemm_ms, cublas_ms, unfused_ms, torch_compile_ms;
  double pingpong_ms;  // coda's GEMM on the ping-pong tile, the fused ops' mainloop at K < 4096
  double alone_ms;     // the fused op without its companion launch (GemmOptions::companion; 0: not timed)
};

// Times the fused op (and, where given, the same without its companion launch), our GEMM of the
// same shape (its default tile, and the ping-pong tile, the fused ops' at K < 4096), cuBLAS, and
// the unfused sequence (cuBLAS plus `rest`), side by side (alternating rounds) on the same buffers.
Row measure(const std::string& op, const std::string& shape, const TensorView& x, const TensorView& w,
            const std::function<void(int)>& fused, const std::function<void(int)>& fused_alone,
            const std::function<void(const TensorView& y)>& rest, double torch_compile_ms, CublasGemm& cublas,
            Arena& arena, cudaStream_t stream) {
  const TensorView y = arena.matrix(x.dtype, x.rows(), w.rows(), stream, false);
  Row r{op, shape, 2.0 * double(x.rows()) * double(w.rows()) * double(x.cols()), 0, 0, 0, 0, torch_compile_ms, 0, 0};
  const GemmOptions pingpong{.tile = GemmTile::pingpong_m128n128};
  std::vector<std::function<void(int)>> pieces{
      fused, [&](int) { gemm({x, Major::k}, {w, Major::k}, y, stream); },
      [&](int) { cublas.run({x, Major::k}, {w, Major::k}, y); },
      [&](int) {
        cublas.run({x, Major::k}, {w, Major::k}, y);
        rest(y);
      },
      [&](int) { gemm({x, Major::k}, {w, Major::k}, y, stream, pingpong); }};
  if (fused_alone) pieces.push_back(fused_alone);
  const std::vector<Timing> t = time_side_by_side(pieces, stream);
  r.fused_ms = t[0].median_ms;
  r.gemm_ms = t[1].median_ms;
  r.cublas_ms = t[2].median_ms;
  r.unfused_ms = t[3].median_ms;
  r.pingpong_ms = t[4].median_ms;
  if (fused_alone) r.alone_ms = t[5].median_ms;
  return r;
}

// The same options without the companion launch.
template <class Options>
Options alone(Options options) {
  options.gemm.companion = false;
  return options;
}

}  // namespace

int ops_benchmark(const std::string& json) {
  if (!hopper_available()) {
    std::fprintf(stderr, "coda bench ops: no Hopper GPU here; the benchmark needs one (see `coda info`)\n");
    return 1;
  }
  cudaStream_t stream = nullptr;
  CODA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CublasGemm cublas(stream);
  std::vector<Row> rows;
  const DType bf = DType::bf16;
  auto bf16 = [](const TensorView& t) { return static_cast<__nv_bfloat16*>(t.data); };

  for (const auto& [h, f, compiled] : {std::tuple{2048, 8192, 1.84}, std::tuple{4096, 14336, 6.27}}) {
    Arena arena;
    const int64_t t = 16384;
    TensorView x = arena.matrix(bf, t, h, stream), w = arena.matrix(bf, 2 * f, h, stream);
    TensorView out = arena.matrix(bf, t, f, stream, false);
    rows.push_back(measure("swiglu", "T=16384 H=" + std::to_string(h) + " F=" + std::to_string(f), x, w,
                           [&](int) { ops::gemm_swiglu(x, w, out, stream); },
                           [&](int) { ops::gemm_swiglu(x, w, out, stream, alone(ops::SwigluOptions{})); },
                           [&](const TensorView& y) { silu_mul(bf16(y), bf16(out), t, f, stream); }, compiled, cublas,
                           arena, stream));
  }
  for (const int64_t t : {1, 16, 64}) {  // decode: the swapped program tile (epilogue/plan.hpp)
    Arena arena;
    const int64_t h = 4096, f = 14336;
    TensorView x = arena.matrix(bf, t, h, stream), w = arena.matrix(bf, 2 * f, h, stream);
    TensorView out = arena.matrix(bf, t, f, stream, false);
    rows.push_back(measure("swiglu", "T=" + std::to_string(t) + " H=4096 F=14336", x, w,
                           [&](int) { ops::gemm_swiglu(x, w, out, stream); }, nullptr,
                           [&](const TensorView& y) { silu_mul(bf16(y), bf16(out), t, f, stream); }, 0.0, cublas,
                           arena, stream));
  }
  for (const auto& [h, compiled] : {std::tuple{2048, 0.764}, std::tuple{4096, 3.45}}) {
    Arena arena;
    const int64_t t = 16384, n = 3 * h;
    const int head_dim = 128, rotated = int(2 * h / head_dim), max_pos = 4096;
    TensorView x = arena.matrix(bf, t, h, stream), w = arena.matrix(bf, n, h, stream);
    TensorView out = arena.matrix(bf, t, n, stream, false);
    TensorView cos = arena.matrix(DType::f32, max_pos, head_dim / 2, stream);
    TensorView sin = arena.matrix(DType::f32, max_pos, head_dim / 2, stream);
    TensorView positions = arena.int32_vector(t, [&](int64_t i) { return int32_t(i % max_pos); });
    rows.push_back(measure(
        "rope (qkv)", "T=16384 H=" + std::to_string(h), x, w,
        [&](int) { ops::gemm_rope(x, w, positions, cos, sin, head_dim, rotated, out, stream); },
        [&](int) { ops::gemm_rope(x, w, positions, cos, sin, head_dim, rotated, out, stream, alone(ops::RopeOptions{})); },
        [&](const TensorView& y) {
          rope(bf16(y), static_cast<int32_t*>(positions.data), static_cast<float*>(cos.data),
               static_cast<float*>(sin.data), t, n, head_dim, rotated, stream);
        },
        compiled, cublas, arena, stream));
  }
  for (const int64_t h : {2048, 4096}) {  // the attention output projection: K = N = H
    Arena arena;
    const int64_t t = 16384;
    TensorView x = arena.matrix(bf, t, h, stream), w = arena.matrix(bf, h, h, stream);
    TensorView residual = arena.matrix(bf, t, h, stream), g = arena.vector(DType::f32, h, stream);
    TensorView hout = arena.matrix(bf, t, h, stream, false), u = arena.matrix(bf, t, h, stream, false);
    TensorView rstd = arena.vector(DType::f32, t, stream, false);
    const std::size_t bytes = ops::residual_rmsnorm_workspace_bytes(t, h);
    void* ws = arena.allocate(bytes);
    // Both rows' unfused sequence: it writes H and the normalized rows the next GEMM reads.
    auto unfused_rest = [&](const TensorView& y) {
      residual_rmsnorm(bf16(y), bf16(residual), static_cast<float*>(g.data), bf16(hout), bf16(u), t, h, 1e-6f, stream);
    };
    rows.push_back(measure(
        "residual+rmsnorm", "T=16384 H=" + std::to_string(h), x, w,
        [&](int) { ops::gemm_residual_rmsnorm(x, w, residual, g, 1e-6f, hout, u, rstd, ws, bytes, stream); },
        [&](int) {
          ops::gemm_residual_rmsnorm(x, w, residual, g, 1e-6f, hout, u, rstd, ws, bytes, stream,
                                     alone(ops::ResidualRmsNormOptions{}));
        },
        unfused_rest, 0.0, cublas, arena, stream));
    // The same without U: RMSNorm's weight folded into the next GEMM's (rmsnorm.hpp).
    rows.push_back(measure(
        "residual+rmsnorm, no U", "T=16384 H=" + std::to_string(h), x, w,
        [&](int) { ops::gemm_residual_rmsnorm(x, w, residual, {}, 1e-6f, hout, {}, rstd, ws, bytes, stream); },
        [&](int) {
          ops::gemm_residual_rmsnorm(x, w, residual, {}, 1e-6f, hout, {}, rstd, ws, bytes, stream,
                                     alone(ops::ResidualRmsNormOptions{}));
        },
        unfused_rest, 0.0, cublas, arena, stream));
  }
  {
    Arena arena;
    const int64_t t = 8192, h = 2048, v = 128256;
    TensorView x = arena.matrix(bf, t, h, stream), w = arena.matrix(bf, v, h, stream);
    TensorView targets = arena.int32_vector(t, [&](int64_t i) { return int32_t((i * 7919) % v); });
    TensorView loss = arena.vector(DType::f32, 1, stream, false), lse = arena.vector(DType::f32, t, stream, false);
    TensorView row_loss = arena.vector(DType::f32, t, stream, false);
    const std::size_t bytes = ops::cross_entropy_workspace_bytes(t, v);
    void* ws = arena.allocate(bytes);
    rows.push_back(measure(
        "lm head + CE", "T=8192 H=2048 V=128256", x, w,
        [&](int) { ops::gemm_cross_entropy(x, w, targets, loss, lse, ws, bytes, stream); },
        [&](int) { ops::gemm_cross_entropy(x, w, targets, loss, lse, ws, bytes, stream, alone(ops::CrossEntropyOptions{})); },
        [&](const TensorView& y) {
          cross_entropy_rows(bf16(y), static_cast<int32_t*>(targets.data), static_cast<float*>(row_loss.data), t, v,
                             stream);
        },
        7.49, cublas, arena, stream));
  }

  std::printf(
      "coda bench ops: %s, bf16, median of CUDA-graph replays; fused vs coda GEMM alone (same shape, its "
      "default tile), cuBLAS alone, cuBLAS + plain CUDA kernels, torch.compile (docs/performance.md, H200), and coda "
      "GEMM on the ping-pong tile (the fused ops' tile at K < 4096; from K = 4096, except residual + RMSNorm, they run "
      "on m128n256); 'alone': the fused op with GemmOptions::companion = false, no second launch on the SMs the "
      "ping-pong "
      "tile leaves idle (SwiGLU and RoPE at K < 4096 and residual + RMSNorm have one: elsewhere 'alone' repeats "
      "'fused')\n",
      current_device().name.c_str());
  std::printf("%-22s %-24s %9s %9s %7s %9s %9s %9s %8s %9s %7s %9s\n", "op", "shape", "fused ms", "GEMM ms", "fused/",
              "cuBLAS", "unfused", "compile", "TF/s", "ping-pong", "fused/", "alone");
  std::printf("%-22s %-24s %9s %9s %7s %9s %9s %9s %8s %9s %7s %9s\n", "", "", "", "(coda)", "GEMM", "ms", "ms", "ms",
              "fused", "GEMM ms", "pp", "ms");
  std::ofstream f(json);
  f << "{\n  \"device\": \"" << current_device().name << "\",\n  \"rows\": [\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    std::printf("%-22s %-24s %9.4f %9.4f %7.3f %9.4f %9.4f %9s %8.1f %9.4f %7.3f %9s\n", r.op.c_str(), r.shape.c_str(),
                r.fused_ms, r.gemm_ms, r.fused_ms / r.gemm_ms, r.cublas_ms, r.unfused_ms,
                r.torch_compile_ms > 0 ? std::to_string(r.torch_compile_ms).substr(0, 5).c_str() : "-",
                r.flops / (r.fused_ms * 1e9), r.pingpong_ms, r.fused_ms / r.pingpong_ms,
                r.alone_ms > 0 ? std::to_string(r.alone_ms).substr(0, 6).c_str() : "-");
    f << "    {\"op\": \"" << r.op << "\", \"shape\": \"" << r.shape << "\", \"fused_ms\": " << r.fused_ms
      << ", \"coda_gemm_ms\": " << r.gemm_ms << ", \"cublas_ms\": " << r.cublas_ms
      << ", \"unfused_ms\": " << r.unfused_ms << ", \"torch_compile_ms\": " << r.torch_compile_ms
      << ", \"coda_pingpong_gemm_ms\": " << r.pingpong_ms << ", \"fused_alone_ms\": " << r.alone_ms << "}"
      << (i + 1 < rows.size() ? "," : "") << "\n";
  }
  f << "  ],\n";
  lm_head_training_benchmark(f);
  f << "}\n";
  std::printf("wrote %s\n", json.c_str());
  cudaStreamDestroy(stream);
  return 0;
}

}  // namespace coda::bench

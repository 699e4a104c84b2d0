#include "router_bench.hpp"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "arena.hpp"
#include "coda/core/device.hpp"
#include "coda/gemm.hpp"
#include "coda/ops/router.hpp"
#include "cublas_gemm.hpp"
#include "router_unfused.cuh"
#include "timing.hpp"

namespace coda::bench {
namespace {

struct RouterRow {
  int64_t m, experts, k, hidden;
  std::string mode;
  double router_us, gemm_us, cublas_us, unfused_us;
  double scores_us;  // the scores path: the router with options.scores (0: not applicable, M <= 16)
  double fused_us;   // the selection in the epilogue: options.fused_selection (0: not applicable)
};

// Mixtral-style routing (softmax over all experts, the k best, renormalized), or DeepSeek-V3's
// (sigmoid, bias, 8 groups of which 4 are kept, scaled).
RouterRow measure(int64_t m, int64_t experts, int k, int64_t hidden, bool deepseek, CublasGemm& cublas,
                  cudaStream_t stream) {
  Arena arena;
  // Logits of a trained router's size (standard deviation about 1.3): with unit weights over K =
  // 7168 they would reach +-100, where every sigmoid is exactly 1 and softmax one-hot.
  const TensorView x = arena.matrix(DType::bf16, m, hidden, stream);
  const TensorView w = arena.matrix(DType::bf16, experts, hidden, stream, true, 4.0f / std::sqrt(float(hidden)));
  const TensorView weights = arena.matrix(DType::f32, m, k, stream, false);
  const TensorView ids = arena.matrix(DType::i32, m, k, stream, false);
  ops::RouterOptions options;
  options.mode = ops::RoutingMode::topk_softmax;
  options.k = k;
  options.renormalize = true;
  if (deepseek) {
    options.mode = ops::RoutingMode::sigmoid_bias;
    // DeepSeek-V3's load-balancing biases are of the sigmoid's size or less.
    options.expert_bias = arena.vector(DType::f32, experts, stream, true, 0.1f);
    options.n_group = 8;
    options.topk_group = 4;
    options.routed_scaling_factor = 2.5f;
  }
  const std::size_t router_bytes = ops::router_workspace_bytes(x, w, options);
  void* router_ws = arena.allocate(router_bytes);
  // The plain GEMM to bf16 logits, with the workspace that lets it split K at small M.
  const TensorView logits = arena.matrix(DType::bf16, m, experts, stream, false);
  const std::size_t gemm_bytes = gemm_workspace_bytes({x, Major::k}, {w, Major::k}, logits);
  void* gemm_ws = arena.allocate(gemm_bytes ? gemm_bytes : 16);
  // cuBLAS to f32 logits, then a plain softmax + top-k kernel.
  const int64_t ld = (experts + 3) / 4 * 4;
  const TensorView logits_f32 = TensorView::matrix(arena.allocate(std::size_t(m * ld) * 4), DType::f32, m, experts, ld);

  ops::RouterOptions fused = options;
  fused.fused_selection = true;
  // The epilogue takes DeepSeek-V3's 8 groups where a group is a chunk of every lane's share.
  const bool has_fused = k <= 8 && m > 16 && (!deepseek || experts == 128 || experts == 256);
  const std::size_t fused_bytes = ops::router_workspace_bytes(x, w, fused);
  void* fused_ws = arena.allocate(fused_bytes);
  ops::RouterOptions scored = options;  // the f32 scores written (options.scores), then selected
  scored.scores = logits_f32;
  const bool has_scores = m > 16;
  const std::size_t scored_bytes = ops::router_workspace_bytes(x, w, scored);
  void* scored_ws = arena.allocate(scored_bytes ? scored_bytes : 16);
  const int per_graph = m <= 128 ? 50 : 5;
  std::vector<std::function<void(int)>> works = {
      [&](int) { ops::gemm_router(x, w, weights, ids, router_ws, router_bytes, stream, options); },
      [&](int) {
        gemm({x, Major::k}, {w, Major::k}, logits, stream, {.workspace = gemm_ws, .workspace_bytes = gemm_bytes});
      },
      [&](int) {
        cublas.run({x, Major::k}, {w, Major::k}, logits);
      },
      [&](int) {
        cublas.run({x, Major::k}, {w, Major::k}, logits_f32);
        softmax_topk_after_gemm(static_cast<const float*>(logits_f32.data), ld, m, int(experts), k,
                                static_cast<float*>(weights.data), static_cast<int32_t*>(ids.data), stream);
      }};
  if (has_scores)
    works.push_back([&](int) { ops::gemm_router(x, w, weights, ids, scored_ws, scored_bytes, stream, scored); });
  if (has_fused)
    works.push_back([&](int) { ops::gemm_router(x, w, weights, ids, fused_ws, fused_bytes, stream, fused); });
  const std::vector<Timing> t = time_side_by_side(works, stream, 3, per_graph, 5);
  return {m,
          experts,
          k,
          hidden,
          deepseek ? "sigmoid_bias 8/4" : "topk_softmax",
          t[0].median_ms * 1e3,
          t[1].median_ms * 1e3,
          t[2].median_ms * 1e3,
          t[3].median_ms * 1e3,
          has_scores ? t[4].median_ms * 1e3 : 0.0,
          has_fused ? t[4 + (has_scores ? 1 : 0)].median_ms * 1e3 : 0.0};
}

}  // namespace

int router_benchmark(const std::string& json_path) {
  cudaStream_t stream = nullptr;
  CODA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CublasGemm cublas(stream);
  struct Config {
    int64_t experts;
    int k;
    int64_t hidden;
  };
  // The six, and E = 512 at k = 8, which the epilogue's wide rows take (k <= 8).
  const std::vector<Config> configs = {{8, 2, 4096},   {64, 8, 2048},   {128, 8, 4096}, {256, 8, 7168},
                                       {384, 8, 7168}, {512, 10, 4096}, {512, 8, 4096}};
  std::vector<RouterRow> rows;
  for (const Config& c : configs)
    for (int64_t m : {1, 16, 128, 4096, 16384}) {
      rows.push_back(measure(m, c.experts, c.k, c.hidden, false, cublas, stream));
      if (c.experts == 256) rows.push_back(measure(m, c.experts, c.k, c.hidden, true, cublas, stream));
    }

  std::printf(
      "\nMoE router (bf16 X M x K, W_r E x K): coda's router (GEMM + selection, weights and ids) against coda's "
      "plain GEMM to bf16 logits (with a workspace: split K at small M), cuBLAS's, and cuBLAS to f32 logits + a "
      "plain softmax/top-k kernel (one warp per token); the router's two paths past decode, each forced: scores "
      "(options.scores: the f32 scores written, then selected) and epilogue (options.fused_selection: selected in "
      "the GEMM's epilogue, E <= 512, k <= 8, no groups or 8 at E = 128, 256). Times in microseconds (CUDA graphs, "
      "median).\n");
  std::printf("%6s %4s %3s %5s %-17s %9s %9s %7s %9s %9s %9s %9s\n", "M", "E", "k", "K", "mode", "router", "coda GEMM",
              "router/", "scores", "epilogue", "cuBLAS", "cuBLAS +");
  std::printf("%6s %4s %3s %5s %-17s %9s %9s %7s %9s %9s %9s %9s\n", "", "", "", "", "", "us", "us", "GEMM", "path us",
              "path us", "GEMM us", "top-k us");
  std::ofstream json(json_path);
  json << "{\n  \"device\": \"" << current_device().name << "\",\n  \"router\": [\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const RouterRow& r = rows[i];
    const auto optional = [](double us) { return us > 0 ? std::to_string(us).substr(0, 7) : std::string("-"); };
    std::printf("%6lld %4lld %3lld %5lld %-17s %9.2f %9.2f %7.3f %9s %9s %9.2f %9.2f\n", (long long)r.m,
                (long long)r.experts, (long long)r.k, (long long)r.hidden, r.mode.c_str(), r.router_us, r.gemm_us,
                r.router_us / r.gemm_us, optional(r.scores_us).c_str(), optional(r.fused_us).c_str(), r.cublas_us,
                r.unfused_us);
    json << "    {\"m\": " << r.m << ", \"experts\": " << r.experts << ", \"k\": " << r.k
         << ", \"hidden\": " << r.hidden << ", \"mode\": \"" << r.mode << "\", \"router_us\": " << r.router_us
         << ", \"coda_gemm_us\": " << r.gemm_us << ", \"cublas_gemm_us\": " << r.cublas_us
         << ", \"cublas_topk_us\": " << r.unfused_us << ", \"scores_path_us\": " << r.scores_us
         << ", \"epilogue_path_us\": " << r.fused_us << "}" << (i + 1 < rows.size() ? "," : "") << "\n";
  }
  json << "  ]\n}\n";
  cudaStreamDestroy(stream);
  std::printf("results: %s\n", json_path.c_str());
  return 0;
}

}  // namespace coda::bench

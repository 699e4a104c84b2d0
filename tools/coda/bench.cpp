// coda bench <what> [options]: the benchmarks of bench/, run from the command line. Options are
// checked before anything looks for a GPU.
#include <algorithm>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "commands.hpp"
#include "options.hpp"

#ifdef CODA_WITH_BENCHMARKS
#include "gemm_bench.hpp"
#include "layer_bench.hpp"
#include "ops_bench.hpp"
#include "primitives_bench.hpp"
#include "router_bench.hpp"
#include "tile_timeline.hpp"
#include "timing.hpp"
#endif

namespace coda::cli {
namespace {

constexpr const char* kUsage =
    "usage: coda bench gemm [options]         coda's GEMM against cuBLAS on Transformer, square, decode and "
    "backward shapes\n"
    "       coda bench ops [options]          each fused op against its GEMM, cuBLAS + plain kernels and "
    "torch.compile; LM head + cross-entropy forward + backward against three GEMMs\n"
    "       coda bench layer [options]        the Transformer layer block, forward and backward, against the "
    "unfused sequence and its GEMMs alone\n"
    "       coda bench router [options]       the MoE router against its plain GEMM, cuBLAS and cuBLAS + a "
    "top-k kernel, M from 1 to 16384\n"
    "       coda bench primitives [options]   what each epilogue primitive costs inside the GEMM\n"
    "       coda bench timeline [options]     where a program kernel's time goes, tile by tile\n"
    "(coda bench <what> --help: its options)\n";

#ifdef CODA_WITH_BENCHMARKS
// --warmup-ms, which every benchmark takes (bench/timing.hpp).
void add_warmup(OptionParser& options, double* ms) {
  options.number("--warmup-ms", ms, "run each timed piece this long before sampling it (default 100)", 0.0);
}

// "automatic" and every tile configuration's name, in GemmTile order (name() is "unknown" past the last).
std::vector<std::string> tile_names() {
  std::vector<std::string> out;
  for (int t = 0; name(GemmTile(t)) != "unknown"; ++t) out.emplace_back(name(GemmTile(t)));
  return out;
}

int run_gemm(int argc, char** argv) {
  bench::GemmBenchOptions o;
  std::string dtype = "bf16", tile = "automatic", split_through = "cluster";
  double warmup = -1;
  OptionParser options("coda bench gemm", "coda's GEMM against cuBLAS, same shapes, majors and data, in one run.");
  options.text("--set", &o.set, "NAME", "the shapes", bench::gemm_bench_sets())
      .text("--shape", &o.shape, "M,N,K", "one shape instead of a set (A and B K-major)")
      .text("--dtype", &dtype, "TYPE", "the operands' type", {"bf16", "f16"})
      .text("--json", &o.json, "PATH", "where the results are written (default bench_gemm.json)")
      .text("--tile", &tile, "NAME", "force a tile configuration", tile_names())
      .integer("--split", &o.forced.split_k,
               "split K into N segments (0: the heuristic; a workspace, or a cluster's CTAs on a swapped tile)", 0, 64)
      .text("--split-through", &split_through, "WHERE",
            "where a swapped tile's K segments meet: a cluster's shared memory where they fit, or the workspace",
            {"cluster", "workspace"})
      .integer("--raster", &o.forced.raster_group, "tile-order group height in cluster rows (0: default)", 0, 1 << 20)
      .integer("--max-ctas", &o.forced.max_ctas, "cap the persistent grid (0: every SM)", 0, 1 << 20);
  add_warmup(options, &warmup);
  if (const auto exit = options.parse(argc, argv)) return *exit;
  o.dtype = dtype == "f16" ? DType::f16 : DType::bf16;
  o.forced.split_k_in_cluster = split_through == "cluster";
  const std::vector<std::string> tiles = tile_names();
  o.forced.tile = GemmTile(std::find(tiles.begin(), tiles.end(), tile) - tiles.begin());
  if (warmup >= 0) bench::set_warmup_ms(warmup);
  return bench::gemm_benchmark(o);
}

// ops and router: --json PATH and --warmup-ms.
template <int (*Benchmark)(const std::string&)>
int run_with_json(const char* command, const char* summary, const char* default_json, int argc, char** argv) {
  std::string json = default_json;
  double warmup = -1;
  OptionParser options(command, summary);
  options.text("--json", &json, "PATH", std::string("where the results are written (default ") + default_json + ")");
  add_warmup(options, &warmup);
  if (const auto exit = options.parse(argc, argv)) return *exit;
  if (warmup >= 0) bench::set_warmup_ms(warmup);
  return Benchmark(json);
}

int run_layer(int argc, char** argv) {
  bench::LayerBenchOptions o;
  double warmup = -1;
  int tokens = int(o.tokens);
  OptionParser options("coda bench layer",
                       "The layer block (coda/blocks/layer.hpp) forward and forward + backward at (H, F) = (2048, "
                       "5632) and (4096, 11008), beside coda's GEMMs + plain kernels and its GEMMs alone, then the "
                       "backward step by step; bench/layer_vs_torch.py adds PyTorch eager and torch.compile.");
  options.text("--json", &o.json, "PATH", "where the results are written (default bench_layer.json)")
      .integer("--tokens", &tokens, "T, the rows (default 16384)", 1, 1 << 20);
  add_warmup(options, &warmup);
  if (const auto exit = options.parse(argc, argv)) return *exit;
  o.tokens = tokens;
  if (warmup >= 0) bench::set_warmup_ms(warmup);
  return bench::layer_benchmark(o);
}

// primitives and timeline: no options but --warmup-ms.
template <int (*Benchmark)()>
int run_plain(const char* command, const char* summary, int argc, char** argv) {
  double warmup = -1;
  OptionParser options(command, summary);
  add_warmup(options, &warmup);
  if (const auto exit = options.parse(argc, argv)) return *exit;
  if (warmup >= 0) bench::set_warmup_ms(warmup);
  return Benchmark();
}
#endif

}  // namespace

int bench(int argc, char** argv) {
  const std::string_view what = argc >= 2 ? argv[1] : "";
  if (what == "-h" || what == "--help") {
    std::printf("%s", kUsage);
    return 0;
  }
#ifdef CODA_WITH_BENCHMARKS
  if (what == "gemm") return run_gemm(argc - 1, argv + 1);
  if (what == "ops")
    return run_with_json<bench::ops_benchmark>(
        "coda bench ops",
        "Each fused op against coda's GEMM of the same shape, cuBLAS alone, cuBLAS + plain CUDA kernels and "
        "torch.compile's time (docs/performance.md), in one run.",
        "bench_ops.json", argc - 1, argv + 1);
  if (what == "layer") return run_layer(argc - 1, argv + 1);
  if (what == "router")
    return run_with_json<bench::router_benchmark>(
        "coda bench router",
        "The MoE router (coda/ops/router.hpp) at M in {1, 16, 128, 4096, 16384} and six (E, k, K) shapes, beside "
        "coda's plain GEMM to the logits, cuBLAS's, and cuBLAS + a top-k kernel.",
        "bench_router.json", argc - 1, argv + 1);
  if (what == "primitives")
    return run_plain<bench::primitives_benchmark>(
        "coda bench primitives", "What each epilogue primitive class costs inside the GEMM.", argc - 1, argv + 1);
  if (what == "timeline")
    return run_plain<bench::timeline_benchmark>(
        "coda bench timeline", "Where a program kernel's time goes, tile by tile (MMA, epilogue, slack, clock).",
        argc - 1, argv + 1);
  if (!what.empty()) std::fprintf(stderr, "coda bench: unknown benchmark '%s'\n", argv[1]);
  std::fprintf(stderr, "%s", kUsage);
  return 2;
#else
  std::fprintf(stderr,
               "coda bench: this build of coda has no benchmarks (configure with -DCODA_BUILD_BENCHMARKS=ON: the "
               "test preset does, `cmake --workflow --preset test`)\n");
  return 2;
#endif
}

}  // namespace coda::cli

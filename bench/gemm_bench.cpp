#include "gemm_bench.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "coda/core/device.hpp"
#include "coda/gemm.hpp"
#include "cublas_gemm.hpp"
#include "device_fill.hpp"
#include "timing.hpp"

namespace coda::bench {
namespace {

struct Shape {
  std::string group;  // transformer, square, decode, backward
  std::string label;
  int64_t m, n, k;
  Major a = Major::k, b = Major::k;
};

struct Row {
  Shape shape;
  GemmPlan plan;
  Timing ours, cublas;
  double difference = 0;  // ||ours - cuBLAS|| / ||cuBLAS||
};

// The Transformer projections at T tokens: QKV (3H), attention output (H), gate/up (2F), down.
void add_layer(std::vector<Shape>& out, const std::string& group, int64_t t, int64_t h, int64_t f,
               const std::string& tag) {
  out.push_back({group, "qkv " + tag, t, 3 * h, h});
  out.push_back({group, "out " + tag, t, h, h});
  out.push_back({group, "gate/up " + tag, t, 2 * f, h});
  out.push_back({group, "down " + tag, t, h, f});
}

std::vector<Shape> shapes_for(const std::string& set) {
  std::vector<Shape> s;
  const bool all = set == "all";
  if (all || set == "square")
    for (int64_t n : {2048, 4096, 8192}) s.push_back({"square", "square " + std::to_string(n), n, n, n});
  if (all || set == "transformer") {
    const int64_t hidden[] = {2048, 4096, 8192}, ffn[] = {8192, 14336, 28672};
    for (int i = 0; i < 3; ++i) add_layer(s, "transformer", 16384, hidden[i], ffn[i], "H=" + std::to_string(hidden[i]));
    for (int64_t h : {2048, 4096, 8192}) s.push_back({"transformer", "lm head H=" + std::to_string(h), 8192, 128256, h});
  }
  if (all || set == "decode")
    for (const auto& [h, f] : {std::pair<int64_t, int64_t>{4096, 14336}, {8192, 28672}})
      for (int64_t m : {1, 2, 8, 16, 32, 64, 128})
        add_layer(s, "decode", m, h, f, "M=" + std::to_string(m) + " H=" + std::to_string(h));
  if (all || set == "backward") {
    // dX = dY W (B N-major) and dW = dY^T X (A M-major, B N-major) of the H=4096 layer, plus
    // the four majors at 4096^3.
    const int64_t t = 16384, h = 4096, f = 14336;
    const int64_t outs[] = {3 * h, h, 2 * f, h}, ins[] = {h, h, h, f};
    const char* names[] = {"qkv", "out", "gate/up", "down"};
    for (int i = 0; i < 4; ++i) {
      s.push_back({"backward", std::string("dgrad ") + names[i], t, ins[i], outs[i], Major::k, Major::mn});
      s.push_back({"backward", std::string("wgrad ") + names[i], outs[i], ins[i], t, Major::mn, Major::mn});
    }
    s.push_back({"backward", "4096^3 A M-major", 4096, 4096, 4096, Major::mn, Major::k});
    s.push_back({"backward", "4096^3 B N-major", 4096, 4096, 4096, Major::k, Major::mn});
    s.push_back({"backward", "4096^3 both MN", 4096, 4096, 4096, Major::mn, Major::mn});
  }
  if (set == "quick") {
    s.push_back({"square", "square 4096", 4096, 4096, 4096});
    s.push_back({"transformer", "gate/up H=4096", 16384, 28672, 4096});
    s.push_back({"decode", "down M=16", 16, 4096, 14336});
  }
  return s;
}

struct Buffers {
  std::vector<void*> a, b, c;
  void* workspace = nullptr;
  ~Buffers() {
    for (auto* v : {&a, &b, &c})
      for (void* p : *v) cudaFree(p);
    cudaFree(workspace);
  }
};

Row measure(const Shape& shape, DType dtype, const GemmOptions& forced, CublasGemm& cublas, cudaStream_t stream,
            std::size_t l2_bytes) {
  const std::size_t e = size_of(dtype);
  const std::size_t bytes_a = std::size_t(shape.m * shape.k) * e, bytes_b = std::size_t(shape.n * shape.k) * e,
                    bytes_c = std::size_t(shape.m * shape.n) * e;
  // Enough sets of operands that one pass over them is more than twice the L2.
  const int sets = int(std::clamp<std::size_t>((2 * l2_bytes) / (bytes_a + bytes_b + bytes_c) + 1, 1, 16));
  Buffers buf;
  for (int i = 0; i < sets; ++i) {
    void* p = nullptr;
    CODA_CUDA_CHECK(cudaMalloc(&p, bytes_a));
    buf.a.push_back(p);
    fill_uniform(p, dtype, bytes_a / e, 1000 + i, stream);
    CODA_CUDA_CHECK(cudaMalloc(&p, bytes_b));
    buf.b.push_back(p);
    fill_uniform(p, dtype, bytes_b / e, 2000 + i, stream);
    CODA_CUDA_CHECK(cudaMalloc(&p, bytes_c));
    buf.c.push_back(p);
  }
  void* reference = nullptr;
  CODA_CUDA_CHECK(cudaMalloc(&reference, bytes_c));

  auto operand = [&](void* p, int64_t mn, Major major) -> GemmOperand {
    return major == Major::k ? GemmOperand{TensorView::matrix(p, dtype, mn, shape.k), major}
                             : GemmOperand{TensorView::matrix(p, dtype, shape.k, mn), major};
  };
  auto views = [&](int i) {
    return std::make_tuple(operand(buf.a[std::size_t(i % sets)], shape.m, shape.a),
                           operand(buf.b[std::size_t(i % sets)], shape.n, shape.b),
                           TensorView::matrix(buf.c[std::size_t(i % sets)], dtype, shape.m, shape.n));
  };

  Row row;
  row.shape = shape;
  GemmOptions options = forced;
  {
    auto [a, b, c] = views(0);
    const std::size_t ws = gemm_workspace_bytes(a, b, c, options);
    if (ws > 0) {
      CODA_CUDA_CHECK(cudaMalloc(&buf.workspace, ws));
      CODA_CUDA_CHECK(cudaMemsetAsync(buf.workspace, 0, ws, stream));  // zeroed once; every call leaves it so
      options.workspace = buf.workspace;
      options.workspace_bytes = ws;
    }
    row.plan = plan_gemm(a, b, c, options);
    // Correctness against cuBLAS on the first set before timing anything.
    cublas.run(a, b, TensorView::matrix(reference, dtype, shape.m, shape.n));
    gemm(a, b, c, stream, options);
    CODA_CUDA_CHECK(cudaStreamSynchronize(stream));
    row.difference = relative_difference(c.data, reference, dtype, bytes_c / e, stream);
  }
  cudaFree(reference);

  // Each replayed graph holds enough launches for ~2 ms of work (at least one pass over the
  // rotating sets), so launch gaps are amortised; 8 replays per round.
  const double flops = 2.0 * double(shape.m) * double(shape.n) * double(shape.k);
  const double estimate_ms = std::max(flops / 700e12 * 1e3, 0.004);
  const int per_graph = std::max(sets, int(std::clamp(2.0 / estimate_ms, 1.0, 200.0)));
  const int samples = 8;
  auto ours = [&](int i) {
    auto [a, b, c] = views(i);
    gemm(a, b, c, stream, options);
  };
  auto theirs = [&](int i) {
    auto [a, b, c] = views(i);
    cublas.run(a, b, c);
  };
  const std::vector<Timing> t = time_side_by_side({ours, theirs}, stream, 5, per_graph, samples);
  row.ours = t[0];
  row.cublas = t[1];
  return row;
}

double tflops(const Shape& s, const Timing& t) { return 2.0 * double(s.m) * double(s.n) * double(s.k) / (t.median_ms * 1e9); }

// Rows of A up to which a product is small M: bound by reading the weight, so its rows report
// the weight's bandwidth against the copy's.
constexpr int64_t kSmallM = 128;

// GB/s of B's bytes (the weight's: what bounds a small-M product) in time `t`.
double weight_gbs(const Shape& s, const Timing& t, DType dtype) {
  return double(s.n) * double(s.k) * double(size_of(dtype)) / (t.median_ms * 1e6);
}

// The device-to-device copy bandwidth, (bytes read + bytes written) / time, of 512 MiB: the
// better of cudaMemcpyAsync and a 16-byte copy kernel. The memory speed small M is measured against.
double copy_gbs(cudaStream_t stream) {
  const std::size_t bytes = std::size_t(512) << 20;
  void *from = nullptr, *to = nullptr;
  CODA_CUDA_CHECK(cudaMalloc(&from, bytes));
  CODA_CUDA_CHECK(cudaMalloc(&to, bytes));
  CODA_CUDA_CHECK(cudaMemsetAsync(from, 1, bytes, stream));
  const std::vector<Timing> t = time_side_by_side(
      {[&](int) { CODA_CUDA_CHECK(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, stream)); },
       [&](int) { copy_16byte(to, from, bytes, stream); }},
      stream, 2, 4, 8);
  cudaFree(from);
  cudaFree(to);
  return 2.0 * double(bytes) / (std::min(t[0].median_ms, t[1].median_ms) * 1e6);
}

std::string majors(const Shape& s) {
  return std::string(s.a == Major::k ? "A:K" : "A:M") + (s.b == Major::k ? " B:K" : " B:N");
}

void write_json(const std::string& path, const std::vector<Row>& rows, const std::map<std::string, double>& geomeans,
                const DeviceInfo& device, DType dtype, double copy) {
  std::ofstream f(path);
  f << "{\n  \"device\": \"" << device.name << "\",\n  \"dtype\": \"" << name(dtype) << "\",\n";
  if (copy > 0) f << "  \"copy_gbs\": " << copy << ",\n";
  f << "  \"geomean_ratio\": {";
  bool first = true;
  for (const auto& [group, g] : geomeans) {
    f << (first ? "" : ", ") << "\"" << group << "\": " << g;
    first = false;
  }
  f << "},\n  \"rows\": [\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    f << "    {\"group\": \"" << r.shape.group << "\", \"label\": \"" << r.shape.label << "\", \"m\": " << r.shape.m
      << ", \"n\": " << r.shape.n << ", \"k\": " << r.shape.k << ", \"majors\": \"" << majors(r.shape)
      << "\", \"tile\": \"" << name(r.plan.tile) << "\", \"split_k\": " << r.plan.split_k
      << ", \"split_k_in_cluster\": " << (r.plan.split_k_in_cluster ? "true" : "false")
      << ", \"stream_k_tiles\": " << r.plan.stream_k_tiles << ", \"ctas\": " << r.plan.ctas
      << ", \"coda_ms\": " << r.ours.median_ms << ", \"cublas_ms\": " << r.cublas.median_ms
      << ", \"coda_tflops\": " << tflops(r.shape, r.ours) << ", \"cublas_tflops\": " << tflops(r.shape, r.cublas)
      << ", \"ratio_cublas_over_coda\": " << r.cublas.median_ms / r.ours.median_ms
      << ", \"coda_weight_gbs\": " << weight_gbs(r.shape, r.ours, dtype)
      << ", \"cublas_weight_gbs\": " << weight_gbs(r.shape, r.cublas, dtype)
      << ", \"difference_vs_cublas\": " << r.difference << "}" << (i + 1 < rows.size() ? "," : "") << "\n";
  }
  f << "  ]\n}\n";
}

}  // namespace

std::vector<std::string> gemm_bench_sets() { return {"transformer", "square", "decode", "backward", "quick", "all"}; }

int gemm_benchmark(const GemmBenchOptions& options) {
  const std::string& set = options.set;
  const DType dtype = options.dtype;
  const GemmOptions& forced = options.forced;
  if (!hopper_available()) {
    std::fprintf(stderr, "coda bench gemm: no Hopper GPU here; the benchmark needs one (see `coda info`)\n");
    return 1;
  }
  std::vector<Shape> shapes = shapes_for(set);
  if (!options.shape.empty()) {
    long long m = 0, n = 0, k = 0;
    if (std::sscanf(options.shape.c_str(), "%lld,%lld,%lld", &m, &n, &k) != 3 || m < 1 || n < 1 || k < 1) {
      std::fprintf(stderr, "coda bench gemm: --shape '%s' is not M,N,K (three positive integers)\n",
                   options.shape.c_str());
      return 2;
    }
    shapes = {{"shape", "M,N,K", m, n, k}};
  }
  if (shapes.empty()) {
    std::fprintf(stderr, "coda bench gemm: unknown --set '%s'\n", set.c_str());
    return 2;
  }
  const DeviceInfo& device = current_device();
  cudaStream_t stream = nullptr;
  CODA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CublasGemm cublas(stream);

  std::printf("coda bench gemm: %s, %s, median of CUDA-graph replays over rotating buffers\n",
              device.name.c_str(), std::string(name(dtype)).c_str());
  const bool small_m = std::any_of(shapes.begin(), shapes.end(), [](const Shape& s) { return s.m <= kSmallM; });
  const double copy = small_m ? copy_gbs(stream) : 0;
  if (small_m)
    std::printf("device-to-device copy: %.0f GB/s (read + write); rows with M <= %lld: GB/s of the weight's bytes, "
                "%% of that\n",
                copy, static_cast<long long>(kSmallM));
  std::printf("%-12s %-22s %-24s %-9s %-26s %9s %7s %9s %7s %7s %9s %13s %13s\n", "group", "shape", "M x N x K",
              "majors", "tile", "coda ms", "TF/s", "cuBLAS ms", "TF/s", "ratio", "diff", "coda GB/s", "cuBLAS GB/s");
  std::vector<Row> rows;
  std::map<std::string, std::pair<double, int>> log_sums;
  double lowest_small_m_ratio = 1e30, lowest_copy_share = 1e30;  // over rows with M <= kSmallM; M <= 16
  for (const Shape& s : shapes) {
    const Row r = measure(s, dtype, forced, cublas, stream, device.l2_bytes);
    rows.push_back(r);
    const double ratio = r.cublas.median_ms / r.ours.median_ms;
    log_sums[s.group].first += std::log(ratio);
    log_sums[s.group].second += 1;
    const std::string dims = std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k);
    const std::string plan =
        std::string(name(r.plan.tile)) +
        (r.plan.split_k > 1 ? (r.plan.split_k_in_cluster ? " cluster" : " split") + std::to_string(r.plan.split_k)
                            : "") +
        (r.plan.stream_k_tiles > 0 ? " sk" + std::to_string(r.plan.stream_k_tiles) : "") + " " +
        std::to_string(r.plan.ctas);
    char bandwidth[2][32] = {"-", "-"};
    if (s.m <= kSmallM) {
      const double ours = weight_gbs(s, r.ours, dtype), theirs = weight_gbs(s, r.cublas, dtype);
      std::snprintf(bandwidth[0], sizeof bandwidth[0], "%.0f %3.0f%%", ours, 100 * ours / copy);
      std::snprintf(bandwidth[1], sizeof bandwidth[1], "%.0f %3.0f%%", theirs, 100 * theirs / copy);
      lowest_small_m_ratio = std::min(lowest_small_m_ratio, ratio);
      if (s.m <= 16) lowest_copy_share = std::min(lowest_copy_share, ours / copy);
    }
    std::printf("%-12s %-22s %-24s %-9s %-26s %9.4f %7.1f %9.4f %7.1f %7.3f %9.2e %13s %13s\n", s.group.c_str(),
                s.label.c_str(), dims.c_str(), majors(s).c_str(), plan.c_str(), r.ours.median_ms, tflops(s, r.ours),
                r.cublas.median_ms, tflops(s, r.cublas), ratio, r.difference, bandwidth[0], bandwidth[1]);
    std::fflush(stdout);
  }
  std::map<std::string, double> geomeans;
  std::printf("\ngeometric mean of cuBLAS time / coda time:\n");
  for (const auto& [group, sum] : log_sums) {
    geomeans[group] = std::exp(sum.first / sum.second);
    std::printf("  %-12s %.3f over %d shapes\n", group.c_str(), geomeans[group], sum.second);
  }
  if (small_m) {
    std::printf("M <= %lld: lowest shape %.3f of cuBLAS", static_cast<long long>(kSmallM), lowest_small_m_ratio);
    if (lowest_copy_share < 1e30) std::printf("; at M <= 16 at least %.1f%% of the copy bandwidth", 100 * lowest_copy_share);
    std::printf("\n");
  }
  write_json(options.json, rows, geomeans, device, dtype, copy);
  std::printf("wrote %s\n", options.json.c_str());
  cudaStreamDestroy(stream);
  return 0;
}

}  // namespace coda::bench

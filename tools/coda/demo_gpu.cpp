// coda demo's GPU suite: the GEMM on a few shapes (residues and both operand majors included),
// then each fused op (demo_gpu_ops.cpp), every one checked against the fp64 reference on sampled
// rows, then timed against cuBLAS on the same data. Also the helpers all sections share
// (demo_gpu.hpp).
#include "demo_gpu.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "coda/core/device.hpp"
#include "coda/gemm.hpp"
#include "coda/reference/gemm.hpp"
#include "coda/reference/matrix.hpp"
#include "demo.hpp"
#include "device_fill.hpp"
#include "timing.hpp"

namespace coda::cli {
namespace gpu {

DeviceMemory allocate(std::size_t bytes) {
  void* p = nullptr;
  CODA_CUDA_CHECK(cudaMalloc(&p, std::max<std::size_t>(bytes, 1)));
  return DeviceMemory(p);
}

DeviceMatrix::DeviceMatrix(DType dtype, int64_t rows, int64_t cols)
    : dtype_(dtype),
      rows_(rows),
      cols_(cols),
      ld_((cols + int64_t(16 / size_of(dtype)) - 1) / int64_t(16 / size_of(dtype)) * int64_t(16 / size_of(dtype))),
      memory_(allocate(bytes())) {}

DeviceMatrix DeviceMatrix::random(DType dtype, int64_t rows, int64_t cols, uint64_t seed, cudaStream_t stream) {
  DeviceMatrix m(dtype, rows, cols);
  bench::fill_uniform(m.memory_.get(), dtype, std::size_t(rows * m.ld_), seed, stream);
  return m;
}

DeviceMatrix DeviceMatrix::poisoned(DType dtype, int64_t rows, int64_t cols, cudaStream_t stream) {
  DeviceMatrix m(dtype, rows, cols);
  CODA_CUDA_CHECK(cudaMemsetAsync(m.memory_.get(), 0xFF, m.bytes(), stream));
  return m;
}

DeviceMatrix DeviceMatrix::of(const reference::Matrix& values, DType dtype, cudaStream_t stream) {
  DeviceMatrix m(dtype, values.rows, values.cols);
  std::vector<unsigned char> host(m.bytes());
  reference::store(values, TensorView::matrix(host.data(), dtype, m.rows_, m.cols_, m.ld_));
  CODA_CUDA_CHECK(cudaMemcpyAsync(m.memory_.get(), host.data(), host.size(), cudaMemcpyHostToDevice, stream));
  CODA_CUDA_CHECK(cudaStreamSynchronize(stream));  // `host` goes out of scope
  return m;
}

reference::Matrix DeviceMatrix::download() const {
  std::vector<unsigned char> host(bytes());
  CODA_CUDA_CHECK(cudaMemcpy(host.data(), memory_.get(), host.size(), cudaMemcpyDeviceToHost));
  return reference::to_matrix(TensorView::matrix(host.data(), dtype_, rows_, cols_, ld_));
}

reference::Matrix DeviceMatrix::download_rows(const std::vector<int64_t>& which) const {
  const std::size_t row_bytes = std::size_t(cols_) * size_of(dtype_), pitch = std::size_t(ld_) * size_of(dtype_);
  std::vector<unsigned char> host(which.size() * row_bytes);
  for (std::size_t i = 0; i < which.size(); ++i)
    CODA_CUDA_CHECK(cudaMemcpy(host.data() + i * row_bytes,
                               static_cast<const unsigned char*>(memory_.get()) + std::size_t(which[i]) * pitch,
                               row_bytes, cudaMemcpyDeviceToHost));
  return reference::to_matrix(TensorView::matrix(host.data(), dtype_, int64_t(which.size()), cols_));
}

std::vector<int64_t> sampled_rows(int64_t m) {
  constexpr int kSampledRows = 32;
  std::vector<int64_t> rows;
  for (int i = 0; i < kSampledRows; ++i) rows.push_back(m * i / kSampledRows);
  rows.push_back(m - 1);
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return rows;
}

reference::Matrix rows_of(const reference::Matrix& m, const std::vector<int64_t>& rows) {
  reference::Matrix selected(int64_t(rows.size()), m.cols);
  for (std::size_t i = 0; i < rows.size(); ++i)
    std::copy(m.row(rows[i]), m.row(rows[i]) + m.cols, selected.row(int64_t(i)));
  return selected;
}

double sampled_error(const reference::Matrix& got, const std::vector<int64_t>& rows, const reference::Matrix& want) {
  if (std::any_of(got.data.begin(), got.data.end(), [](double v) { return std::isnan(v); })) return INFINITY;
  return reference::relative_error(rows_of(got, rows), want);
}

namespace {

cudaStream_t new_stream() {
  cudaStream_t stream = nullptr;
  CODA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return stream;
}

double gemm_flops(const GemmCall& g) {
  const int64_t k = g.a.major == Major::k ? g.a.view.cols() : g.a.view.rows();
  return 2.0 * double(g.c.rows()) * double(g.c.cols()) * double(k);
}

double median_ms(const std::function<void()>& launch, cudaStream_t stream, TimingPlan plan) {
  return bench::time_launches([&](int) { launch(); }, stream, plan.per_graph, plan.replays).median_ms;
}

}  // namespace

GpuContext::GpuContext() : stream_(new_stream()), cublas_(stream_.get()) {}

void GpuContext::synchronize() const { CODA_CUDA_CHECK(cudaStreamSynchronize(stream())); }

std::string GpuContext::timing_note(const std::function<void()>& coda, const std::vector<GemmCall>& gemms,
                                    TimingPlan plan, bool fused) {
  double flops = 0;
  for (const GemmCall& g : gemms) flops += gemm_flops(g);
  const auto tflops = [&](double ms) { return flops / (ms * 1e9); };
  const double coda_ms = median_ms(coda, stream(), plan);
  const double cublas_ms = median_ms(
      [&] {
        for (const GemmCall& g : gemms) cublas_.run(g.a, g.b, g.c);
      },
      stream(), plan);
  std::string note = formatted("%7.3f  %7.0f  %9.3f  %7.0f  %11.2f", coda_ms, tflops(coda_ms), cublas_ms,
                               tflops(cublas_ms), cublas_ms / coda_ms);
  if (!fused) return note;
  const double gemm_ms = median_ms(
      [&] {
        for (const GemmCall& g : gemms) gemm(g.a, g.b, g.c, stream(), g.options);
      },
      stream(), plan);
  return note + formatted("  %12.3f", gemm_ms);
}

}  // namespace gpu

namespace {

using namespace gpu;

constexpr DType kDtype = DType::bf16;
// The GEMM rows are the suite's headline timings: larger graphs, more replays than a fused op's note.
constexpr TimingPlan kGemmTiming{5, 30};

// A GEMM operand stored as its major says: K contiguous, or M (N) contiguous.
DeviceMatrix operand(int64_t mn, int64_t k, Major major, uint64_t seed, cudaStream_t stream) {
  return major == Major::k ? DeviceMatrix::random(kDtype, mn, k, seed, stream)
                           : DeviceMatrix::random(kDtype, k, mn, seed, stream);
}

struct GemmShape {
  const char* label;
  int64_t m, n, k;
  Major a, b;
};

// Transformer-sized forward, dgrad and wgrad GEMMs, decode (split-K), and residues in every
// dimension with each major.
const GemmShape kGemmShapes[] = {
    {"square", 4096, 4096, 4096, Major::k, Major::k},
    {"MLP up", 8192, 14336, 4096, Major::k, Major::k},
    {"dgrad", 4096, 4096, 14336, Major::k, Major::mn},
    {"wgrad", 4096, 4096, 8192, Major::mn, Major::mn},
    {"decode", 16, 4096, 14336, Major::k, Major::k},
    {"residue", 1000, 1031, 777, Major::k, Major::mn},
    {"residue", 777, 1000, 1031, Major::mn, Major::k},
};

void gemm_section(SectionChecks& checks) {
  GpuContext gpu;
  cudaStream_t stream = gpu.stream();
  uint64_t seed = 1;
  for (const GemmShape& s : kGemmShapes) {
    const DeviceMatrix a = operand(s.m, s.k, s.a, seed++, stream), b = operand(s.n, s.k, s.b, seed++, stream);
    const DeviceMatrix c = DeviceMatrix::poisoned(kDtype, s.m, s.n, stream);
    const GemmOperand a_operand{a.view(), s.a}, b_operand{b.view(), s.b};

    GemmCall call{a_operand, b_operand, c.view()};
    const std::size_t workspace_bytes = gemm_workspace_bytes(a_operand, b_operand, c.view());
    const DeviceMemory workspace = allocate(workspace_bytes);
    if (workspace_bytes > 0) {
      CODA_CUDA_CHECK(cudaMemsetAsync(workspace.get(), 0, workspace_bytes, stream));  // gemm() wants it zeroed once
      call.options.workspace = workspace.get();
      call.options.workspace_bytes = workspace_bytes;
    }
    const GemmPlan plan = plan_gemm(a_operand, b_operand, c.view(), call.options);
    const auto ours = [&] { gemm(call.a, call.b, call.c, stream, call.options); };
    ours();
    gpu.synchronize();  // the downloads below run on another stream

    const std::vector<int64_t> rows = sampled_rows(s.m);
    const double error = reference::relative_error(c.download_rows(rows),
                                                   reference::gemm_rows(a.download(), s.a, b.download(), s.b, rows));
    const std::string plan_text =
        std::string(name(plan.tile)) + (plan.split_k > 1 ? formatted(" split-K %d", plan.split_k) : "");
    checks.add(formatted("%-7s %5lldx%5lldx%5lld  A:%s B:%s  %-19s", s.label, (long long)s.m, (long long)s.n,
                         (long long)s.k, s.a == Major::k ? "K" : "M", s.b == Major::k ? "K" : "N", plan_text.c_str()),
               error, kBf16OutputLimit, gpu.timing_note(ours, {call}, kGemmTiming, /*fused=*/false));
  }
}

}  // namespace

// A fused op's row fills the last column too: its own GEMMs run alone by coda.
std::string gpu_note_heading() { return "coda ms  TFLOP/s  cuBLAS ms  TFLOP/s  cuBLAS/coda  coda GEMM ms"; }

const std::vector<DemoSection>& gpu_sections() {
  static const std::vector<DemoSection> sections{
      {"GEMM bf16", gemm_section},
      {"SwiGLU", gpu::swiglu_section},
      {"RoPE", gpu::rope_section},
      {"residual + RMSNorm", gpu::rmsnorm_section},
      {"cross-entropy", gpu::cross_entropy_section},
      {"layer (blocks)", gpu::layer_section},
  };
  return sections;
}

}  // namespace coda::cli

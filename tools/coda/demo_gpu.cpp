// coda demo's GPU suite: each kernel on a few shapes (residues and both operand majors
// included), checked against the fp64 reference on sampled rows, then timed against cuBLAS on the
// same data. Fused epilogue ops add their sections here as they land.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "coda/core/device.hpp"
#include "coda/gemm/gemm.hpp"
#include "coda/reference/gemm.hpp"
#include "coda/reference/matrix.hpp"
#include "cublas_gemm.hpp"
#include "demo.hpp"
#include "device_fill.hpp"
#include "timing.hpp"

namespace coda::cli {
namespace {

struct CudaFree {
  void operator()(void* p) const { cudaFree(p); }
};
using DeviceMemory = std::unique_ptr<void, CudaFree>;

struct StreamDestroy {
  void operator()(cudaStream_t s) const { cudaStreamDestroy(s); }
};
using Stream = std::unique_ptr<std::remove_pointer_t<cudaStream_t>, StreamDestroy>;

DeviceMemory allocate(std::size_t bytes) {
  void* p = nullptr;
  CODA_CUDA_CHECK(cudaMalloc(&p, std::max<std::size_t>(bytes, 1)));
  return DeviceMemory(p);
}

constexpr DType kDtype = DType::bf16;
// One bf16 rounding of each output (2^-9 relative) after fp32 accumulation.
constexpr double kBf16OutputLimit = 6e-3;
constexpr int kSampledRows = 32;

// A row-major bf16 matrix in device memory, rows padded to 16 bytes as TMA requires, filled with
// uniform random values on `stream`.
struct DeviceMatrix {
  int64_t rows, cols, ld;
  DeviceMemory memory;

  DeviceMatrix(int64_t rows_, int64_t cols_, uint64_t seed, cudaStream_t stream)
      : rows(rows_), cols(cols_), ld((cols_ + 7) / 8 * 8), memory(allocate(bytes())) {
    bench::fill_uniform(memory.get(), kDtype, std::size_t(rows * ld), seed, stream);
  }
  std::size_t bytes() const { return std::size_t(rows * ld) * size_of(kDtype); }
  TensorView view() const { return TensorView::matrix(memory.get(), kDtype, rows, cols, ld); }

  ref::Matrix download() const {
    std::vector<unsigned char> host(bytes());
    CODA_CUDA_CHECK(cudaMemcpy(host.data(), memory.get(), host.size(), cudaMemcpyDeviceToHost));
    return ref::to_matrix(TensorView::matrix(host.data(), kDtype, rows, cols, ld));
  }
  ref::Matrix download_rows(const std::vector<int64_t>& which) const {
    const std::size_t row_bytes = std::size_t(cols) * size_of(kDtype), pitch = std::size_t(ld) * size_of(kDtype);
    std::vector<unsigned char> host(which.size() * row_bytes);
    for (std::size_t i = 0; i < which.size(); ++i)
      CODA_CUDA_CHECK(cudaMemcpy(host.data() + i * row_bytes,
                                 static_cast<const unsigned char*>(memory.get()) + std::size_t(which[i]) * pitch,
                                 row_bytes, cudaMemcpyDeviceToHost));
    return ref::to_matrix(TensorView::matrix(host.data(), kDtype, int64_t(which.size()), cols));
  }
};

// A GEMM operand stored as its major says: K contiguous, or M (N) contiguous.
DeviceMatrix operand(int64_t mn, int64_t k, Major major, uint64_t seed, cudaStream_t stream) {
  return major == Major::k ? DeviceMatrix(mn, k, seed, stream) : DeviceMatrix(k, mn, seed, stream);
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

// Rows 0 and M-1 and an even spread between them.
std::vector<int64_t> sampled_rows(int64_t m) {
  std::vector<int64_t> rows;
  for (int i = 0; i < kSampledRows; ++i) rows.push_back(m * i / kSampledRows);
  rows.push_back(m - 1);
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return rows;
}

double tflops(const GemmShape& s, double ms) { return 2.0 * double(s.m) * double(s.n) * double(s.k) / (ms * 1e9); }

std::string formatted(const char* format, auto... values) {
  char text[160];
  std::snprintf(text, sizeof(text), format, values...);
  return text;
}

void gemm_section(SectionChecks& checks) {
  cudaStream_t created = nullptr;
  CODA_CUDA_CHECK(cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking));
  const Stream owned(created);
  cudaStream_t stream = owned.get();
  bench::CublasGemm cublas(stream);
  uint64_t seed = 1;
  for (const GemmShape& s : kGemmShapes) {
    const DeviceMatrix a = operand(s.m, s.k, s.a, seed++, stream), b = operand(s.n, s.k, s.b, seed++, stream);
    const DeviceMatrix c(s.m, s.n, seed++, stream);
    const GemmOperand a_operand{a.view(), s.a}, b_operand{b.view(), s.b};

    GemmOptions options;
    const std::size_t workspace_bytes = gemm_workspace_bytes(a_operand, b_operand, c.view());
    const DeviceMemory workspace = allocate(workspace_bytes);
    if (workspace_bytes > 0) {
      options.workspace = workspace.get();
      options.workspace_bytes = workspace_bytes;
    }
    const GemmPlan plan = plan_gemm(a_operand, b_operand, c.view(), options);
    gemm(a_operand, b_operand, c.view(), stream, options);
    CODA_CUDA_CHECK(cudaStreamSynchronize(stream));  // the downloads below run on another stream

    const std::vector<int64_t> rows = sampled_rows(s.m);
    const double error =
        ref::relative_error(c.download_rows(rows), ref::gemm_rows(a.download(), s.a, b.download(), s.b, rows));

    const auto ours = [&](int) { gemm(a_operand, b_operand, c.view(), stream, options); };
    const auto theirs = [&](int) { cublas.run(a_operand, b_operand, c.view()); };
    const double ours_ms = bench::time_launches(ours, stream, 5, 30).median_ms;
    const double theirs_ms = bench::time_launches(theirs, stream, 5, 30).median_ms;

    const std::string plan_text =
        std::string(name(plan.tile)) + (plan.split_k > 1 ? formatted(" split-K %d", plan.split_k) : "");
    checks.add(formatted("%-7s %5lldx%5lldx%5lld  A:%s B:%s  %-19s", s.label, (long long)s.m, (long long)s.n,
                         (long long)s.k, s.a == Major::k ? "K" : "M", s.b == Major::k ? "K" : "N", plan_text.c_str()),
               error, kBf16OutputLimit,
               formatted("%7.3f %7.0f  %9.3f %7.0f  %11.2f", ours_ms, tflops(s, ours_ms), theirs_ms,
                         tflops(s, theirs_ms), theirs_ms / ours_ms));
  }
}

}  // namespace

std::string gpu_note_heading() { return "coda ms  TFLOP/s  cuBLAS ms  TFLOP/s  cuBLAS/coda"; }

const std::vector<DemoSection>& gpu_sections() {
  static const std::vector<DemoSection> sections{
      {"GEMM bf16", gemm_section},
  };
  return sections;
}

}  // namespace coda::cli

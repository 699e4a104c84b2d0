// coda demo's GPU suite, shared by its sections (demo_gpu.cpp: the GEMM; demo_gpu_ops.cpp: the
// fused ops): device matrices, checks of sampled rows against the fp64 reference, and the timing
// note every row carries (its columns: gpu_note_heading()).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "coda/core/dtype.hpp"
#include "coda/core/tensor.hpp"
#include "coda/gemm.hpp"
#include "coda/reference/matrix.hpp"
#include "cublas_gemm.hpp"
#include "demo.hpp"

namespace coda::cli::gpu {

struct CudaFree {
  void operator()(void* p) const { cudaFree(p); }
};
using DeviceMemory = std::unique_ptr<void, CudaFree>;
DeviceMemory allocate(std::size_t bytes);

/// One bf16 rounding of each output (2^-9 relative) after fp32 accumulation.
inline constexpr double kBf16OutputLimit = 6e-3;

/// A row-major matrix in device memory, rows padded to 16 bytes as TMA requires. A vector (rstd,
/// positions, targets, losses) is a one-row matrix.
class DeviceMatrix {
 public:
  /// Uniform random values in [-1, 1), filled on `stream`.
  static DeviceMatrix random(DType dtype, int64_t rows, int64_t cols, uint64_t seed, cudaStream_t stream);
  /// Every byte 0xFF (NaN in every float type): an element an op never writes reads back as NaN.
  static DeviceMatrix poisoned(DType dtype, int64_t rows, int64_t cols, cudaStream_t stream);
  /// `values` rounded to `dtype` (i32 for positions and targets), copied before this returns.
  static DeviceMatrix of(const reference::Matrix& values, DType dtype, cudaStream_t stream);

  TensorView view() const { return TensorView::matrix(memory_.get(), dtype_, rows_, cols_, ld_); }
  TensorView vector_view() const { return TensorView::vector(memory_.get(), dtype_, cols_); }
  /// The values, once the work that writes them is done (the copy runs on the default stream).
  reference::Matrix download() const;
  reference::Matrix download_rows(const std::vector<int64_t>& which) const;

 private:
  DeviceMatrix(DType dtype, int64_t rows, int64_t cols);
  std::size_t bytes() const { return std::size_t(rows_ * ld_) * size_of(dtype_); }

  DType dtype_;
  int64_t rows_, cols_, ld_;
  DeviceMemory memory_;
};

/// Rows 0 and M-1 and an even spread between them: the rows checked against the fp64 reference.
std::vector<int64_t> sampled_rows(int64_t m);
/// Those rows of `m`, in order.
reference::Matrix rows_of(const reference::Matrix& m, const std::vector<int64_t>& rows);
/// The relative error of `got`'s rows `rows` against `want` (the reference of those rows, in
/// order); +inf when any element of `got` is NaN, poison that the op never overwrote.
double sampled_error(const reference::Matrix& got, const std::vector<int64_t>& rows, const reference::Matrix& want);

template <class... Values>
std::string formatted(const char* format, Values... values) {
  char text[160];
  std::snprintf(text, sizeof(text), format, values...);
  return text;
}

/// How a time is taken (bench::time_launches): CUDA-graph replays of `per_graph` launches, the
/// median of `replays`.
struct TimingPlan {
  int per_graph;
  int replays;
};

/// One GEMM, C = A B^T, as coda and cuBLAS both run it.
struct GemmCall {
  GemmOperand a, b;
  TensorView c;
  GemmOptions options = {};
};

/// What a section runs on: its own non-blocking stream, and cuBLAS on that stream.
class GpuContext {
 public:
  GpuContext();
  cudaStream_t stream() const { return stream_.get(); }
  void synchronize() const;

  /// A row's timing note: `coda` (a GEMM, or a fused op) against cuBLAS computing `gemms` (the
  /// GEMMs it does, plain, same output type), and for a fused op (`fused`) coda's own `gemms`
  /// alone: the difference is what the epilogue costs.
  std::string timing_note(const std::function<void()>& coda, const std::vector<GemmCall>& gemms, TimingPlan plan,
                          bool fused);

 private:
  struct StreamDestroy {
    void operator()(cudaStream_t s) const { cudaStreamDestroy(s); }
  };
  std::unique_ptr<std::remove_pointer_t<cudaStream_t>, StreamDestroy> stream_;
  bench::CublasGemm cublas_;  // after stream_: destroyed before it
};

// The fused ops' sections (demo_gpu_ops.cpp).
void swiglu_section(SectionChecks& checks);
void rope_section(SectionChecks& checks);
void rmsnorm_section(SectionChecks& checks);
void cross_entropy_section(SectionChecks& checks);
// The layer block (demo_layer.cpp).
void layer_section(SectionChecks& checks);

}  // namespace coda::cli::gpu

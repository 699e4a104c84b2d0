// The cuBLAS baseline: the same row-major C = A * B^T, with the same operand majors.
#pragma once

#include <cuda_runtime_api.h>

#include "coda/gemm.hpp"

namespace coda::bench {

class CublasGemm {
 public:
  explicit CublasGemm(cudaStream_t stream);
  ~CublasGemm();
  CublasGemm(const CublasGemm&) = delete;
  CublasGemm& operator=(const CublasGemm&) = delete;

  /// C = A * B^T (fp32 accumulation), rank-2 views only.
  void run(const GemmOperand& a, const GemmOperand& b, const TensorView& c);

 private:
  void* handle_ = nullptr;
  void* workspace_ = nullptr;
};

}  // namespace coda::bench

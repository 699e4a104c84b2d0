#include "cublas_gemm.hpp"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "coda/core/device.hpp"
#include "coda/core/validate.hpp"

namespace coda::bench {
namespace {

void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw CudaError("cuBLAS", text(what, " failed: status ", int(s)));
}

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::bf16: return CUDA_R_16BF;
    case DType::f16: return CUDA_R_16F;
    default: return CUDA_R_32F;
  }
}

constexpr std::size_t kWorkspaceBytes = std::size_t(32) << 20;  // what PyTorch gives cuBLAS on Hopper

}  // namespace

CublasGemm::CublasGemm(cudaStream_t stream) {
  cublasHandle_t h = nullptr;
  check(cublasCreate(&h), "cublasCreate");
  handle_ = h;
  check(cublasSetStream(h, stream), "cublasSetStream");
  CODA_CUDA_CHECK(cudaMalloc(&workspace_, kWorkspaceBytes));
  check(cublasSetWorkspace(h, workspace_, kWorkspaceBytes), "cublasSetWorkspace");
}

CublasGemm::~CublasGemm() {
  cublasDestroy(static_cast<cublasHandle_t>(handle_));
  cudaFree(workspace_);
}

void CublasGemm::run(const GemmOperand& a, const GemmOperand& b, const TensorView& c) {
  // cuBLAS is column-major: row-major C (M x N) is column-major C^T (N x M) = B * A^T. A
  // row-major K-major operand is a column-major K x rows matrix, so B (N x K) needs op T and
  // A (M x K) needs op N; MN-major operands flip.
  const int m = int(c.rows()), n = int(c.cols());
  const int k = int(a.major == Major::k ? a.view.cols() : a.view.rows());
  const cublasOperation_t op_b = b.major == Major::k ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = a.major == Major::k ? CUBLAS_OP_N : CUBLAS_OP_T;
  const float alpha = 1.0f, beta = 0.0f;
  check(cublasGemmEx(static_cast<cublasHandle_t>(handle_), op_b, op_a, n, m, k, &alpha, b.view.data,
                     cuda_type(b.view.dtype), int(b.view.ld()), a.view.data, cuda_type(a.view.dtype), int(a.view.ld()),
                     &beta, c.data, cuda_type(c.dtype), int(c.ld()), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx");
}

}  // namespace coda::bench

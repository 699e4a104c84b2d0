// Device memory for one benchmark case, freed with the arena: matrices and vectors filled with
// reproducible pseudo-random values (or left unfilled for outputs), and int32 vectors of given
// values (positions, targets).
//
//   coda::bench::Arena arena;
//   coda::TensorView x = arena.matrix(coda::DType::bf16, m, k, stream);          // random
//   coda::TensorView y = arena.matrix(coda::DType::bf16, m, n, stream, false);   // not filled
//   coda::TensorView pos = arena.int32_vector(m, [](int64_t i) { return int32_t(i % 4096); });
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "coda/core/device.hpp"
#include "coda/core/tensor.hpp"
#include "device_fill.hpp"

namespace coda::bench {

class Arena {
 public:
  /// The n-th allocation (from 1) is filled from seed first_seed + n.
  explicit Arena(uint64_t first_seed = 7) : first_seed_(first_seed) {}
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  ~Arena() {
    for (void* p : blocks_) cudaFree(p);
  }

  /// Filled uniform in [-scale, scale) unless `fill` is false.
  TensorView matrix(DType t, int64_t rows, int64_t cols, cudaStream_t stream, bool fill = true, float scale = 1.0f) {
    void* p = allocate(std::size_t(rows * cols) * size_of(t));
    if (fill) fill_uniform(p, t, std::size_t(rows * cols), first_seed_ + blocks_.size(), stream, scale);
    return TensorView::matrix(p, t, rows, cols);
  }
  TensorView vector(DType t, int64_t n, cudaStream_t stream, bool fill = true, float scale = 1.0f) {
    return TensorView::vector(matrix(t, 1, n, stream, fill, scale).data, t, n);
  }
  /// int32 values value(0), ..., value(n - 1), copied from the host.
  template <class Value>
  TensorView int32_vector(int64_t n, Value value) {
    std::vector<int32_t> host(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i) host[std::size_t(i)] = value(i);
    void* p = allocate(std::size_t(n) * sizeof(int32_t));
    CODA_CUDA_CHECK(cudaMemcpy(p, host.data(), std::size_t(n) * sizeof(int32_t), cudaMemcpyHostToDevice));
    return TensorView::vector(p, DType::i32, n);
  }
  void* allocate(std::size_t bytes) {
    void* p = nullptr;
    CODA_CUDA_CHECK(cudaMalloc(&p, bytes));
    blocks_.push_back(p);
    return p;
  }

 private:
  uint64_t first_seed_;
  std::vector<void*> blocks_;
};

}  // namespace coda::bench

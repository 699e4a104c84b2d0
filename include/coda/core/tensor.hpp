// coda/core/tensor.hpp: a non-owning view of a strided tensor in device or host memory.
//
//   // X: 4096 tokens x 2048 features of bf16, rows padded to 2056 elements
//   coda::TensorView x = coda::TensorView::matrix(ptr, coda::DType::bf16, 4096, 2048, /*ld=*/2056);
//   x.rows();  // 4096      x.cols();  // 2048      x.ld();  // 2056
//
// Strides count elements, not bytes. Row-major: the last dimension is the contiguous one.
// A view of rank 3 is a batch of matrices: shape (L, rows, cols), stride (batch, ld, 1).
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string>

#include "coda/core/api.hpp"
#include "coda/core/dtype.hpp"

namespace coda {

struct CODA_API TensorView {
  static constexpr int kMaxRank = 4;

  void* data = nullptr;
  DType dtype = DType::f32;
  int rank = 0;
  int64_t shape[kMaxRank] = {};
  int64_t stride[kMaxRank] = {};  // in elements

  /// A length-n vector with unit stride.
  static TensorView vector(const void* data, DType dtype, int64_t n);
  /// A rows x cols row-major matrix; ld (elements between rows) defaults to cols.
  static TensorView matrix(const void* data, DType dtype, int64_t rows, int64_t cols, int64_t ld = -1);
  /// A batch of `batch` row-major matrices, `batch_stride` elements apart (default rows * ld).
  static TensorView batched(const void* data, DType dtype, int64_t batch, int64_t rows, int64_t cols,
                            int64_t ld = -1, int64_t batch_stride = -1);

  bool empty_pointer() const { return data == nullptr; }
  int64_t rows() const { return rank >= 2 ? shape[rank - 2] : 1; }
  int64_t cols() const { return rank >= 1 ? shape[rank - 1] : 1; }
  int64_t ld() const { return rank >= 2 ? stride[rank - 2] : cols(); }
  int64_t batch() const { return rank >= 3 ? shape[rank - 3] : 1; }
  int64_t batch_stride() const { return rank >= 3 ? stride[rank - 3] : rows() * ld(); }
  int64_t numel() const;
  std::size_t element_bytes() const { return size_of(dtype); }
  /// "(4096, 2048) bf16, strides (2056, 1)", for error messages.
  std::string describe() const;
};

/// Writes describe(): error messages take a view as one of their parts (core/validate.hpp).
CODA_API std::ostream& operator<<(std::ostream& out, const TensorView& view);

}  // namespace coda

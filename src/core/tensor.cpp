#include "coda/core/tensor.hpp"

#include <ostream>
#include <sstream>

#include "coda/core/layout.hpp"

namespace coda {

TensorView TensorView::vector(const void* data, DType dtype, int64_t n) {
  TensorView v;
  v.data = const_cast<void*>(data);
  v.dtype = dtype;
  v.rank = 1;
  v.shape[0] = n;
  v.stride[0] = 1;
  return v;
}

TensorView TensorView::matrix(const void* data, DType dtype, int64_t rows, int64_t cols, int64_t ld) {
  TensorView v;
  v.data = const_cast<void*>(data);
  v.dtype = dtype;
  v.rank = 2;
  v.shape[0] = rows;
  v.shape[1] = cols;
  v.stride[0] = ld < 0 ? cols : ld;
  v.stride[1] = 1;
  return v;
}

TensorView TensorView::batched(const void* data, DType dtype, int64_t batch, int64_t rows, int64_t cols,
                               int64_t ld, int64_t batch_stride) {
  TensorView v;
  v.data = const_cast<void*>(data);
  v.dtype = dtype;
  v.rank = 3;
  v.shape[0] = batch;
  v.shape[1] = rows;
  v.shape[2] = cols;
  v.stride[2] = 1;
  v.stride[1] = ld < 0 ? cols : ld;
  v.stride[0] = batch_stride < 0 ? rows * v.stride[1] : batch_stride;
  return v;
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank; ++i) n *= shape[i];
  return n;
}

std::string TensorView::describe() const {
  std::ostringstream s;
  s << *this;
  return s.str();
}

std::ostream& operator<<(std::ostream& out, Major m) { return out << name(m); }

std::ostream& operator<<(std::ostream& out, const TensorView& v) {
  out << '(';
  for (int i = 0; i < v.rank; ++i) out << (i ? ", " : "") << v.shape[i];
  out << ") " << name(v.dtype) << ", strides (";
  for (int i = 0; i < v.rank; ++i) out << (i ? ", " : "") << v.stride[i];
  return out << ')';
}

}  // namespace coda

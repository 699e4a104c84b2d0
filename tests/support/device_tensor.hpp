// A tensor with a host copy and a device copy, for GPU tests.
#pragma once

#include <cstring>
#include <vector>

#include "support/gpu.hpp"
#include "support/random.hpp"

namespace coda::test {

struct DeviceTensor {
  HostTensor host;
  DeviceBuffer device;

  /// Rows padded to a multiple of 16 bytes unless `ld` is given (what TMA-fed kernels need). The
  /// device copy has kGuardBytes more after the last row, for written_only_inside().
  DeviceTensor(DType dtype, int64_t rows, int64_t cols, int64_t ld = -1)
      : host(dtype, rows, cols, ld >= 0 ? ld : padded(dtype, cols)), device(host.bytes.size() + kGuardBytes) {}
  static constexpr std::size_t kGuardBytes = 4096;

  static int64_t padded(DType dtype, int64_t cols) {
    const int64_t per_16_bytes = 16 / int64_t(size_of(dtype));
    return (cols + per_16_bytes - 1) / per_16_bytes * per_16_bytes;
  }

  /// Random values in [lo, hi) on both copies.
  DeviceTensor& random(double lo = -1.0, double hi = 1.0) {
    host.fill_random(lo, hi);
    device.upload(host.bytes);
    return *this;
  }
  /// NaN everywhere on the device (every float type reads 0xFF bytes as NaN).
  DeviceTensor& poison() {
    device.poison();
    return *this;
  }
  DeviceTensor& upload() {
    device.upload(host.bytes);
    return *this;
  }
  /// The device copy, back in `host`.
  DeviceTensor& download() {
    device.download(host.bytes.data(), host.bytes.size());
    return *this;
  }
  /// After poison() and a kernel: whether every byte outside the rows and columns still holds
  /// the poison (each row's padding up to ld, and the guard after the last row), so the kernel
  /// wrote nothing past the tensor's edges. Except the bytes from a row's end up to the next
  /// multiple of 16: a TMA store writes whole 16-byte chunks (coda/epilogue/arguments.hpp, TileOut).
  bool written_only_inside() const {
    std::vector<unsigned char> all(device.bytes());
    device.download(all.data(), all.size());
    const std::size_t element = size_of(host.view.dtype), ld = std::size_t(host.view.ld()) * element;
    const std::size_t row_bytes = std::size_t(host.view.cols()) * element, rows = std::size_t(host.view.rows());
    const std::size_t writable = (row_bytes + 15) / 16 * 16;
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t b = writable; b < ld; ++b)
        if (all[r * ld + b] != 0xFF) return false;
    for (std::size_t b = rows * ld; b < all.size(); ++b)
      if (all[b] != 0xFF) return false;
    return true;
  }
  TensorView view() const {
    TensorView v = host.view;
    v.data = device.get();
    return v;
  }
  /// A rank-1 view of a one-row tensor.
  TensorView vector_view() const { return TensorView::vector(device.get(), host.view.dtype, host.view.cols()); }
};

/// int32 values, on both copies (positions, targets).
inline DeviceTensor int_vector(const std::vector<int32_t>& values) {
  DeviceTensor t(DType::i32, 1, int64_t(values.size()));
  std::memcpy(t.host.bytes.data(), values.data(), values.size() * 4);
  t.upload();
  return t;
}

}  // namespace coda::test

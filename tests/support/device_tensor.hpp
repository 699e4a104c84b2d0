// A tensor with a host copy and a device copy, for GPU tests.
#pragma once

#include "support/gpu.hpp"
#include "support/random.hpp"

namespace coda::test {

struct DeviceTensor {
  HostTensor host;
  DeviceBuffer device;

  /// Rows padded to a multiple of 16 bytes unless `ld` is given (what TMA-fed kernels need).
  DeviceTensor(DType dtype, int64_t rows, int64_t cols, int64_t ld = -1)
      : host(dtype, rows, cols, ld >= 0 ? ld : padded(dtype, cols)), device(host.bytes.size()) {}

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
  TensorView view() const {
    TensorView v = host.view;
    v.data = device.get();
    return v;
  }
  /// A rank-1 view of a one-row tensor.
  TensorView vector_view() const { return TensorView::vector(device.get(), host.view.dtype, host.view.cols()); }
};

}  // namespace coda::test

// GPU test support: skip cleanly without a Hopper GPU, own device memory, poison outputs.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "coda/core/device.hpp"

/// Skip (never pass) the current test unless a Hopper GPU is present.
#define CODA_REQUIRE_HOPPER()                                                              \
  do {                                                                                     \
    if (!::coda::hopper_available())                                                       \
      GTEST_SKIP() << "no Hopper (sm_90) CUDA device: this GPU test cannot run here";      \
  } while (0)

namespace coda::test {

/// Device memory owned for the length of a test.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) { CODA_CUDA_CHECK(cudaMalloc(&data_, bytes ? bytes : 1)); }
  ~DeviceBuffer() { if (data_) cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : data_(o.data_), bytes_(o.bytes_) { o.data_ = nullptr; }

  void* get() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  void upload(const void* host, std::size_t n) { CODA_CUDA_CHECK(cudaMemcpy(data_, host, n, cudaMemcpyHostToDevice)); }
  void upload(const std::vector<unsigned char>& host) { upload(host.data(), host.size()); }
  void download(void* host, std::size_t n) const { CODA_CUDA_CHECK(cudaMemcpy(host, data_, n, cudaMemcpyDeviceToHost)); }
  /// Fill with 0xFF bytes: NaN in f32, f16 and bf16 (and e4m3/e5m2), so an element the kernel
  /// never wrote fails any error check.
  void poison() { CODA_CUDA_CHECK(cudaMemset(data_, 0xFF, bytes_)); }
  /// Fill with pseudo-random bytes from `seed`: what a caching allocator hands out (torch.empty).
  /// Workspaces get this before every call: no result may depend on what they held.
  DeviceBuffer& garbage(uint64_t seed) {
    std::vector<unsigned char> bytes(bytes_);
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (unsigned char& b : bytes) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      b = static_cast<unsigned char>(x >> 24);
    }
    upload(bytes);
    return *this;
  }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace coda::test

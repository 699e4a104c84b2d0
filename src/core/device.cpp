#include "coda/core/device.hpp"

#include <cuda_runtime.h>

#include <array>
#include <mutex>

#include "coda/core/validate.hpp"

namespace coda {

void check_cuda(int error, const char* what) {
  if (error == cudaSuccess) return;
  const auto e = static_cast<cudaError_t>(error);
  throw CudaError(detail::concat(what, " failed: ", cudaGetErrorName(e), " (", cudaGetErrorString(e), ")"));
}

std::vector<DeviceInfo> list_devices(std::string* why_none) {
  std::vector<DeviceInfo> devices;
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error so later calls start clean
    if (why_none) *why_none = detail::concat(cudaGetErrorName(e), ": ", cudaGetErrorString(e));
    return devices;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    DeviceInfo d;
    d.index = i;
    d.name = p.name;
    d.sm_count = p.multiProcessorCount;
    d.major = p.major;
    d.minor = p.minor;
    d.memory_bytes = p.totalGlobalMem;
    d.l2_bytes = std::size_t(p.l2CacheSize);
    d.shared_memory_per_block_optin = p.sharedMemPerBlockOptin;
    devices.push_back(d);
  }
  if (devices.empty() && why_none) *why_none = "the CUDA runtime reports zero devices";
  return devices;
}

const DeviceInfo& current_device() {
  // Properties are fixed for the life of the process; cache them per device index.
  static std::mutex mutex;
  static std::array<DeviceInfo, 64> cache;
  static std::array<bool, 64> filled{};
  int index = 0;
  CODA_CUDA_CHECK(cudaGetDevice(&index));
  std::lock_guard<std::mutex> lock(mutex);
  if (index < 0 || index >= int(cache.size())) throw Unsupported("coda: device index out of range");
  if (!filled[index]) {
    std::string why;
    std::vector<DeviceInfo> all = list_devices(&why);
    if (index >= int(all.size())) throw CudaError("coda: no CUDA device: " + why);
    cache[index] = all[index];
    filled[index] = true;
  }
  return cache[index];
}

bool hopper_available() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    return false;
  }
  return current_device().is_hopper();
}

}  // namespace coda

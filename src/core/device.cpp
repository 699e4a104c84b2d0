#include "coda/core/device.hpp"

#include <cuda_runtime.h>

#include "coda/core/validate.hpp"

namespace coda {

void check_cuda(int error, const char* what) {
  if (error == cudaSuccess) return;
  const auto e = static_cast<cudaError_t>(error);
  throw CudaError("CUDA", text(what, " failed: ", cudaGetErrorName(e), " (", cudaGetErrorString(e), ")"));
}

std::vector<DeviceInfo> list_devices(std::string* why_none) {
  std::vector<DeviceInfo> devices;
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error so later calls start clean
    // Without any driver the runtime reports cudaErrorInsufficientDriver, as for an old one; its
    // driver version is 0 only when no driver is installed at all.
    int driver = 0;
    const bool no_driver = cudaDriverGetVersion(&driver) == cudaSuccess && driver == 0;
    if (why_none)
      *why_none = no_driver ? "no NVIDIA driver is installed (libcuda.so.1 was not found)"
                            : text(cudaGetErrorName(e), ": ", cudaGetErrorString(e));
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

int current_device_index() {
  int index = 0;
  CODA_CUDA_CHECK(cudaGetDevice(&index));
  return index;
}

const DeviceInfo& current_device() {
  // Properties are fixed for the life of the process.
  static PerDevice<DeviceInfo> cache;
  return cache.get([](int device) {
    std::string why;
    std::vector<DeviceInfo> all = list_devices(&why);
    if (device >= int(all.size())) throw CudaError("CUDA", "no CUDA device: " + why);
    return all[std::size_t(device)];
  });
}

bool hopper_available() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    return false;
  }
  return current_device().is_hopper();
}

void require_hopper(const char* function) {
  // Every launch asks: the device count (the runtime keeps it) and the current device's cached facts,
  // not list_devices(), whose cudaGetDeviceProperties per device cost microseconds of host time a call.
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    std::string why;
    list_devices(&why);
    throw Unsupported(function, text("no CUDA device: ", why));
  }
  const DeviceInfo& d = current_device();
  if (!d.is_hopper())
    throw Unsupported(function, text("device ", d.index, " is ", d.name, " (sm_", d.major, d.minor,
                                     "); coda's kernels are built for sm_90a (H100/H200)"));
}

}  // namespace coda

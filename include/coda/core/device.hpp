// coda/core/device.hpp: which CUDA devices this process sees, CUDA error checking, and state kept
// per device.
//
//   for (const coda::DeviceInfo& d : coda::list_devices())
//     std::printf("%s: %d SMs, sm_%d%d%s\n", d.name.c_str(), d.sm_count, d.major, d.minor,
//                 d.is_hopper() ? "" : " (unsupported for the fused kernels)");
//
// With no device (or no driver) list_devices() returns an empty list and, when asked, says why.
#pragma once

#include <array>
#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

#include "coda/core/api.hpp"
#include "coda/core/status.hpp"

namespace coda {

struct CODA_API DeviceInfo {
  int index = 0;
  std::string name;
  int sm_count = 0;
  int major = 0;
  int minor = 0;
  std::size_t memory_bytes = 0;
  std::size_t l2_bytes = 0;
  std::size_t shared_memory_per_block_optin = 0;
  /// The fused kernels are built for sm_90a: H100/H200 (compute capability 9.0) only.
  bool is_hopper() const { return major == 9 && minor == 0; }
};

/// Every CUDA device visible to the process; empty when there is none. `why_none`, when given,
/// receives the reason for an empty list ("no NVIDIA driver is installed", the runtime's error).
CODA_API std::vector<DeviceInfo> list_devices(std::string* why_none = nullptr);

/// The index of the device current on this thread (throws CudaError without one).
CODA_API int current_device_index();

/// The properties of the device current on this thread (throws CudaError without one).
CODA_API const DeviceInfo& current_device();

/// True when the current device is a Hopper GPU that can run coda's kernels.
CODA_API bool hopper_available();

/// Throw coda::Unsupported naming `function` unless the current device runs coda's kernels (no
/// device, no driver, or not sm_90).
CODA_API void require_hopper(const char* function);

/// Throw CudaError naming `what` when a CUDA runtime call failed (`error` is a cudaError_t).
CODA_API void check_cuda(int error, const char* what);

/// Device indices PerDevice serves (CUDA numbers a process's devices from 0).
inline constexpr int kMaxDevices = 64;

/// A value made once per CUDA device, on first use while that device is current (thread-safe).
/// What a process learns about a device (a kernel's shared-memory attribute set, its resident
/// CTAs) belongs to that device: so one process can launch on several GPUs.
///
///   static coda::PerDevice<int> ctas;
///   int n = ctas.get([](int device) { return occupancy_of(device); });
template <class T>
class PerDevice {
 public:
  template <class Make>
  const T& get(Make&& make) {
    const int device = current_device_index();
    if (device >= kMaxDevices)
      throw Unsupported("coda", "device index " + std::to_string(device) + " is beyond the " +
                                    std::to_string(kMaxDevices) + " devices coda keeps state for");
    std::call_once(once_[device], [&] { values_[device] = make(device); });
    return values_[device];
  }

 private:
  std::array<std::once_flag, kMaxDevices> once_;
  std::array<T, kMaxDevices> values_{};
};

}  // namespace coda

#define CODA_CUDA_CHECK(call) ::coda::check_cuda(static_cast<int>(call), #call)

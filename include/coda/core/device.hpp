// coda/core/device.hpp: which CUDA devices this process sees, and CUDA error checking.
//
//   for (const coda::DeviceInfo& d : coda::list_devices())
//     std::printf("%s: %d SMs, sm_%d%d%s\n", d.name.c_str(), d.sm_count, d.major, d.minor,
//                 d.is_hopper() ? "" : " (unsupported for the fused kernels)");
//
// With no device (or no driver) list_devices() returns an empty list and, when asked, says why.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "coda/core/status.hpp"

namespace coda {

struct DeviceInfo {
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
/// receives the CUDA runtime's explanation of an empty list.
std::vector<DeviceInfo> list_devices(std::string* why_none = nullptr);

/// The properties of the device current on this thread (throws CudaError without one).
const DeviceInfo& current_device();

/// True when the current device is a Hopper GPU that can run coda's kernels.
bool hopper_available();

/// Throw CudaError naming `what` when a CUDA runtime call failed (`error` is a cudaError_t).
void check_cuda(int error, const char* what);

}  // namespace coda

#define CODA_CUDA_CHECK(call) ::coda::check_cuda(static_cast<int>(call), #call)

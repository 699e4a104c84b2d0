// Internal: the launch of one kernel instantiation (included by the per-configuration .cu files).
#pragma once

#include <cuda_runtime.h>

#include <mutex>

#include "coda/core/device.hpp"
#include "coda/gemm/launch.cuh"
#include "gemm/launch.hpp"

namespace coda::mainloop {

template <class Config, class Element, Major AMajor, Major BMajor>
void launch(const StoreKernelParams& params, int ctas, cudaStream_t stream) {
  launch_kernel<Config, Element, AMajor, BMajor, StoreEpilogue<Config::kStagingBuffers>>(params, ctas, stream);
}

template <class Config>
int resident_ctas() {
  // Whole clusters that fit at once, asked once of the occupancy calculator.
  static int cached = [] {
    using Epilogue = StoreEpilogue<Config::kStagingBuffers>;
    auto* kernel = &gemm_kernel<Config, __nv_bfloat16, Major::k, Major::k, Epilogue>;
    constexpr int kShared = kSharedBytes<Config, __nv_bfloat16, Epilogue>;
    CODA_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kShared));
    if constexpr (Config::kClusterSize == 1) return current_device().sm_count;
    const ClusterLaunch<Config> one_cluster(Config::kClusterSize, kShared, nullptr);
    int clusters = 0;
    CODA_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, kernel, &one_cluster.config));
    return clusters * Config::kClusterSize;
  }();
  return cached;
}

/// The eight kernels of one configuration: {bf16, f16} x A major x B major.
template <class Config>
Launcher launcher_for(DType input, Major a, Major b) {
  const bool bf16 = input == DType::bf16;
  const bool ta = a == Major::mn, tb = b == Major::mn;
  using BF = __nv_bfloat16;
  using H = __half;
  constexpr Major K = Major::k, MN = Major::mn;
  if (bf16) {
    if (!ta && !tb) return &launch<Config, BF, K, K>;
    if (!ta && tb) return &launch<Config, BF, K, MN>;
    if (ta && !tb) return &launch<Config, BF, MN, K>;
    return &launch<Config, BF, MN, MN>;
  }
  if (!ta && !tb) return &launch<Config, H, K, K>;
  if (!ta && tb) return &launch<Config, H, K, MN>;
  if (ta && !tb) return &launch<Config, H, MN, K>;
  return &launch<Config, H, MN, MN>;
}

}  // namespace coda::mainloop

/// Define launcher_<name>() and resident_ctas_<name>() for one configuration.
#define CODA_GEMM_CONFIGURATION(name, Config)                                                               \
  namespace coda::mainloop {                                                                                     \
  Launcher launcher_##name(DType input, Major a, Major b) { return launcher_for<Config>(input, a, b); }       \
  ResidentCtas resident_ctas_##name() { return &resident_ctas<Config>; }                                    \
  }

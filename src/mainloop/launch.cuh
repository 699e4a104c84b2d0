// Internal: the store kernels of one row of ShippedTiles (included by its tile_<name>.cu).
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <type_traits>

#include "coda/core/device.hpp"
#include "coda/mainloop/launch.cuh"
#include "coda/mainloop/store_epilogue.cuh"
#include "coda/mainloop/tiles.hpp"
#include "coda/mainloop/transposed_epilogue.cuh"
#include "mainloop/launch.hpp"

namespace coda::mainloop {

/// The store epilogue of `Config`'s tiles (transposed back to C on a swapped configuration).
template <class Config>
using StoreEpilogueOf =
    std::conditional_t<Config::kSwapAB, Transposed<StoreEpilogue<Config::kStagingBuffers>, Config::kWarpgroupM>,
                       StoreEpilogue<Config::kStagingBuffers>>;

template <class Config, class Element, Major AMajor, Major BMajor>
void launch_store(const LaunchPlan& plan, const StoreKernelParams& params, cudaStream_t stream) {
  launch_kernel<Config, Element, AMajor, BMajor, StoreEpilogueOf<Config>>(plan, params, stream);
}

template <class Tile>
int resident_ctas_for(int cluster) {
  // Whole clusters that fit at once, asked of the occupancy calculator once per device and cluster
  // size (the configuration's, or `cluster` CTAs for a swapped tile's K split in clusters).
  using Config = typename Tile::Config;
  if (cluster <= 0) cluster = Config::kClusterSize;
  if (cluster > kMaxClusterSplits)
    throw InternalError("coda::mainloop::resident_ctas_for",
                        "K split in clusters of at most " + std::to_string(kMaxClusterSplits) + " CTAs");
  static PerDevice<int> cached[kMaxClusterSplits + 1];
  return cached[cluster].get([cluster](int device) {
    using Epilogue = StoreEpilogueOf<Config>;
    auto* kernel = &gemm_kernel<Config, __nv_bfloat16, Major::k, Major::k, Epilogue>;
    constexpr int kShared = kSharedBytes<Config, __nv_bfloat16, Epilogue>;
    CODA_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kShared));
    if (cluster == 1) {
      int sms = 0;
      CODA_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
      return sms;
    }
    const ClusterLaunch<Config> one_cluster(cluster, kShared, nullptr, false, cluster);
    int clusters = 0;
    CODA_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, kernel, &one_cluster.config));
    return clusters * cluster;
  });
}

template <class Tile>
Launcher launcher_for(DType input, Major a, Major b) {
  using Config = typename Tile::Config;
  const bool bf16 = input == DType::bf16;
  // A swapped kernel's A operand is C's B (plan.cpp: build_launch).
  const bool ta = (Config::kSwapAB ? b : a) == Major::mn, tb = (Config::kSwapAB ? a : b) == Major::mn;
  using BF = __nv_bfloat16;
  using H = __half;
  constexpr Major K = Major::k, MN = Major::mn;
  if (bf16) {
    if (!ta && !tb) return &launch_store<Config, BF, K, K>;
    if (!ta && tb) return &launch_store<Config, BF, K, MN>;
    if (ta && !tb) return &launch_store<Config, BF, MN, K>;
    return &launch_store<Config, BF, MN, MN>;
  }
  if (!ta && !tb) return &launch_store<Config, H, K, K>;
  if (!ta && tb) return &launch_store<Config, H, K, MN>;
  if (ta && !tb) return &launch_store<Config, H, MN, K>;
  return &launch_store<Config, H, MN, MN>;
}

}  // namespace coda::mainloop

/// The kernels of the ShippedTiles row named GemmTile::<name>, in this translation unit.
#define CODA_MAINLOOP_TILE(name)                                                                                \
  template coda::mainloop::Launcher coda::mainloop::launcher_for<coda::mainloop::TileOf<coda::GemmTile::name>>( \
      coda::DType, coda::Major, coda::Major);                                                                   \
  template int coda::mainloop::resident_ctas_for<coda::mainloop::TileOf<coda::GemmTile::name>>(int);

// coda/mainloop/launch.cuh: launching a planned mainloop kernel (plan.hpp) with any epilogue.
//
//   mainloop::LaunchPlan plan = mainloop::plan_launch(a, b, options, "coda::my_op");
//   mainloop::launch_kernel<Config, __nv_bfloat16, Major::k, Major::k, MyEpilogue>(
//       plan, plan.kernel_params(my_epilogue_params), stream);
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "coda/core/device.hpp"
#include "coda/core/status.hpp"
#include "coda/mainloop/kernel.cuh"
#include "coda/mainloop/plan.hpp"

namespace coda::mainloop {

/// A launch of `ctas` CTAs of `Config` in clusters of its size (or of `cluster` CTAs: a swapped
/// tile's K split in clusters), with `shared` bytes of dynamic shared memory (the attribute storage
/// lives in the returned object).
template <class Config>
struct ClusterLaunch {
  cudaLaunchConfig_t config{};
  cudaLaunchAttribute attributes[2]{};

  // `programmatic`: the launch may start before the one ahead of it in the stream has finished
  // (as soon as that one's CTAs have all run sm90::launch_dependent_grids).
  ClusterLaunch(int ctas, int shared, cudaStream_t stream, bool programmatic = false,
                int cluster = Config::kClusterSize) {
    config.gridDim = dim3(unsigned(ctas));
    config.blockDim = dim3(Config::kThreads);
    config.dynamicSmemBytes = std::size_t(shared);
    config.stream = stream;
    attributes[0].id = cudaLaunchAttributeClusterDimension;
    attributes[0].val.clusterDim.x = unsigned(cluster);
    attributes[0].val.clusterDim.y = 1;
    attributes[0].val.clusterDim.z = 1;
    attributes[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attributes[1].val.programmaticStreamSerializationAllowed = 1;
    config.attrs = attributes;
    config.numAttrs = programmatic ? 2 : 1;
  }
  ClusterLaunch(const ClusterLaunch&) = delete;  // config.attrs points into this object
  ClusterLaunch& operator=(const ClusterLaunch&) = delete;
};

/// Launch the mainloop kernel of one configuration on the plan's persistent CTAs (a companion right
/// after its primary, on the same stream). The arrival counters of a split-K or stream-K plan are
/// zeroed first, on the stream, so a workspace's earlier contents never matter. A swapped
/// configuration (tiles.hpp) takes swapped plans only: its AMajor is B's major, its epilogue sees
/// C^T's coordinates (transposed_epilogue.cuh turns them back).
template <class Config, class Element, Major AMajor, Major BMajor, class Epilogue>
void launch_kernel(const LaunchPlan& plan, const KernelParams<typename Epilogue::Params>& params, cudaStream_t stream) {
  static_assert(SeamEpilogue<Epilogue, Accumulators<Config::kWarpgroupM, Config::kWarpgroupN>>);
  if (plan.swap_ab != Config::kSwapAB)
    throw InvalidArgument("coda::mainloop::launch_kernel",
                          plan.swap_ab ? "argument 'plan': is for a swapped tile (C^T = B A^T) but the kernel is not"
                                       : "argument 'plan': is for an unswapped tile but the kernel is swapped");
  // The producer loads B's rows in boxes of token_box_rows: whole boxes must fill the tile's B rows
  // exactly, or one box must hold every B row of the problem (B of fewer rows than the tile). Any
  // other count leaves a slot's expected bytes unmet, and the consumers would wait forever.
  const int32_t box = plan.token_box_rows;
  const int64_t b_rows = plan.swap_ab ? plan.m : plan.n;  // the kernel's B: C's B, or A when swapped
  if (box <= 0 || box % 8 != 0 || box > Config::kRowsLoadedB || (Config::kRowsLoadedB % box != 0 && box < b_rows))
    throw InvalidArgument("coda::mainloop::launch_kernel",
                          "argument 'plan': token_box_rows is " + std::to_string(box) +
                              " but must be a multiple of 8 that divides the tile's " +
                              std::to_string(Config::kRowsLoadedB) + " B rows or holds all " +
                              std::to_string(b_rows) + " of them");
  if (params.k_block_mask.bits != nullptr && (!kReadsKBlockMask<Config, Epilogue> || plan.batch != 1))
    throw InvalidArgument("coda::mainloop::launch_kernel",
                          "argument 'plan': has a K-block mask, which only a kernel whose epilogue skips K blocks "
                          "reads, on a cooperative unswapped tile and one batch");
  const ScheduleParams& schedule = plan.schedule;
  if (schedule.splits_in_cluster &&
      (!kSplitsInClusters<Config, Epilogue> ||
       !cluster_split_fits(schedule.splits, plan.m, Config::kBlockN, Config::kWarpgroupM / 64) ||
       plan.summary.ctas % schedule.splits != 0 || plan.counter_bytes != 0))
    throw InvalidArgument("coda::mainloop::launch_kernel",
                          "argument 'plan': splits K x" + std::to_string(schedule.splits) +
                              " across the CTAs of a cluster, which needs a swapped tile with the store epilogue "
                              "(kSplitsInClusters), at most " +
                              std::to_string(kMaxClusterSplits) + " splits, " + std::to_string(kClusterPartialSlots) +
                              " slots for the partials of M = " + std::to_string(plan.m) +
                              " tokens and whole clusters of CTAs");
  auto* kernel = &gemm_kernel<Config, Element, AMajor, BMajor, Epilogue>;
  constexpr int kShared = kSharedBytes<Config, Element, Epilogue>;
  static_assert(kShared <= kMaxSharedBytes, "more shared memory than an sm_90 CTA may have");
  static PerDevice<bool> shared_memory_raised;  // a kernel's attribute is the device's
  shared_memory_raised.get([&](int) {
    CODA_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kShared));
    return true;
  });
  if (plan.counter_bytes > 0) CODA_CUDA_CHECK(cudaMemsetAsync(params.partials.arrivals, 0, plan.counter_bytes, stream));
  // Every launch is programmatic: the kernel waits for the grid ahead of it before touching memory
  // (kernel.cuh), so its launch and setup overlap that grid's tail.
  const ClusterLaunch<Config> launch(plan.summary.ctas, kShared, stream, true,
                                     schedule.splits_in_cluster ? schedule.splits : Config::kClusterSize);
  CODA_CUDA_CHECK(cudaLaunchKernelEx(&launch.config, kernel, params));
}

}  // namespace coda::mainloop

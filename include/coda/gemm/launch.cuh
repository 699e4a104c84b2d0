// coda/gemm/launch.cuh: planning and launching the mainloop with any epilogue.
//
// coda::gemm() is this with the store epilogue; the epilogue-program launcher
// (coda/epilogue/launch.cuh) uses it with a program's epilogue:
//
//   mainloop::LaunchPlan plan = mainloop::plan_launch(a, b, options, "coda::my_op");
//   mainloop::KernelParams<MyEpilogue::Params> params = plan.kernel_params(my_epilogue_params);
//   mainloop::launch_kernel<TileM128N256, __nv_bfloat16, Major::k, Major::k, MyEpilogue>(params, plan.ctas, stream);
#pragma once

#include <cuda_runtime.h>

#include <mutex>

#include "coda/core/device.hpp"
#include "coda/gemm/gemm.hpp"
#include "coda/gemm/kernel.cuh"

namespace coda::mainloop {

/// A second launch beside a ping-pong launch, on the SMs its 4-CTA clusters leave idle
/// (companion.hpp): the last tile rows in m128n256 tiles of 2-CTA clusters (TileProgramM128N256).
struct CompanionLaunch {
  int ctas = 0;                // 0: no companion
  ScheduleParams schedule{};   // its tiles, from schedule.first_tile_row on
  CUtensorMap a{}, b{};        // boxes of that tile
};

/// Everything a launch needs besides the epilogue's parameters.
struct LaunchPlan {
  GemmPlan summary;      // configuration, split-K, CTAs, workspace
  int64_t m = 0, n = 0, k = 0, batch = 0;
  DType input = DType::bf16;
  Major a_major = Major::k, b_major = Major::k;
  CUtensorMap a{}, b{};
  ScheduleParams schedule{};
  PartialsWorkspace partials{};
  CompanionLaunch companion{};

  template <class EpilogueParams>
  KernelParams<EpilogueParams> kernel_params(const EpilogueParams& epilogue) const {
    KernelParams<EpilogueParams> p{};
    p.a = a;
    p.b = b;
    p.schedule = schedule;
    p.m = int32_t(m);
    p.n = int32_t(n);
    p.partials = partials;
    p.epilogue = epilogue;
    p.role = companion.ctas > 0 ? LaunchRole::primary : LaunchRole::alone;
    return p;
  }

  /// The companion's parameters: the same problem and epilogue, its own tiles.
  template <class EpilogueParams>
  KernelParams<EpilogueParams> companion_params(const EpilogueParams& epilogue) const {
    KernelParams<EpilogueParams> p = kernel_params(epilogue);
    p.a = companion.a;
    p.b = companion.b;
    p.schedule = companion.schedule;
    p.role = LaunchRole::companion;
    return p;
  }
};

/// Validate A and B (the rules of coda::gemm, messages naming `function`) and plan C = A B^T:
/// tile (options.tile, or the heuristic), split-K, tensor maps of A and B, schedule. Needs a
/// Hopper GPU (throws coda::Unsupported without one, after validating the arguments).
LaunchPlan plan_launch(const GemmOperand& a, const GemmOperand& b, const GemmOptions& options, const char* function);

/// Give a planned ping-pong launch a companion (CompanionLaunch) where options.companion allows and
/// companion.hpp finds it pays for an epilogue that runs at `companion_speed` on a companion SM
/// against a primary SM: one K range per tile, one batch, SMs left over, every SM allowed. For
/// epilogues that also run on TileProgramM128N256 (epilogue/launch.cuh: every program, a staged
/// tile input read from global memory there).
void plan_companion(LaunchPlan& plan, const GemmOperand& a, const GemmOperand& b, const GemmOptions& options,
                    double companion_speed);

/// A launch of `ctas` CTAs of `Config` in clusters of its size, with `shared` bytes of dynamic
/// shared memory (the attribute storage lives in the returned object).
template <class Config>
struct ClusterLaunch {
  cudaLaunchConfig_t config{};
  cudaLaunchAttribute attributes[2]{};

  // `programmatic`: the launch may start before the one ahead of it in the stream has finished
  // (as soon as that one's CTAs have all run sm90::launch_dependent_grids).
  ClusterLaunch(int ctas, int shared, cudaStream_t stream, bool programmatic = false) {
    config.gridDim = dim3(unsigned(ctas));
    config.blockDim = dim3(Config::kThreads);
    config.dynamicSmemBytes = std::size_t(shared);
    config.stream = stream;
    attributes[0].id = cudaLaunchAttributeClusterDimension;
    attributes[0].val.clusterDim.x = Config::kClusterSize;
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

/// Launch the mainloop kernel of one configuration on `ctas` persistent CTAs (a companion right
/// after its primary, on the same stream).
template <class Config, class Element, Major AMajor, Major BMajor, class Epilogue>
void launch_kernel(const KernelParams<typename Epilogue::Params>& params, int ctas, cudaStream_t stream) {
  auto* kernel = &gemm_kernel<Config, Element, AMajor, BMajor, Epilogue>;
  constexpr int kShared = kSharedBytes<Config, Element, Epilogue>;
  static_assert(kShared <= 227 * 1024, "more shared memory than an sm_90 CTA may have");
  static std::once_flag once;
  std::call_once(once, [&] {
    CODA_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kShared));
  });
  const ClusterLaunch<Config> launch(ctas, kShared, stream, params.role == LaunchRole::companion);
  CODA_CUDA_CHECK(cudaLaunchKernelEx(&launch.config, kernel, params));
}

}  // namespace coda::mainloop

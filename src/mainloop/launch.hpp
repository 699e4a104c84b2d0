// Internal: the kernels coda::gemm launches, one translation unit per row of ShippedTiles
// (tile_<name>.cu instantiates these for its row; launch.cuh defines them).
#pragma once

#include <cuda_runtime_api.h>

#include "coda/core/dtype.hpp"
#include "coda/core/layout.hpp"
#include "coda/mainloop/params.hpp"
#include "coda/mainloop/plan.hpp"

namespace coda::mainloop {

using StoreKernelParams = KernelParams<StoreParams>;

/// Launch one compiled (configuration, input type, majors) kernel with the store epilogue.
using Launcher = void (*)(const LaunchPlan& plan, const StoreKernelParams& params, cudaStream_t stream);

/// The store kernel of row `Tile` of ShippedTiles for these operands: {bf16, f16} x A major x B major.
template <class Tile>
Launcher launcher_for(DType input, Major a, Major b);

/// CTAs of row `Tile` that fit on the current device at once, in whole clusters of the
/// configuration's size (`cluster` <= 0) or of `cluster` CTAs (1 to kMaxClusterSplits).
template <class Tile>
int resident_ctas_for(int cluster);

}  // namespace coda::mainloop

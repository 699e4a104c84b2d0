// Internal: what the host side of coda::gemm hands to a compiled kernel configuration.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "coda/core/dtype.hpp"
#include "coda/core/layout.hpp"
#include "coda/gemm/gemm.hpp"
#include "coda/gemm/kernel.cuh"
#include "coda/gemm/store_epilogue.cuh"

namespace coda::mainloop {

using StoreKernelParams = KernelParams<StoreParams>;

/// Launch one compiled (configuration, input type, majors) kernel on a grid of `ctas` CTAs.
using Launcher = void (*)(const StoreKernelParams& params, int ctas, cudaStream_t stream);

/// The kernel for each combination; every GemmTile (but automatic) has all eight.
Launcher launcher_m128n256(DType input, Major a, Major b);
Launcher launcher_m256n128(DType input, Major a, Major b);
Launcher launcher_m128n128(DType input, Major a, Major b);
Launcher launcher_m64n256(DType input, Major a, Major b);
Launcher launcher_pingpong_m128n128(DType input, Major a, Major b);

/// Largest number of CTAs of this configuration that can be resident at once (whole clusters).
using ResidentCtas = int (*)();
ResidentCtas resident_ctas_m128n256();
ResidentCtas resident_ctas_m256n128();
ResidentCtas resident_ctas_m128n128();
ResidentCtas resident_ctas_m64n256();
ResidentCtas resident_ctas_pingpong_m128n128();

}  // namespace coda::mainloop

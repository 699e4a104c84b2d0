// The m64n256 configuration's eight kernels (one translation unit per configuration, so builds
// compile them in parallel).
#include "gemm/launch.cuh"

CODA_GEMM_CONFIGURATION(m64n256, TileM64N256)

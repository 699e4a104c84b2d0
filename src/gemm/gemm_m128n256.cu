// The m128n256 configuration's eight kernels (one translation unit per configuration, so builds
// compile them in parallel).
#include "gemm/launch.cuh"

CODA_GEMM_CONFIGURATION(m128n256, TileM128N256)

// The m256n128 configuration's eight kernels (one translation unit per configuration, so builds
// compile them in parallel).
#include "gemm/launch.cuh"

CODA_GEMM_CONFIGURATION(m256n128, TileM256N128)

// The pingpong_m128n128 configuration's eight kernels (one translation unit per configuration, so builds
// compile them in parallel).
#include "gemm/launch.cuh"

CODA_GEMM_CONFIGURATION(pingpong_m128n128, TilePingPongM128N128)

// The pingpong_m64n256 configuration's eight kernels (one translation unit per configuration, so builds
// compile them in parallel).
#include "gemm/launch.cuh"

CODA_GEMM_CONFIGURATION(pingpong_m64n256, TilePingPongM64N256)

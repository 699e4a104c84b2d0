// The store kernels of the swap_m64n64 tile (one translation unit per tile, so builds compile them in parallel).
#include "mainloop/launch.cuh"

CODA_MAINLOOP_TILE(swap_m64n64)

// The store kernels of the swap_m128n64 tile (one translation unit per tile, so builds compile them in parallel).
#include "mainloop/launch.cuh"

CODA_MAINLOOP_TILE(swap_m128n64)

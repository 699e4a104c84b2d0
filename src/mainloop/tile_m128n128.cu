// The store kernels of the m128n128 tile (one translation unit per tile, so builds compile them in parallel).
#include "mainloop/launch.cuh"

CODA_MAINLOOP_TILE(m128n128)

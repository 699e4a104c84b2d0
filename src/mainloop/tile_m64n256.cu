// The store kernels of the m64n256 tile (one translation unit per tile, so builds compile them in parallel).
#include "mainloop/launch.cuh"

CODA_MAINLOOP_TILE(m64n256)

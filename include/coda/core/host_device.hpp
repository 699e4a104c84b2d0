// coda/core/host_device.hpp: CODA_HD marks code compiled for both the host and the device, the
// contract of epilogue programs (one program, two executors).
#pragma once

#if defined(__CUDACC__)
#define CODA_HD __host__ __device__ __forceinline__
#else
#define CODA_HD inline
#endif

/* coda.h: the C ABI of libcoda, for C and for other languages (ctypes, cffi, Rust, Julia).
 *
 *   #include <coda/coda.h>
 *   coda_status s = coda_gemm(&args, stream);
 *   if (s != CODA_OK) fprintf(stderr, "%s\n", coda_last_error());
 *
 * Every function returns a coda_status; on failure coda_last_error() holds a message (per
 * thread) that names the function, the argument and the rule it broke. No function here
 * allocates device memory or synchronizes the stream.
 */
#ifndef CODA_CODA_H
#define CODA_CODA_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum coda_status {
  CODA_OK = 0,
  CODA_INVALID_ARGUMENT = 1,
  CODA_UNSUPPORTED = 2,
  CODA_CUDA_ERROR = 3,
  CODA_INTERNAL = 4
} coda_status;

typedef enum coda_dtype {
  CODA_F32 = 0,
  CODA_F16 = 1,
  CODA_BF16 = 2,
  CODA_E4M3 = 3,
  CODA_E5M2 = 4,
  CODA_I32 = 5
} coda_dtype;

typedef enum coda_major { CODA_K_MAJOR = 0, CODA_MN_MAJOR = 1 } coda_major;

/* A rank-2 or rank-3 tensor: shape (batch, rows, cols), strides in elements; rank 2 ignores batch. */
typedef struct coda_tensor {
  void* data;
  coda_dtype dtype;
  int32_t rank;
  int64_t shape[3];
  int64_t stride[3];
} coda_tensor;

/* "0.1.0" */
const char* coda_version(void);
/* The message of the last failed call on this thread ("" after a success). */
const char* coda_last_error(void);
/* Short name of a status code ("invalid argument", ...). */
const char* coda_status_name(coda_status status);
/* Number of CUDA devices visible (0 with no device or driver); never fails. */
int32_t coda_device_count(void);

#ifdef __cplusplus
}
#endif

#endif /* CODA_CODA_H */

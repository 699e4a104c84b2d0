// Internal, shared by the C ABI's translation units: the call wrapper (status codes, the
// per-thread message under the C function's name, no exception across the boundary) and the
// C-to-C++ view conversion.
#pragma once

#include <cuda_runtime_api.h>

#include <string_view>

#include "coda/coda.h"
#include "coda/core/layout.hpp"
#include "coda/core/status.hpp"
#include "coda/core/tensor.hpp"
#include "coda/core/validate.hpp"

namespace coda::capi {

/// Record `s` as this thread's last error (or clear it) and return its C code.
coda_status finish(const Status& s) noexcept;

/// CODA_INTERNAL with no message: what a call reports when even its message could not be made.
coda_status failed_without_message() noexcept;

/// Run a C function's body: what it throws becomes the status and message of `function` (the C
/// function's name, the one prefix of every message it reports).
template <class Body>
coda_status c_call(const char* function, Body&& body) noexcept {
  try {
    return finish(status_of(function, body));
  } catch (...) {  // building the message failed (out of memory)
    return failed_without_message();
  }
}

/// A C tensor as a TensorView (rank 2: shape[0..1]; rank 3: shape[0..2]). Reads no more than the
/// struct holds whatever its rank, so it is safe before check_tensor() has run.
inline TensorView view_of(const coda_tensor& t) {
  TensorView v;
  v.data = t.data;
  v.dtype = static_cast<DType>(t.dtype);
  v.rank = t.rank;
  for (int i = 0; i < 3 && i < t.rank; ++i) {
    v.shape[i] = t.shape[i];
    v.stride[i] = t.stride[i];
  }
  return v;
}

/// What only a C caller can get wrong about a tensor argument, checked before view_of(): a null
/// struct pointer, a rank outside [min_rank, max_rank] (at most 3, what coda_tensor holds), a
/// dtype code that is not a coda_dtype. The C++ validation behind the call checks the rest.
ArgumentCheck& check_tensor(ArgumentCheck& check, std::string_view argument, const coda_tensor* t, int min_rank,
                            int max_rank);

/// A coda_major code must be one of the enum's values (other languages can pass any integer).
ArgumentCheck& check_major(ArgumentCheck& check, std::string_view argument, coda_major major);

inline Major major_of(coda_major major) { return major == CODA_K_MAJOR ? Major::k : Major::mn; }

inline cudaStream_t stream_of(void* stream) { return static_cast<cudaStream_t>(stream); }

/// The tensor arguments of an op's C function as views: required ones rank 2 (tiles) or 1
/// (vectors), optional ones null or the same. Failures collect in `check`.
struct Views {
  explicit Views(const char* function) : check(function) {}
  TensorView tile(const char* name, const coda_tensor* t) { return take(name, t, 2); }
  TensorView vector(const char* name, const coda_tensor* t) { return take(name, t, 1); }
  TensorView optional_tile(const char* name, const coda_tensor* t) { return t ? take(name, t, 2) : TensorView{}; }
  TensorView optional_vector(const char* name, const coda_tensor* t) { return t ? take(name, t, 1) : TensorView{}; }
  ArgumentCheck check;

 private:
  TensorView take(const char* name, const coda_tensor* t, int rank) {
    check_tensor(check, name, t, rank, rank);
    return check.failed() ? TensorView{} : view_of(*t);
  }
};

}  // namespace coda::capi

// Shared by the C ABI's translation units: status plumbing and C-to-C++ view conversion.
#pragma once

#include "coda/coda.h"
#include "coda/core/status.hpp"
#include "coda/core/tensor.hpp"

namespace coda::capi {

/// Record `s` as this thread's last error (or clear it) and return its C code.
coda_status finish(const Status& s);

/// A C tensor as a TensorView (rank 2: shape[0..1]; rank 3: shape[0..2]).
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

}  // namespace coda::capi

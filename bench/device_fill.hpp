// Fill device memory with reproducible pseudo-random values (never zeros) without a host copy.
#pragma once

#include <cstddef>
#include <cstdint>

#include "coda/core/dtype.hpp"

namespace coda::bench {

/// `count` elements of `dtype` at `data`, uniform in [-1, 1), from a hash of (seed, index).
void fill_uniform(void* data, DType dtype, std::size_t count, uint64_t seed);

}  // namespace coda::bench

namespace coda::bench {

/// ||x - y|| / ||y|| over `count` elements of `dtype`, computed on the device (deterministic
/// per-block partials reduced on the host in order).
double relative_difference(const void* x, const void* y, DType dtype, std::size_t count);

}  // namespace coda::bench

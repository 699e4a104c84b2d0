// Fill device memory with reproducible pseudo-random values (never zeros) without a host copy.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "coda/core/dtype.hpp"

namespace coda::bench {

/// `count` elements of `dtype` at `data`, uniform in [-scale, scale), from a hash of (seed, index),
/// ordered on `stream`.
void fill_uniform(void* data, DType dtype, std::size_t count, uint64_t seed, cudaStream_t stream, float scale = 1.0f);

/// A rows x cols bf16 matrix of noise along a shared direction: element (r, c) is
/// noise * uniform(seed, r * cols + c) + (offset + slope * ln(r + 1)) * d(c), with d(c) = +-1 from
/// `direction_seed`. Two such matrices with one direction give products with a term in ln(row + 1):
/// the LM-head benchmark's model of a trained head (lm_head_bench.cpp).
void fill_along_direction(void* data, int64_t rows, int64_t cols, uint64_t seed, float noise, uint64_t direction_seed,
                          float offset, float slope, cudaStream_t stream);

/// Copy `bytes` (a multiple of 16, both 16-byte aligned) with 16-byte loads and stores over every
/// SM: the device-to-device copy the memory-bound benchmarks measure their bandwidth against.
void copy_16byte(void* to, const void* from, std::size_t bytes, cudaStream_t stream);

}  // namespace coda::bench

namespace coda::bench {

/// ||x - y|| / ||y|| over `count` elements of `dtype`, computed on the device (deterministic
/// per-block partials reduced on the host in order).
double relative_difference(const void* x, const void* y, DType dtype, std::size_t count, cudaStream_t stream);

}  // namespace coda::bench

// coda/mainloop/staging.cuh: the shared-memory staging subtile that epilogues fill and TMA stores
// drain: 64 rows x 128 bytes in the 128B-swizzled layout of the output tensor map.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "coda/sm90/stmatrix.cuh"

namespace coda::mainloop {

constexpr int kStagingSubtileBytes = 64 * 128;

/// Byte offset of byte `byte` of row `row` in a 128B-swizzled 64 x 128-byte subtile: the TMA
/// unit XORs the 16-byte chunk index with the row index modulo 8.
__device__ __forceinline__ uint32_t swizzled_offset(int row, int byte) {
  return uint32_t(row * 128 + (((byte >> 4) ^ (row & 7)) << 4) + (byte & 15));
}

/// Two adjacent results rounded to `Out` (__nv_bfloat16 or __half), packed as one 32-bit register
/// holds them (the low half is the first column).
template <class Out>
__device__ __forceinline__ uint32_t pack_16bit_pair(float lo, float hi) {
  static_assert(std::is_same_v<Out, __nv_bfloat16> || std::is_same_v<Out, __half>);
  if constexpr (std::is_same_v<Out, __nv_bfloat16>) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  } else {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
}

/// A 64 x 64 subtile of 16-bit results from the accumulator fragment: 64 columns = 8 chunks of 8;
/// packed[2c] holds (row r, chunk c) and packed[2c + 1] (row r + 8, chunk c), two values each.
/// stmatrix.x4 stores two chunks for the warp's 16 rows at once.
__device__ __forceinline__ void write_16bit_subtile(uint32_t staging, const uint32_t (&packed)[16], int thread) {
  const int warp = thread / 32, lane = thread % 32;
  const int matrix = lane / 8;  // which of the four 8x8 matrices this lane addresses
  const int row = 16 * warp + lane % 8 + 8 * (matrix & 1);
#pragma unroll
  for (int pair = 0; pair < 4; ++pair) {
    const uint32_t address = staging + swizzled_offset(row, 16 * (2 * pair + (matrix >> 1)));
    sm90::stmatrix_x4(address, packed[4 * pair], packed[4 * pair + 1], packed[4 * pair + 2], packed[4 * pair + 3]);
  }
}

}  // namespace coda::mainloop

// coda/sm90/wgmma.cuh: warpgroup MMA (sm_90a): shared-memory matrix descriptors and the
// fence / commit / wait protocol around wgmma.mma_async.
//
//   sm90::wgmma_fence();                                  // accumulators are ready to be read
//   sm90::mma_m64n256k16<__nv_bfloat16, 0, 0>(acc, desc_a, desc_b, true);
//   sm90::wgmma_commit();                                 // close the group of MMAs
//   sm90::wgmma_wait<0>();                                // and wait for it
#pragma once

#include <cstdint>

#include "coda/sm90/wgmma_instructions.cuh"

namespace coda::sm90 {

/// Descriptor of a tile in shared memory laid out with the 128-byte swizzle, the layout a TMA
/// load with CU_TENSOR_MAP_SWIZZLE_128B produces (PTX ISA 9.7.15.5.1.2):
///   bits  0-13  start address >> 4
///   bits 16-29  leading-dimension byte offset >> 4 (LBO)
///   bits 32-45  stride-dimension byte offset >> 4 (SBO)
///   bits 62-63  swizzle mode, 1 = 128B
/// The swizzle atom is 8 rows of 128 bytes (1024 bytes), so tiles start 1024-aligned (base
/// offset 0). Stepping K inside an atom just moves the start address: the hardware applies
/// the XOR swizzle to the final address, which is why +32 bytes selects the next 16 K-major
/// columns.
///
/// K-major (rows of 64 16-bit K values): SBO = 1024 (next 8 rows); LBO is unused with swizzling.
/// MN-major (rows of 64 16-bit M/N values, one row per k, in chunks of 64 MN x `k_rows` k):
///   LBO = the byte distance between 64-wide MN chunks; SBO = 1024 (next 8 k-rows).
__device__ __forceinline__ uint64_t make_sw128_descriptor(uint32_t smem_address, uint32_t leading_byte_offset,
                                                          uint32_t stride_byte_offset) {
  uint64_t desc = 0;
  desc |= uint64_t((smem_address & 0x3FFFF) >> 4);
  desc |= uint64_t((leading_byte_offset & 0x3FFFF) >> 4) << 16;
  desc |= uint64_t((stride_byte_offset & 0x3FFFF) >> 4) << 32;
  desc |= uint64_t(1) << 62;
  return desc;
}

/// `desc` with its start address moved by `units` 16-byte units. The start address is the low
/// field (bits 0-13) and shared addresses stay below 256 KB, so the sum never carries out of it:
/// a 32-bit add on the low word, the high word kept as is (a 64-bit add would carry-chain).
__device__ __forceinline__ uint64_t advance_descriptor(uint64_t desc, uint32_t units) {
  return (desc & 0xFFFFFFFF00000000ull) | uint32_t(uint32_t(desc) + units);
}

/// wgmma.fence: order earlier register writes to the accumulators (and the shared-memory
/// operands) before the next wgmma.mma_async reads them.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }

__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }

/// Wait until at most `Pending` committed wgmma groups are still in flight.
template <int Pending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(Pending) : "memory");
}

/// Keep the compiler from moving accumulator reads/writes across wgmma boundaries: after a
/// wait, the registers hold the MMA's result; this tells the compiler they may have changed.
template <int N>
__device__ __forceinline__ void accumulators_fence(float (&acc)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(acc[i])::"memory");
}

}  // namespace coda::sm90

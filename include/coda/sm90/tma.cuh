// coda/sm90/tma.cuh: bulk tensor copies (TMA) between global and shared memory.
//
// Every coda tensor map is 3-D: (innermost, outer, batch). A load lands a whole box in shared
// memory (out-of-bounds elements read as zero, and the full box size counts toward the
// barrier's expected bytes); a store writes a box back, clipping what falls outside the tensor.
//
//   sm90::tma_load(smem_tile, &map, x, y, batch, &full_barrier);
//   sm90::tma_store(&map, smem_tile, x, y, batch);  sm90::tma_store_commit();
#pragma once

#include <cuda.h>
#include <cuda/ptx>

#include <cstdint>

namespace coda::sm90 {

namespace ptx = ::cuda::ptx;

/// Fetch the tensor map into the constant cache early (it is a __grid_constant__ parameter).
__device__ __forceinline__ void tma_prefetch_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

__device__ __forceinline__ void tma_load(void* smem, const CUtensorMap* map, int32_t x, int32_t y, int32_t batch,
                                         uint64_t* bar) {
  const int32_t coords[3] = {x, y, batch};
  ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, smem, map, coords, bar);
}

/// Load one box and deliver it to the same shared-memory offset in every CTA of `cta_mask`
/// (bit r = cluster rank r), completing bytes on each destination CTA's barrier at `bar`'s offset.
__device__ __forceinline__ void tma_load_multicast(void* smem, const CUtensorMap* map, int32_t x, int32_t y,
                                                   int32_t batch, uint64_t* bar, uint16_t cta_mask) {
  const int32_t coords[3] = {x, y, batch};
  ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, smem, map, coords, bar, cta_mask);
}

/// Copy `bytes` (a multiple of 16; both addresses 16-byte aligned) of global memory to this CTA's
/// shared memory, completing them on `bar` (cp.async.bulk, no tensor map).
__device__ __forceinline__ void bulk_copy_to_shared(void* smem, const void* global, uint32_t bytes, uint64_t* bar) {
  ptx::cp_async_bulk(ptx::space_cluster, ptx::space_global, smem, global, bytes, bar);
}

__device__ __forceinline__ void tma_store(const CUtensorMap* map, const void* smem, int32_t x, int32_t y,
                                          int32_t batch) {
  const int32_t coords[3] = {x, y, batch};
  ptx::cp_async_bulk_tensor(ptx::space_global, ptx::space_shared, map, coords, smem);
}

/// Close the group of stores this thread issued since the last commit.
__device__ __forceinline__ void tma_store_commit() { ptx::cp_async_bulk_commit_group(); }

/// Wait until at most `Pending` committed store groups may still be reading shared memory.
template <int Pending>
__device__ __forceinline__ void tma_store_wait_read() { ptx::cp_async_bulk_wait_group_read(ptx::n32_t<Pending>{}); }

/// Wait until every committed store has fully completed (before the CTA exits).
__device__ __forceinline__ void tma_store_wait_all() { ptx::cp_async_bulk_wait_group(ptx::n32_t<0>{}); }

}  // namespace coda::sm90

// coda/sm90/barrier.cuh: mbarriers (transaction-counting barriers in shared memory) and
// named CTA barriers.
//
//   __shared__ uint64_t full;
//   if (threadIdx.x == 0) { sm90::barrier_init(&full, 1); sm90::fence_barrier_init(); }
//   __syncthreads();
//   producer:  sm90::arrive_expect_bytes(&full, bytes);  (then TMA loads complete the bytes)
//   consumer:  sm90::wait(&full, phase);                 (phase flips each time the ring wraps)
#pragma once

#include <cstdint>
#include <cuda/ptx>

#include "coda/sm90/cluster.cuh"

namespace coda::sm90 {

namespace ptx = ::cuda::ptx;

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

/// Initialise an mbarrier that completes a phase after `arrivals` arrivals (and, with
/// expect-tx, once every expected byte has landed).
__device__ __forceinline__ void barrier_init(uint64_t* bar, uint32_t arrivals) { ptx::mbarrier_init(bar, arrivals); }

/// Make barrier initialisation visible to the async proxy (TMA) and to the other CTAs of the
/// cluster before anyone signals the barriers (PTX ISA: fence.mbarrier_init).
__device__ __forceinline__ void fence_barrier_init() { ptx::fence_mbarrier_init(ptx::sem_release, ptx::scope_cluster); }

/// Arrive once and announce `bytes` that TMA copies will deliver to this phase.
__device__ __forceinline__ void arrive_expect_bytes(uint64_t* bar, uint32_t bytes) {
  ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared, bar, bytes);
}

/// Arrive once on the barrier at the same shared-memory offset in CTA `cta_rank` of this
/// cluster (the local CTA included). mapa turns the local address into the peer's
/// shared::cluster address (PTX ISA 9.7.9.22). The arrive keeps the default .release.cta
/// semantics on purpose: the slot's readers are wgmma operations already retired by
/// wgmma.wait_group, so no memory ordering is owed to the peer, and .release.cluster would
/// cost a GPU-scope MEMBAR before every arrive (seen in the SASS).
/// (Barriers may also be named by their 32-bit shared address, for loops that keep the address in
/// a register rather than have the compiler rebuild it: see kernel.cuh.)
__device__ __forceinline__ void arrive_cluster(uint32_t bar, uint32_t cta_rank) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(peer_address(bar, cta_rank)) : "memory");
}

/// Arrive once on a barrier of this CTA (release semantics at CTA scope, the default).
__device__ __forceinline__ void arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void arrive(uint64_t* bar) { arrive(shared_address(bar)); }

/// Block until the phase with parity `phase` has completed. try_wait suspends the thread in
/// hardware for a while before returning false, so the loop does not spin hot.
__device__ __forceinline__ void wait(uint32_t bar, uint32_t phase) {
  uint32_t done = 0;
  while (!done)
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(phase)
        : "memory");
}
__device__ __forceinline__ void wait(uint64_t* bar, uint32_t phase) { wait(shared_address(bar), phase); }

/// bar.sync on hardware barrier `id` (1..15; 0 is __syncthreads) among `threads` threads, a
/// multiple of 32. Lets one warpgroup synchronise without stopping the others.
__device__ __forceinline__ void named_barrier_sync(uint32_t id, uint32_t threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

/// Order this thread's generic-proxy shared-memory writes (st.shared, stmatrix) before later
/// async-proxy reads of them (TMA store, wgmma) once a barrier has been passed (PTX ISA 9.7.12.15).
__device__ __forceinline__ void fence_shared_to_async() { ptx::fence_proxy_async(ptx::space_shared); }

/// Order global-memory writes this thread has observed (generic proxy; another SM's, acquired)
/// before its later async-proxy reads of them (cp.async.bulk from global; PTX ISA 9.7.12.15).
__device__ __forceinline__ void fence_global_to_async() { ptx::fence_proxy_async(ptx::space_global); }

}  // namespace coda::sm90

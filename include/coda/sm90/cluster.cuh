// coda/sm90/cluster.cuh: thread-block clusters (sm_90): rank, cluster-wide barrier, and the
// distributed shared memory of a peer CTA (its addresses, stores that complete on its mbarriers).
#pragma once

#include <cuda/ptx>

#include <cstdint>

namespace coda::sm90 {

/// This CTA's rank within its cluster (0 when launched without clusters).
__device__ __forceinline__ uint32_t cluster_cta_rank() { return ::cuda::ptx::get_sreg_cluster_ctarank(); }

/// All threads of all CTAs of the cluster meet here. Arrive has release and wait has acquire
/// semantics by default, so shared-memory writes before it are visible to peers after it.
__device__ __forceinline__ void cluster_sync() {
  ::cuda::ptx::barrier_cluster_arrive();
  ::cuda::ptx::barrier_cluster_wait();
}

/// The shared::cluster address of the object at local shared address `local` in CTA `cta_rank`
/// of this cluster (PTX ISA, mapa).
__device__ __forceinline__ uint32_t peer_address(uint32_t local, uint32_t cta_rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(cta_rank));
  return remote;
}

/// Store 16 bytes into a peer's shared memory at `remote` (peer_address) and count them on the
/// peer's mbarrier at `remote_barrier` (complete-tx), whose phase then completes only once they
/// have landed (PTX ISA, st.async). Floats, read as floats: see epilogue/gpu/reductions.cuh on
/// accumulators moved through integer registers.
__device__ __forceinline__ void store_to_peer(uint32_t remote, float x, float y, float z, float w,
                                              uint32_t remote_barrier) {
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, [%5];" ::"r"(remote),
      "f"(x), "f"(y), "f"(z), "f"(w), "r"(remote_barrier)
      : "memory");
}

/// Arrive once on a peer's mbarrier (`remote`: peer_address), releasing this CTA's earlier memory
/// accesses at cluster scope: a peer that waits with wait_cluster then sees them done.
__device__ __forceinline__ void arrive_on_peer(uint32_t remote) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
}

/// Block until the phase with parity `phase` of this CTA's mbarrier at `bar` has completed,
/// acquiring at cluster scope what the peers that arrived on it (or stored to it) released.
__device__ __forceinline__ void wait_cluster(uint32_t bar, uint32_t phase) {
  uint32_t done = 0;
  while (!done)
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, "
        "0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(phase)
        : "memory");
}

}  // namespace coda::sm90

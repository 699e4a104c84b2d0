// coda/sm90/cluster.cuh: thread-block clusters (sm_90): rank and cluster-wide barrier.
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

}  // namespace coda::sm90

// coda/sm90/warpgroup.cuh: warpgroup roles: register reallocation and single-thread election.
#pragma once

#include <cstdint>

namespace coda::sm90 {

constexpr int kWarpgroupThreads = 128;

/// Raise (Increase) or lower this warpgroup's per-thread register limit (setmaxnreg, sm_90a).
/// Takes effect only with a register cap at kernel entry (__launch_bounds__(threads, 1)) and when
/// every warp of the warpgroup executes it; the count is a multiple of 8 in [24, 256].
template <uint32_t Registers>
__device__ __forceinline__ void setmaxnreg_increase() {
  static_assert(Registers % 8 == 0 && Registers >= 24 && Registers <= 256);
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(Registers));
}
template <uint32_t Registers>
__device__ __forceinline__ void setmaxnreg_decrease() {
  static_assert(Registers % 8 == 0 && Registers >= 24 && Registers <= 256);
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(Registers));
}

/// True in exactly one (the same, leader) lane of the calling warp (elect.sync, sm_90).
__device__ __forceinline__ bool elect_one() {
  uint32_t elected = 0;
  asm volatile(
      "{\n.reg .pred p;\nelect.sync _|p, 0xffffffff;\nselp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(elected));
  return elected != 0;
}

}  // namespace coda::sm90

// Internal: what the router's selection in the GEMM's epilogue (router_epilogue.cuh) does across
// the four lanes of a quad, which hold one row: the bitonic merge of two sorted lists of 8 (a
// lane's values sorted by router_select_common.cuh's sort_descending) into the 8 largest, that
// merge across the quad, and quad sums.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "router_select_common.cuh"

namespace coda::ops::router_detail::fused {

// a and b sorted largest first: a becomes the 8 largest of both, sorted (a half-cleaner leaves
// them as a bitonic sequence, which three rounds of compare-exchanges sort), and `dropped` the
// largest of the other 8 if that is larger (the half-cleaner's smaller sides).
template <class T>
__device__ __forceinline__ void keep_larger_half(T (&a)[8], const T (&b)[8], T& dropped) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    dropped = larger(dropped, smaller(a[i], b[7 - i]));
    a[i] = larger(a[i], b[7 - i]);
  }
#pragma unroll
  for (int stride = 4; stride >= 1; stride /= 2)
#pragma unroll
    for (int i = 0; i < 8; ++i)
      if ((i & stride) == 0) {
        const T x = a[i], y = a[i + stride];
        a[i] = larger(x, y);
        a[i + stride] = smaller(x, y);
      }
}
// The quad's 8 largest: every lane ends with the same sorted list, and `dropped` with the largest
// value left out of it (if larger than what it held: pass the lane's own dropped value).
template <class T>
__device__ __forceinline__ void keep_quad_best(T (&a)[8], T& dropped) {
#pragma unroll
  for (int mask = 1; mask <= 2; mask *= 2) {
    T other[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) other[i] = __shfl_xor_sync(0xffffffffu, a[i], mask);
    dropped = larger(dropped, __shfl_xor_sync(0xffffffffu, dropped, mask));
    keep_larger_half(a, other, dropped);
  }
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

}  // namespace coda::ops::router_detail::fused

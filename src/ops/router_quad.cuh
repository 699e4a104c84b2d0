// Internal: what the router's selection in the GEMM's epilogue (router_epilogue.cuh) does across
// the four lanes of a quad, which hold one row: sorting networks on a lane's values (floats, or
// 32- or 64-bit keys, none NaN), the bitonic merge of two sorted lists of 8 into the 8 largest,
// that merge across the quad, and quad sums.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "router_select_common.cuh"

namespace coda::ops::router_detail::fused {

__device__ __forceinline__ float larger(float a, float b) { return fmaxf(a, b); }
__device__ __forceinline__ float smaller(float a, float b) { return fminf(a, b); }
__device__ __forceinline__ uint32_t larger(uint32_t a, uint32_t b) { return max(a, b); }
__device__ __forceinline__ uint32_t smaller(uint32_t a, uint32_t b) { return min(a, b); }
__device__ __forceinline__ uint64_t larger(uint64_t a, uint64_t b) { return a > b ? a : b; }
__device__ __forceinline__ uint64_t smaller(uint64_t a, uint64_t b) { return a > b ? b : a; }

template <int kLow, int kHigh, class T, int N>
__device__ __forceinline__ void exchange(T (&v)[N]) {
  const T a = v[kLow], b = v[kHigh];
  v[kLow] = larger(a, b);
  v[kHigh] = smaller(a, b);
}
template <class T, int N, std::size_t... I>
__device__ __forceinline__ void sort_network(T (&v)[N], std::index_sequence<I...>) {
  (exchange<kMergeSortNetwork<N>.pairs[I].first, kMergeSortNetwork<N>.pairs[I].second>(v), ...);
}
// N values (no NaN), largest first.
template <class T, int N>
__device__ __forceinline__ void sort_descending(T (&v)[N]) {
  sort_network(v, std::make_index_sequence<kMergeSortNetwork<N>.size>());
}
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

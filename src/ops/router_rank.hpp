// Internal: a row's ranks by counting, for the router's ranked rows (router_epilogue_ranked.cuh),
// and the merge of wide rows' tile candidates (merged_rank), host and device
// (tests/ops/router_rank_test.cpp runs them on the CPU).
//
//   rank(i) = #{j : code_j > code_i, or code_j = code_i and j < i}
//
// over a row's kWidth order-preserving codes (NaN 0, below every score): larger first, ties to the
// lower id, so the ranks are a permutation of 0 .. kWidth - 1. The two lanes of a row each rank half
// of it: lane h experts i = h kHalf + u, u < kHalf. With u fixed, every j < u lies below i and no j
// >= kHalf + u does; between, j < i exactly when h = 1. So the three ranges compare code_j + 1,
// code_j + h and code_j with `>` against code_i, one comparison each, all independent (no overflow:
// the largest code, +inf's, is 0xff800000).
#pragma once

#include <cstdint>

#include "coda/core/host_device.hpp"

#if defined(__CUDA_ARCH__)
#define CODA_RANK_UNROLL _Pragma("unroll")
#else
#define CODA_RANK_UNROLL
#endif

namespace coda::ops::router_detail {

template <int kWidth>
struct RowRanks {
  static_assert(kWidth % 2 == 0, "two halves");
  static constexpr int kHalf = kWidth / 2;
  uint32_t code[kWidth];
  int h;  // the lane's half

  CODA_HD RowRanks(const uint32_t (&codes)[kWidth], int half) : h(half) {
    CODA_RANK_UNROLL
    for (int j = 0; j < kWidth; ++j) code[j] = codes[j];
  }
  /// The rank of expert h kHalf + u (u a constant once unrolled: the codes stay in registers).
  CODA_HD int rank(int u) const {
    const uint32_t mine = h ? code[kHalf + u] : code[u];
    int rank = 0;
    CODA_RANK_UNROLL
    for (int j = 0; j < kWidth; ++j) {
      const uint32_t other = j < u ? code[j] + 1u : j < kHalf + u ? code[j] + uint32_t(h) : code[j];
      rank += other > mine ? 1 : 0;
    }
    return rank;
  }
};

/// Wide rows (router_epilogue_wide.cuh): the place among a row's slots of candidate (t, i), i.e.
/// `mine`, filled, at place i of tile t's list. Each tile's list holds its k best sorted (larger
/// score first, ties to the lower id; an empty candidate's id is negative and ranks after every
/// filled one), the ids distinct across tiles: the place is i plus the other tiles' candidates that
/// rank before it. t and the loops' indices are constants once unrolled (the lists stay in
/// registers). tests/ops/router_rank_test.cpp runs it on the CPU against a whole row's selection.
template <int kMaxTiles, int kK>
CODA_HD int merged_rank(const float (&score)[kMaxTiles][kK], const int32_t (&id)[kMaxTiles][kK], int t, int i,
                        float mine_score, int32_t mine_id) {
  int rank = i;
  CODA_RANK_UNROLL
  for (int c = 0; c < kMaxTiles * kK; ++c) {
    const int u = c / kK, j = c % kK;
    const bool before =
        id[u][j] >= 0 && (score[u][j] > mine_score || (score[u][j] == mine_score && id[u][j] < mine_id));
    rank += u != t && before ? 1 : 0;
  }
  return rank;
}

}  // namespace coda::ops::router_detail

#undef CODA_RANK_UNROLL

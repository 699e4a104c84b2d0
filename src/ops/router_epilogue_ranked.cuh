// Internal: the router's selection in the GEMM's epilogue for rows of at most 16 experts
// (coda/ops/router.hpp, fused_selection; Mixtral's 8, DBRX's 16) on m128n128: the seam epilogue
// RankedSelection<kWidth>, kWidth = 8 or 16 the smaller that holds E.
//
// A row is two lanes' work, not a quad's chain of sorts, shuffles and merges (router_epilogue.cuh):
// each warp moves its 16 rows of scores through shared memory, and the two lanes of a row each rank
// half of its kWidth experts against all of them by counting,
//   rank(i) = #{j : s_j > s_i, or s_j = s_i and j < i},  NaN below every score,
// kWidth / 2 x kWidth independent comparisons (no dependent chain). A rank below k names a slot,
// and every rule of the other paths follows from the order: larger score first, ties to the lower
// id, NaN never selected, and the slots nothing selectable filled take the lowest ids left (the NaN
// ids, ascending) at weight 0. Every row of the tile is selected at once, where the quad selects
// its two row halves in turn, ~3,000 cycles each at E = 8 (H200, clock64). H200, E = 8, k = 2, K =
// 4096: 36.5 us at M = 16384 and 18.1 at M = 4096, against 36.2 and 17.8 for coda's GEMM to the
// logits (docs/performance.md). At E = 32 the 512 comparisons a lane measured slower than the
// quad's narrow rows (M = 4096 21.3-21.7 against 20.4-20.8 us): E = 17 to 32 stays there
// (FusedRows::narrow).
#pragma once

#include <cmath>
#include <cstdint>

#include "coda/epilogue/monoids.hpp"
#include "coda/mainloop/epilogue_seam.cuh"
#include "coda/ops/router.hpp"
#include "router_epilogue_slots.cuh"
#include "router_rank.hpp"
#include "router_select_common.cuh"

namespace coda::ops::router_detail {

/// The seam epilogue selecting on rows of E <= kWidth experts (columns past E are NaN). A consumer
/// of m128n128 holds 64 x 128 accumulators; the experts are its first kWidth columns.
template <int kWidth>
struct RankedSelection : fused::SelectsInPrepare {
  static_assert(kWidth == 8 || kWidth == kRankedMaxExperts, "rows of 8 or 16 experts");
  static constexpr int kHalf = kWidth / 2;  // experts a lane ranks
  // A row's floats in shared memory: four more than its width, so that the 16-byte loads of a
  // quarter warp (four rows) hit distinct banks.
  static constexpr int kStride = kWidth + 4;
  using Params = SelectArgs;
  struct WarpRows {
    alignas(16) float value[16][kStride];  // the warp's rows: logits, or sigmoid_bias's p
    int32_t slot[16][kFusedMaxK];  // each row's experts by slot, best first
  };
  struct SharedStorage {
    WarpRows warps[2][4];               // [consumer][warp]
    alignas(16) float bias[2][kWidth];  // each consumer's copy of the expert bias (copy_bias_once)
  };

  template <class Acc>
  __device__ void prepare(const Params& a, SharedStorage& s, Acc& acc, const mainloop::TileCoordinates& t,
                          Pending<Acc>&) {
    static_assert(Acc::kBlocks == 1 && Acc::kCols >= kWidth, "a warp holds 16 whole rows");
    if (t.row0 >= t.problem_m) return;  // a cluster's CTA past the last tile row
    if (a.mode == RoutingMode::sigmoid_bias) {
      fused::copy_bias_once(a, s.bias[t.consumer], t.consumer, t.thread, bias_copied_);
      select<true>(a, s.bias[t.consumer], acc, t, s.warps[t.consumer][t.thread / 32]);
    } else {
      select<false>(a, nullptr, acc, t, s.warps[t.consumer][t.thread / 32]);
    }
  }

 private:
  bool bias_copied_ = false;  // this consumer's copy of the expert bias is in shared memory

  template <bool kSigmoid, class Acc>
  __device__ void select(const Params& a, const float* bias, Acc& acc, const mainloop::TileCoordinates& t,
                         WarpRows& rows) {
    const int lane = t.thread % 32;
    // 1. The warp's 16 rows to shared memory (value i of the fragment: row row_offset(0, i) + lane / 4
    // of the warp's, column col_offset(i) + 2 (lane % 4)): logits, sigmoid_bias's p; NaN past E.
#pragma unroll
    for (int i = 0; i < kWidth / 2; ++i) {
      const int col = Acc::col_offset(i) + 2 * (lane % 4);
      const float v = col < a.experts ? acc.value[0][i] : NAN;
      rows.value[Acc::row_offset(0, i) + lane / 4][col] = kSigmoid ? fused::sigmoid_p(v) : v;
    }
    __syncwarp();

    // 2. Lane pair r ranks row r: lane 2r + h experts h kHalf + u, u < kHalf, each against all.
    const int r = lane / 2, h = lane % 2;
    float value[kWidth], score[kWidth];
    uint32_t code[kWidth];  // order-preserving, NaN 0: below every score
#pragma unroll
    for (int j = 0; j < kWidth; j += 4) {
      const float4 v = *reinterpret_cast<const float4*>(&rows.value[r][j]);
      value[j] = v.x, value[j + 1] = v.y, value[j + 2] = v.z, value[j + 3] = v.w;
    }
#pragma unroll
    for (int j = 0; j < kWidth; ++j) {
      score[j] = fused::selection_score<kSigmoid>(bias, value[j], j);
      code[j] = score[j] == score[j] ? ordered_code(score[j]) : 0u;
    }
    const RowRanks<kWidth> ranks(code, h);  // router_rank.hpp
#pragma unroll
    for (int u = 0; u < kHalf; ++u) {
      const int rank = ranks.rank(u);
      if (rank < a.k) rows.slot[r][rank] = h * kHalf + u;
    }
    float lse = 0.0f;
    if (!kSigmoid && needs_log_sum_exp(a.mode, a.renormalize)) {  // over the row's non-NaN scores
      float live[kWidth];
#pragma unroll
      for (int j = 0; j < kWidth; ++j) live[j] = code[j] ? score[j] : -INFINITY;
      lse = epilogue::LogSumExp::finish(epilogue::LogSumExp::fold(live));
    }
    __syncwarp();

    // 3. The weights of the row's k slots, lane h writing slots h, h + 2, ...: select_token's
    // formulas and its slot sum's order (the same bits), but for topk_softmax's log-sum-exp, folded
    // here over the row in one lane (LogSumExp::fold), which rounds differently. Only slots below k
    // are computed, and only a lane's own divided (k is uniform: no divergence).
    const bool softmax_of_slots =
        a.mode == RoutingMode::softmax_topk || (a.mode == RoutingMode::topk_softmax && a.renormalize);
    int32_t id[kFusedMaxK];
    float w[kFusedMaxK], slot_score[kFusedMaxK];
    bool filled[kFusedMaxK];
#pragma unroll
    for (int q = 0; q < kFusedMaxK; ++q) {
      id[q] = 0;
      w[q] = slot_score[q] = 0.0f;
      filled[q] = false;
      if (q < a.k) {
        id[q] = rows.slot[r][q];
        const float v = rows.value[r][id[q]];
        slot_score[q] = fused::selection_score<kSigmoid>(bias, v, id[q]);
        filled[q] = slot_score[q] == slot_score[q];
        const float term = kSigmoid ? v : expf(slot_score[q] - (softmax_of_slots ? slot_score[0] : lse));
        w[q] = filled[q] ? term : 0.0f;
      }
    }
    const bool divided = softmax_of_slots || (kSigmoid && a.renormalize);
    // slot_sum's butterfly (xor 4, 2, 1) over slots 0-7: the same bits as the other paths' sums.
    const float sum = ((w[0] + w[4]) + (w[2] + w[6])) + ((w[1] + w[5]) + (w[3] + w[7]));
    const int64_t row = int64_t(t.row0) + 16 * (t.thread / 32) + r;
#pragma unroll
    for (int q = 0; q < kFusedMaxK; q += 2) {
      const int slot = q + h;  // the lane's values by selects: an index into registers must be a constant
      if (slot >= a.k || row >= a.rows) break;
      const bool slot_filled = h ? filled[q + 1] : filled[q];
      const float weight = h ? w[q + 1] : w[q];
      const int64_t i = row * a.k + slot;
      a.weights[i] = slot_filled ? (divided ? weight / sum : weight) * a.scale : 0.0f;
      a.ids[i] = h ? id[q + 1] : id[q];
      if (a.token_expert_indices) a.token_expert_indices[i] = int32_t(slot * a.rows + row);
    }
    __syncwarp();  // the next tile's rows reuse this one's shared memory
  }
};

}  // namespace coda::ops::router_detail

// Internal: the router's epilogue selection (router_epilogue.cuh), its parts other than the fast
// path's keys: the parameters, a consumer's row layout, the selection score, the exact rounds for
// rows the fast path cannot settle (select_exactly) and the weights and outputs (write_slots).
#pragma once

#include <cmath>
#include <cstdint>

#include "coda/epilogue/math.hpp"
#include "coda/mainloop/epilogue_seam.cuh"
#include "coda/ops/router.hpp"
#include "coda/sm90/barrier.cuh"
#include "router_quad.cuh"
#include "router_select_common.cuh"

namespace coda::ops::router_detail {

inline constexpr int kFusedMaxK = 8;
inline constexpr int kFusedMaxExperts = 256;  // in one tile
inline constexpr int kWideMaxExperts = int(kRouterMaxExperts);

/// Whether the epilogue's selection takes grouped selection with n_group groups of E experts: one
/// group a chunk of each lane's row share (8), E the tile's width (fused_tile: 128 or 256), so
/// that group g is a whole chunk of every lane (DeepSeek-V3's 8 groups of 32).
CODA_HD constexpr bool groups_in_epilogue(int experts, int n_group) {
  return n_group == 1 || (n_group == 8 && (experts == 128 || experts == 256));
}

/// What a fused kernel's rows hold, each a kernel of its own (FusedSelection): any E up to the
/// tile's width; sigmoid_bias's 8 groups (groups_in_epilogue); E <= kNarrowMaxExperts on m128n128,
/// whose live values (a lane's first two chunks of four) fill the row's 8 slots, so that no chunk
/// threshold is needed; or rows wider than the tile (E up to kWideMaxExperts, no groups), whose
/// tiles' k best merge (router_epilogue_wide.cuh). Rows of E <= kRankedMaxExperts are ranked by
/// counting instead (router_epilogue_ranked.cuh: RankedSelection).
enum class FusedRows { ungrouped, groups, narrow, wide };
inline constexpr int kNarrowMaxExperts = 32;
inline constexpr int kRankedMaxExperts = 16;

namespace fused {

inline constexpr int kChunks = 8;  // per lane and row
inline constexpr int kSlots = 8;   // chunks a row copies to shared memory (k <= 8)
// A narrow row's live chunks a lane: value v is column 8 (v / 2) + v % 2 + 2 (lane % 4), below 32
// for v < 8 (chunks 0 and 1 of four values).
inline constexpr int kNarrowChunks = 2;

// One row's copied chunks, in the warp's shared memory: the row's values (logits, or sigmoid_bias's
// p; the scores are recomputed from them, bit for bit) and each chunk's first column. Rows 4 words longer than their
// data: the quads' 16-byte stores of one chunk each fall in different banks.
template <int kChunk>
struct RowChunks {
  float logit[kSlots][kChunk];
  int32_t first_col[kSlots];
  float pad[4];
};

/// A thread's two rows of one 64-row block, V values each: value v of row half h is accumulator
/// 4 (v / 2) + 2 h + v % 2, column 8 (v / 2) + v % 2 + 2 (lane % 4) (epilogue_seam.cuh).
template <int V>
struct RowLayout {
  static_assert(V % 16 == 0 && V <= 64, "rows of 64 to 256 columns");
  static constexpr int kChunk = V / kChunks;
  static constexpr int index(int v, int h) { return 4 * (v / 2) + 2 * h + v % 2; }
  static constexpr int col(int v) { return 8 * (v / 2) + v % 2; }
};

// min(a, b), NaN where either is NaN (min.NaN.f32, PTX ISA; fminf gives the other operand).
__device__ __forceinline__ float min_propagating_nan(float a, float b) {
  float r;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}

// sigmoid_bias's p = sigmoid(s): epilogue::sigmoid's bits (the scores path's) without exp2f's
// subnormal steps (ex2.approx.ftz: 2^y below 2^-126 flushes to 0, where 1 + e^-s is 1 either way),
// three instructions fewer a score.
__device__ __forceinline__ float sigmoid_p(float s) {
  return epilogue::reciprocal_approx(1.0f + epilogue::exp2_approx(s * -epilogue::kLog2e));
}

// The selection score of a row value: the logit itself, or sigmoid_bias's p + bias, the row then
// holding p (select_row's first step turns each logit into p in place, once; the scores path's
// sigmoid_selection_score, the same bits). kSigmoid is a template parameter: a run-time test would
// leave the sigmoid's instructions in every mode's path. `bias`: the expert bias in shared memory
// (zeros where there is none: p + 0 is p), unused without kSigmoid.
template <bool kSigmoid>
__device__ __forceinline__ float selection_score(const float* bias, float value, int col) {
  if constexpr (!kSigmoid) return value;
  else return value + bias[col];
}

/// What a selection epilogue doing all its work in prepare() (the seam's contract,
/// mainloop/epilogue_seam.cuh) leaves empty: nothing pending for the next tile's MMAs to overlap,
/// nothing to finish. Its outputs are k words a row, written from registers.
struct SelectsInPrepare {
  template <class Acc>
  struct Pending {};
  template <class Shared, class Acc>
  __device__ bool write(const SelectArgs&, Shared&, const Pending<Acc>&, const mainloop::TileCoordinates&, int) {
    return true;
  }
  template <class Shared>
  __device__ void finish(const SelectArgs&, Shared&, const mainloop::TileCoordinates&) {}
};

/// A consumer's copy of the expert bias in shared memory, for sigmoid_bias's selection scores (read
/// from there, a row's loads do not all wait in registers at once), made on its first tile
/// (`copied`: the consumer's flag). Zeros without a bias and past E: p + 0 is p, NaN + 0 NaN. The
/// copy holds every expert (kExperts: the tile's width, or kWideMaxExperts where a row spans several
/// tiles): one copy serves every tile. Named barrier
/// 1 + consumer, the epilogue's.
template <int kExperts>
__device__ __forceinline__ void copy_bias_once(const SelectArgs& a, float (&bias)[kExperts], int consumer, int thread,
                                               bool& copied) {
  if (copied) return;
  for (int e = thread; e < kExperts; e += 128)
    bias[e] = a.expert_bias && e < a.experts ? __ldg(a.expert_bias + e) : 0.0f;
  sm90::named_barrier_sync(1 + uint32_t(consumer), 128);
  copied = true;
}

/// What a lane hands the weights for its slots (j = lane % 4 and j + 4 of the row).
struct Slot {
  float score = 0.0f;   // selection score
  float p = 0.0f;       // sigmoid_bias's weight before renormalizing: sigmoid(s)
  int32_t id = -1;      // -1: a slot past k
  bool filled = false;  // false: nothing selectable was left for it (weight 0)
};

// k exact rounds over the lanes' registers, for a quad the fast path could not settle (`keep`:
// it could, and its slots stay): each round the quad's best score ranking after the last one
// taken (larger first, ties to the lower column, NaN never). Slots no selectable score filled take
// the lowest ids not chosen. sigmoid_bias's row holds p = sigmoid(s) (select_row), the score
// p + bias. The chosen ids go through the row's shared memory (`chosen`, the chunks' first
// columns, read before).
template <int V, bool kSigmoid, int N>
__device__ __forceinline__ void select_exactly(const SelectArgs& a, const float* bias, float (&acc)[N], int lane_col,
                                               bool keep, int32_t (&chosen)[kSlots], Slot (&mine)[2]) {
  using Layout = RowLayout<V>;
  const int quad_lane = int(threadIdx.x % 4u);
  float last_score = INFINITY;
  int last_col = -1, filled = 0;
  for (int slot = 0; slot < a.k; ++slot) {
    // The bias's address laundered each round, so that its loads stay in the round (hoisted, V of
    // them would wait in registers beside the accumulators).
    const float* round_bias = bias;
    if constexpr (kSigmoid) asm volatile("" : "+l"(round_bias));
    // The lane's best in four interleaved chains (each in column order, so that ties keep the
    // first), then merged: one chain of V compare-and-selects would be the round's latency.
    bool chain_have[4] = {false, false, false, false};
    float chain_score[4] = {0.0f, 0.0f, 0.0f, 0.0f}, chain_p[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    int chain_col[4] = {0, 0, 0, 0};
#pragma unroll
    for (int v = 0; v < V; ++v) {
      const int c = v % 4, col = lane_col + Layout::col(v);
      // sigmoid_bias: the row holds p = sigmoid(s); the score is p + bias, selection_score's bits.
      const float score = selection_score<kSigmoid>(round_bias, acc[Layout::index(v, 0)], col);
      const bool after = score < last_score || (score == last_score && col > last_col);
      if (after && (!chain_have[c] || score > chain_score[c])) {
        chain_have[c] = true;
        chain_score[c] = score;
        chain_p[c] = acc[Layout::index(v, 0)];
        chain_col[c] = col;
      }
    }
    bool have = chain_have[0];
    float best_score = chain_score[0], best_p = chain_p[0];
    int best_col = chain_col[0];
#pragma unroll
    for (int c = 1; c < 4; ++c)
      if (chain_have[c] &&
          (!have || chain_score[c] > best_score || (chain_score[c] == best_score && chain_col[c] < best_col))) {
        have = true;
        best_score = chain_score[c];
        best_p = chain_p[c];
        best_col = chain_col[c];
      }
#pragma unroll
    for (int mask = 1; mask <= 2; mask *= 2) {
      const bool other = __shfl_xor_sync(0xffffffffu, int(have), mask) != 0;
      const float other_score = __shfl_xor_sync(0xffffffffu, best_score, mask);
      const float other_p = __shfl_xor_sync(0xffffffffu, best_p, mask);
      const int other_col = __shfl_xor_sync(0xffffffffu, best_col, mask);
      if (other && (!have || other_score > best_score || (other_score == best_score && other_col < best_col))) {
        have = true;
        best_score = other_score;
        best_p = other_p;
        best_col = other_col;
      }
    }
    if (have) {
      last_score = best_score;
      last_col = best_col;
      ++filled;
    }
    if (quad_lane == 0 && !keep) chosen[slot] = best_col;  // a kept quad's lanes may still read it
#pragma unroll
    for (int s = 0; s < 2; ++s)
      if (!keep && slot == quad_lane + 4 * s) mine[s] = {best_score, best_p, best_col, have};
  }
  __syncwarp();
  if (keep) return;
#pragma unroll
  for (int s = 0; s < 2; ++s) {
    const int j = quad_lane + 4 * s;
    if (j >= a.k || mine[s].filled) continue;
    mine[s].id = nth_unchosen(j - filled, chosen, filled);  // the filled slots come first
  }
}

// The weights of a row's slots (the scores path's formulas, select_token) and the outputs.
__device__ __forceinline__ void write_slots(const SelectArgs& a, int32_t row, const Slot (&mine)[2], float lse) {
  const int lane = int(threadIdx.x % 32u), quad_lane = lane % 4;
  const bool renormalized_softmax = a.mode == RoutingMode::topk_softmax && a.renormalize;
  float w[2];
  if (a.mode == RoutingMode::softmax_topk || renormalized_softmax) {
    const float top = __shfl_sync(0xffffffffu, mine[0].score, lane & ~3);  // slot 0, the largest
#pragma unroll
    for (int s = 0; s < 2; ++s) w[s] = mine[s].filled ? expf(mine[s].score - top) : 0.0f;
    const float sum = quad_sum(w[0] + w[1]);
#pragma unroll
    for (int s = 0; s < 2; ++s) w[s] /= sum;
  } else if (a.mode == RoutingMode::topk_softmax) {
#pragma unroll
    for (int s = 0; s < 2; ++s) w[s] = mine[s].filled ? expf(mine[s].score - lse) : 0.0f;
  } else {
#pragma unroll
    for (int s = 0; s < 2; ++s) w[s] = mine[s].filled ? mine[s].p : 0.0f;
    if (a.renormalize) {
      const float sum = quad_sum(w[0] + w[1]);
#pragma unroll
      for (int s = 0; s < 2; ++s) w[s] /= sum;
    }
  }
  if (row >= a.rows) return;
#pragma unroll
  for (int s = 0; s < 2; ++s) {
    const int j = quad_lane + 4 * s;
    if (j >= a.k) continue;
    const int64_t i = int64_t(row) * a.k + j;
    a.weights[i] = mine[s].filled ? w[s] * a.scale : 0.0f;
    a.ids[i] = mine[s].id;
    if (a.token_expert_indices) a.token_expert_indices[i] = int32_t(j * a.rows + row);
  }
}

}  // namespace fused
}  // namespace coda::ops::router_detail

// coda/epilogue/programs/router.hpp: GEMM + the per-part half of MoE routing (docs/kernels.md "MoE
// routing"; the op is coda/ops/router.hpp).
//
// Per row m and part b of the router scores S = X W_r^T (M x E), on the fp32 accumulators:
//   candidates[m, b] = the K best (selection score, expert) of the part    (TopK<K>: 2K words)
//   lse[m, b]        = log sum exp over the part's non-NaN scores           (topk_softmax only)
// where the selection score is s itself (the softmax modes: softmax is monotonic) or sigmoid(s)
// + expert_bias[e] (sigmoid_bias). The op's finishing kernel merges the parts' candidates and
// turns them into weights; the M x E scores are never written.
//
//   coda::epilogue::RouterCandidates<8> program{.candidates = coda::epilogue::row_partials(c, "ws", 16)};
#pragma once

#include <cmath>

#include "coda/epilogue/program.hpp"

namespace coda::epilogue {

template <int K>
struct RouterCandidates {
  Partials candidates{};    // M x parts, TopK<K>::kWords words per slot
  Partials lse{};           // optional: M x parts (topk_softmax's softmax over every expert)
  RowVector expert_bias{};  // optional, f32 E (sigmoid selection only)
  bool sigmoid = false;     // rank sigmoid(s) + bias instead of s

  template <class Tile>
  CODA_HD void operator()(Tile& t) const {
    // NaN scores take no part in the softmax: as -inf they add exp(-inf) = 0 (the reference's rule).
    if (lse.data) t.row_reduce(lse, LogSumExp{}, [](const Element& x) { return x.value == x.value ? x.value : -INFINITY; });
    if (sigmoid) {
      t.row_reduce(candidates, TopK<K>{}, [&](const Element& x) {
        const float bias = expert_bias.data ? t.load(expert_bias, x) : 0.0f;
        return TopK<K>::one(epilogue::sigmoid(x.value) + bias, x.col);
      });
    } else {
      t.row_reduce(candidates, TopK<K>{}, [](const Element& x) { return TopK<K>::one(x.value, x.col); });
    }
  }
};

}  // namespace coda::epilogue

// coda/reference/moe.hpp: the fp64 reference of MoE routing (GEMM + top-k + softmax): the
// router scores X W_r^T (M x E) reduced to k (weight, expert id) pairs per token.
//
//   RoutingOptions deepseek{.mode = RoutingMode::sigmoid_bias, .k = 8, .renormalize = true,
//                           .expert_bias = bias, .n_group = 8, .topk_group = 4,
//                           .routed_scaling_factor = 2.5};
//   Routing r = coda::reference::moe_route(x, w_router, deepseek);   // r.weights (M x 8), r.ids (M x 8)
//   int32_t first = r.id(m, 0);                                 // the best expert of token m
//
// Modes (s = one row of scores):
//   softmax_topk: select the k largest s; weights = softmax over the selected s.
//   topk_softmax: p = softmax over all E; select the k largest (same order as s); weights = p of
//                 the selected, divided by their sum when renormalize (Mixtral/Qwen/vLLM).
//   sigmoid_bias: p = sigmoid(s); selection uses p + expert_bias (the bias affects selection
//                 only). Grouped selection when n_group > 1: the E experts form n_group contiguous
//                 groups; a group's score is the sum of its two largest p + bias; the topk_group
//                 best groups are kept and the k experts are chosen among them. Weights = p of the
//                 selected (no bias), divided by their sum when renormalize (DeepSeek-V3).
// Every mode then multiplies the weights by routed_scaling_factor (1 by default).
//
// Order and ties: slots are ordered by descending selection score; equal scores (experts or
// groups) go to the lower id first. NaN scores are never selected (in a group score they count
// as -inf, and a group with fewer than two selectable experts scores -inf); NaN scores are also
// left out of topk_softmax's softmax. When fewer than k experts are selectable, the remaining
// slots hold the lowest ids not yet chosen, at weight 0 (ids are always distinct and in [0, E)).
// Infinite scores are ordinary values (as in softmax, a row whose selected scores are all -inf
// gives NaN weights).
// The bias may be any value: a NaN bias makes its expert's selection score NaN (never selected);
// +inf ranks the expert before every finite score, -inf after every finite score (still
// selectable); a group whose two best sum to NaN (+inf and -inf) scores -inf.
#pragma once

#include <cstdint>
#include <vector>

#include "coda/reference/matrix.hpp"

namespace coda::reference {

enum class RoutingMode { softmax_topk, topk_softmax, sigmoid_bias };

struct RoutingOptions {
  RoutingMode mode = RoutingMode::softmax_topk;
  int64_t k = 1;                       // experts per token, 1 <= k <= E (the GPU may allow fewer)
  bool renormalize = false;            // scale the k weights to sum 1 (a no-op for softmax_topk)
  Vector expert_bias = {};             // sigmoid_bias only: length E (NaN, +-inf: above); empty = no bias
  int64_t n_group = 1;                 // sigmoid_bias only: grouped selection when > 1
  int64_t topk_group = 1;              // groups kept, 1 <= topk_group <= n_group
  double routed_scaling_factor = 1.0;  // finite, > 0
};

struct Routing {
  Matrix weights;            // M x k
  std::vector<int32_t> ids;  // M x k, row-major; distinct per row, in [0, E)

  int32_t id(int64_t m, int64_t slot) const { return ids[std::size_t(m * weights.cols + slot)]; }

  /// What the dispatch after routing reads (vLLM's layout): M x k, slot j of token m holds j * M + m,
  /// the row of the (slot-major) list of token copies that entry becomes.
  std::vector<int32_t> token_expert_indices() const;
  /// Tokens routed to each of `experts` experts (the histogram the dispatch sizes its buffers by);
  /// every slot counts, the weight-0 ones that fill a row with too few selectable experts too.
  std::vector<int64_t> expert_counts(int64_t experts) const;
};

/// Route from the scores (M x E, 1 <= E <= 512). Besides the rules above: E must be a multiple of
/// n_group with at least two experts per group when n_group > 1, and k <= topk_group * E / n_group.
Routing route(const Matrix& scores, const RoutingOptions& options);

/// The whole kernel: scores = X W_r^T (x M x K, router_weight E x K), then route().
Routing moe_route(const Matrix& x, const Matrix& router_weight, const RoutingOptions& options);

}  // namespace coda::reference

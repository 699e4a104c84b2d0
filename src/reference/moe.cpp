#include "coda/reference/moe.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string_view>

#include "coda/core/layout.hpp"
#include "coda/reference/epilogues.hpp"
#include "coda/reference/gemm.hpp"
#include "reference/checks.hpp"

namespace coda::reference {
namespace {

constexpr int64_t kMaxExperts = 512;  // the router's range: wider than one GPU tile, tiles' candidates merge
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// `experts_argument` names the argument whose extent E is.
void check_options(ArgumentCheck& check, std::string_view experts_argument, int64_t experts,
                   const RoutingOptions& options) {
  check.require(experts >= 1 && experts <= kMaxExperts, experts_argument, "holds ", experts,
                " experts but must hold 1 to ", kMaxExperts);
  check.require(options.k >= 1 && options.k <= experts, "options.k", "is ", options.k, " but must lie in [1, ", experts,
                "] (the number of experts)");
  const bool sigmoid_bias = options.mode == RoutingMode::sigmoid_bias;
  check.require(options.expert_bias.empty() || sigmoid_bias, "options.expert_bias",
                "is used only by mode sigmoid_bias; leave it empty for the softmax modes");
  check.require(options.n_group == 1 || sigmoid_bias, "options.n_group", "is ", options.n_group,
                " but grouped selection exists only in mode sigmoid_bias");
  if (!options.expert_bias.empty())
    checks::require_length(check, "options.expert_bias", options.expert_bias.size(), experts, "one bias per expert");
  check.require(options.n_group >= 1 && experts % options.n_group == 0, "options.n_group", "is ", options.n_group,
                " but must be >= 1 and divide the number of experts (", experts, ")");
  const int64_t group_size = options.n_group >= 1 ? experts / options.n_group : 0;
  check.require(options.n_group == 1 || group_size >= 2, "options.n_group", "gives groups of ", group_size,
                " expert(s), but a group scores its two best experts");
  check.require(options.topk_group >= 1 && options.topk_group <= options.n_group, "options.topk_group", "is ",
                options.topk_group, " but must lie in [1, n_group = ", options.n_group, "]");
  check.require(options.k <= options.topk_group * group_size, "options.k", "is ", options.k, " but the ",
                options.topk_group, " kept group(s) hold only ", options.topk_group * group_size, " experts");
  check.require(std::isfinite(options.routed_scaling_factor) && options.routed_scaling_factor > 0,
                "options.routed_scaling_factor", "is ", options.routed_scaling_factor, " but must be finite and > 0");
}

// Indices i in [begin, end) with allowed[i] and a non-NaN score, by descending score; the stable
// sort keeps equal scores in ascending index order, so ties go to the lower id.
std::vector<int64_t> ranked(const Vector& score, const std::vector<bool>& allowed, int64_t begin, int64_t end) {
  std::vector<int64_t> order;
  for (int64_t i = begin; i < end; ++i)
    if (allowed[std::size_t(i)] && !std::isnan(score[std::size_t(i)])) order.push_back(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return score[std::size_t(a)] > score[std::size_t(b)]; });
  return order;
}

// DeepSeek-V3's group-limited selection: keep only the experts of the topk_group groups whose
// two best selection scores sum highest. A group with fewer than two selectable experts, or whose
// two best sum to NaN (+inf and -inf, from infinite biases), scores -inf: every group score is
// ordered, so exactly topk_group groups are kept.
void keep_best_groups(const Vector& selection, const RoutingOptions& options, std::vector<bool>& allowed) {
  const int64_t experts = int64_t(selection.size()), group_size = experts / options.n_group;
  Vector group_score(std::size_t(options.n_group));
  for (int64_t g = 0; g < options.n_group; ++g) {
    const std::vector<int64_t> best = ranked(selection, allowed, g * group_size, (g + 1) * group_size);
    const double sum = best.size() >= 2 ? selection[std::size_t(best[0])] + selection[std::size_t(best[1])] : kNaN;
    group_score[std::size_t(g)] = std::isnan(sum) ? -std::numeric_limits<double>::infinity() : sum;
  }
  const std::vector<bool> every_group(group_score.size(), true);
  const std::vector<int64_t> groups = ranked(group_score, every_group, 0, options.n_group);
  std::vector<bool> kept(std::size_t(options.n_group), false);
  for (int64_t i = 0; i < options.topk_group; ++i) kept[std::size_t(groups[std::size_t(i)])] = true;
  for (int64_t e = 0; e < experts; ++e)
    if (!kept[std::size_t(e / group_size)]) allowed[std::size_t(e)] = false;
}

// softmax over the entries of `score` listed in `over`, evaluated at expert e.
double softmax_at(const Vector& score, const std::vector<int64_t>& over, int64_t e) {
  double top = -std::numeric_limits<double>::infinity();
  for (int64_t i : over) top = std::max(top, score[std::size_t(i)]);
  double sum = 0;
  for (int64_t i : over) sum += std::exp(score[std::size_t(i)] - top);
  return std::exp(score[std::size_t(e)] - top) / sum;
}

// Route one token: fill its k slots of weights and ids.
void route_row(const double* scores, int64_t experts, const RoutingOptions& options, double* weights, int32_t* ids) {
  const Activation sigmoid = Activation::sigmoid();
  const Vector raw(scores, scores + experts);
  Vector selection = raw;  // what ranks the experts
  if (options.mode == RoutingMode::sigmoid_bias)
    for (int64_t e = 0; e < experts; ++e)
      selection[std::size_t(e)] =
          sigmoid(raw[std::size_t(e)]) + (options.expert_bias.empty() ? 0.0 : options.expert_bias[std::size_t(e)]);

  std::vector<bool> allowed(std::size_t(experts), true);
  if (options.n_group > 1) keep_best_groups(selection, options, allowed);
  std::vector<int64_t> chosen = ranked(selection, allowed, 0, experts);
  chosen.resize(std::min<std::size_t>(chosen.size(), std::size_t(options.k)));

  // topk_softmax's softmax runs over every expert whose score is not NaN (order does not matter).
  const std::vector<int64_t> scored_experts = ranked(raw, std::vector<bool>(std::size_t(experts), true), 0, experts);
  double total = 0;
  for (std::size_t slot = 0; slot < chosen.size(); ++slot) {
    const int64_t e = chosen[slot];
    switch (options.mode) {
      case RoutingMode::softmax_topk: weights[slot] = softmax_at(raw, chosen, e); break;
      case RoutingMode::topk_softmax: weights[slot] = softmax_at(raw, scored_experts, e); break;
      case RoutingMode::sigmoid_bias: weights[slot] = sigmoid(raw[std::size_t(e)]); break;
    }
    ids[slot] = int32_t(e);
    total += weights[slot];
  }
  for (std::size_t slot = 0; slot < chosen.size(); ++slot) {
    if (options.renormalize) weights[slot] /= total;
    weights[slot] *= options.routed_scaling_factor;
  }
  // Slots no selectable expert fills take the lowest ids not chosen, at weight 0: every id stays
  // in range and distinct, so a dispatch after routing needs no special case.
  std::vector<bool> taken(std::size_t(experts), false);
  for (int64_t e : chosen) taken[std::size_t(e)] = true;
  int64_t next = 0;
  for (std::size_t slot = chosen.size(); slot < std::size_t(options.k); ++slot) {
    while (taken[std::size_t(next)]) ++next;
    weights[slot] = 0.0;
    ids[slot] = int32_t(next++);
  }
}

}  // namespace

Routing route(const Matrix& scores, const RoutingOptions& options) {
  ArgumentCheck check("coda::reference::route");
  check_options(check, "scores", scores.cols, options);
  check.throw_if_error();
  Routing out{Matrix(scores.rows, options.k), std::vector<int32_t>(std::size_t(scores.rows * options.k))};
  for (int64_t m = 0; m < scores.rows; ++m)
    route_row(scores.row(m), scores.cols, options, out.weights.row(m), out.ids.data() + m * options.k);
  return out;
}

std::vector<int32_t> Routing::token_expert_indices() const {
  const int64_t tokens = weights.rows, k = weights.cols;
  std::vector<int32_t> out(std::size_t(tokens * k));
  for (int64_t m = 0; m < tokens; ++m)
    for (int64_t slot = 0; slot < k; ++slot) out[std::size_t(m * k + slot)] = int32_t(slot * tokens + m);
  return out;
}

std::vector<int64_t> Routing::expert_counts(int64_t experts) const {
  std::vector<int64_t> counts(std::size_t(std::max<int64_t>(experts, 0)), 0);
  for (int32_t id : ids)
    if (id >= 0 && id < experts) ++counts[std::size_t(id)];
  return counts;
}

Routing moe_route(const Matrix& x, const Matrix& router_weight, const RoutingOptions& options) {
  ArgumentCheck check("coda::reference::moe_route");
  check.require(router_weight.cols == x.cols, "router_weight", "is ", checks::shape_of(router_weight), " but x is ",
                checks::shape_of(x), " (they must agree on K)");
  check_options(check, "router_weight", router_weight.rows, options);
  check.throw_if_error();
  return route(gemm(x, Major::k, router_weight, Major::k), options);
}

}  // namespace coda::reference

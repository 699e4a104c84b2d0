// coda/ops/router.hpp: the MoE router, scores = X W_r^T reduced to k (weight, expert) pairs per
// token, with the selection on the GEMM's fp32 accumulators (docs/kernels.md "MoE routing").
//
//   // Mixtral / Qwen: softmax over all experts, the 8 best, renormalized
//   coda::ops::RouterOptions mixtral{.mode = coda::ops::RoutingMode::topk_softmax, .k = 8, .renormalize = true};
//   std::size_t bytes = coda::ops::router_workspace_bytes(x, w, mixtral);
//   coda::ops::gemm_router(x, w, weights, ids, workspace, bytes, stream, mixtral);
//
//   // DeepSeek-V3: sigmoid scores, a selection bias, 8 groups of which 4 are kept, scaled by 2.5
//   coda::ops::RouterOptions deepseek{.mode = coda::ops::RoutingMode::sigmoid_bias, .k = 8, .renormalize = true,
//                                     .expert_bias = bias, .n_group = 8, .topk_group = 4,
//                                     .routed_scaling_factor = 2.5f};
//
//   // seed 003: the k best, softmax over them only; with the dispatch's inputs
//   coda::ops::RouterOptions top2{.mode = coda::ops::RoutingMode::softmax_topk, .k = 2,
//                                 .token_expert_indices = tei, .expert_counts = counts};
//
// Modes, per row s of scores (the same rules as coda/reference/moe.hpp):
//   softmax_topk  select the k largest s; weights = softmax over the selected s.
//   topk_softmax  p = softmax over every non-NaN s; select the k largest; weights = p of the selected.
//   sigmoid_bias  p = sigmoid(s); select by p + expert_bias (the bias only ranks); with n_group > 1
//                 the E experts form n_group contiguous groups, a group scores the sum of its two
//                 best p + bias, the topk_group best groups are kept and the k experts chosen among
//                 them; weights = p of the selected.
// renormalize divides the k weights by their sum; every mode then multiplies by
// routed_scaling_factor. Slots are ordered by descending selection score, ties to the lower id.
// NaN scores are never selected (a padded batch's NaN row is no error): where fewer than k
// experts are selectable, the remaining slots take the lowest ids not chosen, at weight 0, so ids
// are always distinct and in [0, E). The bias is device data, not checked: a NaN bias makes its
// expert's selection score NaN (never selected), +inf ranks it before and -inf after every finite
// score, and a group whose two best are +inf and -inf scores -inf. p + bias and a group's sum are
// fp32: a bias that dwarfs p (|bias| near 3e38, where an ulp is 2^104) ties its experts at the
// bias (lower id first), and two such in a group sum to +inf (fp64, coda/reference/moe.hpp, would
// still order them by p). Same inputs, same bits.
//
// Outputs: weights (M x k, f32), ids (M x k, int32); optionally token_expert_indices (M x k, int32:
// slot j of token m holds j M + m, vLLM's layout), expert_counts (E, int32: slots routed to each
// expert, every slot counted) and scores (M x E, f32: the GEMM's accumulators, for debugging or an
// auxiliary loss).
//
// How it runs: at M <= 16 (decode), one cooperative kernel reads the weight over every SM (K split
// across CTAs, tensor-core dot products), adds the splits' partials in a fixed order after a grid
// barrier and selects in the same launch (src/ops/router_decode.hpp); options.gemm's tile, split_k,
// stream_k or max_ctas send a decode batch through coda::gemm instead. Larger batches where k <= 8,
// no scores output and either no groups or 8 groups at E = 128 or 256 (DeepSeek-V3's) select in the
// GEMM's epilogue (src/ops/router_epilogue.cuh: a tile's consumers hold whole rows, four lanes a
// row, or at E <= 16 two lanes a row ranking it by counting, router_epilogue_ranked.cuh; past E =
// 256 a row spans two tiles, whose k best merge, router_epilogue_wide.cuh; the scores are never
// written) where that measured faster (M >= 256 at E <= 128; to E = 256, M >= 2048, grouped M >=
// 4096; past E = 384, M >= 8192) or where options.fused_selection asks; otherwise coda::gemm writes
// the f32 scores (to the workspace, or to options.scores) and a kernel of one warp per token selects
// from them. Same rules, same ids.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "coda/core/api.hpp"
#include "coda/core/status.hpp"
#include "coda/core/tensor.hpp"
#include "coda/gemm.hpp"

namespace coda::ops {

enum class RoutingMode : uint8_t { softmax_topk, topk_softmax, sigmoid_bias };

struct RouterOptions {
  RoutingMode mode = RoutingMode::softmax_topk;
  int32_t k = 1;                       // experts per token, 1 <= k <= min(E, 32)
  bool renormalize = false;            // scale the k weights to sum 1
  TensorView expert_bias;              // sigmoid_bias only, optional: f32 (E); NaN, +-inf: above
  int32_t n_group = 1;                 // sigmoid_bias only: grouped selection when > 1 (divides E, >= 2 per group)
  int32_t topk_group = 1;              // groups kept, 1 <= topk_group <= n_group; k <= topk_group E / n_group
  float routed_scaling_factor = 1.0f;  // finite, > 0
  TensorView token_expert_indices;     // optional output: int32 (M x k)
  TensorView expert_counts;            // optional output: int32 (E)
  TensorView scores;                   // optional output: f32 (M x E)
  // Select in the GEMM's epilogue at any M > 16 where it can (k <= 8, no groups or 8 at E = 128 or
  // 256, no scores output, gemm.tile automatic), not only where it measured faster.
  bool fused_selection = false;
  GemmOptions gemm;                    // the GEMM's tile and CTA cap (its workspace: the router's)
};

/// The largest number of experts and of experts per token the router takes.
inline constexpr int64_t kRouterMaxExperts = 512;
inline constexpr int32_t kRouterMaxK = 32;

/// Bytes of the workspace gemm_router needs for x (M x K) and w (E x K, the router weight); any contents.
CODA_API std::size_t router_workspace_bytes(const TensorView& x, const TensorView& w,
                                            const RouterOptions& options = {});

/// x (M x K) and w (E x K, the router weight): bf16 or f16, rows 16-byte aligned. weights f32 (M x k), ids
/// int32 (M x k); the workspace 16-byte aligned. Throws coda::InvalidArgument naming the argument and the rule.
CODA_API void gemm_router(const TensorView& x, const TensorView& w, const TensorView& weights,
                          const TensorView& ids, void* workspace, std::size_t workspace_bytes,
                          cudaStream_t stream = nullptr, const RouterOptions& options = {});
CODA_API Status try_gemm_router(const TensorView& x, const TensorView& w, const TensorView& weights,
                                const TensorView& ids, void* workspace, std::size_t workspace_bytes,
                                cudaStream_t stream = nullptr, const RouterOptions& options = {});

}  // namespace coda::ops

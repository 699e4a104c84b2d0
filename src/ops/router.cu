#include <algorithm>
#include <cmath>

#include "coda/core/device.hpp"
#include "coda/ops/router.hpp"
#include "op_checks.hpp"
#include "router_decode.hpp"
#include "router_epilogue.cuh"
#include "router_fused.hpp"
#include "router_select.cuh"
#include "workspace_carve.hpp"

namespace coda::ops {
namespace {

constexpr const char* kFunction = "coda::ops::gemm_router";

// Decode batches (router_decode.hpp): one cooperative kernel, unless the GEMM's options ask for
// coda::gemm (a tile, a split, a CTA cap).
bool uses_decode(int64_t m, const RouterOptions& o) {
  const GemmOptions plain{};
  return m <= router_detail::kDecodeMaxRows && o.gemm.tile == plain.tile && o.gemm.split_k == plain.split_k &&
         o.gemm.stream_k == plain.stream_k && o.gemm.max_ctas == plain.max_ctas;
}

// The workspace (carved from `base`; null only counts): the decode kernel's split partials (its
// scores stay in shared memory), or the GEMM's own workspace (a K split) behind the scores (unless
// options.scores takes them, or the epilogue selects and writes none), and where the epilogue's
// rows span several tiles their tiles' published slots (router_epilogue_wide.cuh).
struct Workspace {
  bool decode, fused;
  TensorView scores;  // the scores path's
  void* gemm = nullptr;
  std::size_t gemm_bytes = 0;
  float* split_partials = nullptr;  // the decode kernel's
  int splits = 0;
  int wide_tiles = 1;  // the epilogue's tiles a row spans
  float* tile_slots = nullptr;
  float* tile_lse = nullptr;
  int32_t* tile_arrivals = nullptr;
  std::size_t bytes = 0;

  Workspace(void* base, const TensorView& x, const TensorView& w, const RouterOptions& o)
      : decode(uses_decode(x.rows(), o)),
        fused(!decode && router_detail::fused_selection_applies(x.rows(), w.rows(), o)) {
    const int64_t m = x.rows(), experts = w.rows();
    Carve carve(base);
    if (decode) {
      scores = o.scores;  // empty unless asked for
      splits = router_detail::decode_splits(experts, x.cols());
      split_partials = static_cast<float*>(carve.take(std::size_t(splits * m * experts) * sizeof(float)));
    } else {
      const int64_t ld = (experts + 3) / 4 * 4;  // rows 16-byte aligned (TMA stores)
      if (!fused)
        scores = o.scores.data
                     ? o.scores
                     : TensorView::matrix(carve.take(std::size_t(m * ld) * sizeof(float)), DType::f32, m, experts, ld);
      // The size query wants an output; any aligned address will do (the fused GEMM writes none).
      TensorView sized = fused ? TensorView::matrix(nullptr, DType::f32, m, experts, ld) : scores;
      if (!sized.data) sized.data = reinterpret_cast<void*>(uintptr_t(256));
      GemmOptions gemm_options = o.gemm;
      if (fused) gemm_options.tile = router_detail::fused_tile(experts);
      gemm_bytes = gemm_workspace_bytes({x, Major::k}, {w, Major::k}, sized, gemm_options);
      gemm = carve.take(gemm_bytes);
      if (fused) wide_tiles = router_detail::fused_tiles(experts);
      if (wide_tiles > 1) {
        const router_detail::WideLayout wide(m, wide_tiles);
        tile_slots = static_cast<float*>(carve.take(wide.slot_bytes()));
        tile_lse = static_cast<float*>(carve.take(wide.lse_bytes()));
        tile_arrivals = static_cast<int32_t*>(carve.take(wide.arrival_bytes()));
      }
    }
    bytes = carve.used();
  }
};

void check_router(ArgumentCheck& check, const TensorView& x, const TensorView& w, const TensorView& weights,
                  const TensorView& ids, const RouterOptions& o) {
  const GemmShape g = check_projection(check, x, w);
  if (check.failed()) return;
  const int64_t experts = g.n;
  check.require(experts <= kRouterMaxExperts, "w", "holds ", experts, " experts (rows) but the router takes 1 to ",
                kRouterMaxExperts);
  check.require(o.k >= 1 && o.k <= std::min<int64_t>(experts, kRouterMaxK), "options.k", "is ", o.k,
                " but must lie in [1, min(E, ", kRouterMaxK, ")] with E = ", experts);
  const bool sigmoid = o.mode == RoutingMode::sigmoid_bias;
  check.require(o.mode == RoutingMode::softmax_topk || o.mode == RoutingMode::topk_softmax || sigmoid, "options.mode",
                "is ", int(o.mode), ", not a RoutingMode");
  check.require(o.expert_bias.data == nullptr || sigmoid, "options.expert_bias",
                "is used only by mode sigmoid_bias; leave it empty for the softmax modes");
  if (o.expert_bias.data) check_vector(check, "options.expert_bias", o.expert_bias, experts, {DType::f32});
  check.require(o.n_group == 1 || sigmoid, "options.n_group", "is ", o.n_group,
                " but grouped selection exists only in mode sigmoid_bias");
  check.require(o.n_group >= 1 && experts % o.n_group == 0, "options.n_group", "is ", o.n_group,
                " but must be >= 1 and divide the number of experts (", experts, ")");
  const int64_t group_size = o.n_group >= 1 ? experts / o.n_group : 0;
  check.require(o.n_group == 1 || group_size >= 2, "options.n_group", "gives groups of ", group_size,
                " expert(s), but a group scores its two best experts");
  check.require(o.topk_group >= 1 && o.topk_group <= o.n_group, "options.topk_group", "is ", o.topk_group,
                " but must lie in [1, n_group = ", o.n_group, "]");
  check.require(o.k <= o.topk_group * group_size, "options.k", "is ", o.k, " but the ", o.topk_group,
                " kept group(s) hold only ", o.topk_group * group_size, " experts");
  check.require(std::isfinite(o.routed_scaling_factor) && o.routed_scaling_factor > 0.0f,
                "options.routed_scaling_factor", "is ", o.routed_scaling_factor, " but must be finite and > 0");
  check_partials(check, "weights", weights, g.m, o.k, "one row per row of x", "k columns");
  auto check_slots = [&](const char* argument, const TensorView& view) {  // M x k int32, contiguous
    check.not_null(argument, view.data).rank_in(argument, view, 2, 2).dtype_in(argument, view.dtype, {DType::i32});
    if (!check.failed())
      check.dim_equals(argument, view, 0, g.m, "rows", "one row per row of x")
          .dim_equals(argument, view, 1, o.k, "columns", "k columns")
          .require(view.ld() == o.k, argument, "must be contiguous (row stride k)");
  };
  check_slots("ids", ids);
  if (o.token_expert_indices.data || o.token_expert_indices.rank)
    check_slots("options.token_expert_indices", o.token_expert_indices);
  check.require(weights.ld() == o.k, "weights", "must be contiguous (row stride k)");
  if (o.expert_counts.data || o.expert_counts.rank)
    check_vector(check, "options.expert_counts", o.expert_counts, experts, {DType::i32});
  if (o.scores.data || o.scores.rank) {
    check.not_null("options.scores", o.scores.data)
        .rank_in("options.scores", o.scores, 2, 2)
        .dtype_in("options.scores", o.scores.dtype, {DType::f32});
    if (!check.failed())
      check.dim_equals("options.scores", o.scores, 0, g.m, "rows", "one row per row of x")
          .dim_equals("options.scores", o.scores, 1, experts, "columns", "one column per expert")
          .inner_contiguous("options.scores", o.scores)
          .tma_aligned("options.scores", o.scores);
  }
}

// Slots per expert: a histogram in shared memory per block, added to `counts` (zeroed before) by
// integer atomics (exact, so the order does not matter).
__global__ void count_experts(const int32_t* ids, int64_t slots, int experts, int32_t* counts) {
  __shared__ int32_t local[kRouterMaxExperts];
  for (int e = int(threadIdx.x); e < experts; e += int(blockDim.x)) local[e] = 0;
  __syncthreads();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < slots; i += int64_t(gridDim.x) * blockDim.x)
    atomicAdd(&local[ids[i]], 1);
  __syncthreads();
  for (int e = int(threadIdx.x); e < experts; e += int(blockDim.x))
    if (local[e]) atomicAdd(&counts[e], local[e]);
}

// A selection of at most one block per SM is launched programmatically: it starts while the GEMM
// ahead of it runs and waits for it in the kernel, not behind a launch gap (M = 128: 0.4-1.4 us
// less). A larger one is not: its early blocks would pile up on the SMs the GEMM leaves free and
// leave the rest under-filled (M = 4096: 0.4-6 us more; H100, docs/performance.md).
template <int PerLane>
void launch_selection(const router_detail::SelectArgs& a, int64_t blocks, cudaStream_t stream) {
  using router_detail::kWarpsPerBlock;
  const int scratch =
      int(router_detail::groups_in_shared_memory(a.experts, a.n_group) ? sizeof(router_detail::WarpScratch)
                                                                       : router_detail::kSlotScratchBytes);
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(unsigned(blocks));
  config.blockDim = dim3(32 * kWarpsPerBlock);
  config.dynamicSmemBytes = std::size_t(scratch) * kWarpsPerBlock;
  config.stream = stream;
  cudaLaunchAttribute programmatic{};
  programmatic.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  programmatic.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &programmatic;
  config.numAttrs = blocks <= current_device().sm_count ? 1 : 0;
  CODA_CUDA_CHECK(cudaLaunchKernelEx(&config, router_detail::select_experts<PerLane>, a, scratch));
}

}  // namespace

std::size_t router_workspace_bytes(const TensorView& x, const TensorView& w, const RouterOptions& options) {
  return reported_by("coda::ops::router_workspace_bytes", [&] {
    ArgumentCheck check("coda::ops::router_workspace_bytes");
    check_projection(check, x, w);
    check.throw_if_error();
    return Workspace(nullptr, x, w, options).bytes;
  });
}

void gemm_router(const TensorView& x, const TensorView& w, const TensorView& weights, const TensorView& ids,
                 void* workspace, std::size_t workspace_bytes, cudaStream_t stream, const RouterOptions& options) {
  reported_by(kFunction, [&] {
    ArgumentCheck check(kFunction);
    check_router(check, x, w, weights, ids, options);
    // Before the layout is computed: the scores carved from it feed TMA, and a split tile's
    // partials move as float4s (mainloop/segments.cuh, share_tile_rows).
    check.require(reinterpret_cast<uintptr_t>(workspace) % 16 == 0, "workspace", "must be 16-byte aligned");
    check.throw_if_error();
    const Workspace ws(workspace, x, w, options);  // addresses only: nothing is touched before the check
    if (ws.bytes > 0)  // none: options.scores given to a GEMM that needs no workspace of its own
      check_workspace(check, workspace, workspace_bytes, ws.bytes, "coda::ops::router_workspace_bytes");
    check.throw_if_error();

    const int64_t m = x.rows(), experts = w.rows();
    GemmOptions gemm = options.gemm;
    gemm.workspace = ws.gemm;
    gemm.workspace_bytes = ws.gemm_bytes;
    router_detail::SelectArgs a;
    if (ws.decode) {
      a.scores = static_cast<const float*>(ws.scores.data);  // the scores output, or null
      a.scores_ld = ws.scores.data ? ws.scores.ld() : 0;
    } else if (!ws.fused) {
      coda::gemm({x, Major::k}, {w, Major::k}, ws.scores, stream, gemm);
      a.scores = static_cast<const float*>(ws.scores.data);
      a.scores_ld = ws.scores.ld();
    }
    a.expert_bias = static_cast<const float*>(options.expert_bias.data);
    a.mode = options.mode;
    a.rows = m;
    a.experts = int(experts);
    a.k = options.k;
    a.renormalize = options.renormalize;
    a.n_group = options.n_group;
    a.topk_group = options.topk_group;
    a.scale = options.routed_scaling_factor;
    a.weights = static_cast<float*>(weights.data);
    a.ids = static_cast<int32_t*>(ids.data);
    a.token_expert_indices = static_cast<int32_t*>(options.token_expert_indices.data);
    a.tiles = ws.wide_tiles;
    a.tile_slots = ws.tile_slots;
    a.tile_lse = ws.tile_lse;
    a.tile_arrivals = ws.tile_arrivals;
    if (ws.decode) {
      router_detail::launch_decode(x, w, ws.split_partials, ws.splits, a,
                                   static_cast<int32_t*>(options.expert_counts.data), stream);
      return;
    }
    if (ws.fused) {
      router_detail::launch_fused(x, w, a, gemm, kFunction, stream);
    } else {
      const int64_t blocks = (m + router_detail::kWarpsPerBlock - 1) / router_detail::kWarpsPerBlock;
      router_detail::with_per_lane(int(experts),
                                   [&]<int kPerLane>() { launch_selection<kPerLane>(a, blocks, stream); });
    }
    if (options.expert_counts.data) {
      int32_t* counts = static_cast<int32_t*>(options.expert_counts.data);
      CODA_CUDA_CHECK(cudaMemsetAsync(counts, 0, std::size_t(experts) * sizeof(int32_t), stream));
      const int64_t slots = m * options.k;
      const int threads = 256;
      const unsigned count_blocks = unsigned(std::min<int64_t>((slots + 4 * threads - 1) / (4 * threads), 264));
      count_experts<<<count_blocks, threads, 0, stream>>>(a.ids, slots, int(experts), counts);
    }
    CODA_CUDA_CHECK(cudaGetLastError());
  });
}

Status try_gemm_router(const TensorView& x, const TensorView& w, const TensorView& weights, const TensorView& ids,
                       void* workspace, std::size_t workspace_bytes, cudaStream_t stream,
                       const RouterOptions& options) {
  return status_of(kFunction, [&] { gemm_router(x, w, weights, ids, workspace, workspace_bytes, stream, options); });
}

}  // namespace coda::ops

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <type_traits>
#include <utility>

#include "coda/core/device.hpp"
#include "router_decode.hpp"

namespace coda::ops::router_detail {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kTileExperts = 16;  // mma's M
// Words between the warps' sums of two tokens in shared memory (partial_scores): 16 experts and 4
// of padding, so that a warp's stores take one shared-memory wavefront and its loads two (stored
// by expert then token, each of a thread's eight loads of the sums took 8 at M = 16, the stores 4).
constexpr int kReduceStride = kTileExperts + 4;
constexpr int kChunk = 32;          // K elements a warp takes per step: 16 bytes a lane, two k16 mmas
constexpr int kChunksInFlight = 4;  // a warp's loads issued before its first mma (4 KB of weight)
constexpr int kTargetCtas = 132;    // one CTA an SM of an H100: fewer arrivals at the grid barrier
constexpr int kSplitsAtOnce = 8;    // partials a thread loads before adding them

struct DecodeArgs {
  const void* x;
  const void* w;
  int64_t x_ld, w_ld;
  int32_t k_dim, chunks, splits, expert_tiles;
  int32_t chunks_per_split, longer_splits;  // chunks / splits, chunks % splits (the first ones take one more)
  float* partials;                          // splits x M x E
  int32_t* counts;                          // E, or null
};

// 16 bytes of a row at column `col`, or zeros past its end (rows are 16-byte aligned and K is a
// multiple of 8: a load lies wholly inside or wholly past). The weight is read once: no L1.
__device__ __forceinline__ uint4 load_weight(const uint16_t* row, int32_t col, bool inside) {
  uint4 v = make_uint4(0, 0, 0, 0);
  if (inside)
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(row + col));
  return v;
}
__device__ __forceinline__ uint4 load_tokens(const uint16_t* row, int32_t col, bool inside) {
  return inside ? __ldg(reinterpret_cast<const uint4*>(row + col)) : make_uint4(0, 0, 0, 0);
}

// D += A B: A 16 x 16 (row-major), B 16 x 8 (column-major), f32 accumulators.
template <class Element>
__device__ __forceinline__ void mma_16x8x16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                            uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<Element, __nv_bfloat16>)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Phase 1 for one CTA: the scores of its 16 experts over its K range, as the split's partials.
//
// Fragments come straight from global memory. mma m16n8k16 gives lane (g = lane / 4, c = lane % 4)
// rows g and g + 8 of A at k {2c, 2c+1, 2c+8, 2c+9} and column g of B at the same k (PTX ISA,
// "Matrix Fragments for mma.m16n8k16"). A dot product does not care which memory column plays
// which k, as long as A and B agree: lane c loads the 16 bytes at columns 8c..8c+7 of a 32-wide
// chunk (one vector load a row) and feeds columns 8c..8c+3 to the first mma, 8c+4..8c+7 to the
// second, the same on both operands.
template <class Element, int kTokenTiles>
__device__ void partial_scores(const DecodeArgs& d, const SelectArgs& a, float* reduce) {
  const int warp = int(threadIdx.x / 32), lane = int(threadIdx.x % 32);
  const int g = lane / 4, c = lane % 4;
  const int tile = int(blockIdx.x), split = int(blockIdx.y);  // no division: a 2-D grid
  const int chunk_begin = split * d.chunks_per_split + min(split, d.longer_splits);
  const int chunk_end = chunk_begin + d.chunks_per_split + int(split < d.longer_splits);
  const int e0 = tile * kTileExperts + g, e1 = e0 + 8;
  // A lane's row pointers at its first column; each load adds a constant (u kWarps kChunk elements),
  // so that its address is a register plus an immediate, not rebuilt from the parameters.
  const int32_t col0 = (chunk_begin + warp) * kChunk + 8 * c;
  const uint16_t* w0 = static_cast<const uint16_t*>(d.w) + int64_t(min(e0, a.experts - 1)) * d.w_ld + col0;
  const uint16_t* w1 = static_cast<const uint16_t*>(d.w) + int64_t(min(e1, a.experts - 1)) * d.w_ld + col0;
  const bool w0_inside = e0 < a.experts, w1_inside = e1 < a.experts;
  const uint16_t* xs[kTokenTiles];
  bool x_inside[kTokenTiles];
#pragma unroll
  for (int t = 0; t < kTokenTiles; ++t) {
    xs[t] = static_cast<const uint16_t*>(d.x) + std::min<int64_t>(t * 8 + g, a.rows - 1) * d.x_ld + col0;
    x_inside[t] = t * 8 + g < a.rows;
  }

  float acc[kTokenTiles][4] = {};
  constexpr int kStep = kWarps * kChunk;  // elements from one of a warp's chunks to its next
  for (int first = chunk_begin + warp, col = col0; first < chunk_end;
       first += kWarps * kChunksInFlight, col += kChunksInFlight * kStep) {
    uint4 lo[kChunksInFlight], hi[kChunksInFlight], tok[kChunksInFlight][kTokenTiles];
#pragma unroll
    for (int u = 0; u < kChunksInFlight; ++u) {
      const bool inside = first + u * kWarps < chunk_end && col + u * kStep < d.k_dim;
      lo[u] = load_weight(w0, u * kStep, inside && w0_inside);
      hi[u] = load_weight(w1, u * kStep, inside && w1_inside);
#pragma unroll
      for (int t = 0; t < kTokenTiles; ++t) tok[u][t] = load_tokens(xs[t], u * kStep, inside && x_inside[t]);
    }
    w0 += kChunksInFlight * kStep;
    w1 += kChunksInFlight * kStep;
#pragma unroll
    for (int t = 0; t < kTokenTiles; ++t) xs[t] += kChunksInFlight * kStep;
#pragma unroll
    for (int u = 0; u < kChunksInFlight; ++u)
#pragma unroll
      for (int t = 0; t < kTokenTiles; ++t) {
        mma_16x8x16<Element>(acc[t], lo[u].x, hi[u].x, lo[u].y, hi[u].y, tok[u][t].x, tok[u][t].y);
        mma_16x8x16<Element>(acc[t], lo[u].z, hi[u].z, lo[u].w, hi[u].w, tok[u][t].z, tok[u][t].w);
      }
  }

  // The warps' sums in warp order: reduce[warp][token][expert], rows kReduceStride words apart,
  // then one (token, expert) a thread. Accumulator i of lane (g, c) is expert g + 8 (i / 2), token
  // 2c + i % 2 of its column tile: a warp's store of one accumulator hits banks 8c + g, and a warp's
  // load (two tokens of 16 experts) 32 banks but for four lanes.
  constexpr int kTokens = 8 * kTokenTiles;
#pragma unroll
  for (int t = 0; t < kTokenTiles; ++t)
#pragma unroll
    for (int i = 0; i < 4; ++i)
      reduce[(warp * kTokens + t * 8 + 2 * c + i % 2) * kReduceStride + g + 8 * (i / 2)] = acc[t][i];
  __syncthreads();
  for (int i = int(threadIdx.x); i < kTileExperts * kTokens; i += kThreads) {
    const int token = i / kTileExperts, expert = i % kTileExperts;
    const int e = tile * kTileExperts + expert;
    if (token >= a.rows || e >= a.experts) continue;
    float sum = 0.0f;
    for (int v = 0; v < kWarps; ++v) sum += reduce[(v * kTokens + token) * kReduceStride + expert];
    d.partials[(int64_t(split) * a.rows + token) * a.experts + e] = sum;
  }
}

// Where grouped selection (n_group > 1) keeps its groups: nowhere (n_group 1); split between the
// CTA's warps and the selecting warp where groups are whole 32-expert columns (columns:
// DeepSeek-V3's 8 groups of 32; the CTA also computes the selection scores, route_decode); in the
// selecting warp where a group is a power-of-two run of whole lanes (groups_in_lanes: E = 160 / 10
// groups); or with the whole CTA before the warp selects (keep_best_groups_in_block). Each is a
// kernel of its own, so that the ungrouped ones keep their registers and schedule (the CTA's group
// code in them cost M = 16 0.6-0.9 us, docs/performance.md).
enum class GroupStage { none, columns, lanes, block };

// The token's score of expert e: its split partials added in split order, kSplitsAtOnce loads in
// flight (one L2 round trip each, not one per split). The loads are unconditional (a split past the
// last reads the last again) from one pointer and a stride in registers: loads behind their own
// conditions, addresses rebuilt from the parameters, were issued one after another in some of these
// kernels (cuobjdump -sass).
__device__ __forceinline__ float token_score(const DecodeArgs& d, const SelectArgs& a, int64_t m, int e) {
  const int64_t split_stride = a.rows * a.experts;
  const float* partial = d.partials + m * a.experts + e;
  float sum = 0.0f;
  for (int first = 0; first < d.splits; first += kSplitsAtOnce, partial += kSplitsAtOnce * split_stride) {
    float part[kSplitsAtOnce];
#pragma unroll
    for (int j = 0; j < kSplitsAtOnce; ++j)
      part[j] = __ldcg(partial + std::min(j, d.splits - 1 - first) * split_stride);
#pragma unroll
    for (int j = 0; j < kSplitsAtOnce; ++j)
      if (first + j < d.splits) sum = first + j == 0 ? part[j] : sum + part[j];
  }
  return sum;
}

// The grouped kernels' options.expert_bias, loaded by the selecting CTAs between the scores phase
// and the grid barrier, so that its L2 round trip overlaps the barrier's wait (loaded before the
// scores phase it made DeepSeek-V3's M = 1 and 16 0.1-0.2 us slower, docs/performance.md). Thread
// t holds experts t, t + kThreads; `store` copies them to shared memory after the barrier. Not in
// the ungrouped kernels: there a copy, though topk_softmax never runs it, made them 0.3-0.8 us
// slower (H200, E = 256 and 384, docs/performance.md).
struct ExpertBiasCopy {
  static constexpr int kPerThread = (kRouterMaxExperts + kThreads - 1) / kThreads;
  float value[kPerThread];
  __device__ __forceinline__ void load(const SelectArgs& a) {
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int e = int(threadIdx.x) + i * kThreads;
      value[i] = e < a.experts ? __ldg(a.expert_bias + e) : 0.0f;
    }
  }
  __device__ __forceinline__ void store(float* bias, const SelectArgs& a) const {
#pragma unroll
    for (int i = 0; i < kPerThread; ++i)
      if (const int e = int(threadIdx.x) + i * kThreads; e < a.experts) bias[e] = value[i];
  }
};

template <class Element, int kTokenTiles, int kPerLane, GroupStage kGroups>
__global__ void __launch_bounds__(kThreads, 2) route_decode(DecodeArgs d, SelectArgs a) {
  __shared__ float reduce[kWarps * 8 * kTokenTiles * kReduceStride];
  __shared__ float row[kRouterMaxExperts];  // the token's scores (columns kernel: sigmoid(s))
  __shared__ WarpScratch scratch;
  const int block = int(blockIdx.y * gridDim.x + blockIdx.x), blocks = int(gridDim.x * gridDim.y);
  if (d.counts && block == 0)
    for (int e = int(threadIdx.x); e < a.experts; e += kThreads) d.counts[e] = 0;
  // The grouped kernels' bias: the columns kernel keeps it in registers (a thread's experts there
  // are the ones whose scores it adds up), the others copy it to shared memory, where their
  // selection reads it.
  constexpr bool kColumns = kGroups == GroupStage::columns;
  constexpr bool kCopiesBias = kGroups == GroupStage::lanes || kGroups == GroupStage::block;
  __shared__ float bias_copy[kCopiesBias ? kRouterMaxExperts : 1];
  __shared__ float selection[kColumns ? kRouterMaxExperts : 1];  // sigmoid(s) + bias (row: sigmoid(s))
  __shared__ ColumnTopTwo column_top[kColumns ? kRouterMaxExperts / 32 : 1];
  // The columns kernel's E / n_group / 32, here so that its division's latency hides under the
  // scores phase (the empty asm keeps the compiler from sinking it into the selecting warp's chain).
  int columns_per_group = kColumns ? a.experts / a.n_group / 32 : 0;
  if constexpr (kColumns) asm volatile("" : "+r"(columns_per_group));
  partial_scores<Element, kTokenTiles>(d, a, reduce);
  ExpertBiasCopy bias{};
  if constexpr (kGroups != GroupStage::none)
    if (a.expert_bias && block < a.rows) bias.load(a);
  // Every split's partials written and visible: a CTA past the last token only arrives, so that the
  // barrier's poll is the selecting CTAs' alone (M = 1: one). An arrival is one release atomic after
  // a CTA barrier, the wait only a poll (cooperative_groups/details/sync.h, sync_grids_arrive and
  // sync_grids_wait), so a CTA that leaves after arriving takes nothing from the others.
  const cooperative_groups::grid_group grid = cooperative_groups::this_grid();
  cooperative_groups::grid_group::arrival_token arrived = grid.barrier_arrive();
  if (block >= a.rows) return;
  grid.barrier_wait(std::move(arrived));
  if constexpr (kCopiesBias)
    if (a.expert_bias) bias.store(bias_copy, a);  // visible after the CTA barrier behind the row

  float* scores_out = const_cast<float*>(a.scores);  // options.scores, or null
  SelectArgs select = a;
  select.scores = row;
  select.scores_ld = 0;  // select_token reads row m at scores + m * ld: always `row`
  if (kCopiesBias && a.expert_bias) select.expert_bias = bias_copy;
  const SelectArgs as_given = select;  // n_group and topk_group, for the CTA's group stage
  if constexpr (kGroups == GroupStage::block) select.n_group = select.topk_group = 1;  // the CTA keeps the groups
  if constexpr (kColumns) select.scores = selection;
  for (int64_t m = block; m < a.rows; m += blocks) {
    if constexpr (kColumns) {
      // Expert e = threadIdx.x + i kThreads: warp w adds up columns w, w + kWarps, .. (E is a
      // multiple of 32 here, so a warp's experts are all real or all past E), and takes p, the
      // selection score and the column's top two, so that the selecting warp's chain only ranks
      // the groups (lane_group_kept) and reads its scores.
#pragma unroll
      for (int i = 0; i < ExpertBiasCopy::kPerThread; ++i) {
        const int e = int(threadIdx.x) + i * kThreads;
        if (e >= a.experts) break;
        const float sum = token_score(d, a, m, e);
        if (scores_out) scores_out[m * a.scores_ld + e] = sum;
        const float p = epilogue::sigmoid(sum), score = p + bias.value[i];  // sigmoid_selection_score
        row[e] = p;
        selection[e] = score;
        const ColumnTopTwo top = column_top_two(score == score ? ordered_code(score) : 0u, int(threadIdx.x % 32));
        if (threadIdx.x % 32 == 0) {
          column_top[e / 32] = top;
          if (columns_per_group == 1) scratch.group_score[e / 32] = group_score_of_codes(top.first, top.second);
        }
      }
    } else {
      for (int e = int(threadIdx.x); e < a.experts; e += kThreads) {
        const float sum = token_score(d, a, m, e);
        row[e] = sum;
        if (scores_out) scores_out[m * a.scores_ld + e] = sum;
      }
    }
    __syncthreads();
    if constexpr (kGroups == GroupStage::block)
      keep_best_groups_in_block<kThreads>(as_given, row, scratch, int(threadIdx.x));
    if (threadIdx.x < 32) {
      const int lane = int(threadIdx.x);
      int32_t id;
      if constexpr (kColumns)
        id = select_token<kPerLane, true, false, true>(
            select, m, scratch, lane,
            {row, lane_group_kept<kPerLane>(a, column_top, columns_per_group, scratch.group_score, lane)});
      else id = select_token<kPerLane, true, kGroups == GroupStage::lanes>(select, m, scratch, lane);
      if (d.counts && id >= 0) atomicAdd(&d.counts[id], 1);  // integers: exact in any order
    }
    __syncthreads();
  }
}

template <class Element, int kTokenTiles, int kPerLane, GroupStage kGroups>
void launch(const DecodeArgs& d, const SelectArgs& a, cudaStream_t stream) {
  auto* kernel = &route_decode<Element, kTokenTiles, kPerLane, kGroups>;
  static PerDevice<int> resident;  // CTAs of this kernel an SM holds at once
  const int per_sm = resident.get([&](int) {
    int blocks = 0;
    CODA_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kThreads, 0));
    return blocks;
  });
  DecodeArgs args = d;
  // The cooperative grid must be resident at once: fewer splits on a smaller GPU.
  const int most = std::max(1, per_sm * current_device().sm_count / d.expert_tiles);
  args.splits = std::min(d.splits, most);
  args.chunks_per_split = d.chunks / args.splits;
  args.longer_splits = d.chunks % args.splits;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(unsigned(args.expert_tiles), unsigned(args.splits));
  config.blockDim = dim3(kThreads);
  config.stream = stream;
  cudaLaunchAttribute cooperative{};
  cooperative.id = cudaLaunchAttributeCooperative;
  cooperative.val.cooperative = 1;
  config.attrs = &cooperative;
  config.numAttrs = 1;
  CODA_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, args, a));
}

template <class Element>
void launch_for_tokens(const DecodeArgs& d, const SelectArgs& a, cudaStream_t stream) {
  with_per_lane(a.experts, [&]<int kPerLane>() {
    auto for_groups = [&]<int kTokenTiles>() {
      if (a.n_group == 1) launch<Element, kTokenTiles, kPerLane, GroupStage::none>(d, a, stream);
      else if (!groups_in_shared_memory(a.experts, a.n_group))  // groups of whole 32-expert columns
        launch<Element, kTokenTiles, kPerLane, GroupStage::columns>(d, a, stream);
      else if (groups_in_lanes(a.experts, a.n_group, kPerLane))
        launch<Element, kTokenTiles, kPerLane, GroupStage::lanes>(d, a, stream);
      else launch<Element, kTokenTiles, kPerLane, GroupStage::block>(d, a, stream);
    };
    if (a.rows <= 8) for_groups.template operator()<1>();
    else for_groups.template operator()<2>();
  });
}

}  // namespace

int decode_splits(int64_t experts, int64_t k_dim) {
  const int64_t tiles = (experts + kTileExperts - 1) / kTileExperts;
  const int64_t chunks = (k_dim + kChunk - 1) / kChunk;
  return int(std::max<int64_t>(1, std::min(kTargetCtas / tiles, chunks / kWarps)));
}

void launch_decode(const TensorView& x, const TensorView& w, float* partials, int splits, SelectArgs a, int32_t* counts,
                   cudaStream_t stream) {
  DecodeArgs d{.x = x.data,
               .w = w.data,
               .x_ld = x.ld(),
               .w_ld = w.ld(),
               .k_dim = int32_t(x.cols()),
               .chunks = int32_t((x.cols() + kChunk - 1) / kChunk),
               .splits = splits,
               .expert_tiles = int32_t((a.experts + kTileExperts - 1) / kTileExperts),
               .partials = partials,
               .counts = counts};
  if (x.dtype == DType::bf16) launch_for_tokens<__nv_bfloat16>(d, a, stream);
  else launch_for_tokens<__half>(d, a, stream);
}

}  // namespace coda::ops::router_detail

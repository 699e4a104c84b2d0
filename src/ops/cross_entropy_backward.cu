// gemm_cross_entropy_backward: dX and dW of LM head + cross-entropy over chunks of the vocabulary
// (ops/cross_entropy.hpp). Per chunk, in order: the logits GEMM with CrossEntropyBackward as its
// epilogue (dZ of the chunk into the workspace), dW[chunk] = dZ^T x, and dX += dZ W[chunk] with
// RunningSum as its epilogue (an f32 sum in the workspace; the last chunk writes dX). With
// skip_below the logits GEMM also writes each part's largest logit, a small kernel turns those into
// K-block masks (gradient_skip.hpp), and the dW and dX products run on the m128n256 tile leaving
// out the blocks the masks clear.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>

#include "coda/epilogue/host_arguments.hpp"
#include "coda/epilogue/launch.cuh"
#include "coda/epilogue/programs/cross_entropy.hpp"
#include "coda/epilogue/programs/running_sum.hpp"
#include "coda/ops/cross_entropy.hpp"
#include "gradient_skip.hpp"
#include "logits_gradient.hpp"
#include "op_checks.hpp"
#include "workspace_carve.hpp"

namespace coda::ops {
namespace {

constexpr const char* kFunction = "coda::ops::gemm_cross_entropy_backward";
constexpr int64_t kChunkAlign = 128;  // a part's width: each chunk's row_dots start at a whole part
// The workspace the chunk width is picked for: at T = 8192, H = 2048 a 128 MiB chunk of dZ (8192
// columns, 16 chunks at V = 128256) beside the 64 MiB running sum of dX.
constexpr int64_t kWorkspaceTarget = int64_t(192) << 20;
constexpr int64_t kMinChunk = 1024;  // below this the dX GEMM's K (the chunk) gets too short to run at speed
// The skipping products' tile and its rows per mask row (a cluster's: its CTAs share operand loads,
// so they skip together).
constexpr GemmTile kSkipTile = GemmTile::m128n256;
using SkipConfig = epilogue::CooperativeProgramTile;
constexpr int32_t kSkipTileRows = SkipConfig::kBlockM * SkipConfig::kClusterM;
static_assert(kSkipTileRows % epilogue::kPartCols == 0 && kSkipTileRows % 64 == 0, "mask rows hold whole parts");

int64_t round_up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

// The workspace: the per-row factors of the gradient, the chunk of dZ and (with more than one chunk)
// the running sum of dX, its rows padded to 16 bytes (TMA stores it: any K works). No base: only
// the sizes and `bytes`.
struct Workspace {
  int64_t chunk, chunks, sum_ld;
  float* row_factors;
  void* grad_logits;
  float* sum;
  // skip_below > 0: each chunk's row maxima (M x parts of the chunk) and the products' K-block masks
  float* row_max;
  uint32_t *grad_w_mask, *grad_x_mask;
  int32_t grad_w_words, grad_x_words;
  std::size_t bytes;
};

Workspace layout(int64_t m, int64_t vocab, int64_t k, const CrossEntropyBackwardOptions& backward, void* base) {
  const bool from_logits = backward.logits.data != nullptr;
  const int64_t chunk_columns = backward.chunk_columns;
  Workspace w{};
  if (from_logits) {  // no chunks: the row factors alone
    Carve carve(base);
    w.row_factors = static_cast<float*>(carve.take(std::size_t(m * epilogue::kRowFactors) * 4));
    w.bytes = carve.used();
    return w;
  }
  w.chunk = std::min(chunk_columns > 0 ? chunk_columns : cross_entropy_backward_chunk_columns(m, vocab, k),
                     round_up(vocab, kChunkAlign));
  w.chunks = (vocab + w.chunk - 1) / w.chunk;
  w.sum_ld = round_up(k, 4);
  Carve carve(base);
  w.row_factors = static_cast<float*>(carve.take(std::size_t(m * epilogue::kRowFactors) * 4));
  w.grad_logits = carve.take(std::size_t(m * w.chunk) * 2);
  if (w.chunks > 1) w.sum = static_cast<float*>(carve.take(std::size_t(m * w.sum_ld) * 4));
  if (backward.skip_below > 0.0f) {
    w.row_max = static_cast<float*>(carve.take(std::size_t(m * epilogue::parts_along(w.chunk)) * 4));
    w.grad_w_words = mask_words(m);
    w.grad_x_words = mask_words(w.chunk);
    const int64_t w_rows = mask_rows(w.chunk, kSkipTileRows), x_rows = mask_rows(m, kSkipTileRows);
    w.grad_w_mask = static_cast<uint32_t*>(carve.take(std::size_t(w_rows * w.grad_w_words) * 4));
    w.grad_x_mask = static_cast<uint32_t*>(carve.take(std::size_t(x_rows * w.grad_x_words) * 4));
  }
  w.bytes = carve.used();
  return w;
}

struct RowFactorOptions {
  int32_t ignore_index;
  float z_loss, label_smoothing;
  int64_t vocab;
  LossReduction reduction;
};

// One block: CrossEntropyBackward's row factors (epilogue::RowFactor), g the gradient reaching row
// m's loss: grad_loss[m], grad_loss[0], or grad_loss[0] over the non-ignored rows (counted here in a
// fixed order); 0 on ignored rows, NaN for a target outside the vocabulary.
__global__ void row_factors(const int32_t* targets, const float* lse, const float* grad_loss, int64_t rows,
                            RowFactorOptions o, float* factors) {
  __shared__ int64_t counts[1024];
  float scalar = o.reduction == LossReduction::none ? 0.0f : grad_loss[0];
  if (o.reduction == LossReduction::mean) {
    int64_t count = 0;
    for (int64_t m = threadIdx.x; m < rows; m += blockDim.x) count += targets[m] != o.ignore_index ? 1 : 0;
    counts[threadIdx.x] = count;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
      if (int(threadIdx.x) < stride) counts[threadIdx.x] += counts[threadIdx.x + stride];
      __syncthreads();
    }
    scalar /= float(counts[0]);  // no row left: every row is ignored and gets 0 below
  }
  for (int64_t m = threadIdx.x; m < rows; m += blockDim.x) {
    const int32_t t = targets[m];
    float g = o.reduction == LossReduction::none ? grad_loss[m] : scalar;
    if (t == o.ignore_index) g = 0.0f;
    else if (t < 0 || t >= o.vocab) g = NAN;
    epilogue::write_row_factors(factors + m * epilogue::kRowFactors, lse[m], g, o.z_loss, o.label_smoothing, o.vocab);
  }
}

TensorView rows_of(const TensorView& t, int64_t first, int64_t count) {
  return TensorView::matrix(row_address(t, first), t.dtype, count, t.cols(), t.ld());
}

// A RunningSum product on the skipping tile, leaving out the K blocks `mask` clears.
template <Major A, Major B>
void launch_skipping(const GemmOperand& a, const GemmOperand& b, const epilogue::RunningSum& program,
                     const mainloop::KBlockMask& mask, cudaStream_t stream) {
  epilogue::ProgramPlan plan = epilogue::plan_program<epilogue::RunningSum>(a, b, {.tile = kSkipTile}, kFunction);
  plan.main.k_block_mask = mask;
  if (a.view.dtype == DType::bf16)
    epilogue::launch_program_on<kSkipTile, DType::bf16>(plan, program, stream, epilogue::OutputTypes<DType::f32>{},
                                                        epilogue::OperandMajors<A, B>{});
  else
    epilogue::launch_program_on<kSkipTile, DType::f16>(plan, program, stream, epilogue::OutputTypes<DType::f32>{},
                                                       epilogue::OperandMajors<A, B>{});
}

// dX (+)= dz w_chunk for one chunk, in row blocks whose f32 sum (rows sum_ld apart) a Table's
// 32-bit index reaches; with a mask (rows of kSkipTileRows tokens), leaving out its cleared blocks.
void accumulate_grad_x(const TensorView& dz, const TensorView& w_chunk, float* sum, int64_t sum_ld, bool first,
                       bool last, const TensorView& grad_x, const mainloop::KBlockMask& mask, cudaStream_t stream) {
  const int64_t m = dz.rows(), k = w_chunk.cols();
  const int64_t align = mask.bits ? kSkipTileRows : kChunkAlign;  // whole rows of the mask
  const int64_t block = std::max<int64_t>(align, (int64_t(INT32_MAX) / sum_ld) / align * align);
  for (int64_t r = 0; r < m; r += block) {
    const int64_t rows = std::min(block, m - r);
    const TensorView sum_rows = TensorView::matrix(sum + r * sum_ld, DType::f32, rows, k, sum_ld);
    epilogue::RunningSum program;
    if (!first) program.sum_in = epilogue::table(sum_rows, "workspace");
    if (last) program.out = epilogue::tile_out(rows_of(grad_x, r, rows), "grad_x");
    else program.sum_out = epilogue::TileOutOf<DType::f32>{epilogue::tile_out(sum_rows, "workspace")};
    const GemmOperand a{rows_of(dz, r, rows), Major::k}, b{w_chunk, Major::mn};
    if (mask.bits) {
      const mainloop::KBlockMask rows_mask{mask.bits + (r / kSkipTileRows) * mask.words_per_row, mask.words_per_row};
      launch_skipping<Major::k, Major::mn>(a, b, program, rows_mask, stream);
    } else {
      epilogue::launch_program(epilogue::plan_program<epilogue::RunningSum>(a, b, {}, kFunction), program, stream,
                               epilogue::OutputTypes<DType::f32>{}, epilogue::OperandMajors<Major::k, Major::mn>{});
    }
  }
}

void launch_row_factors(const TensorView& targets, const TensorView& lse, const TensorView& grad_loss, int64_t rows,
                        const RowFactorOptions& options, float* factors, cudaStream_t stream) {
  row_factors<<<1, 1024, 0, stream>>>(static_cast<const int32_t*>(targets.data), static_cast<const float*>(lse.data),
                                      static_cast<const float*>(grad_loss.data), rows, options, factors);
  CODA_CUDA_CHECK(cudaGetLastError());
}

// The backward from stored logits: the row factors, dZ in one pass, then dW = dZ^T x and dX = dZ w
// over the whole vocabulary (K = V: no running sum).
void backward_from_logits(const TensorView& x, const TensorView& w, const TensorView& targets, const TensorView& lse,
                          const TensorView& grad_loss, const TensorView& grad_x, const TensorView& grad_w,
                          const Workspace& ws, cudaStream_t stream, const CrossEntropyOptions& options,
                          const RowFactorOptions& factor_options, const CrossEntropyBackwardOptions& backward) {
  const int64_t m = x.rows(), vocab = w.rows();
  const TensorView dz = backward.grad_logits;
  const GemmOperand dz_by_token{dz, Major::mn}, dz_by_vocab{dz, Major::k};
  // Both GEMMs planned before anything runs: they check the device and their operands.
  plan_gemm(dz_by_token, {x, Major::mn}, grad_w);
  plan_gemm(dz_by_vocab, {w, Major::mn}, grad_x);
  launch_row_factors(targets, lse, grad_loss, m, factor_options, ws.row_factors, stream);
  launch_logits_gradient({.logits = backward.logits.data,
                          .logits_ld = backward.logits.ld(),
                          .grad_logits = backward.grad_logits.data,
                          .grad_logits_ld = backward.grad_logits.ld(),
                          .dtype = x.dtype,
                          .rows = m,
                          .vocab = vocab,
                          .targets = static_cast<const int32_t*>(targets.data),
                          .row_factors = ws.row_factors,
                          .row_scale = static_cast<const float*>(options.row_scale.data),
                          .row_dots = static_cast<float*>(backward.row_dots.data),
                          .row_dots_ld = backward.row_dots.ld(),
                          .softcap = options.softcap},
                         stream);
  gemm(dz_by_token, {x, Major::mn}, grad_w, stream);  // dW = dZ^T x
  gemm(dz_by_vocab, {w, Major::mn}, grad_x, stream);  // dX = dZ w
}

}  // namespace

int64_t cross_entropy_backward_chunk_columns(int64_t m, int64_t vocab, int64_t k) {
  ArgumentCheck check("coda::ops::cross_entropy_backward_chunk_columns");
  check.positive("m", m, "M").positive("vocab", vocab, "the vocabulary").positive("k", k, "K");
  check.throw_if_error();
  const int64_t room = std::max<int64_t>(kWorkspaceTarget - m * k * 4, 0) / (m * 2);
  return std::min(std::max(room / kChunkAlign * kChunkAlign, kMinChunk), round_up(vocab, kChunkAlign));
}

std::size_t cross_entropy_backward_workspace_bytes(int64_t m, int64_t vocab, int64_t k,
                                                   const CrossEntropyBackwardOptions& backward) {
  ArgumentCheck check("coda::ops::cross_entropy_backward_workspace_bytes");
  check.positive("m", m, "M").positive("vocab", vocab, "the vocabulary").positive("k", k, "K");
  check_chunk_columns(check, "backward.chunk_columns", backward.chunk_columns);
  check_skip_below(check, "backward.skip_below", backward.skip_below);
  check.throw_if_error();
  return layout(m, vocab, k, backward, nullptr).bytes;
}

void gemm_cross_entropy_backward(const TensorView& x, const TensorView& w, const TensorView& targets,
                                 const TensorView& lse, const TensorView& grad_loss, const TensorView& grad_x,
                                 const TensorView& grad_w, void* workspace, std::size_t workspace_bytes,
                                 cudaStream_t stream, const CrossEntropyOptions& options,
                                 const CrossEntropyBackwardOptions& backward) {
  reported_by(kFunction, [&] {
    ArgumentCheck check(kFunction);
    const GemmShape g = check_projection(check, x, w);
    const int64_t k = x.cols();
    check_vector(check, "targets", targets, g.m, {DType::i32});
    check_vector(check, "lse", lse, g.m, {DType::f32});
    check_vector(check, "grad_loss", grad_loss, options.reduction == LossReduction::none ? g.m : 1, {DType::f32});
    for (const auto& [name, grad] : {std::pair{"grad_x", grad_x}, std::pair{"grad_w", grad_w}})
      check.require(grad.dtype == x.dtype || grad.dtype == DType::f32, name, "dtype ", coda::name(grad.dtype),
                    " must be x's (", coda::name(x.dtype), ") or f32");
    check_output(check, "grad_x", grad_x, g.m, k, grad_x.dtype);
    check_output(check, "grad_w", grad_w, g.n, k, grad_w.dtype, "one row per row of w");
    check_cross_entropy_options(check, options, g.m);
    check.require(options.logits.data == nullptr, "options.logits",
                  "is set, but the backward stores no logits (stored logits go in backward.logits)");
    if (backward.row_dots.data)
      check_partials(check, "backward.row_dots", backward.row_dots, g.m, parts_along(g.n), "one row per row of x",
                     "one per 128 columns of the vocabulary: row_partial_count(V)");
    check_chunk_columns(check, "backward.chunk_columns", backward.chunk_columns);
    const bool from_logits = backward.logits.data != nullptr;
    if (from_logits)
      check_stored_logits(check, options.softcap, backward, g.m, g.n, x.dtype,
                          {"backward.logits", "backward.grad_logits", "backward.row_dots", "backward.chunk_columns"});
    else
      check.require(backward.grad_logits.data == nullptr, "backward.grad_logits",
                    "is set without backward.logits (dZ is written only when computed from stored logits)");
    check_skip_below(check, "backward.skip_below", backward.skip_below);
    check.require(!from_logits || backward.skip_below == 0.0f, "backward.skip_below",
                  "is set with backward.logits: only the recomputing backward skips blocks");
    const Workspace ws = layout(g.m, g.n, k, backward, workspace);
    check_workspace(check, workspace, workspace_bytes, ws.bytes,
                    "coda::ops::cross_entropy_backward_workspace_bytes");
    check.require(reinterpret_cast<uintptr_t>(workspace) % 16 == 0, "workspace",
                  "must be 16-byte aligned (the chunks of dZ and the sum of dX are written by TMA)");
    check.throw_if_error();

    const RowFactorOptions factor_options{options.ignore_index, options.z_loss, options.label_smoothing, g.n,
                                          options.reduction};
    if (from_logits) {
      backward_from_logits(x, w, targets, lse, grad_loss, grad_x, grad_w, ws, stream, options, factor_options,
                           backward);
      return;
    }

    // The first chunk's plan before anything runs: it checks the device.
    const auto plan_chunk = [&](const TensorView& w_chunk) {
      return epilogue::plan_program<epilogue::CrossEntropyBackward>({x, Major::k}, {w_chunk, Major::k}, options.gemm,
                                                                    kFunction);
    };
    const epilogue::ProgramPlan first_plan = plan_chunk(rows_of(w, 0, std::min(ws.chunk, g.n)));
    launch_row_factors(targets, lse, grad_loss, g.m, factor_options, ws.row_factors, stream);

    epilogue::CrossEntropyBackward program;
    program.targets = epilogue::column_vector(targets, "targets");
    program.row_factors =
        epilogue::table(TensorView::matrix(ws.row_factors, DType::f32, g.m, epilogue::kRowFactors), "workspace");
    if (options.row_scale.data) program.row_scale = epilogue::column_vector(options.row_scale, "options.row_scale");
    program.softcap = options.softcap;

    const bool skip = backward.skip_below > 0.0f;
    for (int64_t c = 0; c < ws.chunks; ++c) {
      const int64_t first = c * ws.chunk, cols = std::min(ws.chunk, g.n - first);
      const TensorView w_chunk = rows_of(w, first, cols);
      const TensorView dz = TensorView::matrix(ws.grad_logits, x.dtype, g.m, cols, ws.chunk);
      program.first_column = int32_t(first);
      program.grad_logits = epilogue::tile_out(dz, "workspace");
      if (backward.row_dots.data)
        program.row_dots =
            epilogue::row_partials(TensorView::matrix(static_cast<float*>(backward.row_dots.data) + first / kChunkAlign,
                                                      DType::f32, g.m, parts_along(cols), backward.row_dots.ld()),
                                   "backward.row_dots");
      const int64_t max_ld = parts_along(ws.chunk);
      if (skip)
        program.row_max = epilogue::row_partials(
            TensorView::matrix(ws.row_max, DType::f32, g.m, parts_along(cols), max_ld), "workspace");
      epilogue::launch_program(c == 0 ? first_plan : plan_chunk(w_chunk), program, stream);
      const TensorView grad_w_chunk = rows_of(grad_w, first, cols);
      if (!skip) {
        gemm({dz, Major::mn}, {x, Major::mn}, grad_w_chunk, stream);  // dW[chunk] = dZ^T x
        accumulate_grad_x(dz, w_chunk, ws.sum, ws.sum_ld, c == 0, c == ws.chunks - 1, grad_x, {}, stream);
        continue;
      }
      launch_gradient_skip({.row_max = ws.row_max,
                            .row_max_ld = max_ld,
                            .lse = static_cast<const float*>(lse.data),
                            .row_factors = ws.row_factors,
                            .targets = static_cast<const int32_t*>(targets.data),
                            .rows = g.m,
                            .vocab = g.n,
                            .first_column = first,
                            .columns = cols,
                            .softcap = options.softcap,
                            .threshold = backward.skip_below,
                            .tile_rows = kSkipTileRows,
                            .grad_w_mask = ws.grad_w_mask,
                            .grad_w_words = ws.grad_w_words,
                            .grad_x_mask = ws.grad_x_mask,
                            .grad_x_words = ws.grad_x_words},
                           stream);
      epilogue::RunningSum grad_w_program;
      grad_w_program.out = epilogue::tile_out(grad_w_chunk, "grad_w");
      launch_skipping<Major::mn, Major::mn>({dz, Major::mn}, {x, Major::mn}, grad_w_program,
                                            {ws.grad_w_mask, ws.grad_w_words}, stream);
      accumulate_grad_x(dz, w_chunk, ws.sum, ws.sum_ld, c == 0, c == ws.chunks - 1, grad_x,
                        {ws.grad_x_mask, ws.grad_x_words}, stream);
    }
  });
}

Status try_gemm_cross_entropy_backward(const TensorView& x, const TensorView& w, const TensorView& targets,
                                       const TensorView& lse, const TensorView& grad_loss, const TensorView& grad_x,
                                       const TensorView& grad_w, void* workspace, std::size_t workspace_bytes,
                                       cudaStream_t stream, const CrossEntropyOptions& options,
                                       const CrossEntropyBackwardOptions& backward) {
  return status_of(kFunction, [&] {
    gemm_cross_entropy_backward(x, w, targets, lse, grad_loss, grad_x, grad_w, workspace, workspace_bytes, stream,
                                options, backward);
  });
}

}  // namespace coda::ops

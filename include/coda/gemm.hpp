// coda/gemm.hpp: coda's Hopper GEMM, C = A * B^T, for any shape and both operand majors.
//
//   // Y = X W^T: X (M x K) activations, W (N x K) an nn.Linear weight, Y (M x N)
//   coda::gemm({x, coda::Major::k}, {w, coda::Major::k}, y, stream);
//
//   // dX = dY W: A = dY (M x N_out) K-major, B = W stored (N_out x K_in): N-major
//   coda::gemm({dy, coda::Major::k}, {w, coda::Major::mn}, dx, stream);
//
//   // dW = dY^T X: A = dY stored (T x N_out): M-major; B = X stored (T x K_in): N-major
//   coda::gemm({dy, coda::Major::mn}, {x, coda::Major::mn}, dw, stream);
//
// Shapes: A is (M x K) when K-major, (K x M) when M-major; B is (N x K) when K-major, (K x N)
// when N-major; C is (M x N). Rank-3 views add a leading batch dimension L (the same for all
// three). Inputs bf16 or f16 (the same for A and B), fp32 accumulation, C bf16, f16 or f32.
// Any M, N, K >= 1 and batch each below 2^31, provided every row and batch stride is a multiple of
// 16 bytes and every base address is 16-byte aligned (what the TMA unit can address); anything else
// is rejected with an error naming the argument. Runs on sm_90 (H100/H200). No host synchronisation and no
// allocation. C is written by TMA stores, which write whole 16-byte chunks: where a row of C is not
// a multiple of 16 bytes long, the bytes after its last column up to the next multiple of 16 (inside
// its row stride) are overwritten too. A C that is a column slice of a wider matrix loses the
// neighbouring columns there (CUDA's TMA; the same holds for every tile output of an epilogue).
//
// Small M: at M <= 128 the heuristic computes C^T = B A^T on a swapped tile (the weight on wgmma's
// 64-row side, the tokens on its N side), written back in C's layout; the same results.
//
// Workspace: with one (options.workspace), tiles may be computed in several K segments: split-K
// when there are few output tiles (decode) and, on request, a stream-K tail that deals the last
// partial wave of tiles out evenly over the SMs. Results stay bitwise deterministic and never
// depend on what the workspace held before: a call clears the few bytes it counts arrivals in
// (cudaMemsetAsync on its stream, captured by a CUDA graph like the kernel). Size it with
// gemm_workspace_bytes(); one workspace serves any number of calls ordered on a stream (not
// concurrent ones). A workspace smaller than the plan needs is no error unless split_k asks for
// splits: the call computes whole tiles (the same values, slower where few tiles leave SMs idle).
// plan_gemm() says what a call will run.
//
//   std::size_t bytes = coda::gemm_workspace_bytes(a, b, c);
//   cudaMallocAsync(&ws, bytes, stream);                          // no zero-fill needed
//   coda::gemm(a, b, c, stream, {.workspace = ws, .workspace_bytes = bytes});
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string_view>

#include "coda/core/api.hpp"
#include "coda/core/layout.hpp"
#include "coda/core/status.hpp"
#include "coda/core/tensor.hpp"

namespace coda {

/// The mainloop's tile configurations (output tile per CTA).
enum class GemmTile : uint8_t {
  automatic,  // let the heuristic pick
  m128n256,   // large GEMMs; 2-CTA clusters share B by multicast
  m256n128,   // large GEMMs; 2-CTA clusters share A by multicast
  m128n128,   // medium shapes (more tiles to fill the GPU)
  m64n256,    // few rows: split-K capable (forced only; at M <= 128 the heuristic swaps: below)
  // Ping-pong: each consumer warpgroup computes whole tiles, the two taking turns (one runs its
  // epilogue while the other runs its MMAs); 2 x 2 clusters share A and B. Epilogue programs run here
  // (and on m128n256 from K = 4096: coda/epilogue/plan.hpp); the heuristic never picks it for a
  // plain GEMM (slower than m128n256 at the power limit).
  pingpong_m128n128,
  // Small M (the heuristic's choice at M <= 128): computed transposed, C^T = B A^T, the weight on
  // wgmma's 64-row side and up to 64 tokens on its N side; 64 x 128 tiles of C.
  swap_m64n128,
  swap_m64n64,   // the same, 64 x 64 tiles of C (ping-pong): for weights of few rows
  swap_m128n64,  // the same, 128 tokens x 64 features (ping-pong): M = 65-128 reads the weight once
};

CODA_API std::string_view name(GemmTile tile);
/// Writes name(tile).
CODA_API std::ostream& operator<<(std::ostream& out, GemmTile tile);

struct GemmOptions {
  GemmTile tile = GemmTile::automatic;
  int split_k = 0;  // 0: heuristic (splits only when a workspace is given, or in clusters); 1: never; n: exactly n
  // Swapped tiles (M <= 128): K may be split across the 2 to 4 CTAs of a cluster, which add their
  // partials through distributed shared memory: no workspace, none of its overhead. The planner
  // does so where few weight tiles would leave SMs idle; a split asked for runs so where the
  // partials fit CTA 0's slots: (splits - 1) x ceil(M / 8) <= 3 (M <= 8: up to 4 splits; M <= 24: 2).
  // false: K is split only through the workspace.
  bool split_k_in_cluster = true;
  // Share the last partial wave out by K iterations (needs a workspace). Off by default: on an
  // H200 the fixup of the shared tiles cost more than the idle SMs it saves on every Transformer
  // shape measured (docs/performance.md).
  bool stream_k = false;
  int raster_group = 0;  // tile-order group height in cluster rows; 0: default (8)
  int max_ctas = 0;      // cap on persistent CTAs (e.g. to leave SMs to other work); 0: all SMs
  // Epilogue programs that ask for it (epilogue/program.hpp: SwiGLU, RoPE, residual + RMSNorm) on
  // the ping-pong tile: run the last tile rows in a second launch on the SMs its 4-CTA clusters
  // leave idle (12 of an H100's 132; epilogue/plan.hpp). Same bits either way; false: one launch.
  bool companion = true;
  void* workspace = nullptr;  // device memory of gemm_workspace_bytes() bytes (any contents)
  std::size_t workspace_bytes = 0;
};

struct GemmOperand {
  TensorView view;
  Major major = Major::k;
};

/// What a call will run: the configuration, the split count and the grid.
struct GemmPlan {
  GemmTile tile = GemmTile::automatic;
  int split_k = 1;
  bool split_k_in_cluster = false;  // the split_k segments of a tile are the CTAs of one cluster
  int stream_k_tiles = 0;    // tiles (of clusters) finished in the stream-K tail
  int ctas = 0;              // persistent CTAs launched
  int64_t output_tiles = 0;  // tiles of C (all batches)
  std::size_t workspace_bytes = 0;
};

/// C = A * B^T on `stream`. Throws coda::InvalidArgument / Unsupported / CudaError.
CODA_API void gemm(const GemmOperand& a, const GemmOperand& b, const TensorView& c, cudaStream_t stream = nullptr,
                   const GemmOptions& options = {});

/// The same, reporting failure as a Status.
CODA_API Status try_gemm(const GemmOperand& a, const GemmOperand& b, const TensorView& c, cudaStream_t stream = nullptr,
                         const GemmOptions& options = {});

/// The plan gemm() would follow with these options, the workspace among them (validates the
/// arguments; needs a Hopper GPU's properties).
CODA_API GemmPlan plan_gemm(const GemmOperand& a, const GemmOperand& b, const TensorView& c,
                            const GemmOptions& options = {});

/// Workspace bytes this problem's best plan needs (0 when it computes every tile in one piece);
/// options.workspace is ignored: the size assumes a workspace will be given.
CODA_API std::size_t gemm_workspace_bytes(const GemmOperand& a, const GemmOperand& b, const TensorView& c,
                                          const GemmOptions& options = {});

}  // namespace coda

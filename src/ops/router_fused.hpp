// Internal: the router's fused_selection GEMM (coda/ops/router.hpp): X W^T with the selection in
// its epilogue (router_epilogue.cuh), in its own translation unit (router_fused.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "coda/core/tensor.hpp"
#include "coda/gemm.hpp"
#include "coda/ops/router.hpp"

namespace coda::ops::router_detail {

struct SelectArgs;

/// Whether the epilogue selects for M rows of x and E experts (past the decode kernel's M): where it
/// can (k <= 8, E <= 512, groups only as groups_in_epilogue allows, no scores output, the GEMM's
/// tile left to coda: fused_tile),
/// if options.fused_selection asks or where it measured faster than the scores path (the one
/// home of that rule: router_fused.cu).
bool fused_selection_applies(int64_t rows, int64_t experts, const RouterOptions& options);

/// The tile whose consumers hold whole rows of E scores: m128n128 to E = 128, else m128n256; past
/// E = 256 a row spans fused_tiles of them, whose candidates merge.
GemmTile fused_tile(int64_t experts);
int fused_tiles(int64_t experts);

/// X W^T, each row's k slots selected in the epilogue and written to args' outputs; `gemm` carries
/// the workspace of gemm_workspace_bytes on fused_tile (a K split at few tiles).
void launch_fused(const TensorView& x, const TensorView& w, const SelectArgs& args, const GemmOptions& gemm,
                  const char* function, cudaStream_t stream);

}  // namespace coda::ops::router_detail

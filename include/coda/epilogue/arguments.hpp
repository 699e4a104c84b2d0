// coda/epilogue/arguments.hpp: the tensors an epilogue program reads and writes, besides the
// accumulators. The same descriptors serve both executors: on the GPU they hold device pointers
// (and, for tile outputs, the TMA map the executor stores through), on the CPU host pointers.
//
//   struct ResidualAdd {
//     coda::epilogue::TileIn residual;   // M x N, read at each element's (row, col)
//     coda::epilogue::TileOut out;       // M x N
//     ...
//   };
//
// Indices are global (the row and column of the whole output, and the batch); strides are in
// elements. Rows and columns past the problem's M and N are never read or written.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "coda/core/divisor.hpp"
#include "coda/core/dtype.hpp"

namespace coda::epilogue {

/// An M x N (x batch) input read at an element's position: the residual stream, a saved
/// activation (or an M x 2N one, read by pairs with t.load_wide).
struct TileIn {
  const void* data = nullptr;
  DType dtype = DType::bf16;
  int64_t ld = 0;
  int64_t batch_stride = 0;
  CUtensorMap map{};  // GPU executor, a program's staged input (program.hpp): filled by tile_in()
};

/// An M x N output (or M x N/2 for pair outputs, M x 2N for wide outputs), written in `dtype`.
/// fp8 outputs are multiplied by `scale` first (and saturate: DType docs). The GPU writes it by TMA
/// stores, in whole 16-byte chunks: a row not a multiple of 16 bytes long has the bytes after it,
/// up to the next multiple of 16, overwritten too (with zeros; inside its row stride, which
/// tile_out() requires to be a multiple of 16 bytes): leave them free (coda/gemm.hpp).
struct TileOut {
  void* data = nullptr;
  DType dtype = DType::bf16;
  int64_t ld = 0;
  int64_t batch_stride = 0;
  float scale = 1.0f;
  CUtensorMap map{};  // GPU executor: filled by tile_out()
  // GPU executor, 1-byte outputs: store_pairs writes 64 bytes per part row, half the 128-byte box
  // of `map`, through this map of 64-byte boxes (filled by tile_out() for fp8 outputs).
  CUtensorMap half_width_map{};
};

/// A tile output whose type the program fixes (`Type`), where a TileOut's follows the launch (one
/// type for all of a launch's TileOuts, launch.cuh): so one launch can write an fp8 result and a
/// bf16 auxiliary output. Made from tile_out()'s descriptor, `TileOutOf<DType::bf16>{tile_out(...)}`;
/// launch_program and the CPU executor refuse one whose tensor is of another type.
template <DType Type>
struct TileOutOf : TileOut {
  static_assert(Type == DType::bf16 || Type == DType::f16 || Type == DType::f32 || Type == DType::e4m3 ||
                    Type == DType::e5m2,
                "tile outputs are bf16, f16, f32, e4m3 or e5m2");
};

/// One value per output column (bias, RMSNorm weight): `data[col]`.
struct RowVector {
  const void* data = nullptr;
  DType dtype = DType::f32;
};

/// One value per output row (rstd, positions, targets): `data[batch * batch_stride + row]`.
struct ColumnVector {
  const void* data = nullptr;
  DType dtype = DType::f32;
  int64_t batch_stride = 0;
};

/// Per-tile partial results, fp32. A row reduction writes value(row, tile column b) at
/// data[batch * batch_stride + row * row_stride + b * tile_stride]; a column reduction writes
/// value(tile row b, col) at data[batch * batch_stride + b * row_stride + col * tile_stride].
/// tile_stride 0 gives one slot shared by all tiles (for results that only one tile produces).
struct Partials {
  float* data = nullptr;
  int64_t row_stride = 0;
  int64_t tile_stride = 1;
  int64_t batch_stride = 0;
};

/// A table indexed by (a per-row index, a column index): the RoPE cos/sin cache.
/// value(i, j) = data[i * ld + j] (fp32). Indices are 32-bit: rows * ld < 2^31 (table() checks).
struct Table {
  const float* data = nullptr;
  int32_t ld = 0;
  int32_t rows = 0;
};

/// Two tables of the same rows read along an output row's column pairs, at a table row picked per
/// output row (t.map_pairs(PairTables, f), program.hpp): the pair of columns (c, c + 1) of output
/// row m (c even) reads entry [index[m]][(c mod period) / 2] of `first` and of `second`. RoPE's
/// cos/sin cache: index = the positions, period = head_dim. A row whose index is outside
/// [0, rows) reads NaN from both.
struct PairTables {
  ColumnVector index{};  // int32, M (per batch)
  Table first{};
  Table second{};
  Divisor period{};      // columns, even
};

}  // namespace coda::epilogue

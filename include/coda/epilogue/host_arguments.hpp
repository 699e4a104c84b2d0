// coda/epilogue/host_arguments.hpp: a program's argument descriptors from tensor views, on the
// host. Tile outputs get the TMA map the GPU executor stores through; every builder checks the
// view and names `argument` in its errors.
//
//   coda::epilogue::Swiglu program;
//   program.out = coda::epilogue::tile_out(out_view, "out");        // M x N/2, bf16
//   program.row_scale = coda::epilogue::column_vector(rstd_view, "rstd");
#pragma once

#include "coda/core/tensor.hpp"
#include "coda/epilogue/arguments.hpp"

namespace coda::epilogue {

/// An M x N (x batch) input, any 16/32-bit float type; rows contiguous.
TileIn tile_in(const TensorView& view, const char* argument);
/// An output of bf16, f16, f32, e4m3 or e5m2 (fp8: multiplied by `scale` first). Its rows and
/// base must be 16-byte aligned (TMA).
TileOut tile_out(const TensorView& view, const char* argument, float scale = 1.0f);
/// A length-N vector (f32, bf16 or f16).
RowVector row_vector(const TensorView& view, const char* argument);
/// A length-M vector, or batch x M (f32, bf16, f16 or i32).
ColumnVector column_vector(const TensorView& view, const char* argument);
/// fp32 partials, rows x parts (x batch), row-major: value(row, part) at [row * ld + part].
Partials row_partials(const TensorView& view, const char* argument);
/// fp32 partials, parts x columns (x batch): value(part, col) at [part * ld + col].
Partials column_partials(const TensorView& view, const char* argument);
/// One fp32 value per row (a row reduction only one part writes): [row].
Partials per_row(const TensorView& view, const char* argument);
/// An fp32 table, rows x columns.
Table table(const TensorView& view, const char* argument);

}  // namespace coda::epilogue

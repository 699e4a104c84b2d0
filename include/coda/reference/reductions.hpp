// coda/reference/reductions.hpp: the fp64 reference of the epilogue reductions: full row and
// column reductions, the tile-partial forms the GPU emits (one value per row and column tile,
// or per column and row tile), and their fixed-order combination.
//
//   Matrix partial = coda::reference::row_partial_sums_of_squares(h, /*bn=*/128);  // M x ceil(N/128)
//   Vector full    = coda::reference::combine_row_partials(partial, Combine::sum); // == row_sums_of_squares(h)
//   Matrix dg_part = coda::reference::column_partial_dots(d, rstd_h, /*bm=*/64);   // ceil(M/64) x N
//
// Tiles: column tile b of width bn covers columns [b*bn, min((b+1)*bn, N)); the last tile may be
// narrower (N need not be a multiple of bn, and bn >= N gives one tile). Row tiles likewise.
// max propagates NaN (a NaN anywhere in the reduced range gives NaN), as torch.max does.
#pragma once

#include <cstdint>
#include <functional>

#include "coda/reference/matrix.hpp"

namespace coda::reference {

/// How partials are combined: summed, or their maximum.
enum class Combine { sum, max };

// ---- full reductions ------------------------------------------------------------------------
Vector row_sums(const Matrix& y);
Vector row_sums_of_squares(const Matrix& y);
Vector row_max(const Matrix& y);
/// out[m] = sum_n y[m, n] * other[m, n].
Vector row_dots(const Matrix& y, const Matrix& other);
Vector column_sums(const Matrix& y);
/// max |y| over all elements (0 for an empty matrix; NaN when any element is NaN).
double abs_max(const Matrix& y);

// ---- the tile grid ----------------------------------------------------------------------------
/// Reduces one segment of a row (or column): index is the row (column), [begin, end) the columns
/// (rows) of one tile.
using SegmentReduction = std::function<double(int64_t index, int64_t begin, int64_t end)>;

/// rows x ceil(cols/bn): entry (m, b) = reduce(m, b*bn, min((b+1)*bn, cols)). The shape of every
/// row-partial output in coda (RMSNorm sums of squares, cross-entropy lse, the backward dots).
Matrix row_partials(int64_t rows, int64_t cols, int64_t bn, const SegmentReduction& reduce);
/// ceil(rows/bm) x cols: entry (b, n) = reduce(n, b*bm, min((b+1)*bm, rows)).
Matrix column_partials(int64_t rows, int64_t cols, int64_t bm, const SegmentReduction& reduce);

// ---- tile partials of y over column tiles of width bn (M x ceil(N/bn)) -------------------------
Matrix row_partial_sums(const Matrix& y, int64_t bn);
Matrix row_partial_sums_of_squares(const Matrix& y, int64_t bn);
Matrix row_partial_max(const Matrix& y, int64_t bn);
Matrix row_partial_dots(const Matrix& y, const Matrix& other, int64_t bn);

// ---- tile partials of y over row tiles of height bm (ceil(M/bm) x N) ---------------------------
Matrix column_partial_sums(const Matrix& y, int64_t bm);
Matrix column_partial_sums_of_squares(const Matrix& y, int64_t bm);
Matrix column_partial_max(const Matrix& y, int64_t bm);
Matrix column_partial_dots(const Matrix& y, const Matrix& other, int64_t bm);

/// Reduce each row of row partials, tiles in order b = 0, 1, ... (length = partials.rows).
Vector combine_row_partials(const Matrix& partials, Combine op);
/// Reduce each column of column partials, tiles in order b = 0, 1, ... (length = partials.cols).
Vector combine_column_partials(const Matrix& partials, Combine op);

}  // namespace coda::reference

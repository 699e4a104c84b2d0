#include "coda/reference/reductions.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string_view>

#include "reference/checks.hpp"

namespace coda::reference {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// What one element contributes, and how contributions are combined.
enum class Statistic { sum, sum_of_squares, max, dot };

Combine combine_of(Statistic s) { return s == Statistic::max ? Combine::max : Combine::sum; }

double start_value(Combine op) { return op == Combine::sum ? 0.0 : -kInf; }

double combine(Combine op, double accumulated, double value) {
  if (op == Combine::sum) return accumulated + value;
  if (std::isnan(accumulated) || std::isnan(value)) return kNaN;  // std::max would drop a NaN
  return std::max(accumulated, value);
}

double element(Statistic s, const Matrix& y, const Matrix* other, int64_t m, int64_t n) {
  switch (s) {
    case Statistic::sum:
    case Statistic::max: return y(m, n);
    case Statistic::sum_of_squares: return y(m, n) * y(m, n);
    case Statistic::dot: return y(m, n) * (*other)(m, n);
  }
  return kNaN;
}

// The statistic over columns [begin, end) of row m, in column order.
double reduce_row_segment(Statistic s, const Matrix& y, const Matrix* other, int64_t m, int64_t begin, int64_t end) {
  double accumulated = start_value(combine_of(s));
  for (int64_t n = begin; n < end; ++n) accumulated = combine(combine_of(s), accumulated, element(s, y, other, m, n));
  return accumulated;
}

// The statistic over rows [begin, end) of column n, in row order.
double reduce_column_segment(Statistic s, const Matrix& y, const Matrix* other, int64_t n, int64_t begin, int64_t end) {
  double accumulated = start_value(combine_of(s));
  for (int64_t m = begin; m < end; ++m) accumulated = combine(combine_of(s), accumulated, element(s, y, other, m, n));
  return accumulated;
}

void check_same_shape(std::string_view function, const Matrix& y, const Matrix& other) {
  ArgumentCheck check(function);
  checks::require_shape(check, "other", other, y.rows, y.cols, "the shape of y");
  check.throw_if_error();
}

int64_t tile_count(int64_t extent, int64_t tile) { return (extent + tile - 1) / tile; }

Matrix tiled_row_partials(std::string_view function, int64_t rows, int64_t cols, int64_t bn,
                          const SegmentReduction& reduce) {
  ArgumentCheck check(function);
  checks::require_tile_size(check, "bn", bn).throw_if_error();
  Matrix partials(rows, tile_count(cols, bn));
  for (int64_t m = 0; m < rows; ++m)
    for (int64_t b = 0; b < partials.cols; ++b) partials(m, b) = reduce(m, b * bn, std::min((b + 1) * bn, cols));
  return partials;
}

Matrix tiled_column_partials(std::string_view function, int64_t rows, int64_t cols, int64_t bm,
                             const SegmentReduction& reduce) {
  ArgumentCheck check(function);
  checks::require_tile_size(check, "bm", bm).throw_if_error();
  Matrix partials(tile_count(rows, bm), cols);
  for (int64_t b = 0; b < partials.rows; ++b)
    for (int64_t n = 0; n < cols; ++n) partials(b, n) = reduce(n, b * bm, std::min((b + 1) * bm, rows));
  return partials;
}

Vector full_rows(Statistic s, const Matrix& y, const Matrix* other) {
  Vector out(std::size_t(y.rows));
  for (int64_t m = 0; m < y.rows; ++m) out[std::size_t(m)] = reduce_row_segment(s, y, other, m, 0, y.cols);
  return out;
}

Matrix row_partials_of(std::string_view function, Statistic s, const Matrix& y, const Matrix* other, int64_t bn) {
  return tiled_row_partials(function, y.rows, y.cols, bn, [&](int64_t m, int64_t begin, int64_t end) {
    return reduce_row_segment(s, y, other, m, begin, end);
  });
}

Matrix column_partials_of(std::string_view function, Statistic s, const Matrix& y, const Matrix* other, int64_t bm) {
  return tiled_column_partials(function, y.rows, y.cols, bm, [&](int64_t n, int64_t begin, int64_t end) {
    return reduce_column_segment(s, y, other, n, begin, end);
  });
}

}  // namespace

Vector row_sums(const Matrix& y) { return full_rows(Statistic::sum, y, nullptr); }
Vector row_sums_of_squares(const Matrix& y) { return full_rows(Statistic::sum_of_squares, y, nullptr); }
Vector row_max(const Matrix& y) { return full_rows(Statistic::max, y, nullptr); }

Vector row_dots(const Matrix& y, const Matrix& other) {
  check_same_shape("coda::reference::row_dots", y, other);
  return full_rows(Statistic::dot, y, &other);
}

Vector column_sums(const Matrix& y) {
  Vector out(std::size_t(y.cols));
  for (int64_t n = 0; n < y.cols; ++n)
    out[std::size_t(n)] = reduce_column_segment(Statistic::sum, y, nullptr, n, 0, y.rows);
  return out;
}

double abs_max(const Matrix& y) {
  double largest = 0.0;
  for (double v : y.data) largest = combine(Combine::max, largest, std::fabs(v));
  return largest;
}

Matrix row_partials(int64_t rows, int64_t cols, int64_t bn, const SegmentReduction& reduce) {
  return tiled_row_partials("coda::reference::row_partials", rows, cols, bn, reduce);
}

Matrix column_partials(int64_t rows, int64_t cols, int64_t bm, const SegmentReduction& reduce) {
  return tiled_column_partials("coda::reference::column_partials", rows, cols, bm, reduce);
}

Matrix row_partial_sums(const Matrix& y, int64_t bn) {
  return row_partials_of("coda::reference::row_partial_sums", Statistic::sum, y, nullptr, bn);
}
Matrix row_partial_sums_of_squares(const Matrix& y, int64_t bn) {
  return row_partials_of("coda::reference::row_partial_sums_of_squares", Statistic::sum_of_squares, y, nullptr, bn);
}
Matrix row_partial_max(const Matrix& y, int64_t bn) {
  return row_partials_of("coda::reference::row_partial_max", Statistic::max, y, nullptr, bn);
}
Matrix row_partial_dots(const Matrix& y, const Matrix& other, int64_t bn) {
  check_same_shape("coda::reference::row_partial_dots", y, other);
  return row_partials_of("coda::reference::row_partial_dots", Statistic::dot, y, &other, bn);
}

Matrix column_partial_sums(const Matrix& y, int64_t bm) {
  return column_partials_of("coda::reference::column_partial_sums", Statistic::sum, y, nullptr, bm);
}
Matrix column_partial_sums_of_squares(const Matrix& y, int64_t bm) {
  return column_partials_of("coda::reference::column_partial_sums_of_squares", Statistic::sum_of_squares, y, nullptr,
                            bm);
}
Matrix column_partial_max(const Matrix& y, int64_t bm) {
  return column_partials_of("coda::reference::column_partial_max", Statistic::max, y, nullptr, bm);
}
Matrix column_partial_dots(const Matrix& y, const Matrix& other, int64_t bm) {
  check_same_shape("coda::reference::column_partial_dots", y, other);
  return column_partials_of("coda::reference::column_partial_dots", Statistic::dot, y, &other, bm);
}

Vector combine_row_partials(const Matrix& partials, Combine op) {
  Vector out(std::size_t(partials.rows), start_value(op));
  for (int64_t m = 0; m < partials.rows; ++m)
    for (int64_t b = 0; b < partials.cols; ++b) out[std::size_t(m)] = combine(op, out[std::size_t(m)], partials(m, b));
  return out;
}

Vector combine_column_partials(const Matrix& partials, Combine op) {
  Vector out(std::size_t(partials.cols), start_value(op));
  for (int64_t b = 0; b < partials.rows; ++b)
    for (int64_t n = 0; n < partials.cols; ++n) out[std::size_t(n)] = combine(op, out[std::size_t(n)], partials(b, n));
  return out;
}

}  // namespace coda::reference

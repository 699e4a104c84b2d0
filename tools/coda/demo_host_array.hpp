// coda demo's CPU path, internal: host arrays that epilogue programs read and write on the CPU
// executor (reference::run_epilogue), and the part shape they run on.
#pragma once

#include <cstdint>
#include <vector>

#include "coda/core/dtype.hpp"
#include "coda/core/tensor.hpp"
#include "coda/epilogue/arguments.hpp"
#include "coda/epilogue/parts.hpp"
#include "coda/reference/epilogue_executor.hpp"
#include "coda/reference/matrix.hpp"

namespace coda::cli::cpu {

using epilogue::kPartCols;
using epilogue::kPartRows;

// The part one program call sees on the GPU (parts.hpp). The problems below are larger than one
// part and no multiple of it, so every program sees whole and cut parts, and its reductions leave
// several partials per row or column to combine.
constexpr reference::PartShape kPart{kPartRows, kPartCols};
constexpr int64_t kRows = 100;

// Limits. Outputs stored as bf16: fp32 math, then one rounding to bf16 (2^-9 relative at most,
// about 1e-3 over a whole output). f32 partials and losses: the accumulators' rounding to fp32 and
// fp32 sums of at most a few hundred terms, a few 1e-7.
constexpr double kBf16Output = 6e-3;
constexpr double kF32 = 1e-6;

inline int64_t part_count(int64_t extent, int64_t part) { return (extent + part - 1) / part; }

// A rows x cols host array of `dtype` that a program reads or writes. It starts as 0xFF bytes (NaN
// in every float type), so an element a program never wrote reads back as NaN and fails its check.
class HostArray {
 public:
  HostArray(DType dtype, int64_t rows, int64_t cols)
      : dtype_(dtype), rows_(rows), cols_(cols), bytes_(std::size_t(rows * cols) * size_of(dtype), 0xFF) {}

  /// `values` rounded to `dtype`: an input, as the GPU would read it.
  static HostArray of(const reference::Matrix& values, DType dtype) {
    HostArray array(dtype, values.rows, values.cols);
    reference::store(values, array.view());
    return array;
  }
  /// One row: a per-column vector (bias, weight) or a per-row one (rstd, positions, targets).
  static HostArray of(const reference::Vector& values, DType dtype) {
    reference::Matrix row(1, int64_t(values.size()));
    row.data = values;
    return of(row, dtype);
  }

  reference::Matrix matrix() const { return reference::to_matrix(view()); }
  reference::Vector values() const { return matrix().data; }

  epilogue::TileIn tile_in() const { return {.data = bytes_.data(), .dtype = dtype_, .ld = cols_}; }
  epilogue::TileOut tile_out() { return {.data = bytes_.data(), .dtype = dtype_, .ld = cols_}; }
  epilogue::RowVector row_vector() const { return {.data = bytes_.data(), .dtype = dtype_}; }
  epilogue::ColumnVector column_vector() const { return {.data = bytes_.data(), .dtype = dtype_}; }
  // f32 arrays only: partials (rows x parts of a row reduction, parts x cols of a column
  // reduction) and tables.
  epilogue::Partials partials() { return {.data = floats(), .row_stride = cols_}; }
  epilogue::Table table() const { return {.data = floats(), .ld = int32_t(cols_), .rows = int32_t(rows_)}; }

 private:
  TensorView view() const { return TensorView::matrix(bytes_.data(), dtype_, rows_, cols_); }
  float* floats() const { return reinterpret_cast<float*>(const_cast<unsigned char*>(bytes_.data())); }

  DType dtype_;
  int64_t rows_, cols_;
  std::vector<unsigned char> bytes_;
};

inline reference::Vector as_values(const std::vector<int32_t>& indices) {
  return reference::Vector(indices.begin(), indices.end());
}

}  // namespace coda::cli::cpu

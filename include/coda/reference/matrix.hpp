// coda/reference/matrix.hpp: the fp64 host matrix every reference computation works on, and
// the error measure tests use.
//
//   coda::reference::Matrix x = coda::reference::to_matrix(host_view);      // any dtype, any strides
//   coda::reference::Matrix y = coda::reference::gemm(x, coda::Major::k, w, coda::Major::k);
//   double err = coda::reference::relative_error(out, y);             // ||out - ref|| / ||ref||
#pragma once

#include <cstdint>
#include <vector>

#include "coda/core/tensor.hpp"

namespace coda::reference {

using Vector = std::vector<double>;

struct Matrix {
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<double> data;  // row-major, rows * cols

  Matrix() = default;
  Matrix(int64_t rows_, int64_t cols_, double fill = 0.0)
      : rows(rows_), cols(cols_), data(std::size_t(rows_ * cols_), fill) {}

  double& operator()(int64_t r, int64_t c) { return data[std::size_t(r * cols + c)]; }
  double operator()(int64_t r, int64_t c) const { return data[std::size_t(r * cols + c)]; }
  double* row(int64_t r) { return data.data() + r * cols; }
  const double* row(int64_t r) const { return data.data() + r * cols; }

  Matrix transposed() const;
};

/// Read a rank-2 host tensor of any dtype and strides into an fp64 matrix (exact).
Matrix to_matrix(const TensorView& host);
/// Write `m` into a rank-2 host tensor, rounding to its dtype (nearest even).
void store(const Matrix& m, const TensorView& host);

/// ||out - ref||_2 / ||ref||_2 over all elements; +inf when `out` holds a NaN or an infinity
/// where `ref` is finite, or when the shapes differ. Zero reference: returns ||out||.
double relative_error(const Matrix& out, const Matrix& ref);
double relative_error(const Vector& out, const Vector& ref);

/// Largest |a - b| over all elements (+inf on NaN or shape mismatch).
double max_abs_difference(const Matrix& a, const Matrix& b);

}  // namespace coda::reference

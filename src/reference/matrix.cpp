#include "coda/reference/matrix.hpp"

#include <cmath>
#include <limits>

namespace coda::reference {

Matrix Matrix::transposed() const {
  Matrix t(cols, rows);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) t(c, r) = (*this)(r, c);
  return t;
}

Matrix to_matrix(const TensorView& host) {
  Matrix m(host.rows(), host.cols());
  const auto* base = static_cast<const unsigned char*>(host.data);
  const int64_t col_stride = host.rank >= 1 ? host.stride[host.rank - 1] : 1;
  for (int64_t r = 0; r < m.rows; ++r)
    for (int64_t c = 0; c < m.cols; ++c)
      m(r, c) = load_element(host.dtype, base + (r * host.ld() + c * col_stride) * int64_t(host.element_bytes()));
  return m;
}

void store(const Matrix& m, const TensorView& host) {
  auto* base = static_cast<unsigned char*>(host.data);
  const int64_t col_stride = host.rank >= 1 ? host.stride[host.rank - 1] : 1;
  for (int64_t r = 0; r < m.rows; ++r)
    for (int64_t c = 0; c < m.cols; ++c)
      store_element(host.dtype, base + (r * host.ld() + c * col_stride) * int64_t(host.element_bytes()), m(r, c));
}

namespace {
double relative_error(const double* out, const double* ref, std::size_t n) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!std::isfinite(out[i]) && std::isfinite(ref[i])) return std::numeric_limits<double>::infinity();
    const double d = out[i] - ref[i];
    diff += d * d;
    norm += ref[i] * ref[i];
  }
  if (std::isnan(diff)) return std::numeric_limits<double>::infinity();
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}
}  // namespace

double relative_error(const Matrix& out, const Matrix& ref) {
  if (out.rows != ref.rows || out.cols != ref.cols) return std::numeric_limits<double>::infinity();
  return relative_error(out.data.data(), ref.data.data(), ref.data.size());
}

double relative_error(const Vector& out, const Vector& ref) {
  if (out.size() != ref.size()) return std::numeric_limits<double>::infinity();
  return relative_error(out.data(), ref.data(), ref.size());
}

double max_abs_difference(const Matrix& a, const Matrix& b) {
  if (a.rows != b.rows || a.cols != b.cols) return std::numeric_limits<double>::infinity();
  double worst = 0;
  for (std::size_t i = 0; i < a.data.size(); ++i) {
    const double d = std::fabs(a.data[i] - b.data[i]);
    if (std::isnan(d)) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, d);
  }
  return worst;
}

}  // namespace coda::reference

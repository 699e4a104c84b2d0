#include "coda/reference/rope.hpp"

#include <cmath>
#include <string_view>

#include "reference/checks.hpp"

namespace coda::reference {
namespace {

// head_dim even and positive; `width` (the extent holding the heads) a whole number of heads;
// 0 <= rot_heads <= heads.
void check_heads(ArgumentCheck& check, std::string_view width_argument, int64_t width, int64_t head_dim,
                 int64_t rot_heads) {
  check.require(head_dim >= 2 && head_dim % 2 == 0, "head_dim", "is ", head_dim,
                " but must be even and >= 2 (RoPE rotates pairs)");
  if (check.failed()) return;
  check.require(width % head_dim == 0, width_argument, "has N = ", width, ", not a multiple of head_dim = ", head_dim,
                " (N = heads * head_dim)");
  check.require(rot_heads >= 0 && rot_heads <= width / head_dim, "rot_heads", "is ", rot_heads, " but must lie in [0, ",
                width / head_dim, "] (the number of heads)");
}

// Rotate every pair of the first rot_heads heads by direction * angle (+1 forward, -1 backward).
Matrix rotate(std::string_view function, const Matrix& y, const std::vector<int32_t>& positions,
              const RopeCache& cache, int64_t head_dim, int64_t rot_heads, double direction) {
  ArgumentCheck check(function);
  check_heads(check, "y", y.cols, head_dim, rot_heads);
  checks::require_length(check, "positions", positions.size(), y.rows, "one position per row of y");
  checks::require_shape(check, "cache", cache.cos, cache.cos.rows, head_dim / 2, "cos has head_dim / 2 columns");
  checks::require_shape(check, "cache", cache.sin, cache.cos.rows, head_dim / 2, "sin has the shape of cos");
  for (std::size_t m = 0; m < positions.size() && !check.failed(); ++m)
    check.require(positions[m] >= 0 && positions[m] < cache.cos.rows, "positions", "positions[", m,
                  "] = ", positions[m], " is outside [0, ", cache.cos.rows, ") (the cache's max_pos)");
  check.throw_if_error();

  Matrix out = y;
  for (int64_t m = 0; m < y.rows; ++m) {
    const int32_t p = positions[std::size_t(m)];
    for (int64_t h = 0; h < rot_heads; ++h) {
      for (int64_t i = 0; i < head_dim / 2; ++i) {
        const double c = cache.cos(p, i), s = direction * cache.sin(p, i);
        const int64_t first = h * head_dim + 2 * i;
        const double y0 = y(m, first), y1 = y(m, first + 1);
        out(m, first) = y0 * c - y1 * s;
        out(m, first + 1) = y0 * s + y1 * c;
      }
    }
  }
  return out;
}

// Within a rotated head: the rotate-half index that interleaved index j comes from.
int64_t rotate_half_index(int64_t interleaved, int64_t head_dim) {
  return interleaved % 2 == 0 ? interleaved / 2 : interleaved / 2 + head_dim / 2;
}

}  // namespace

RopeCache rope_cache(int64_t max_pos, int64_t head_dim, double theta) {
  ArgumentCheck check("coda::reference::rope_cache");
  check.positive("max_pos", max_pos, "max_pos");
  check.require(head_dim >= 2 && head_dim % 2 == 0, "head_dim", "is ", head_dim, " but must be even and >= 2");
  check.require(std::isfinite(theta) && theta > 0, "theta", "is ", theta, " but must be finite and > 0");
  check.throw_if_error();
  RopeCache cache{Matrix(max_pos, head_dim / 2), Matrix(max_pos, head_dim / 2)};
  for (int64_t p = 0; p < max_pos; ++p) {
    for (int64_t i = 0; i < head_dim / 2; ++i) {
      const double angle = double(p) * std::pow(theta, -2.0 * double(i) / double(head_dim));
      cache.cos(p, i) = std::cos(angle);
      cache.sin(p, i) = std::sin(angle);
    }
  }
  return cache;
}

Matrix rope(const Matrix& y, const std::vector<int32_t>& positions, const RopeCache& cache, int64_t head_dim,
            int64_t rot_heads) {
  return rotate("coda::reference::rope", y, positions, cache, head_dim, rot_heads, +1.0);
}

Matrix rope_backward(const Matrix& grad_output, const std::vector<int32_t>& positions, const RopeCache& cache,
                     int64_t head_dim, int64_t rot_heads) {
  return rotate("coda::reference::rope_backward", grad_output, positions, cache, head_dim, rot_heads, -1.0);
}

Matrix permute_rotate_half_to_interleaved(const Matrix& w, int64_t head_dim, int64_t rot_heads) {
  ArgumentCheck check("coda::reference::permute_rotate_half_to_interleaved");
  check_heads(check, "w", w.rows, head_dim, rot_heads);
  check.throw_if_error();
  Matrix out = w;
  for (int64_t h = 0; h < rot_heads; ++h)
    for (int64_t j = 0; j < head_dim; ++j)
      for (int64_t k = 0; k < w.cols; ++k)
        out(h * head_dim + j, k) = w(h * head_dim + rotate_half_index(j, head_dim), k);
  return out;
}

Matrix permute_interleaved_to_rotate_half_columns(const Matrix& y, int64_t head_dim, int64_t rot_heads) {
  ArgumentCheck check("coda::reference::permute_interleaved_to_rotate_half_columns");
  check_heads(check, "y", y.cols, head_dim, rot_heads);
  check.throw_if_error();
  Matrix out = y;
  for (int64_t m = 0; m < y.rows; ++m)
    for (int64_t h = 0; h < rot_heads; ++h)
      for (int64_t j = 0; j < head_dim; ++j)
        out(m, h * head_dim + rotate_half_index(j, head_dim)) = y(m, h * head_dim + j);
  return out;
}

}  // namespace coda::reference

// Argument rules shared by the fp64 reference functions, worded once so every message reads
// the same: "coda::reference::<function>: argument '<name>': <rule>".
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "coda/core/validate.hpp"
#include "coda/reference/matrix.hpp"

namespace coda::reference::checks {

inline std::string shape_of(const Matrix& m) { return text("(", m.rows, " x ", m.cols, ")"); }

/// `m` must be rows x cols; `why` says where the expected shape comes from.
inline ArgumentCheck& require_shape(ArgumentCheck& check, std::string_view name, const Matrix& m, int64_t rows,
                                    int64_t cols, std::string_view why) {
  return check.require(m.rows == rows && m.cols == cols, name, "is ", shape_of(m), " but must be (", rows, " x ", cols,
                       ") (", why, ")");
}

/// A vector (or index list) must hold `expected` entries.
inline ArgumentCheck& require_length(ArgumentCheck& check, std::string_view name, std::size_t length,
                                     int64_t expected, std::string_view why) {
  return check.require(int64_t(length) == expected, name, "has ", length, " entries but must have ", expected, " (",
                       why, ")");
}

/// A tile height or width of the GPU's tile grid.
inline ArgumentCheck& require_tile_size(ArgumentCheck& check, std::string_view name, int64_t size) {
  return check.require(size >= 1, name, "tile size is ", size, " but must be at least 1");
}

/// The RMSNorm epsilon: finite and not negative.
inline ArgumentCheck& require_epsilon(ArgumentCheck& check, std::string_view name, double eps) {
  return check.require(std::isfinite(eps) && eps >= 0, name, "is ", eps, " but must be finite and >= 0");
}

}  // namespace coda::reference::checks

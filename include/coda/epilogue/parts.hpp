// coda/epilogue/parts.hpp: the part of an output tile one epilogue-program call sees: on the GPU,
// a whole 128 x 128 tile of the ping-pong schedule (gemm/tile_config.cuh), held by one consumer
// warpgroup while the other runs its MMAs, so the program's time hides behind tensor-core work.
// Partials are per part: a row reduction of an N-column output yields ceil(N / kPartCols) values
// per row, a column reduction of M rows ceil(M / kPartRows) values per column. The CPU executor
// is given the same shape.
#pragma once

#include <cstdint>

namespace coda::epilogue {

inline constexpr int kPartRows = 128;
inline constexpr int kPartCols = 128;

/// Parts of a row of `n` columns: the number of per-part partials a row reduction writes.
inline constexpr int64_t parts_along(int64_t n) { return (n + kPartCols - 1) / kPartCols; }

}  // namespace coda::epilogue

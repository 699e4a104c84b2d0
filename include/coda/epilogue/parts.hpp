// coda/epilogue/parts.hpp: the part of an output tile one epilogue-program call sees: on the GPU,
// the 128 x 128 accumulators of one consumer warpgroup (mainloop/tiles.hpp): a whole tile of the
// ping-pong schedule, run while the other consumer runs its MMAs (the program's time hides behind
// tensor-core work), or half of a cooperative m128n256 tile (long K: epilogue/plan.hpp).
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
/// Parts of a column of `m` rows: the number of per-part partials a column reduction writes.
inline constexpr int64_t parts_along_rows(int64_t m) { return (m + kPartRows - 1) / kPartRows; }

}  // namespace coda::epilogue

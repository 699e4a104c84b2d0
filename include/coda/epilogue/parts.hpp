// coda/epilogue/parts.hpp: the part of an output tile one epilogue-program call sees on the GPU
// (a consumer warpgroup's share of the m128n128 tile: 64 accumulators per thread leave a program
// the registers it needs; with the 128 of a 64 x 256 part, programs with several stores spilled). Partials are per part: a row reduction of
// an N-column output yields ceil(N / kPartCols) values per row, a column reduction of M rows
// ceil(M / kPartRows) values per column. The CPU executor is given the same shape.
#pragma once

namespace coda::epilogue {

inline constexpr int kPartRows = 64;
inline constexpr int kPartCols = 128;

}  // namespace coda::epilogue

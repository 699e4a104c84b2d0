// coda/epilogue/companion.hpp: how many tile rows a companion launch takes (plan.hpp).
//
// The ping-pong tile's 4-CTA clusters do not tile the H100's GPCs: 120 of its 132 SMs get one
// (`coda bench gemm --json`, "ctas"). An epilogue program on that tile may run its last tile rows
// in a second launch on the SMs left over: m128n256 program tiles in 2-CTA clusters, which fit
// there, started by programmatic dependent launch as soon as the first launch is resident.
#pragma once

#include <algorithm>
#include <cstdint>

namespace coda::epilogue {

/// Tile rows (of 128) for the companion, the last ones, so that both launches finish together
/// when a companion SM runs the program at `companion_speed` times a primary SM's rate (the
/// program's own measure, epilogue/program.hpp: the m128n256 tile runs the program with the tensor
/// cores idle, the ping-pong tile in the other consumer's shadow); 0 where a companion would not
/// pay (no SM left over, or too few tiles to keep the primary's grid busy for two waves). The
/// primary keeps an even number of rows: its 2 x 2 clusters must not overhang into the companion's.
inline int64_t companion_tile_rows(int64_t tile_rows, int64_t tile_cols, int primary_ctas, int companion_ctas,
                                   double companion_speed) {
  if (companion_ctas < 2 || primary_ctas < 4 || !(companion_speed > 0.0)) return 0;
  const double primary_rate = primary_ctas, companion_rate = companion_ctas * companion_speed;
  int64_t best_rows = 0;
  double best_time = double(tile_rows) / primary_rate;
  for (int64_t primary_rows = tile_rows - tile_rows % 2; primary_rows >= 2; primary_rows -= 2) {
    const int64_t rows = tile_rows - primary_rows;
    const double time = std::max(double(primary_rows) / primary_rate, double(rows) / companion_rate);
    if (rows > 0 && time < best_time) {
      best_time = time;
      best_rows = rows;
    }
    if (double(rows) / companion_rate > best_time) break;  // the companion only gets slower from here
  }
  const int64_t primary_cluster_tiles = (tile_rows - best_rows) / 2 * ((tile_cols + 1) / 2);
  return primary_cluster_tiles >= 2 * (primary_ctas / 4) ? best_rows : 0;
}

}  // namespace coda::epilogue

// coda/epilogue/programs/rope.hpp: GEMM + RoPE (CODA kernel 1; with a row scale, kernel 7).
//
// Y is M x N with N = heads * head_dim. For the pair (y_2i, y_2i+1) of a head (interleaved
// convention; reference/rope.hpp permutes rotate-half weights into it) and (c, s) =
// (cos, sin)[pos[m]][i]:  (y_2i, y_2i+1) -> (y_2i c - y_2i+1 s, y_2i s + y_2i+1 c). Heads from
// `rotated_heads` on (the V of a fused QKV projection) pass through. A position outside the
// cache makes that row's rotated pairs NaN (a device-side error that cannot go unnoticed).
#pragma once

#include <cmath>

#include "coda/core/divisor.hpp"
#include "coda/epilogue/program.hpp"

namespace coda::epilogue {

struct Rope {
  ColumnVector positions{};  // int32, M
  Table cos{};               // max_pos x head_dim / 2
  Table sin{};
  Divisor head_dim{128};     // a multiply and a shift per pair instead of an integer division
  int32_t rotated_heads = 0;
  ColumnVector row_scale{};  // optional: Y = rstd[m] * (X W^T) first (kernel 7)
  TileOut out{};             // M x N

  template <class Tile>
  CODA_HD void operator()(Tile& t) const {
    if (row_scale.data) t.map([&](Element& x) { x.value *= t.load(row_scale, x); });
    // A part whose columns all pass through (the V of a fused QKV projection) reads no table:
    // the rotation's gathers are most of the epilogue (coda bench timeline), a third of QKV's parts.
    // Inside, written without early returns: every pair reads the tables (row 0 for a bad
    // position), so the GPU executor can issue all of a part's table loads before the first is needed.
    if (t.part_columns().first < rotated_heads * head_dim.value()) t.map_pairs([&](Pair& p) {
      const int32_t head = head_dim.divide(p.col);
      const bool rotated = head < rotated_heads;
      const int32_t position = t.load_index(positions, p);
      const bool known = uint32_t(position) < uint32_t(cos.rows);  // 0 <= position < rows
      // head_dim.remainder(p.col), from the quotient at hand (remainder() would divide again:
      // the compiler does not merge the two). p.col and head_dim are even.
      const int32_t i = (p.col - head * head_dim.value()) >> 1;
      const float c = t.load(cos, known ? position : 0, i), s = t.load(sin, known ? position : 0, i);
      const float y0 = p.first, y1 = p.second;
      p.first = !rotated ? y0 : known ? y0 * c - y1 * s : NAN;
      p.second = !rotated ? y1 : known ? y0 * s + y1 * c : NAN;
    });
    t.store(out);
  }
};

}  // namespace coda::epilogue

// coda/epilogue/programs/rope.hpp: GEMM + RoPE (with a row scale: after an RMSNorm) and its
// backward, the inverse rotation; docs/kernels.md.
//
// Y is M x N with N = heads * head_dim. For the pair (y_2i, y_2i+1) of a head (interleaved
// convention; reference/rope.hpp permutes rotate-half weights into it) and (c, s) =
// (cos, sin)[pos[m]][i]:  (y_2i, y_2i+1) -> (y_2i c - y_2i+1 s, y_2i s + y_2i+1 c). Heads from
// `rotated_heads` on (the V of a fused QKV projection) pass through. A position outside the
// cache makes that row's rotated pairs NaN (a device-side error that cannot go unnoticed).
// RopeBackward rotates a GEMM's output dY_post back by the negated angle (R is orthogonal:
// dY_pre = R^T dY_post) and can emit the row partials of <dY_post, Y_post> = <dY_pre, Y_pre>, the
// statistic of an RMSNorm before the projection.
#pragma once

#include <cmath>

#include "coda/core/divisor.hpp"
#include "coda/epilogue/program.hpp"

namespace coda::epilogue {

/// Rotate each pair of the first `rotated_heads` heads by its row's angle, the cos and sin tables
/// at the row's position (Inverse: by the negated angle).
template <bool Inverse, class Tile>
CODA_HD void rotate_pairs(Tile& t, const ColumnVector& positions, const Table& cos, const Table& sin,
                          const Divisor& head_dim, int32_t rotated_heads) {
  // A part whose columns all pass through (the V of a fused QKV projection) reads no table:
  // the rotation's table reads are most of the epilogue (coda bench timeline), a third of QKV's parts.
  const int32_t rotated_columns = rotated_heads * head_dim.value();
  if (t.part_columns().first < rotated_columns)
    t.map_pairs(PairTables{positions, cos, sin, head_dim}, [&](Pair& p, const Values2& angle) {
      // Selects, not a branch per pair. The head is p.col / head_dim; c and s are NaN where the
      // row's position is outside the cache.
      const bool rotated = p.col < rotated_columns;
      const float y0 = p.first, y1 = p.second, c = angle.first, s = Inverse ? -angle.second : angle.second;
      p.first = rotated ? y0 * c - y1 * s : y0;
      p.second = rotated ? y0 * s + y1 * c : y1;
    });
}

struct Rope {
  ColumnVector positions{};  // int32, M
  Table cos{};               // max_pos x head_dim / 2
  Table sin{};
  Divisor head_dim{128};  // a multiply and a shift per pair instead of an integer division
  int32_t rotated_heads = 0;
  ColumnVector row_scale{};  // optional: Y = rstd[m] * (X W^T) first (an RMSNorm before the QKV projection)
  TileOut out{};             // M x N
  // A companion launch (program.hpp): on the cooperative tile a companion SM runs the rotation at
  // about 0.8 of a ping-pong SM (K = 2048, H100). coda bench ops, the op with and without it side by
  // side: 0.96-1.01 of its time alone on H100s, 0.97-0.99 on an H200; at 0.92 it got two more tile
  // rows and was 5% slower (docs/performance.md).
  static constexpr double companion_speed = 0.8;

  template <class Tile>
  CODA_HD void operator()(Tile& t) const {
    if (row_scale.data) t.map([&](Element& x) { x.value *= t.load(row_scale, x); });
    rotate_pairs<false>(t, positions, cos, sin, head_dim, rotated_heads);
    t.store(out);
  }
};

struct RopeBackward {
  ColumnVector positions{};  // int32, M: as the forward's
  Table cos{};
  Table sin{};
  Divisor head_dim{128};
  int32_t rotated_heads = 0;
  TileIn output{};           // optional: Y_post, M x N, the forward's output (for row_dots)
  Partials row_dots{};       // optional: M x parts, <dY_post, Y_post> over the part
  ColumnVector row_scale{};  // optional: the stored gradient times rstd[m] (kernels.md: the RMSNorm backward)
  TileOut out{};             // dY_pre, M x N

  template <class Inputs>
  CODA_HD void tile_inputs(Inputs& in) const {
    in(output);
  }

  void check_arguments(ArgumentCheck& check) const {
    check.require(!row_dots.data || output.data, "output", "is null, but row_dots is <dY, output> over each part");
  }

  template <class Tile>
  CODA_HD void operator()(Tile& t) const {
    if (row_dots.data) t.row_reduce(row_dots, Sum{}, [&](const Element& x) { return x.value * t.load(output, x); });
    if (row_scale.data) t.map([&](Element& x) { x.value *= t.load(row_scale, x); });
    rotate_pairs<true>(t, positions, cos, sin, head_dim, rotated_heads);
    t.store(out);
  }
};

}  // namespace coda::epilogue

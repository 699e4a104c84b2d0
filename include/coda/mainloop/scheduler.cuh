// coda/mainloop/scheduler.cuh: the persistent tile scheduler.
//
// Work is cut into units: (batch, output tile, range of K blocks). Cluster c of a persistent grid
// of C clusters walks its own list of units; the producer and the consumers of a CTA walk the
// same list. Three modes:
//
//   data-parallel  every unit is a whole tile; cluster c takes tiles c, c + C, c + 2C, ...
//   split-K        every tile is cut into `splits` equal K ranges (few tiles, long K: decode)
//   stream-K tail  the first tiles are data-parallel, a whole number of waves; the K blocks of
//                  the remaining `stream_k_tiles` (the partial last wave) are dealt out evenly, as
//                  one contiguous range of iterations per cluster, so no SM idles at the end.
//
// A tile computed in several segments is finished by whichever segment arrives last: it adds the
// published partials in segment order (bitwise the same whoever arrives last) and runs the
// epilogue; no unit waits for another. The one exception is an epilogue that shares a split tile's
// rows out (segments.cuh, share_tile_rows), whose segments wait for each other: taken only where
// every unit has a CTA of its own in the persistent grid, which assumes, as the grid's size does,
// that the launch's CTAs are all resident at once (no kernel on another stream holding SMs).
//
// Tiles are visited in groups of `group_m` cluster rows, walking down M inside a group, so the
// units in flight at once share a few A and B panels in L2.
#pragma once

#include <cstdint>

#include "coda/mainloop/params.hpp"

namespace coda::mainloop {

struct WorkUnit {
  int32_t tile_m;
  int32_t tile_n;
  int32_t batch;
  int32_t k_block_begin;
  int32_t k_block_end;
  int32_t segment;       // which K segment of the tile this is
  int32_t segments;      // how many the tile has (1: the unit finishes the tile on its own)
  int32_t counter;       // the tile's arrival counter; its partials start at slot counter * slots_per_tile()
};

/// Partial slots reserved per multi-segment tile.
__device__ __forceinline__ int32_t slots_per_tile(const ScheduleParams& s) {
  return s.splits > 1 ? s.splits : s.max_segments;
}

/// The list of units of one cluster.
template <int ClusterM, int ClusterN>
class WorkList {
 public:
  static constexpr int kClusterSize = ClusterM * ClusterN;

  // The schedule is passed to every call rather than kept, and the cluster's index and count
  // are read from blockIdx and gridDim when needed: the consumers have no registers to spare.
  __device__ explicit WorkList(const ScheduleParams& s) : next_(cluster()) {
    if (s.stream_k_tiles > 0) {
      stream_k_position_ = range_start(s, cluster());
      stream_k_end_ = range_start(s, cluster() + 1);
    }
  }

  /// The next unit for CTA `cta_rank` of the cluster; false when the list is done.
  __device__ bool next(const ScheduleParams& s_, WorkUnit& w, uint32_t cta_rank) {
    const int32_t whole_units = s_.splits > 1 ? s_.cluster_tiles * s_.splits : s_.cluster_tiles - s_.stream_k_tiles;
    if (next_ < whole_units) {
      const int32_t unit = next_;
      next_ += clusters();
      const int32_t split = unit % s_.splits;
      place(s_, w, unit / s_.splits, cta_rank);
      // Splits share the K blocks as evenly as integers allow; each gets at least one. (The host
      // keeps k_blocks * splits below 2^31: 32-bit products, no 64-bit division routine.)
      w.k_block_begin = s_.k_blocks * split / s_.splits;
      w.k_block_end = s_.k_blocks * (split + 1) / s_.splits;
      w.segment = split;
      w.segments = s_.splits;
      w.counter = cta_tile_index(s_, w, cta_rank);
      return true;
    }
    if (stream_k_position_ >= stream_k_end_) return false;
    // Stream-K: the rest of this cluster's iteration range, clipped to one tile.
    const int32_t tile = int32_t(stream_k_position_ / s_.k_blocks);
    const int32_t tile_first = tile * s_.k_blocks, tile_end = tile_first + s_.k_blocks;
    place(s_, w, s_.cluster_tiles - s_.stream_k_tiles + tile, cta_rank);
    w.k_block_begin = stream_k_position_ - tile_first;
    w.k_block_end = min(stream_k_end_, tile_end) - tile_first;
    const int32_t first_cluster = owner_of(s_, tile_first);
    w.segment = cluster() - first_cluster;
    w.segments = owner_of(s_, tile_end - 1) - first_cluster + 1;
    w.counter = tile * kClusterSize + int32_t(cta_rank);
    stream_k_position_ = tile_end;
    return true;
  }

 private:
  // Stream-K: cluster c's range of the I = stream_k_tiles * k_blocks iterations (I < 2^31, kept so
  // by the host) starts at floor(c I / C). In 32 bits, with I = q C + r: c q + floor(c r / C).
  // (A 64-bit division is a called routine whose saved registers go to local memory.)
  __device__ static int32_t range_start(const ScheduleParams& s_, int32_t c) {
    const int32_t iterations = s_.stream_k_tiles * s_.k_blocks, count = clusters();
    return c * (iterations / count) + c * (iterations % count) / count;
  }
  // The cluster whose range holds iteration x: the largest c < C with range_start(c) <= x. A float
  // estimate starts the search next to it (a step or two away; more only with fewer iterations
  // than clusters, where ranges are empty); the walks make it exact.
  __device__ static int32_t owner_of(const ScheduleParams& s_, int32_t x) {
    const int32_t iterations = s_.stream_k_tiles * s_.k_blocks, count = clusters();
    int32_t c = min(count - 1, int32_t(float(x) * float(count) / float(iterations)));
    while (c + 1 < count && range_start(s_, c + 1) <= x) ++c;
    while (c > 0 && range_start(s_, c) > x) --c;
    return c;
  }

  __device__ static int32_t cluster() { return int32_t(blockIdx.x) / kClusterSize; }
  __device__ static int32_t clusters() { return int32_t(gridDim.x) / kClusterSize; }

  // Cluster tile `index` (in raster order) -> this CTA's output tile.
  __device__ static void place(const ScheduleParams& s_, WorkUnit& w, int32_t index, uint32_t cta_rank) {
    const int32_t per_batch = s_.cluster_rows * s_.cluster_cols;
    w.batch = index / per_batch;
    const int32_t rest = index % per_batch;
    const int32_t per_group = s_.group_m * s_.cluster_cols;
    const int32_t first_row = (rest / per_group) * s_.group_m;
    const int32_t group_height = min(s_.cluster_rows - first_row, s_.group_m);
    const int32_t in_group = rest % per_group;
    w.tile_m = s_.first_tile_row + (first_row + in_group % group_height) * ClusterM + int32_t(cta_rank % ClusterM);
    w.tile_n = (in_group / group_height) * ClusterN + int32_t(cta_rank / ClusterM);
  }

  // Unique over the padded grid of cluster tiles (a cluster's CTAs may overhang the edge).
  __device__ static int32_t cta_tile_index(const ScheduleParams& s_, const WorkUnit& w, uint32_t cta_rank) {
    const int32_t cluster_row = (w.tile_m - s_.first_tile_row) / ClusterM, cluster_col = w.tile_n / ClusterN;
    return ((w.batch * s_.cluster_rows + cluster_row) * s_.cluster_cols + cluster_col) * kClusterSize +
           int32_t(cta_rank);
  }

  int32_t next_;
  int32_t stream_k_position_ = 0;
  int32_t stream_k_end_ = 0;
};

}  // namespace coda::mainloop

// coda/gemm/scheduler.cuh: the persistent tile scheduler.
//
// Work is a list of units: (batch, output tile, K split). Cluster c of a persistent grid of C
// clusters takes units c, c + C, c + 2C, ... Tiles are visited in groups of `group_m` cluster
// rows, walking down M inside a group, so the units in flight at once share a few B panels and
// a few A panels in L2. The splits of one tile are adjacent units, and a split only ever waits
// for splits of smaller unit index, which (with every CTA resident) cannot deadlock.
#pragma once

#include <cstdint>

namespace coda::mainloop {

struct ScheduleParams {
  int32_t tiles_m;         // output tiles along M
  int32_t tiles_n;         // and along N
  int32_t cluster_rows;    // ceil(tiles_m / ClusterM)
  int32_t cluster_cols;    // ceil(tiles_n / ClusterN)
  int32_t batches;
  int32_t splits;          // K splits per tile (1: no split-K)
  int32_t k_blocks;        // ceil(K / 64)
  int32_t group_m;         // raster group height, in cluster rows
  int32_t units;           // cluster_rows * cluster_cols * batches * splits
};

struct WorkUnit {
  int32_t tile_m;
  int32_t tile_n;
  int32_t batch;
  int32_t split;
  int32_t k_block_begin;
  int32_t k_block_end;
  int32_t tile_index;  // batch-major linear index of the output tile, for split-K bookkeeping
};

template <int ClusterM, int ClusterN>
__device__ __forceinline__ WorkUnit work_unit(const ScheduleParams& s, int32_t unit, uint32_t cta_rank) {
  WorkUnit w;
  w.split = unit % s.splits;
  int32_t rest = unit / s.splits;
  const int32_t per_batch = s.cluster_rows * s.cluster_cols;
  w.batch = rest / per_batch;
  rest %= per_batch;

  const int32_t per_group = s.group_m * s.cluster_cols;
  const int32_t first_row = (rest / per_group) * s.group_m;
  const int32_t group_height = min(s.cluster_rows - first_row, s.group_m);
  const int32_t in_group = rest % per_group;
  const int32_t cluster_row = first_row + in_group % group_height;
  const int32_t cluster_col = in_group / group_height;

  w.tile_m = cluster_row * ClusterM + int32_t(cta_rank % ClusterM);
  w.tile_n = cluster_col * ClusterN + int32_t(cta_rank / ClusterM);
  w.tile_index = (w.batch * s.tiles_m + w.tile_m) * s.tiles_n + w.tile_n;
  // Splits share the K blocks as evenly as integers allow; each gets at least one.
  w.k_block_begin = int32_t(int64_t(s.k_blocks) * w.split / s.splits);
  w.k_block_end = int32_t(int64_t(s.k_blocks) * (w.split + 1) / s.splits);
  return w;
}

}  // namespace coda::mainloop

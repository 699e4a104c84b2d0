// The mainloop's planner: validate the operands, pick the tile configuration (or take the one
// asked for), split K, size the grid and the workspace, encode the TMA tensor maps.
#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <ostream>
#include <string>

#include "coda/core/device.hpp"
#include "coda/core/validate.hpp"
#include "coda/mainloop/tiles.hpp"
#include "coda/sm90/tensor_map.hpp"
#include "mainloop/launch.hpp"
#include "mainloop/planner.hpp"

namespace coda {

std::ostream& operator<<(std::ostream& out, GemmTile tile) { return out << name(tile); }

std::string_view name(GemmTile tile) {
  static const auto names = [] {
    std::array<std::string, mainloop::ShippedTiles::kSize + 1> out;
    out[0] = "automatic";
    [&]<class... Tiles>(mainloop::TileList<Tiles...>) {
      ((out[std::size_t(Tiles::kId)] = Tiles::name()), ...);
    }(mainloop::ShippedTiles{});
    return out;
  }();
  return std::size_t(tile) < names.size() ? std::string_view(names[std::size_t(tile)]) : "unknown";
}

namespace mainloop {
namespace {

static_assert(int(GemmTile::swap_m128n64) == ShippedTiles::kSize,
              "every GemmTile but automatic has a row in ShippedTiles (tiles.hpp)");

// What the planner needs to know of a tile, from its row of ShippedTiles.
struct TileFacts {
  int block_m, block_n, cluster_m, cluster_n;  // the kernel's (a swapped tile's rows are C's columns)
  int stages;                                  // operand ring slots
  double relative_speed;  // per-tile throughput relative to the largest tiles (a planning estimate)
  bool swap_ab;           // computes C^T = B A^T (tiles.hpp)
  int cluster_size() const { return cluster_m * cluster_n; }
};

TileFacts facts(GemmTile t) {
  return with_tile(
      t,
      []<class Tile>() {
        using C = typename Tile::Config;
        return TileFacts{C::kBlockM, C::kBlockN,           C::kClusterM, C::kClusterN,
                         C::kStages, Tile::kRelativeSpeed, C::kSwapAB};
      },
      []() -> TileFacts { throw InternalError("coda::mainloop", "no facts for the automatic tile"); });
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

// The problem the kernel of `f` computes: C's, or C^T's on a swapped tile.
Problem kernel_problem(Problem p, const TileFacts& f) {
  if (f.swap_ab) std::swap(p.m, p.n);
  return p;
}

// The swapped tiles (tiles.hpp) take products of up to this many rows of A (tokens): there the
// weight's bytes bound the product. At M = 65-128 (two token tiles of 64, or one of swap_m128n64)
// they measured faster than the unswapped tiles on 6 of the decode set's 8 shapes (out 4096 x
// 4096: 0.945 of cuBLAS against 0.592; H100, docs/performance.md).
constexpr int64_t kSwappedMaxM = 128;
// swap_m128n64 (128 tokens a tile) competes from this M: below, its token box is mostly empty.
constexpr int64_t kWideTokenTileMinM = 65;

// A model of a swapped plan's time (H100, `coda bench gemm --set decode`): each work unit (a weight
// tile of block_m rows, a token tile, a K segment) streams its weight bytes at
//   min(its CTA's rate, the copy bandwidth shared by the units running at once),
// where a CTA keeps its ring's weight bytes in flight for kLoadedLatency (Little's law: 32 whole
// 128 x 4096 tiles of swap_m64n128, six 16 KB slots, reached 1.9 TB/s, 60 GB/s a CTA) and the units
// of different token tiles share the weight's DRAM bytes through L2, a fraction kL2Reuse of the
// time (fitted: 128 x 28672 x 4096 on swap_m64n64, 896 units, took 100 us, 0.67; the model then
// gives 100.5 there, and 43.0 for 128 x 12288 x 4096, measured 43.9). Units run in rounds of the
// resident CTAs (a persistent grid deals them out in order). A plan in K segments pays
// kSegmentsBase once (the counters' memset before the kernel, the arrivals) and per segment
// kSegmentCost plus kSegmentTokenCost a token of the tile (each segment's partial published, then
// read back by the last one). Fitted to split 2, 4, 8, 32 of swap_m64n64 (H100, the whole time less
// the streaming): 1 x 8 x 4096 5.3 + 1.1 s us, 16 x 256 x 7168 5 + 2.3 s, 128 x 128 x 4096 5 +
// 5.1 s. So K is split only where a CTA's stream of a long K is much slower than the copy
// bandwidth; every split of those three and of 1 x 4096 x 4096 measured slower than none. The
// model puts 12288 x 4096 on 96 CTAs of swap_m64n128 at 36 us (measured 37) and 28672 x 4096 in two
// rounds of it at 84 (measured 84).
constexpr double kLoadedLatency = 1.6e-6;  // s
constexpr double kCopyBandwidth = 2.8e12;  // bytes / s
constexpr double kL2Reuse = 0.67;
constexpr double kSegmentsBase = 5e-6;         // s
constexpr double kSegmentCost = 1.1e-6;        // s
constexpr double kSegmentTokenCost = 0.03e-6;  // s
// A plan split across the CTAs of a cluster (segments.cuh) pays no memset and no round trip
// through L2: each CTA but the first stores its partial into the first's shared memory, which
// waits for them. kClusterSplitCost a split.
constexpr double kClusterSplitCost = 0.3e-6;  // s

// CTAs of tile `t` that fit on the current device at once, in whole clusters of `cluster` CTAs (0:
// the configuration's).
int resident_in_clusters(GemmTile t, int cluster) {
  return with_tile(
      t, [&]<class Tile>() { return resident_ctas_for<Tile>(cluster); },
      []() -> int { throw InvalidArgument("coda::mainloop::resident_ctas", "argument 'tile': is automatic"); });
}

// Resident CTAs of tile `t` in whole clusters of `cluster` CTAs (0: the configuration's) that
// options.max_ctas allows (at least one cluster).
int allowed_ctas(GemmTile t, const GemmOptions& options, int cluster = 0) {
  const int ctas = resident_in_clusters(t, cluster);
  if (cluster <= 0) cluster = facts(t).cluster_size();
  return options.max_ctas > 0 ? std::max(cluster, std::min(ctas, options.max_ctas / cluster * cluster)) : ctas;
}

struct SwappedPlan {
  int split = 1;
  bool in_cluster = false;  // the splits are the CTAs of a cluster
  double seconds = 0;
  int64_t rounds = 1;  // of resident CTAs
  int64_t busy = 0;    // CTAs with work in the first round
};

// The time of `q` (the kernel's problem: weight rows x tokens) on swapped tile `f` in `split` K
// segments (in a cluster or through the workspace), over `ctas` resident CTAs.
SwappedPlan swapped_time(const Problem& q, const TileFacts& f, int64_t ctas, int split, bool in_cluster) {
  const int64_t weight_tiles = ceil_div(q.m, f.block_m) * q.batch;
  const int64_t token_tiles = ceil_div(q.n, f.block_n);
  const int64_t tokens = std::min<int64_t>(q.n, f.block_n);  // of a (full) token tile
  const double tile_bytes = double(f.block_m) * double(q.k) * double(size_of(q.input));
  const double per_cta = double(f.stages) * f.block_m * 128 / kLoadedLatency;
  const int64_t units = weight_tiles * token_tiles * split;
  // A round of `running` units: each streams its share of a weight tile at the rate above.
  auto round = [&](int64_t running) {
    const double shared = kCopyBandwidth * (1.0 + kL2Reuse * double(token_tiles - 1));
    return tile_bytes / double(split) / std::min(per_cta, shared / double(running));
  };
  double segments = 0;
  if (in_cluster) segments = kClusterSplitCost * double(split);
  else if (split > 1) segments = kSegmentsBase + double(split) * (kSegmentCost + kSegmentTokenCost * double(tokens));
  SwappedPlan out{split, in_cluster, segments, ceil_div(units, ctas), std::min(units, ctas)};
  out.seconds += double(units / ctas) * round(ctas) + (units % ctas ? round(units % ctas) : 0.0);
  return out;
}

// Whether swapped plan `x` beats `y`: faster by 3%, or as fast (within 3%) in fewer rounds, or in
// as many rounds over more CTAs (N = 8192, M <= 64, where the model gives both the copy
// bandwidth: 128 CTAs of swap_m64n64 0.87-1.05 of cuBLAS, 64 of swap_m64n128 0.79-1.01; H100. A
// cluster split of a few weight tiles, where the model gives whole tiles within 3%: out and down
// at H = 4096, M = 1, swap_m64n64 on 128 CTAs against 64, 13.0 -> 12.0 and 37.0 -> 31.8 us; H200).
bool swapped_plan_better(const SwappedPlan& x, const SwappedPlan& y) {
  if (x.seconds < y.seconds * 0.97) return true;
  if (x.seconds > y.seconds * 1.03) return false;
  return x.rounds < y.rounds || (x.rounds == y.rounds && x.busy > y.busy);
}

// The best split of C's problem `p` on swapped tile `t`: whole tiles, K split across the CTAs of a
// cluster (where options allow and the partials fit), or through the workspace (`workspace_split`).
SwappedPlan swapped_plan(const Problem& p, GemmTile t, const GemmOptions& options, bool workspace_split) {
  const TileFacts f = facts(t);
  const Problem q = kernel_problem(p, f);
  const int64_t tiles = ceil_div(q.m, f.block_m) * ceil_div(q.n, f.block_n) * q.batch;
  const int64_t k_blocks = ceil_div(q.k, 64);
  SwappedPlan best = swapped_time(q, f, allowed_ctas(t, options), 1, false);
  auto consider = [&](const SwappedPlan& next) {
    if (swapped_plan_better(next, best)) best = next;
  };
  for (int split = 2; options.split_k_in_cluster && split <= kMaxClusterSplits && split <= k_blocks; ++split) {
    const int ctas = allowed_ctas(t, options, split);
    if (cluster_split_fits(split, q.n, f.block_n) && tiles * split <= ctas)
      consider(swapped_time(q, f, ctas, split, true));
  }
  const int ctas = allowed_ctas(t, options);
  for (int split = 2; workspace_split && split <= std::min<int64_t>(64, k_blocks / 2) && tiles * split <= ctas;
       split *= 2)
    consider(swapped_time(q, f, ctas, split, false));
  return best;
}

// Estimated time in units of one large tile's mainloop: whole "waves" of resident CTAs, each
// tile costing its area over its relative speed.
double estimated_cost(const Problem& p, GemmTile t, int ctas) {
  const TileFacts f = facts(t);
  const int64_t tiles = ceil_div(p.m, f.block_m) * ceil_div(p.n, f.block_n) * p.batch;
  const double waves = std::ceil(double(tiles) / ctas);
  return waves * double(f.block_m * f.block_n) / (128.0 * 256.0) / f.relative_speed;
}

// The stream-K tail deals tiles * k_blocks iterations to C clusters as contiguous ranges
// [c I / C, (c + 1) I / C); a tile has one segment per range it meets (see scheduler.cuh).
int max_segments_per_tile(int64_t tiles, int64_t k_blocks, int64_t clusters) {
  const int64_t iterations = tiles * k_blocks;
  auto owner = [&](int64_t x) { return ((x + 1) * clusters - 1) / iterations; };
  int64_t most = 1;
  for (int64_t t = 0; t < tiles; ++t)
    most = std::max(most, owner(t * k_blocks + k_blocks - 1) - owner(t * k_blocks) + 1);
  return int(most);
}

// Workspace: the arrival counters (one per CTA tile in several segments), then the partials.
std::size_t counter_bytes(int64_t counters) { return std::size_t(round_up(counters * 4, 256)); }
std::size_t workspace_bytes_for(const TileFacts& f, int64_t counters, int64_t slots_per_counter) {
  if (counters == 0) return 0;
  return counter_bytes(counters) +
         std::size_t(counters * slots_per_counter) * std::size_t(f.block_m) * std::size_t(f.block_n) * 4;
}

// Operand tensor map: the contiguous dimension first. K-major operands load boxes of 64 K x
// `rows_per_load` rows; MN-major ones boxes of 64 M/N x 64 K.
CUtensorMap operand_map(const GemmOperand& op, uint32_t rows_per_load, const char* argument) {
  const TensorView& v = op.view;
  const uint32_t box_outer = op.major == Major::k ? rows_per_load : 64;
  return sm90::make_tensor_map_3d(v.data, v.dtype, {v.cols(), v.rows(), v.batch()}, {v.ld(), v.batch_stride()},
                                  {64, box_outer}, argument);
}

}  // namespace

Problem validate_operands(const GemmOperand& a, const GemmOperand& b, const GemmOptions& options,
                          const char* function) {
  ArgumentCheck check(function);
  check.not_null("a", a.view.data)
      .not_null("b", b.view.data)
      .rank_in("a", a.view, 2, 3)
      .rank_in("b", b.view, 2, 3)
      .dtype_in("a", a.view.dtype, {DType::bf16, DType::f16})
      .dtype_in("b", b.view.dtype, {DType::bf16, DType::f16})
      .require(a.view.dtype == b.view.dtype, "b", "dtype ", name(b.view.dtype), " must match a's dtype ",
               name(a.view.dtype));
  check.throw_if_error();

  Problem p{};
  const bool a_k_major = a.major == Major::k, b_k_major = b.major == Major::k;
  p.m = a_k_major ? a.view.rows() : a.view.cols();
  p.k = a_k_major ? a.view.cols() : a.view.rows();
  p.n = b_k_major ? b.view.rows() : b.view.cols();
  p.batch = a.view.batch();
  p.input = a.view.dtype;
  const int64_t b_k = b_k_major ? b.view.cols() : b.view.rows();
  const char* b_k_dim = b_k_major ? "columns" : "rows";

  check.positive("a", p.m, "M")
      .positive("a", p.k, "K")
      .positive("b", p.n, "N")
      .require(b_k == p.k, "b", "shape ", b.view, " (", name(b.major), "): its ", b_k_dim, " are K = ", b_k,
               " but a has K = ", p.k)
      .require(b.view.batch() == p.batch, "b", "batch ", b.view.batch(), " must equal a's batch ", p.batch)
      .require(p.m <= INT32_MAX && p.n <= INT32_MAX && p.k <= INT32_MAX && p.batch <= INT32_MAX, "a",
               "M, N, K and the batch must each be below 2^31")
      .inner_contiguous("a", a.view)
      .inner_contiguous("b", b.view)
      .tma_aligned("a", a.view)
      .tma_aligned("b", b.view)
      .require(options.split_k >= 0, "options.split_k", "is ", options.split_k, " but must be >= 0")
      .require(options.raster_group >= 0, "options.raster_group", "is ", options.raster_group, " but must be >= 0")
      .require(options.max_ctas >= 0, "options.max_ctas", "is ", options.max_ctas, " but must be >= 0")
      .require(options.workspace != nullptr || options.workspace_bytes == 0, "options.workspace",
               "is null but workspace_bytes is not 0");
  check.throw_if_error();
  return p;
}

void validate_output(const TensorView& c, Problem& p, const char* function) {
  ArgumentCheck check(function);
  check.not_null("c", c.data)
      .rank_in("c", c, 2, 3)
      .dtype_in("c", c.dtype, {DType::bf16, DType::f16, DType::f32})
      .dim_equals("c", c, -2, p.m, "M (rows)", "c must have one row per row of A*B^T")
      .dim_equals("c", c, -1, p.n, "N (columns)", "c must have one column per column of A*B^T")
      .require(c.batch() == p.batch, "a", "batch ", p.batch, " must equal c's batch ", c.batch())
      .inner_contiguous("c", c)
      .tma_aligned("c", c);
  check.throw_if_error();
  p.output = c.dtype;
}

Plan make_plan(const Problem& p, const GemmOptions& options, const char* function) {
  Plan plan;
  GemmPlan& out = plan.public_plan;
  out.tile = options.tile;
  SwappedPlan chosen;  // the split the swapped tile choice found best
  bool swapped_chosen = false;
  const bool workspace_split = options.workspace != nullptr && options.split_k == 0;
  if (out.tile == GemmTile::automatic) {
    if (p.m <= kSwappedMaxM) {
      // Few tokens: swapped, a CTA's MMAs cover its weight rows at any M (m64n256 measured 0.63-0.92
      // of cuBLAS here): the tile and split the bandwidth model above prefers, the larger tile when
      // it cannot tell them apart. From 129 tokens the planner's estimate below.
      // A split asked for (split_k > 1) is planned below, on the tile chosen whole.
      GemmOptions choice = options;
      if (options.split_k != 0) choice.split_k_in_cluster = false;
      for (GemmTile t : {GemmTile::swap_m64n128, GemmTile::swap_m64n64, GemmTile::swap_m128n64}) {
        if (t == GemmTile::swap_m128n64 && p.m < kWideTokenTileMinM) continue;
        const SwappedPlan next = swapped_plan(p, t, choice, workspace_split);
        if (out.tile == GemmTile::automatic || swapped_plan_better(next, chosen)) {
          out.tile = t;
          chosen = next;
        }
      }
      swapped_chosen = true;
    } else {
      // Not the ping-pong tile: it reads 1.5x the operand bytes per MMA from L2, which an H200 at
      // its power limit pays for in clock (steady state, the Transformer set: m128n256 everywhere
      // 1.004 of cuBLAS, ping-pong where K <= 4096 0.994, everywhere 0.959; docs/performance.md).
      double best = 0;
      for (GemmTile t : {GemmTile::m128n256, GemmTile::m256n128, GemmTile::m128n128}) {
        const double cost = estimated_cost(p, t, resident_ctas(t));
        if (out.tile == GemmTile::automatic || cost < best * 0.999) {
          out.tile = t;
          best = cost;
        }
      }
    }
  }
  const TileFacts f = facts(out.tile);
  const Problem q = kernel_problem(p, f);
  int cluster = f.cluster_size();
  int64_t clusters = allowed_ctas(out.tile, options) / cluster;
  out.output_tiles = ceil_div(q.m, f.block_m) * ceil_div(q.n, f.block_n) * q.batch;
  plan.cluster_tiles =
      ceil_div(ceil_div(q.m, f.block_m), f.cluster_m) * ceil_div(ceil_div(q.n, f.block_n), f.cluster_n) * q.batch;
  const int64_t k_blocks = ceil_div(q.k, 64);
  const bool has_workspace = options.workspace != nullptr;

  if (options.split_k > 1) {
    ArgumentCheck check(function);
    check
        .require(options.split_k <= k_blocks, "options.split_k", "is ", options.split_k, " but K = ", p.k, " has only ",
                 k_blocks, " blocks of 64")
        .require(options.split_k * k_blocks < INT32_MAX, "options.split_k", "is ", options.split_k,
                 ": splits x K blocks (", k_blocks, ") must stay below 2^31");
    check.throw_if_error();
    out.split_k = options.split_k;
    // Across the CTAs of a cluster where the partials fit and a cluster of that many is resident.
    out.split_k_in_cluster = f.swap_ab && options.split_k_in_cluster &&
                             cluster_split_fits(options.split_k, q.n, f.block_n) &&
                             allowed_ctas(out.tile, options, options.split_k) >= options.split_k;
  } else if (options.split_k == 0 && f.swap_ab) {
    // The heuristic's choice already weighed the splits; a forced swapped tile's not.
    const SwappedPlan best = swapped_chosen ? chosen : swapped_plan(p, out.tile, options, workspace_split);
    out.split_k = best.split;
    out.split_k_in_cluster = best.in_cluster;
  } else if (options.split_k == 0 && has_workspace && plan.cluster_tiles * 2 <= clusters) {
    // Few tiles leave SMs idle: split K, at most 4 ways with at least 8 blocks of 64 each (on an
    // H200, decode shapes ran fastest at 4 splits; 8 and 16 were slower).
    out.split_k = int(std::max<int64_t>(1, std::min<int64_t>({clusters / plan.cluster_tiles, k_blocks / 8, 4})));
  }
  if (out.split_k == 1 && options.stream_k && has_workspace && plan.cluster_tiles > clusters && k_blocks >= 8 &&
      clusters * k_blocks < INT32_MAX) {  // the device counts stream-K iterations in 32 bits
    // The last, partial wave would leave (1 - tail / clusters) of the SMs idle: share it out.
    const int64_t tail = plan.cluster_tiles % clusters;
    if (tail > 0 && tail * 20 < clusters * 19) {
      out.stream_k_tiles = int(tail);
      plan.max_segments = max_segments_per_tile(tail, k_blocks, clusters);
    }
  }
  if (out.split_k_in_cluster) {
    cluster = out.split_k;  // the launch's clusters: one tile's segments each
    clusters = allowed_ctas(out.tile, options, cluster) / cluster;
  } else if (out.split_k > 1) {
    plan.counters = plan.cluster_tiles * cluster;
    plan.max_segments = out.split_k;
  } else if (out.stream_k_tiles > 0) {
    plan.counters = int64_t(out.stream_k_tiles) * cluster;
  }
  out.workspace_bytes = workspace_bytes_for(f, plan.counters, plan.max_segments);
  if (out.workspace_bytes > options.workspace_bytes) {
    // An explicit split must get its workspace; the automatic plans fall back to whole tiles
    // (the documented behaviour of a workspace smaller than the plan: gemm.hpp).
    ArgumentCheck check(function);
    check.require(options.split_k <= 1 || out.split_k_in_cluster, "options.workspace", "holds ",
                  options.workspace_bytes, " bytes but split-K x", out.split_k, " needs ", out.workspace_bytes,
                  " (see coda::gemm_workspace_bytes)");
    check.throw_if_error();
    out.split_k = 1;
    out.stream_k_tiles = 0;
    plan.counters = 0;
    plan.max_segments = 1;
    out.workspace_bytes = 0;
  }
  // Clusters with work: one a tile, or one a unit of split-K through the workspace.
  const int64_t work_clusters =
      out.split_k > 1 && !out.split_k_in_cluster ? plan.cluster_tiles * out.split_k : plan.cluster_tiles;
  out.ctas = int(std::min<int64_t>(work_clusters, clusters) * cluster);
  return plan;
}

LaunchPlan build_launch(const GemmOperand& a, const GemmOperand& b, const Problem& p, const Plan& plan,
                        const GemmOptions& options) {
  LaunchPlan launch;
  launch.summary = plan.public_plan;
  launch.m = p.m;
  launch.n = p.n;
  launch.k = p.k;
  launch.batch = p.batch;
  launch.input = p.input;
  launch.a_major = a.major;
  launch.b_major = b.major;
  const TileFacts f = facts(plan.public_plan.tile);
  const Problem q = kernel_problem(p, f);
  launch.swap_ab = f.swap_ab;
  const GemmOperand& kernel_a = f.swap_ab ? b : a;  // C^T = B A^T
  const GemmOperand& kernel_b = f.swap_ab ? a : b;
  launch.a = operand_map(kernel_a, uint32_t(f.block_m / f.cluster_n), f.swap_ab ? "b" : "a");
  // A K-major kernel B of fewer rows than the tile (a swapped tile's M < 64 tokens, an unswapped
  // N below BlockN: a router's experts) loads in one box of them rounded up to 8, where B is not
  // multicast: a box mostly past the tensor's last row costs TMA its boundary handling. 1 x 4096 x
  // 4096 on swap_m64n64 took 23.0 us with a 64-row box at M = 1 against 15.5 at M = 64, and 14.8
  // with an 8-row box (H100); 16384 x 8 x 4096 on m128n128 55.5 us with a 128-row box, 35.8 with
  // an 8-row one (H200, docs/performance.md).
  launch.token_box_rows = int32_t(f.block_n / f.cluster_m);
  if (f.cluster_m == 1 && kernel_b.major == Major::k && q.n < f.block_n)
    launch.token_box_rows = int32_t(round_up(q.n, 8));
  launch.b = operand_map(kernel_b, uint32_t(launch.token_box_rows), f.swap_ab ? "a" : "b");

  ScheduleParams& s = launch.schedule;
  s.tiles_m = int32_t(ceil_div(q.m, f.block_m));
  s.tiles_n = int32_t(ceil_div(q.n, f.block_n));
  s.cluster_rows = int32_t(ceil_div(s.tiles_m, f.cluster_m));
  s.cluster_cols = int32_t(ceil_div(s.tiles_n, f.cluster_n));
  s.batches = int32_t(p.batch);
  s.cluster_tiles = int32_t(plan.cluster_tiles);
  s.k_blocks = int32_t(ceil_div(p.k, 64));
  s.group_m = options.raster_group > 0 ? options.raster_group : 8;
  s.splits = plan.public_plan.split_k;
  s.splits_in_cluster = plan.public_plan.split_k_in_cluster ? 1 : 0;
  s.stream_k_tiles = plan.public_plan.stream_k_tiles;
  s.max_segments = plan.max_segments;
  if (plan.counters > 0) {
    auto* base = static_cast<uint8_t*>(options.workspace);
    launch.partials.arrivals = reinterpret_cast<int32_t*>(base);
    launch.partials.partials = reinterpret_cast<float*>(base + counter_bytes(plan.counters));
    launch.counter_bytes = std::size_t(plan.counters) * sizeof(int32_t);
  }
  return launch;
}

LaunchPlan plan_launch(const GemmOperand& a, const GemmOperand& b, const GemmOptions& options, const char* function) {
  const Problem p = validate_operands(a, b, options, function);
  require_hopper(function);
  return build_launch(a, b, p, make_plan(p, options, function), options);
}

LaunchPlan over_rows(const LaunchPlan& whole, TileRows rows, const char* function) {
  LaunchPlan plan = whole;
  const TileFacts f = facts(plan.summary.tile);
  ScheduleParams& s = plan.schedule;
  const int32_t first = s.first_tile_row + rows.first;
  const int32_t count = rows.count < 0 ? s.tiles_m - rows.first : rows.count;
  const bool to_last = rows.first + count == s.tiles_m;
  ArgumentCheck check(function);
  check
      .require(s.splits == 1 && s.stream_k_tiles == 0 && s.batches == 1, "plan",
               "computes tiles in several K segments or batches: only whole tiles of one batch split by rows")
      .require(!plan.swap_ab, "plan", "is for a swapped tile, whose tile rows are C's columns")
      .require(rows.first >= 0 && count >= 1 && rows.first + count <= s.tiles_m, "rows", "[", rows.first, ", ",
               rows.first + count, ") is not inside the plan's ", s.tiles_m, " tile rows")
      .require(first % f.cluster_m == 0 && (to_last || count % f.cluster_m == 0), "rows", "[", rows.first, ", ",
               rows.first + count, ") does not start and end at whole rows of ", f.cluster_m, "-tile clusters");
  check.throw_if_error();
  s.first_tile_row = first;
  s.tiles_m = count;
  s.cluster_rows = int32_t(ceil_div(count, f.cluster_m));
  s.cluster_tiles = s.cluster_rows * s.cluster_cols;
  plan.summary.output_tiles = int64_t(count) * s.tiles_n;
  plan.summary.ctas = std::min(plan.summary.ctas, s.cluster_tiles * f.cluster_size());
  return plan;
}

int resident_ctas(GemmTile tile) { return resident_in_clusters(tile, 0); }

}  // namespace mainloop
}  // namespace coda

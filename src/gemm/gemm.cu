// The host side of coda::gemm: validate, plan (configuration, split-K, grid), encode the TMA
// tensor maps, launch.
#include "coda/gemm/gemm.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cmath>

#include "coda/arch/sm90/tensor_map.hpp"
#include "coda/core/device.hpp"
#include "coda/core/validate.hpp"
#include "coda/gemm/companion.hpp"
#include "coda/gemm/launch.cuh"
#include "gemm/launch.hpp"

namespace coda {

std::string_view name(GemmTile tile) {
  switch (tile) {
    case GemmTile::automatic: return "automatic";
    case GemmTile::m128n256: return "m128n256";
    case GemmTile::m256n128: return "m256n128";
    case GemmTile::m128n128: return "m128n128";
    case GemmTile::m64n256: return "m64n256";
    case GemmTile::pingpong_m128n128: return "pingpong_m128n128";
  }
  return "unknown";
}

namespace {

using detail::concat;

struct Problem {
  int64_t m, n, k, batch;
  DType input, output;
};

struct TileFacts {
  int block_m, block_n, cluster_m, cluster_n;
  double relative_speed;  // per-tile throughput relative to the largest tiles (a planning estimate)
  int cluster_size() const { return cluster_m * cluster_n; }
};

TileFacts facts(GemmTile t) {
  switch (t) {
    case GemmTile::m128n256: return {128, 256, 2, 1, 1.0};
    case GemmTile::m256n128: return {256, 128, 1, 2, 1.0};
    case GemmTile::m128n128: return {128, 128, 1, 1, 0.9};
    case GemmTile::m64n256: return {64, 256, 1, 1, 0.8};
    case GemmTile::pingpong_m128n128: return {128, 128, 2, 2, 0.95};
    case GemmTile::automatic: break;
  }
  throw InternalError("coda::gemm: no facts for the automatic tile");
}

int resident_ctas(GemmTile t) {
  switch (t) {
    case GemmTile::m128n256: return mainloop::resident_ctas_m128n256()();
    case GemmTile::m256n128: return mainloop::resident_ctas_m256n128()();
    case GemmTile::m128n128: return mainloop::resident_ctas_m128n128()();
    case GemmTile::m64n256: return mainloop::resident_ctas_m64n256()();
    case GemmTile::pingpong_m128n128: return mainloop::resident_ctas_pingpong_m128n128()();
    case GemmTile::automatic: break;
  }
  throw InternalError("coda::gemm: no kernel for the automatic tile");
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A and B, the problem they define, and the options: the rules every launch shares.
Problem validate_operands(const GemmOperand& a, const GemmOperand& b, const GemmOptions& options,
                          const char* function) {
  ArgumentCheck check(function);
  check.not_null("a", a.view.data)
      .not_null("b", b.view.data)
      .rank_in("a", a.view, 2, 3)
      .rank_in("b", b.view, 2, 3)
      .dtype_in("a", a.view.dtype, {DType::bf16, DType::f16})
      .dtype_in("b", b.view.dtype, {DType::bf16, DType::f16})
      .require(a.view.dtype == b.view.dtype, "b",
               concat("dtype ", name(b.view.dtype), " must match a's dtype ", name(a.view.dtype)));
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

  check.positive("a", p.m, "M").positive("a", p.k, "K").positive("b", p.n, "N")
      .require(b_k == p.k, "b",
               concat("shape ", b.view.describe(), " (", name(b.major), "): its ", b_k_dim, " are K = ", b_k,
                      " but a has K = ", p.k))
      .require(b.view.batch() == p.batch, "b", concat("batch ", b.view.batch(), " must equal a's batch ", p.batch))
      .require(p.m <= INT32_MAX && p.n <= INT32_MAX && p.k <= INT32_MAX && p.batch <= INT32_MAX, "a",
               "M, N, K and the batch must each be below 2^31")
      .inner_contiguous("a", a.view)
      .inner_contiguous("b", b.view)
      .tma_aligned("a", a.view)
      .tma_aligned("b", b.view)
      .require(options.split_k >= 0, "options.split_k", concat("is ", options.split_k, " but must be >= 0"))
      .require(options.raster_group >= 0, "options.raster_group",
               concat("is ", options.raster_group, " but must be >= 0"))
      .require(options.max_ctas >= 0, "options.max_ctas", concat("is ", options.max_ctas, " but must be >= 0"))
      .require(options.workspace != nullptr || options.workspace_bytes == 0, "options.workspace",
               "is null but workspace_bytes is not 0");
  check.throw_if_error();
  return p;
}

// coda::gemm's C: M x N (x batch), a type the store epilogue writes.
void validate_output(const TensorView& c, Problem& p) {
  ArgumentCheck check("coda::gemm");
  check.not_null("c", c.data)
      .rank_in("c", c, 2, 3)
      .dtype_in("c", c.dtype, {DType::bf16, DType::f16, DType::f32})
      .dim_equals("c", c, -2, p.m, "M (rows)", "c must have one row per row of A*B^T")
      .dim_equals("c", c, -1, p.n, "N (columns)", "c must have one column per column of A*B^T")
      .require(c.batch() == p.batch, "a", concat("batch ", p.batch, " must equal c's batch ", c.batch()))
      .inner_contiguous("c", c)
      .tma_aligned("c", c);
  check.throw_if_error();
  p.output = c.dtype;
}

// `function` names the caller: coda::gemm or the fused op that planned through plan_launch.
void require_hopper(const char* function) {
  std::string why;
  const auto devices = list_devices(&why);
  if (devices.empty()) throw Unsupported(concat(function, ": no CUDA device (", why, ")"));
  const DeviceInfo& d = current_device();
  if (!d.is_hopper())
    throw Unsupported(concat(function, ": device ", d.index, " is ", d.name, " (sm_", d.major, d.minor,
                             "); coda's kernels are built for sm_90a (H100/H200)"));
}

// Estimated time in units of one large tile's mainloop: whole "waves" of resident CTAs, each
// tile costing its area over its relative speed.
double estimated_cost(const Problem& p, GemmTile t, int ctas) {
  const TileFacts f = facts(t);
  const int64_t tiles = ceil_div(p.m, f.block_m) * ceil_div(p.n, f.block_n) * p.batch;
  const double waves = std::ceil(double(tiles) / ctas);
  return waves * double(f.block_m * f.block_n) / (128.0 * 256.0) / f.relative_speed;
}

int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

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
std::size_t workspace_bytes_for(const TileFacts& f, int64_t counters, int64_t slots_per_counter) {
  if (counters == 0) return 0;
  return std::size_t(round_up(counters * 4, 256)) + std::size_t(counters * slots_per_counter) * std::size_t(f.block_m) *
                                                        std::size_t(f.block_n) * 4;
}

struct Plan {
  GemmPlan public_plan;
  int64_t cluster_tiles = 0;
  int max_segments = 1;
  int64_t counters = 0;
};

Plan make_plan(const Problem& p, const GemmOptions& options) {
  Plan plan;
  GemmPlan& out = plan.public_plan;
  out.tile = options.tile;
  if (out.tile == GemmTile::automatic) {
    if (p.m <= 64) {
      out.tile = GemmTile::m64n256;
    } else {
      // Not the ping-pong tile: it reads 1.5x the operand bytes per MMA from L2, which an H200 at
      // its power limit pays for in clock. Steady state (100 ms warm-up, bench/timing.hpp), the
      // Transformer set: m128n256 everywhere 1.004 of cuBLAS, ping-pong where K <= 4096 0.994-0.995,
      // ping-pong everywhere 0.959 (bench/RESULTS.md, fourteenth session). Its 1.03-1.09x lead of
      // the thirteenth session came from timing each piece right after lighter work.
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
  const int cluster = f.cluster_size();
  int ctas = resident_ctas(out.tile);
  if (options.max_ctas > 0) ctas = std::max(cluster, std::min(ctas, options.max_ctas / cluster * cluster));
  const int64_t clusters = ctas / cluster;
  out.output_tiles = ceil_div(p.m, f.block_m) * ceil_div(p.n, f.block_n) * p.batch;
  plan.cluster_tiles =
      ceil_div(ceil_div(p.m, f.block_m), f.cluster_m) * ceil_div(ceil_div(p.n, f.block_n), f.cluster_n) * p.batch;
  const int64_t k_blocks = ceil_div(p.k, 64);
  const bool has_workspace = options.workspace != nullptr;

  if (options.split_k > 1) {
    ArgumentCheck check("coda::gemm");
    check.require(options.split_k <= k_blocks, "options.split_k",
                  concat("is ", options.split_k, " but K = ", p.k, " has only ", k_blocks, " blocks of 64"))
        .require(options.split_k * k_blocks < INT32_MAX, "options.split_k",
                 concat("is ", options.split_k, ": splits x K blocks (", k_blocks, ") must stay below 2^31"));
    check.throw_if_error();
    out.split_k = options.split_k;
  } else if (options.split_k == 0 && has_workspace && plan.cluster_tiles * 2 <= clusters) {
    // Few tiles leave SMs idle: split K, at most 4 ways with at least 8 blocks of 64 each (on an
    // H200, decode shapes ran fastest at 4 splits; 8 and 16 were slower: bench/RESULTS.md).
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
  if (out.split_k > 1) {
    plan.counters = plan.cluster_tiles * cluster;
    plan.max_segments = out.split_k;
  } else if (out.stream_k_tiles > 0) {
    plan.counters = int64_t(out.stream_k_tiles) * cluster;
  }
  out.workspace_bytes = workspace_bytes_for(f, plan.counters, plan.max_segments);
  if (out.workspace_bytes > options.workspace_bytes) {
    // An explicit split must get its workspace; the automatic plans fall back to whole tiles.
    ArgumentCheck check("coda::gemm");
    check.require(options.split_k <= 1, "options.workspace",
                  concat("holds ", options.workspace_bytes, " bytes but split-K x", out.split_k, " needs ",
                         out.workspace_bytes, " (see coda::gemm_workspace_bytes)"));
    check.throw_if_error();
    out.split_k = 1;
    out.stream_k_tiles = 0;
    plan.counters = 0;
    plan.max_segments = 1;
    out.workspace_bytes = 0;
  }
  const int64_t work_clusters = out.split_k > 1 ? plan.cluster_tiles * out.split_k : plan.cluster_tiles;
  out.ctas = int(std::min<int64_t>(work_clusters, clusters) * cluster);
  return plan;
}

mainloop::Launcher launcher(GemmTile t, DType input, Major a, Major b) {
  switch (t) {
    case GemmTile::m128n256: return mainloop::launcher_m128n256(input, a, b);
    case GemmTile::m256n128: return mainloop::launcher_m256n128(input, a, b);
    case GemmTile::m128n128: return mainloop::launcher_m128n128(input, a, b);
    case GemmTile::m64n256: return mainloop::launcher_m64n256(input, a, b);
    case GemmTile::pingpong_m128n128: return mainloop::launcher_pingpong_m128n128(input, a, b);
    case GemmTile::automatic: break;
  }
  throw InternalError("coda::gemm: no kernel for the automatic tile");
}

// Operand tensor map: the contiguous dimension first. K-major operands load boxes of 64 K x
// `rows_per_load` rows; MN-major ones boxes of 64 M/N x 64 K.
CUtensorMap operand_map(const GemmOperand& op, uint32_t rows_per_load, const char* argument) {
  const TensorView& v = op.view;
  const uint32_t box_outer = op.major == Major::k ? rows_per_load : 64;
  return sm90::make_tensor_map_3d(v.data, v.dtype, {v.cols(), v.rows(), v.batch()}, {v.ld(), v.batch_stride()},
                                  {64, box_outer}, argument);
}

// The kernel-independent part of a launch: tensor maps of A and B, the schedule, the workspace.
mainloop::LaunchPlan build_launch(const GemmOperand& a, const GemmOperand& b, const Problem& p, const Plan& plan,
                                  const GemmOptions& options) {
  mainloop::LaunchPlan launch;
  launch.summary = plan.public_plan;
  launch.m = p.m;
  launch.n = p.n;
  launch.k = p.k;
  launch.batch = p.batch;
  launch.input = p.input;
  launch.a_major = a.major;
  launch.b_major = b.major;
  const TileFacts f = facts(plan.public_plan.tile);
  launch.a = operand_map(a, uint32_t(f.block_m / f.cluster_n), "a");
  launch.b = operand_map(b, uint32_t(f.block_n / f.cluster_m), "b");

  mainloop::ScheduleParams& s = launch.schedule;
  s.tiles_m = int32_t(ceil_div(p.m, f.block_m));
  s.tiles_n = int32_t(ceil_div(p.n, f.block_n));
  s.cluster_rows = int32_t(ceil_div(s.tiles_m, f.cluster_m));
  s.cluster_cols = int32_t(ceil_div(s.tiles_n, f.cluster_n));
  s.batches = int32_t(p.batch);
  s.cluster_tiles = int32_t(plan.cluster_tiles);
  s.k_blocks = int32_t(ceil_div(p.k, 64));
  s.group_m = options.raster_group > 0 ? options.raster_group : 8;
  s.splits = plan.public_plan.split_k;
  s.stream_k_tiles = plan.public_plan.stream_k_tiles;
  s.max_segments = plan.max_segments;
  if (plan.counters > 0) {
    auto* base = static_cast<uint8_t*>(options.workspace);
    launch.partials.arrivals = reinterpret_cast<int32_t*>(base);
    launch.partials.partials = reinterpret_cast<float*>(base + round_up(plan.counters * 4, 256));
  }
  return launch;
}

}  // namespace

GemmPlan plan_gemm(const GemmOperand& a, const GemmOperand& b, const TensorView& c, const GemmOptions& options) {
  Problem p = validate_operands(a, b, options, "coda::gemm");
  validate_output(c, p);
  require_hopper("coda::gemm");
  return make_plan(p, options).public_plan;
}

std::size_t gemm_workspace_bytes(const GemmOperand& a, const GemmOperand& b, const TensorView& c,
                                 const GemmOptions& options) {
  Problem p = validate_operands(a, b, options, "coda::gemm");
  validate_output(c, p);
  require_hopper("coda::gemm");
  GemmOptions sizing = options;  // as if a workspace of any size were given
  sizing.workspace = reinterpret_cast<void*>(uintptr_t(256));
  sizing.workspace_bytes = SIZE_MAX;
  return make_plan(p, sizing).public_plan.workspace_bytes;
}

namespace mainloop {

LaunchPlan plan_launch(const GemmOperand& a, const GemmOperand& b, const GemmOptions& options, const char* function) {
  const Problem p = validate_operands(a, b, options, function);
  require_hopper(function);
  return build_launch(a, b, p, make_plan(p, options), options);
}

void plan_companion(LaunchPlan& plan, const GemmOperand& a, const GemmOperand& b, const GemmOptions& options,
                    double companion_speed) {
  ScheduleParams& s = plan.schedule;
  if (!options.companion || options.max_ctas > 0 || plan.companion.ctas > 0 ||
      plan.summary.tile != GemmTile::pingpong_m128n128 || s.splits != 1 || s.stream_k_tiles != 0 || s.batches != 1)
    return;
  const int primary_ctas = resident_ctas(GemmTile::pingpong_m128n128);
  const int idle_ctas = (current_device().sm_count - primary_ctas) / 2 * 2;  // whole 2-CTA clusters
  if (plan.summary.ctas != primary_ctas) return;  // the primary's grid does not fill its SMs
  const int64_t rows = companion_tile_rows(s.tiles_m, s.tiles_n, primary_ctas, idle_ctas, companion_speed);
  if (rows == 0) return;
  CompanionLaunch& c = plan.companion;
  c.schedule = s;
  c.schedule.first_tile_row = int32_t(s.tiles_m - rows);
  c.schedule.tiles_m = int32_t(rows);
  c.schedule.tiles_n = int32_t(ceil_div(plan.n, 256));
  c.schedule.cluster_rows = int32_t(ceil_div(rows, 2));
  c.schedule.cluster_cols = c.schedule.tiles_n;
  c.schedule.cluster_tiles = c.schedule.cluster_rows * c.schedule.cluster_cols;
  c.ctas = int(std::min<int64_t>(idle_ctas, int64_t(c.schedule.cluster_tiles) * 2));
  // TileProgramM128N256's boxes: 128 rows of A; 256 of B split over its 2 x 1 cluster.
  c.a = operand_map(a, 128, "a");
  c.b = operand_map(b, 128, "b");
  s.tiles_m -= int32_t(rows);
  s.cluster_rows = s.tiles_m / 2;  // even (companion_tile_rows)
  s.cluster_tiles = s.cluster_rows * s.cluster_cols;
  plan.summary.companion_ctas = c.ctas;
}

}  // namespace mainloop

void gemm(const GemmOperand& a, const GemmOperand& b, const TensorView& c, cudaStream_t stream,
          const GemmOptions& options) {
  Problem p = validate_operands(a, b, options, "coda::gemm");
  validate_output(c, p);
  require_hopper("coda::gemm");
  const Plan plan = make_plan(p, options);
  const mainloop::LaunchPlan launch = build_launch(a, b, p, plan, options);
  mainloop::StoreParams store{};
  store.output = sm90::make_tensor_map_3d(c.data, c.dtype, {c.cols(), c.rows(), c.batch()}, {c.ld(), c.batch_stride()},
                                          {uint32_t(128 / size_of(c.dtype)), 64}, "c");
  store.output_type = c.dtype;
  launcher(plan.public_plan.tile, p.input, a.major, b.major)(launch.kernel_params(store), plan.public_plan.ctas, stream);
}

Status try_gemm(const GemmOperand& a, const GemmOperand& b, const TensorView& c, cudaStream_t stream,
                const GemmOptions& options) {
  return status_of([&] { gemm(a, b, c, stream, options); });
}

}  // namespace coda

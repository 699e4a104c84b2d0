// The fused ops on the GPU, each against the fp64 reference and against the CPU executor running
// the same epilogue program: residue shapes, M = 1, every option, poisoned outputs, bitwise
// repeatability.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "coda/epilogue/parts.hpp"
#include "coda/epilogue/programs/rmsnorm.hpp"
#include "coda/epilogue/programs/rope.hpp"
#include "coda/epilogue/programs/swiglu.hpp"
#include "coda/ops/cross_entropy.hpp"
#include "coda/ops/rmsnorm.hpp"
#include "coda/ops/rope.hpp"
#include "coda/ops/swiglu.hpp"
#include "coda/reference/epilogue_executor.hpp"
#include "coda/reference/cross_entropy.hpp"
#include "coda/reference/gemm.hpp"
#include "coda/reference/rmsnorm.hpp"
#include "coda/reference/rope.hpp"
#include "coda/reference/swiglu.hpp"
#include "support/device_tensor.hpp"
#include "support/gemm_case.hpp"

namespace coda::test {
namespace {

using epilogue::kPartCols;
using epilogue::kPartRows;

constexpr double kBf16Tolerance = 6e-3;  // one bf16 rounding of each output
// GPU and CPU executors see accumulators that differ by fp32 summation order only: after one
// rounding to bf16 the outputs differ by at most one ulp here and there.
constexpr double kExecutorTolerance = 2e-3;

struct Shape {
  int64_t m, n, k;
};
// {1024, 2048, 1024} has 4 tiles per CTA: a residual staged in shared memory goes round both
// consumers. The last has the tile rows for a companion launch (mainloop/launch.cuh) on the ping-pong
// tile, which SwiGLU, RoPE and residual + RMSNorm ask for.
constexpr Shape kShapes[] = {{1, 512, 64},       {200, 600, 136},  {129, 1030, 264},
                             {1024, 2048, 1024}, {2000, 4100, 64}, {4173, 1100, 72}};

reference::Matrix matrix_of(const DeviceTensor& t) { return t.host.matrix(); }

// Every element of `t`'s logical region is finite (not the NaN poison).
int64_t unwritten(const HostTensor& t) {
  const reference::Matrix m = t.matrix();
  int64_t count = 0;
  for (double v : m.data) count += std::isnan(v) ? 1 : 0;
  return count;
}

TEST(OpsGpu, SwigluMatchesReferenceAndCpuExecutor) {
  CODA_REQUIRE_HOPPER();
  for (const GemmTile tile : {GemmTile::automatic, GemmTile::m128n256})  // K < 4096: ping-pong, then cooperative
    for (const Shape& s : kShapes)
      for (int variant = 0; variant < 3; ++variant) {  // plain, + pre-activation, + row scale
        SCOPED_TRACE(::testing::Message() << "M=" << s.m << " N=" << s.n << " K=" << s.k << " variant " << variant
                                          << " tile " << name(tile) << ", " << seed_note());
        DeviceTensor x(DType::bf16, s.m, s.k), w(DType::bf16, s.n, s.k);
        x.random();
        w.random();
        DeviceTensor out(DType::bf16, s.m, s.n / 2), pre(DType::bf16, s.m, s.n), rstd(DType::f32, 1, s.m);
        rstd.random(0.5, 2.0);
        out.poison();
        pre.poison();
        ops::SwigluOptions options;
        options.gemm.tile = tile;
        if (variant == 1) options.pre_activation = pre.view();
        if (variant == 2) options.row_scale = rstd.vector_view();
        ops::gemm_swiglu(x.view(), w.view(), out.view(), nullptr, options);
        CODA_CUDA_CHECK(cudaDeviceSynchronize());
        out.download();
        pre.download();
        EXPECT_EQ(unwritten(out.host), 0);

        // fp64 reference
        reference::Matrix y = reference::gemm(matrix_of(x), Major::k, matrix_of(w), Major::k);
        if (variant == 2) y = reference::row_scale(y, rstd.host.matrix().data);
        EXPECT_LT(reference::relative_error(out.host.matrix(), reference::swiglu(y)), kBf16Tolerance);
        if (variant == 1) {
          EXPECT_LT(reference::relative_error(pre.host.matrix(), y), kBf16Tolerance);
        }

        // the CPU executor, same program, host buffers
        HostTensor expected(DType::bf16, s.m, s.n / 2);
        epilogue::Swiglu program;
        program.out = {expected.bytes.data(), DType::bf16, expected.view.ld(), 0};
        if (variant == 2) program.row_scale = {rstd.host.bytes.data(), DType::f32, 0};
        reference::run_epilogue(program, reference::gemm(matrix_of(x), Major::k, matrix_of(w), Major::k), 0,
                                {kPartRows, kPartCols});
        EXPECT_LT(reference::relative_error(out.host.matrix(), expected.matrix()), kExecutorTolerance);
      }
}

// Tiles computed in several K segments (split-K, stream-K) run the program once, in the last
// segment to arrive; every segment still takes its turn with the staged residual's buffer.
struct Segments {
  int split_k = 1;
  bool stream_k = false;
};

TEST(OpsGpu, ResidualRmsNormThenRowScaleMatchesTheReparameterizedForward) {
  CODA_REQUIRE_HOPPER();
  std::vector<std::pair<Shape, Segments>> cases;
  for (const Shape& s : kShapes) cases.push_back({s, {}});
  cases.push_back({{129, 1030, 264}, {.split_k = 3}});
  cases.push_back({{1000, 4000, 512}, {.stream_k = true}});  // 62 of 66 cluster tiles in the stream-K tail
  for (const auto& [s, segments] : cases) {
    SCOPED_TRACE(::testing::Message() << "M=" << s.m << " N=" << s.n << " K=" << s.k << " split_k "
                                      << segments.split_k << (segments.stream_k ? " stream-K" : "") << ", "
                                      << seed_note());
    const int64_t n2 = 384 + 8;  // the next GEMM's N
    DeviceTensor x(DType::bf16, s.m, s.k), w1(DType::bf16, s.n, s.k), r(DType::bf16, s.m, s.n), g(DType::f32, 1, s.n),
        w2(DType::bf16, n2, s.n);
    x.random();
    w1.random();
    r.random(-2.0, 2.0);
    g.random(0.5, 1.5);
    w2.random();
    DeviceTensor h(DType::bf16, s.m, s.n), u(DType::bf16, s.m, s.n), rstd(DType::f32, 1, s.m), z(DType::bf16, s.m, n2);
    h.poison();
    u.poison();
    rstd.poison();
    z.poison();
    DeviceBuffer workspace(ops::residual_rmsnorm_workspace_bytes(s.m, s.n));
    workspace.garbage(3);
    GemmOptions options{.tile = GemmTile::pingpong_m128n128, .split_k = segments.split_k, .stream_k = segments.stream_k};
    const std::size_t gemm_bytes = gemm_workspace_bytes({x.view(), Major::k}, {w1.view(), Major::k}, h.view(), options);
    DeviceBuffer gemm_workspace(gemm_bytes);
    gemm_workspace.garbage(1);
    if (segments.split_k > 1 || segments.stream_k) {
      options.workspace = gemm_workspace.get();
      options.workspace_bytes = gemm_workspace.bytes();
      const GemmPlan plan = plan_gemm({x.view(), Major::k}, {w1.view(), Major::k}, h.view(), options);
      EXPECT_TRUE(plan.split_k == segments.split_k && (plan.stream_k_tiles > 0) == segments.stream_k)
          << "the plan does not compute tiles in segments: split_k " << plan.split_k << ", stream-K tiles "
          << plan.stream_k_tiles;
    }
    const float eps = 1e-6f;
    ops::gemm_residual_rmsnorm(x.view(), w1.view(), r.view(), g.vector_view(), eps, h.view(), u.view(),
                               rstd.vector_view(), workspace.get(), workspace.bytes(), nullptr, {.gemm = options});
    // The second GEMM (K = N): with split-K, on the cooperative tile in the same number of segments.
    GemmOptions second;
    if (segments.split_k > 1) second = {.tile = GemmTile::m128n256, .split_k = segments.split_k};
    const std::size_t second_bytes =
        segments.split_k > 1 ? gemm_workspace_bytes({u.view(), Major::k}, {w2.view(), Major::k}, z.view(), second) : 0;
    DeviceBuffer second_workspace(second_bytes);
    if (segments.split_k > 1) {
      second_workspace.garbage(2);
      second.workspace = second_workspace.get();
      second.workspace_bytes = second_bytes;
      EXPECT_EQ(plan_gemm({u.view(), Major::k}, {w2.view(), Major::k}, z.view(), second).split_k, segments.split_k);
    }
    ops::gemm_row_scale(u.view(), w2.view(), rstd.vector_view(), z.view(), nullptr, {.gemm = second});
    CODA_CUDA_CHECK(cudaDeviceSynchronize());
    h.download();
    u.download();
    rstd.download();
    z.download();
    EXPECT_EQ(unwritten(h.host) + unwritten(u.host) + unwritten(z.host), 0);

    const reference::Matrix y = reference::gemm(matrix_of(x), Major::k, matrix_of(w1), Major::k);
    const reference::ResidualRmsNorm want =
        reference::residual_rmsnorm(y, matrix_of(r), g.host.matrix().data, kPartCols);
    const reference::Vector want_rstd = reference::rstd_from_partials(want.sum_squares, s.n, eps);
    EXPECT_LT(reference::relative_error(h.host.matrix(), want.residual), kBf16Tolerance);
    EXPECT_LT(reference::relative_error(u.host.matrix(), want.weighted), kBf16Tolerance);
    EXPECT_LT(reference::relative_error(rstd.host.matrix().data, want_rstd), 1e-5);
    // z = rstd * (u W2^T) from the bf16 u the GPU stored
    const reference::Matrix want_z = reference::row_scale(
        reference::gemm(u.host.matrix(), Major::k, matrix_of(w2), Major::k), rstd.host.matrix().data);
    EXPECT_LT(reference::relative_error(z.host.matrix(), want_z), kBf16Tolerance);
  }
}

// Without u (g folded into the next GEMM's weight, W2' = W2 diag(g)): H and rstd bit for bit those
// of the op with u, nothing written past H's edges, both against the fp64 reference.
TEST(OpsGpu, ResidualRmsNormWithoutUMatchesTheOpWithU) {
  CODA_REQUIRE_HOPPER();
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(::testing::Message() << "M=" << s.m << " N=" << s.n << " K=" << s.k << ", " << seed_note());
    DeviceTensor x(DType::bf16, s.m, s.k), w1(DType::bf16, s.n, s.k), r(DType::bf16, s.m, s.n), g(DType::f32, 1, s.n);
    x.random();
    w1.random();
    r.random(-2.0, 2.0);
    g.random(0.5, 1.5);
    DeviceTensor h(DType::bf16, s.m, s.n), u(DType::bf16, s.m, s.n), rstd(DType::f32, 1, s.m);
    DeviceTensor h_alone(DType::bf16, s.m, s.n), rstd_alone(DType::f32, 1, s.m);
    for (DeviceTensor* t : {&h, &u, &rstd, &h_alone, &rstd_alone}) t->poison();
    DeviceBuffer workspace(ops::residual_rmsnorm_workspace_bytes(s.m, s.n));
    workspace.garbage(3);
    ops::gemm_residual_rmsnorm(x.view(), w1.view(), r.view(), g.vector_view(), 1e-6f, h.view(), u.view(),
                               rstd.vector_view(), workspace.get(), workspace.bytes());
    ops::gemm_residual_rmsnorm(x.view(), w1.view(), r.view(), {}, 1e-6f, h_alone.view(), {}, rstd_alone.vector_view(),
                               workspace.get(), workspace.bytes());
    CODA_CUDA_CHECK(cudaDeviceSynchronize());
    for (DeviceTensor* t : {&h, &rstd, &h_alone, &rstd_alone}) t->download();
    EXPECT_EQ(unwritten(h_alone.host) + unwritten(rstd_alone.host), 0);
    EXPECT_TRUE(h_alone.written_only_inside());
    EXPECT_EQ(h_alone.host.bytes, h.host.bytes);
    EXPECT_EQ(rstd_alone.host.bytes, rstd.host.bytes);

    const reference::Matrix y = reference::gemm(matrix_of(x), Major::k, matrix_of(w1), Major::k);
    const reference::ResidualRmsNorm want =
        reference::residual_rmsnorm(y, matrix_of(r), g.host.matrix().data, kPartCols);
    EXPECT_LT(reference::relative_error(h_alone.host.matrix(), want.residual), kBf16Tolerance);
    EXPECT_LT(reference::relative_error(rstd_alone.host.matrix().data,
                                        reference::rstd_from_partials(want.sum_squares, s.n, 1e-6f)),
              1e-5);
  }
}

// The GPU executor reads the RMSNorm weight once per part, two columns per load where the
// vector's alignment allows and one by one where it does not (and in edge parts): every dtype,
// aligned and one element off. M = 200, N = 600: interior and edge parts both ways.
TEST(OpsGpu, ResidualRmsNormReadsTheWeightAtAnyAlignment) {
  CODA_REQUIRE_HOPPER();
  const Shape s{200, 600, 136};
  DeviceTensor x(DType::bf16, s.m, s.k), w1(DType::bf16, s.n, s.k), r(DType::bf16, s.m, s.n);
  x.random();
  w1.random();
  r.random(-2.0, 2.0);
  const reference::Matrix y = reference::gemm(matrix_of(x), Major::k, matrix_of(w1), Major::k);
  for (DType dtype : {DType::f32, DType::bf16, DType::f16})
    for (int64_t offset : {0, 1}) {
      SCOPED_TRACE(::testing::Message() << "weight " << name(dtype) << ", offset " << offset << " element(s), "
                                        << seed_note());
      DeviceTensor g(dtype, 1, s.n + 1);
      g.random(0.5, 1.5);
      const std::size_t element = size_of(dtype);
      const TensorView weight =
          TensorView::vector(static_cast<const unsigned char*>(g.device.get()) + offset * element, dtype, s.n);
      const reference::Vector all_values = g.host.matrix().data;
      const reference::Vector weight_values(all_values.begin() + offset, all_values.begin() + offset + s.n);
      DeviceTensor h(DType::bf16, s.m, s.n), u(DType::bf16, s.m, s.n), rstd(DType::f32, 1, s.m);
      h.poison();
      u.poison();
      DeviceBuffer workspace(ops::residual_rmsnorm_workspace_bytes(s.m, s.n));
      workspace.garbage(4);
      ops::gemm_residual_rmsnorm(x.view(), w1.view(), r.view(), weight, 1e-6f, h.view(), u.view(), rstd.vector_view(),
                                 workspace.get(), workspace.bytes());
      CODA_CUDA_CHECK(cudaDeviceSynchronize());
      u.download();
      EXPECT_EQ(unwritten(u.host), 0);
      const reference::ResidualRmsNorm want = reference::residual_rmsnorm(y, matrix_of(r), weight_values, kPartCols);
      EXPECT_LT(reference::relative_error(u.host.matrix(), want.weighted), kBf16Tolerance);
    }
}

// A cos or sin cache on the device whose rows are `ld` floats apart and whose first entry is
// `offset` floats into its allocation (packed: ld = its columns, offset 0). Rows that are not
// 16-byte aligned take the GPU executor's per-pair loads.
struct CacheTable {
  DeviceTensor t;
  int64_t offset;
  CacheTable(const reference::Matrix& m, int64_t ld, int64_t offset)
      : t(DType::f32, m.rows, offset + ld, offset + ld), offset(offset) {
    reference::Matrix padded(m.rows, offset + ld);
    for (int64_t r = 0; r < m.rows; ++r)
      for (int64_t c = 0; c < m.cols; ++c) padded(r, offset + c) = m(r, c);
    reference::store(padded, t.host.view);
    t.upload();
  }
  int64_t ld() const { return t.host.view.ld(); }
  TensorView view(int64_t cols) const {
    return TensorView::matrix(static_cast<const float*>(t.device.get()) + offset, DType::f32, t.host.view.rows(), cols, ld());
  }
  epilogue::Table host(int32_t rows) const {
    return {reinterpret_cast<const float*>(t.host.bytes.data()) + offset, int32_t(ld()), rows};
  }
};

// Every cache layout: head dims whose 32-column chunks stay inside a head (64, 128, 96: the quad
// loads) and one whose do not (80), rows padded to an odd stride, a base 4 bytes past alignment.
TEST(OpsGpu, RopeMatchesReferenceAndCpuExecutor) {
  CODA_REQUIRE_HOPPER();
  struct Layout { int head_dim; int64_t pad, offset; };
  const Layout layouts[] = {{64, 0, 0}, {128, 0, 0}, {96, 0, 0}, {80, 0, 0}, {64, 1, 0}, {64, 0, 1}};
  const int max_pos = 300;
  for (const Layout& layout : layouts) {
    const int head_dim = layout.head_dim;
    const reference::RopeCache cache = reference::rope_cache(max_pos, head_dim);
    const CacheTable cos(cache.cos, head_dim / 2 + layout.pad, layout.offset),
        sin(cache.sin, head_dim / 2 + layout.pad, layout.offset);
    const bool first_layout = &layout == &layouts[0];
    for (const GemmTile tile : {GemmTile::automatic, GemmTile::m128n256})  // ping-pong (K < 4096), cooperative
      for (const Shape& s : kShapes)
        for (int variant = 0; variant < 2; ++variant) {                              // plain, + row scale
          if (!first_layout && (s.n < 600 || s.m > 1024 || variant == 1)) continue;  // the other layouts: three shapes
          if (!first_layout && tile != GemmTile::automatic) continue;
          const int64_t n = (s.n / head_dim) * head_dim, heads = n / head_dim;
          const int rotated = int(heads > 1 ? heads - 1 : heads);  // the last head passes through (V)
          SCOPED_TRACE(::testing::Message() << "M=" << s.m << " N=" << n << " K=" << s.k << " variant " << variant
                                            << " head_dim " << head_dim << " cache ld " << cos.ld() << " offset "
                                            << layout.offset << " tile " << name(tile) << ", " << seed_note());
          DeviceTensor x(DType::bf16, s.m, s.k), w(DType::bf16, n, s.k), rstd(DType::f32, 1, s.m);
          x.random();
          w.random();
          rstd.random(0.5, 2.0);
          std::vector<int32_t> positions(std::size_t(s.m));
          for (auto& p : positions) p = int32_t(uniform_int(0, max_pos - 1));
          DeviceTensor pos = int_vector(positions);
          DeviceTensor out(DType::bf16, s.m, n);
          out.poison();
          ops::RopeOptions options;
          options.gemm.tile = tile;
          if (variant == 1) options.row_scale = rstd.vector_view();
          ops::gemm_rope(x.view(), w.view(), pos.vector_view(), cos.view(head_dim / 2), sin.view(head_dim / 2),
                         head_dim, rotated, out.view(), nullptr, options);
          CODA_CUDA_CHECK(cudaDeviceSynchronize());
          out.download();
          EXPECT_EQ(unwritten(out.host), 0);
          reference::Matrix y = reference::gemm(matrix_of(x), Major::k, matrix_of(w), Major::k);
          if (variant == 1) y = reference::row_scale(y, rstd.host.matrix().data);
          EXPECT_LT(
              reference::relative_error(out.host.matrix(), reference::rope(y, positions, cache, head_dim, rotated)),
              kBf16Tolerance);
          if (tile == GemmTile::automatic && &s == &kShapes[std::size(kShapes) - 1]) {
            // RoPE asks for a companion launch there (programs/rope.hpp): the bits must not change.
            DeviceTensor alone(DType::bf16, s.m, n);
            alone.poison();
            options.gemm.companion = false;
            ops::gemm_rope(x.view(), w.view(), pos.vector_view(), cos.view(head_dim / 2), sin.view(head_dim / 2),
                           head_dim, rotated, alone.view(), nullptr, options);
            CODA_CUDA_CHECK(cudaDeviceSynchronize());
            alone.download();
            EXPECT_EQ(alone.host.bytes, out.host.bytes) << "with and without the companion launch";
          }

          HostTensor expected(DType::bf16, s.m, n);
          epilogue::Rope program;
          program.positions = {pos.host.bytes.data(), DType::i32, 0};
          program.cos = cos.host(max_pos);
          program.sin = sin.host(max_pos);
          program.head_dim = Divisor(head_dim);
          program.rotated_heads = rotated;
          if (variant == 1) program.row_scale = {rstd.host.bytes.data(), DType::f32, 0};
          program.out = {expected.bytes.data(), DType::bf16, expected.view.ld(), 0};
          reference::run_epilogue(program, reference::gemm(matrix_of(x), Major::k, matrix_of(w), Major::k), 0,
                                  {kPartRows, kPartCols});
          EXPECT_LT(reference::relative_error(out.host.matrix(), expected.matrix()), kExecutorTolerance);
        }
  }
}

// A row whose position is outside the cache gets NaN in every rotated column and nothing else does:
// in parts at the problem's edge (M = 4: per-pair table reads) and inside it (M = 256: quad reads).
TEST(OpsGpu, RopePositionOutsideTheCacheGivesNaN) {
  CODA_REQUIRE_HOPPER();
  const int head_dim = 64, max_pos = 16, heads = 4, rotated = 3;  // the last head passes through
  const reference::RopeCache cache = reference::rope_cache(max_pos, head_dim);
  const CacheTable cos(cache.cos, head_dim / 2, 0), sin(cache.sin, head_dim / 2, 0);
  for (const int64_t m : {4, 256}) {
    SCOPED_TRACE(::testing::Message() << "M=" << m);
    DeviceTensor x(DType::bf16, m, 64), w(DType::bf16, heads * head_dim, 64), out(DType::bf16, m, heads * head_dim);
    x.random();
    w.random();
    out.poison();
    std::vector<int32_t> positions(static_cast<std::size_t>(m));
    for (int32_t r = 0; r < int32_t(m); ++r) positions[std::size_t(r)] = r % 3 == 1 ? max_pos + r : r % 5 == 3 ? -r : r % max_pos;
    DeviceTensor pos = int_vector(positions);
    ops::gemm_rope(x.view(), w.view(), pos.vector_view(), cos.view(head_dim / 2), sin.view(head_dim / 2), head_dim, rotated,
                   out.view());
    CODA_CUDA_CHECK(cudaDeviceSynchronize());
    const reference::Matrix got = out.download().host.matrix();
    int64_t wrong = 0;
    for (int64_t r = 0; r < m; ++r) {
      const int32_t p = positions[std::size_t(r)];
      const bool outside = p < 0 || p >= max_pos;
      for (int64_t c = 0; c < heads * head_dim; ++c)
        wrong += std::isnan(got(r, c)) != (outside && c < rotated * head_dim) ? 1 : 0;
    }
    EXPECT_EQ(wrong, 0);
  }
}

TEST(OpsGpu, CrossEntropyMatchesReferenceForEveryOption) {
  CODA_REQUIRE_HOPPER();
  struct Variant {
    ops::LossReduction reduction;
    float smoothing, z_loss, softcap;
    bool logits, row_scale;
  };
  const Variant variants[] = {{ops::LossReduction::mean, 0, 0, 0, false, false},
                              {ops::LossReduction::none, 0.1f, 1e-3f, 0, true, false},
                              {ops::LossReduction::sum, 0, 0, 30.0f, false, true},
                              {ops::LossReduction::mean, 0.05f, 1e-4f, 15.0f, false, true}};
  const Shape shapes[] = {{1, 1000, 64}, {200, 5000 + 17, 136}, {512, 32000, 256}};
  for (const GemmTile tile : {GemmTile::automatic, GemmTile::m128n256})  // ping-pong (K < 4096), cooperative
    for (const Shape& s : shapes)
      for (const Variant& v : variants) {
        if (tile != GemmTile::automatic && &v != &variants[0] && &v != &variants[3]) continue;
        SCOPED_TRACE(::testing::Message() << "M=" << s.m << " V=" << s.n << " K=" << s.k << " reduction "
                                          << int(v.reduction) << " eps " << v.smoothing << " z " << v.z_loss << " cap "
                                          << v.softcap << " tile " << name(tile) << ", " << seed_note());
        DeviceTensor x(DType::bf16, s.m, s.k), w(DType::bf16, s.n, s.k), rstd(DType::f32, 1, s.m);
        x.random(-2, 2);
        w.random();
        rstd.random(0.5, 2.0);
        std::vector<int32_t> targets(std::size_t(s.m));
        for (auto& t : targets) t = uniform_int(0, 9) == 0 ? -100 : int32_t(uniform_int(0, s.n - 1));
        if (s.m > 1) targets[0] = -100;  // at least one ignored row
        DeviceTensor tgt = int_vector(targets);
        const int64_t loss_len = v.reduction == ops::LossReduction::none ? s.m : 1;
        DeviceTensor loss(DType::f32, 1, loss_len), lse(DType::f32, 1, s.m), logits(DType::bf16, s.m, s.n);
        loss.poison();
        lse.poison();
        logits.poison();
        ops::CrossEntropyOptions options;
        options.gemm.tile = tile;
        options.reduction = v.reduction;
        options.label_smoothing = v.smoothing;
        options.z_loss = v.z_loss;
        options.softcap = v.softcap;
        if (v.logits) options.logits = logits.view();
        if (v.row_scale) options.row_scale = rstd.vector_view();
        DeviceBuffer workspace(ops::cross_entropy_workspace_bytes(s.m, s.n, options));
        workspace.garbage(5);
        ops::gemm_cross_entropy(x.view(), w.view(), tgt.vector_view(), loss.vector_view(), lse.vector_view(),
                                workspace.get(), workspace.bytes(), nullptr, options);
        CODA_CUDA_CHECK(cudaDeviceSynchronize());
        loss.download();
        lse.download();

        reference::Matrix y = reference::gemm(matrix_of(x), Major::k, matrix_of(w), Major::k);
        if (v.row_scale) y = reference::row_scale(y, rstd.host.matrix().data);
        reference::CrossEntropyOptions ro;
        ro.label_smoothing = v.smoothing;
        ro.z_loss = v.z_loss;
        ro.softcap = v.softcap;
        ro.reduction = v.reduction == ops::LossReduction::none  ? reference::LossReduction::none
                       : v.reduction == ops::LossReduction::sum ? reference::LossReduction::sum
                                                                : reference::LossReduction::mean;
        const reference::CrossEntropyLoss want = reference::cross_entropy(y, targets, ro);
        // fp32 accumulation of the GEMM, fp32 epilogue math: errors ~1e-6 relative
        EXPECT_LT(reference::relative_error(lse.host.matrix().data, want.lse), 1e-5);
        if (v.reduction == ops::LossReduction::none) {
          EXPECT_LT(reference::relative_error(loss.host.matrix().data, want.per_row), 1e-4);
        } else if (std::isnan(*want.reduced)) {  // a mean over no rows: NaN, as PyTorch
          EXPECT_TRUE(std::isnan(loss.host.matrix()(0, 0)));
        } else {
          EXPECT_NEAR(loss.host.matrix()(0, 0), *want.reduced, 1e-4 * std::fabs(*want.reduced) + 1e-6);
        }
        if (v.logits) {
          logits.download();
          reference::Matrix capped = y;
          if (v.softcap > 0)
            for (double& e : capped.data) e = v.softcap * std::tanh(e / v.softcap);
          EXPECT_EQ(unwritten(logits.host), 0);
          EXPECT_LT(reference::relative_error(logits.host.matrix(), capped), kBf16Tolerance);
        }
      }
}

TEST(OpsGpu, FusedOpsAreBitwiseRepeatable) {
  CODA_REQUIRE_HOPPER();
  const Shape s{300, 1000, 520};
  DeviceTensor x(DType::bf16, s.m, s.k), w(DType::bf16, s.n, s.k), r(DType::bf16, s.m, s.n), g(DType::f32, 1, s.n);
  x.random();
  w.random();
  r.random();
  g.random();
  DeviceTensor h(DType::bf16, s.m, s.n), u(DType::bf16, s.m, s.n), rstd(DType::f32, 1, s.m), o(DType::bf16, s.m, s.n / 2),
      o_cooperative(DType::bf16, s.m, s.n / 2);
  DeviceBuffer workspace(ops::residual_rmsnorm_workspace_bytes(s.m, s.n));
  std::vector<unsigned char> first[5];
  ops::SwigluOptions cooperative;
  cooperative.gemm.tile = GemmTile::m128n256;
  for (int run = 0; run < 2; ++run) {
    for (DeviceTensor* t : {&h, &u, &rstd, &o, &o_cooperative}) t->poison();
    ops::gemm_residual_rmsnorm(x.view(), w.view(), r.view(), g.vector_view(), 1e-5f, h.view(), u.view(),
                               rstd.vector_view(), workspace.get(), workspace.bytes());
    ops::gemm_swiglu(x.view(), w.view(), o.view());
    ops::gemm_swiglu(x.view(), w.view(), o_cooperative.view(), nullptr, cooperative);
    CODA_CUDA_CHECK(cudaDeviceSynchronize());
    int i = 0;
    for (DeviceTensor* t : {&h, &u, &rstd, &o, &o_cooperative}) {
      t->download();
      if (run == 0) first[i] = t->host.bytes;
      else EXPECT_EQ(t->host.bytes, first[i]) << "output " << i;
      ++i;
    }
    // Both tiles run the same wgmmas in the same K order and the same program: the same bits.
    EXPECT_EQ(o_cooperative.host.bytes, o.host.bytes);
  }
}

}  // namespace
}  // namespace coda::test

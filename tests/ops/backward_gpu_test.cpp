// The backward ops on the GPU, each against the fp64 reference (and the GEMM ones against the CPU
// executor running the same program): residue shapes, M = 1, both program tiles, every option,
// poisoned outputs, garbage workspaces, bitwise repeatability.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "coda/epilogue/parts.hpp"
#include "coda/epilogue/programs/swiglu.hpp"
#include "coda/ops/rmsnorm.hpp"
#include "coda/ops/rope.hpp"
#include "coda/ops/swiglu.hpp"
#include "coda/reference/epilogue_executor.hpp"
#include "coda/reference/gemm.hpp"
#include "coda/reference/reductions.hpp"
#include "coda/reference/rmsnorm.hpp"
#include "coda/reference/rope.hpp"
#include "coda/reference/swiglu.hpp"
#include "support/device_tensor.hpp"

namespace coda::test {
namespace {

using epilogue::kPartCols;
using epilogue::kPartRows;

constexpr double kBf16Tolerance = 6e-3;      // one bf16 rounding of each output
constexpr double kExecutorTolerance = 2e-3;  // GPU and CPU executors: fp32 summation order, then bf16
constexpr double kPartialTolerance = 1e-4;   // fp32 sums of fp32 products against fp64

// Output M x N of the GEMM, depth K (K < 4096: the ping-pong tile unless a test asks for m128n256).
struct Shape {
  int64_t m, n, k;
};
constexpr Shape kShapes[] = {{1, 512, 64}, {200, 600, 136}, {129, 1030, 264}, {1024, 2048, 1024}, {4173, 1100, 72}};

reference::Matrix matrix_of(const DeviceTensor& t) { return t.host.matrix(); }
reference::Vector values_of(const DeviceTensor& t) { return t.host.matrix().data; }

int64_t unwritten(const HostTensor& t) {
  int64_t count = 0;
  for (double v : t.matrix().data) count += std::isnan(v) ? 1 : 0;
  return count;
}

// Downloads the outputs of a first run (into their host copies); expect_same() after a second
// run: the same bytes.
class Repeat {
 public:
  explicit Repeat(std::vector<DeviceTensor*> outputs) : outputs_(std::move(outputs)) {
    for (DeviceTensor* t : outputs_) first_.push_back(t->download().host.bytes);
  }
  void expect_same() {
    for (std::size_t i = 0; i < outputs_.size(); ++i)
      EXPECT_EQ(outputs_[i]->download().host.bytes, first_[i]) << "output " << i << " changed between two runs";
  }

 private:
  std::vector<DeviceTensor*> outputs_;
  std::vector<std::vector<unsigned char>> first_;
};

TEST(BackwardGpu, SwigluBackwardMatchesReferenceAndCpuExecutor) {
  CODA_REQUIRE_HOPPER();
  for (const GemmTile tile : {GemmTile::automatic, GemmTile::m128n256})
    for (const Shape& s : kShapes)
      for (int variant = 0; variant < 2; ++variant) {  // dY alone; every option
        // dO = dP W_down: dP (M x H = K), W_down (H x F = N), Y and dY M x 2F.
        SCOPED_TRACE(::testing::Message() << "M=" << s.m << " F=" << s.n << " H=" << s.k << " variant " << variant
                                          << " tile " << name(tile) << ", " << seed_note());
        const bool all = variant == 1;
        DeviceTensor dp(DType::bf16, s.m, s.k), w_down(DType::bf16, s.k, s.n), y(DType::bf16, s.m, 2 * s.n);
        dp.random();
        w_down.random(-0.2, 0.2);
        y.random(-5.0, 5.0);
        DeviceTensor dy(DType::bf16, s.m, 2 * s.n), o(DType::bf16, s.m, s.n), rstd(DType::f32, 1, s.m),
            dots(DType::f32, s.m, epilogue::parts_along(s.n));
        rstd.random(0.5, 2.0);
        for (DeviceTensor* t : {&dy, &o, &dots}) t->poison();
        ops::SwigluBackwardOptions options;
        options.gemm.tile = tile;
        if (all) {
          options.row_dots = dots.view();
          options.row_scale = rstd.vector_view();
          options.output = o.view();
        }
        ops::gemm_swiglu_backward(dp.view(), w_down.view(), y.view(), dy.view(), nullptr, options);
        CODA_CUDA_CHECK(cudaDeviceSynchronize());
        Repeat first_run({&dy, &o, &dots});
        EXPECT_EQ(unwritten(dy.host), 0);
        EXPECT_TRUE(dy.written_only_inside());

        const reference::Matrix grad_o = reference::gemm(matrix_of(dp), Major::k, matrix_of(w_down), Major::mn);
        const reference::SwigluBackward want = reference::swiglu_backward(grad_o, matrix_of(y), kPartCols);
        const reference::Matrix want_dy = all ? reference::row_scale(want.grad_y, values_of(rstd)) : want.grad_y;
        EXPECT_LT(reference::relative_error(dy.host.matrix(), want_dy), kBf16Tolerance);
        if (all) {
          EXPECT_LT(reference::relative_error(dots.host.matrix(), want.row_partials), kPartialTolerance);
          EXPECT_LT(reference::relative_error(o.host.matrix(), want.output), kBf16Tolerance);
        }

        HostTensor expected(DType::bf16, s.m, 2 * s.n);
        epilogue::SwigluBackward program;
        program.pre_activation = {y.host.bytes.data(), DType::bf16, y.host.view.ld(), 0};
        program.grad_pre_activation = {expected.bytes.data(), DType::bf16, expected.view.ld(), 0};
        if (all) program.row_scale = {rstd.host.bytes.data(), DType::f32, 0};
        reference::run_epilogue(program, grad_o, 0, {kPartRows, kPartCols});
        EXPECT_LT(reference::relative_error(dy.host.matrix(), expected.matrix()), kExecutorTolerance);

        ops::gemm_swiglu_backward(dp.view(), w_down.view(), y.view(), dy.view(), nullptr, options);
        CODA_CUDA_CHECK(cudaDeviceSynchronize());
        first_run.expect_same();
      }
}

TEST(BackwardGpu, ResidualRmsNormBackwardMatchesReference) {
  CODA_REQUIRE_HOPPER();
  for (const Shape& s : kShapes)
    for (int variant = 0; variant < 3; ++variant) {  // scaled dZ; + dH_out; unscaled dZ + dH_out
      // D = dZs W2: dZs (M x N2 = K), W2 (N2 x hidden = N), h and dH M x hidden.
      SCOPED_TRACE(::testing::Message() << "M=" << s.m << " hidden=" << s.n << " N2=" << s.k << " variant " << variant
                                        << ", " << seed_note());
      const int64_t parts = 3;
      DeviceTensor dz(DType::bf16, s.m, s.k), w2(DType::bf16, s.k, s.n), h(DType::bf16, s.m, s.n),
          g(DType::f32, 1, s.n), rstd(DType::f32, 1, s.m), dots(DType::f32, s.m, parts), dh_out(DType::bf16, s.m, s.n);
      dz.random();
      w2.random(-0.2, 0.2);
      h.random(-2.0, 2.0);
      g.random(0.5, 1.5);
      rstd.random(0.5, 2.0);
      dots.random(-1.0, 1.0);
      dh_out.random();
      DeviceTensor dh(DType::bf16, s.m, s.n);
      dh.poison();
      DeviceBuffer workspace(ops::residual_rmsnorm_backward_workspace_bytes(s.m));
      workspace.garbage(5);
      ops::ResidualRmsNormBackwardOptions options;
      if (variant >= 1) options.grad_residual = dh_out.view();
      options.grad_output_scaled = variant != 2;
      ops::gemm_residual_rmsnorm_backward(dz.view(), w2.view(), h.view(), g.vector_view(), rstd.vector_view(),
                                          dots.view(), dh.view(), workspace.get(), workspace.bytes(), nullptr, options);
      CODA_CUDA_CHECK(cudaDeviceSynchronize());
      Repeat first_run({&dh});
      EXPECT_EQ(unwritten(dh.host), 0);
      EXPECT_TRUE(dh.written_only_inside());

      const reference::Vector correction =
          reference::rmsnorm_backward_correction(matrix_of(dots), values_of(rstd), s.n);
      reference::Matrix d = reference::gemm(matrix_of(dz), Major::k, matrix_of(w2), Major::mn);
      if (variant == 2) d = reference::row_scale(d, values_of(rstd));
      const reference::Matrix want = reference::residual_rmsnorm_backward(
          d, matrix_of(h), values_of(g), correction, variant >= 1 ? matrix_of(dh_out) : reference::Matrix(s.m, s.n));
      EXPECT_LT(reference::relative_error(dh.host.matrix(), want), kBf16Tolerance);

      workspace.garbage(6);
      ops::gemm_residual_rmsnorm_backward(dz.view(), w2.view(), h.view(), g.vector_view(), rstd.vector_view(),
                                          dots.view(), dh.view(), workspace.get(), workspace.bytes(), nullptr, options);
      CODA_CUDA_CHECK(cudaDeviceSynchronize());
      first_run.expect_same();
    }
}

TEST(BackwardGpu, RmsNormWeightGradientsMatchReference) {
  CODA_REQUIRE_HOPPER();
  // G = dZs^T h: N2 x hidden, depth T. K = T >= 4096 runs on m128n256 by itself.
  const Shape shapes[] = {{96, 64, 1}, {600, 200, 136}, {1030, 264, 129}, {512, 1024, 4173}, {264, 136, 8200}};
  for (const Shape& s : shapes)
    for (const DType grad_type : {DType::bf16, DType::f32}) {
      SCOPED_TRACE(::testing::Message() << "N2=" << s.m << " hidden=" << s.n << " T=" << s.k << " dW2 "
                                        << name(grad_type) << ", " << seed_note());
      DeviceTensor dz(DType::bf16, s.k, s.m), h(DType::bf16, s.k, s.n), w2(DType::bf16, s.m, s.n),
          g(DType::bf16, 1, s.n);
      dz.random();
      h.random(-2.0, 2.0);
      w2.random(-0.2, 0.2);
      g.random(0.5, 1.5);
      DeviceTensor dw2(grad_type, s.m, s.n), dg(grad_type, 1, s.n);
      dw2.poison();
      dg.poison();
      DeviceBuffer workspace(ops::rmsnorm_weight_gradients_workspace_bytes(s.m, s.n));
      workspace.garbage(7);
      ops::gemm_rmsnorm_weight_gradients(dz.view(), h.view(), w2.view(), g.vector_view(), dw2.view(), dg.vector_view(),
                                         workspace.get(), workspace.bytes());
      CODA_CUDA_CHECK(cudaDeviceSynchronize());
      Repeat first_run({&dw2, &dg});
      EXPECT_EQ(unwritten(dw2.host) + unwritten(dg.host), 0);

      const reference::Matrix product = reference::gemm(matrix_of(dz), Major::mn, matrix_of(h), Major::mn);
      const reference::RmsNormWeightGradients want =
          reference::rmsnorm_weight_gradients(product, matrix_of(w2), values_of(g), kPartRows);
      const double tolerance = grad_type == DType::f32 ? 1e-4 : kBf16Tolerance;
      EXPECT_LT(reference::relative_error(dw2.host.matrix(), want.grad_projection_weight), tolerance);
      EXPECT_LT(reference::relative_error(values_of(dg), reference::combine_column_partials(want.norm_weight_partials,
                                                                                            reference::Combine::sum)),
                tolerance);

      workspace.garbage(8);
      ops::gemm_rmsnorm_weight_gradients(dz.view(), h.view(), w2.view(), g.vector_view(), dw2.view(), dg.vector_view(),
                                         workspace.get(), workspace.bytes());
      CODA_CUDA_CHECK(cudaDeviceSynchronize());
      first_run.expect_same();
    }
}

TEST(BackwardGpu, RopeBackwardMatchesReference) {
  CODA_REQUIRE_HOPPER();
  struct Case {
    int64_t m;
    int head_dim, heads, rotated;
    bool options;
  };
  // head_dim 10: rows of 30 and 50 columns end inside a lane's 4 columns.
  const Case cases[] = {{1, 64, 3, 2, true},    {7, 10, 3, 3, true},   {129, 128, 3, 2, false},
                        {129, 128, 3, 2, true}, {300, 10, 5, 4, true}, {4095, 64, 12, 8, true}};
  const int max_pos = 300;
  for (const Case& c : cases) {
    const int64_t n = int64_t(c.heads) * c.head_dim;
    SCOPED_TRACE(::testing::Message() << "M=" << c.m << " N=" << n << " head_dim " << c.head_dim << " rotated "
                                      << c.rotated << (c.options ? " with every option" : "") << ", " << seed_note());
    const reference::RopeCache cache = reference::rope_cache(max_pos, c.head_dim);
    DeviceTensor cos(DType::f32, max_pos, c.head_dim / 2), sin(DType::f32, max_pos, c.head_dim / 2);
    reference::store(cache.cos, cos.host.view);
    reference::store(cache.sin, sin.host.view);
    cos.upload();
    sin.upload();
    std::vector<int32_t> positions(std::size_t(c.m));
    for (auto& p : positions) p = int32_t(uniform_int(0, max_pos - 1));
    DeviceTensor pos(DType::i32, 1, c.m);
    std::memcpy(pos.host.bytes.data(), positions.data(), positions.size() * 4);
    pos.upload();
    DeviceTensor grad(DType::bf16, c.m, n), y(DType::bf16, c.m, n), rstd(DType::f32, 1, c.m);
    grad.random();
    y.random();
    rstd.random(0.5, 2.0);
    DeviceTensor out(DType::bf16, c.m, n), dots(DType::f32, c.m, epilogue::parts_along(n));
    out.poison();
    dots.poison();
    ops::RopeBackwardOptions options;
    if (c.options) {
      options.output = y.view();
      options.row_dots = dots.view();
      options.row_scale = rstd.vector_view();
    }
    ops::rope_backward(grad.view(), pos.vector_view(), cos.view(), sin.view(), c.head_dim, c.rotated, out.view(),
                       nullptr, options);
    CODA_CUDA_CHECK(cudaDeviceSynchronize());
    Repeat first_run({&out, &dots});
    EXPECT_EQ(unwritten(out.host), 0);
    EXPECT_TRUE(out.written_only_inside());

    const reference::Matrix dy = c.options ? reference::row_scale(matrix_of(grad), values_of(rstd)) : matrix_of(grad);
    const reference::Matrix want = reference::rope_backward(dy, positions, cache, c.head_dim, c.rotated);
    EXPECT_LT(reference::relative_error(out.host.matrix(), want), kBf16Tolerance);
    if (c.options) {
      EXPECT_LT(reference::relative_error(dots.host.matrix(),
                                          reference::row_partial_dots(matrix_of(grad), matrix_of(y), kPartCols)),
                kPartialTolerance);
    }
    ops::rope_backward(grad.view(), pos.vector_view(), cos.view(), sin.view(), c.head_dim, c.rotated, out.view(),
                       nullptr, options);
    CODA_CUDA_CHECK(cudaDeviceSynchronize());
    first_run.expect_same();
  }
}

TEST(BackwardGpu, RowScaleBackwardMatchesReference) {
  CODA_REQUIRE_HOPPER();
  for (const auto& [m, n] : {std::pair<int64_t, int64_t>{1, 8}, {129, 200}, {4095, 1030}}) {
    SCOPED_TRACE(::testing::Message() << "M=" << m << " N=" << n << ", " << seed_note());
    DeviceTensor grad(DType::bf16, m, n), z(DType::bf16, m, n), scale(DType::f32, 1, m);
    grad.random();
    z.random(-2.0, 2.0);
    scale.random(0.5, 2.0);
    DeviceTensor out(DType::bf16, m, n), dots(DType::f32, m, epilogue::parts_along(n));
    out.poison();
    dots.poison();
    ops::row_scale_backward(grad.view(), z.view(), scale.vector_view(), out.view(), dots.view());
    CODA_CUDA_CHECK(cudaDeviceSynchronize());
    Repeat first_run({&out, &dots});
    EXPECT_EQ(unwritten(out.host) + unwritten(dots.host), 0);
    EXPECT_TRUE(out.written_only_inside());
    EXPECT_LT(reference::relative_error(out.host.matrix(), reference::row_scale(matrix_of(grad), values_of(scale))),
              kBf16Tolerance);
    EXPECT_LT(reference::relative_error(dots.host.matrix(),
                                        reference::row_partial_dots(matrix_of(grad), matrix_of(z), kPartCols)),
              kPartialTolerance);
    ops::row_scale_backward(grad.view(), z.view(), scale.vector_view(), out.view(), dots.view());
    CODA_CUDA_CHECK(cudaDeviceSynchronize());
    first_run.expect_same();
  }
}

// A position outside the cache makes that row's rotated columns NaN, as in the forward; the rest
// of the row and the other rows are untouched by it.
TEST(BackwardGpu, RopeBackwardPositionOutsideTheCache) {
  CODA_REQUIRE_HOPPER();
  const int head_dim = 64, heads = 3, rotated = 2, max_pos = 16;
  const int64_t m = 4, n = heads * head_dim;
  const reference::RopeCache cache = reference::rope_cache(max_pos, head_dim);
  DeviceTensor cos(DType::f32, max_pos, head_dim / 2), sin(DType::f32, max_pos, head_dim / 2);
  reference::store(cache.cos, cos.host.view);
  reference::store(cache.sin, sin.host.view);
  cos.upload();
  sin.upload();
  const std::vector<int32_t> positions = {3, -1, max_pos, 5};
  DeviceTensor pos(DType::i32, 1, m);
  std::memcpy(pos.host.bytes.data(), positions.data(), positions.size() * 4);
  pos.upload();
  DeviceTensor grad(DType::bf16, m, n), out(DType::bf16, m, n);
  grad.random();
  out.poison();
  ops::rope_backward(grad.view(), pos.vector_view(), cos.view(), sin.view(), head_dim, rotated, out.view());
  CODA_CUDA_CHECK(cudaDeviceSynchronize());
  out.download();
  const reference::Matrix got = out.host.matrix();
  for (int64_t r = 0; r < m; ++r)
    for (int64_t col = 0; col < n; ++col) {
      const bool bad_row = r == 1 || r == 2;
      if (bad_row && col < rotated * head_dim) EXPECT_TRUE(std::isnan(got(r, col))) << r << ", " << col;
      else EXPECT_FALSE(std::isnan(got(r, col))) << r << ", " << col;
    }
}

}  // namespace
}  // namespace coda::test

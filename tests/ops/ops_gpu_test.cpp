// The fused ops on the GPU, each against the fp64 reference and against the CPU executor running
// the same epilogue program: residue shapes, M = 1, every option, poisoned outputs, bitwise
// repeatability.
#include <gtest/gtest.h>

#include <cmath>

#include "coda/epilogue/parts.hpp"
#include "coda/epilogue/programs/rmsnorm.hpp"
#include "coda/epilogue/programs/swiglu.hpp"
#include "coda/ops/rmsnorm.hpp"
#include "coda/ops/swiglu.hpp"
#include "coda/reference/epilogue_executor.hpp"
#include "coda/reference/gemm.hpp"
#include "coda/reference/rmsnorm.hpp"
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
constexpr Shape kShapes[] = {{1, 512, 64}, {200, 600, 136}, {129, 1030, 264}, {1024, 2048, 1024}};

ref::Matrix matrix_of(const DeviceTensor& t) { return t.host.matrix(); }

// Every element of `t`'s logical region is finite (not the NaN poison).
int64_t unwritten(const HostTensor& t) {
  const ref::Matrix m = t.matrix();
  int64_t count = 0;
  for (double v : m.data) count += std::isnan(v) ? 1 : 0;
  return count;
}

TEST(OpsGpu, SwigluMatchesReferenceAndCpuExecutor) {
  CODA_REQUIRE_HOPPER();
  for (const Shape& s : kShapes)
    for (int variant = 0; variant < 3; ++variant) {  // plain, + pre-activation, + row scale (kernel 6)
      SCOPED_TRACE(::testing::Message() << "M=" << s.m << " N=" << s.n << " K=" << s.k << " variant " << variant << ", "
                                        << seed_note());
      DeviceTensor x(DType::bf16, s.m, s.k), w(DType::bf16, s.n, s.k);
      x.random();
      w.random();
      DeviceTensor out(DType::bf16, s.m, s.n / 2), pre(DType::bf16, s.m, s.n), rstd(DType::f32, 1, s.m);
      rstd.random(0.5, 2.0);
      out.poison();
      pre.poison();
      ops::SwigluOptions options;
      if (variant == 1) options.pre_activation = pre.view();
      if (variant == 2) options.row_scale = rstd.vector_view();
      ops::gemm_swiglu(x.view(), w.view(), out.view(), nullptr, options);
      CODA_CUDA_CHECK(cudaDeviceSynchronize());
      out.download();
      pre.download();
      EXPECT_EQ(unwritten(out.host), 0);

      // fp64 reference
      ref::Matrix y = ref::gemm(matrix_of(x), Major::k, matrix_of(w), Major::k);
      if (variant == 2) y = ref::row_scale(y, rstd.host.matrix().data);
      EXPECT_LT(ref::relative_error(out.host.matrix(), ref::swiglu(y)), kBf16Tolerance);
      if (variant == 1) {
        EXPECT_LT(ref::relative_error(pre.host.matrix(), y), kBf16Tolerance);
      }

      // the CPU executor, same program, host buffers
      HostTensor expected(DType::bf16, s.m, s.n / 2);
      epilogue::Swiglu program;
      program.out = {expected.bytes.data(), DType::bf16, expected.view.ld(), 0};
      if (variant == 2) program.row_scale = {rstd.host.bytes.data(), DType::f32, 0};
      ref::run_epilogue(program, ref::gemm(matrix_of(x), Major::k, matrix_of(w), Major::k), 0, {kPartRows, kPartCols});
      EXPECT_LT(ref::relative_error(out.host.matrix(), expected.matrix()), kExecutorTolerance);
    }
}

TEST(OpsGpu, ResidualRmsNormThenRowScaleMatchesTheReparameterizedForward) {
  CODA_REQUIRE_HOPPER();
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(::testing::Message() << "M=" << s.m << " N=" << s.n << " K=" << s.k << ", " << seed_note());
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
    const float eps = 1e-6f;
    ops::gemm_residual_rmsnorm(x.view(), w1.view(), r.view(), g.vector_view(), eps, h.view(), u.view(),
                               rstd.vector_view(), workspace.get(), workspace.bytes());
    ops::gemm_row_scale(u.view(), w2.view(), rstd.vector_view(), z.view());
    CODA_CUDA_CHECK(cudaDeviceSynchronize());
    h.download();
    u.download();
    rstd.download();
    z.download();
    EXPECT_EQ(unwritten(h.host) + unwritten(u.host) + unwritten(z.host), 0);

    const ref::Matrix y = ref::gemm(matrix_of(x), Major::k, matrix_of(w1), Major::k);
    const ref::ResidualRmsNorm want = ref::residual_rmsnorm(y, matrix_of(r), g.host.matrix().data, kPartCols);
    const ref::Vector want_rstd = ref::rstd_from_partials(want.sum_squares, s.n, eps);
    EXPECT_LT(ref::relative_error(h.host.matrix(), want.residual), kBf16Tolerance);
    EXPECT_LT(ref::relative_error(u.host.matrix(), want.weighted), kBf16Tolerance);
    EXPECT_LT(ref::relative_error(rstd.host.matrix().data, want_rstd), 1e-5);
    // z = rstd * (u W2^T) from the bf16 u the GPU stored
    const ref::Matrix want_z = ref::row_scale(ref::gemm(u.host.matrix(), Major::k, matrix_of(w2), Major::k), rstd.host.matrix().data);
    EXPECT_LT(ref::relative_error(z.host.matrix(), want_z), kBf16Tolerance);
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
  DeviceTensor h(DType::bf16, s.m, s.n), u(DType::bf16, s.m, s.n), rstd(DType::f32, 1, s.m), o(DType::bf16, s.m, s.n / 2);
  DeviceBuffer workspace(ops::residual_rmsnorm_workspace_bytes(s.m, s.n));
  std::vector<unsigned char> first[4];
  for (int run = 0; run < 2; ++run) {
    h.poison();
    u.poison();
    rstd.poison();
    o.poison();
    ops::gemm_residual_rmsnorm(x.view(), w.view(), r.view(), g.vector_view(), 1e-5f, h.view(), u.view(),
                               rstd.vector_view(), workspace.get(), workspace.bytes());
    ops::gemm_swiglu(x.view(), w.view(), o.view());
    CODA_CUDA_CHECK(cudaDeviceSynchronize());
    int i = 0;
    for (DeviceTensor* t : {&h, &u, &rstd, &o}) {
      t->download();
      if (run == 0) first[i] = t->host.bytes;
      else EXPECT_EQ(t->host.bytes, first[i]) << "output " << i;
      ++i;
    }
  }
}

}  // namespace
}  // namespace coda::test

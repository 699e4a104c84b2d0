// The GEMM–residual–RMSNorm–GEMM block on the GPU against the fp64 reference
// (reference/gemm_rmsnorm_gemm.hpp) from the same bf16 inputs: T = 1, 7, 129 and 4095, with and
// without a gradient reaching h from later layers, outputs poisoned, a garbage workspace, every
// output and gradient, the same bits on a second run.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "coda/blocks/gemm_rmsnorm_gemm.hpp"
#include "coda/reference/gemm_rmsnorm_gemm.hpp"
#include "support/device_tensor.hpp"

namespace coda::test {
namespace {

constexpr double kForwardTolerance = 1e-2;
constexpr double kGradientTolerance = 3e-2;

reference::Vector values_of(const DeviceTensor& t) { return t.host.matrix().data; }

struct Pair {
  Pair(int64_t t, int64_t k, int64_t h, int64_t n2)
      : x(DType::bf16, t, k),
        residual(DType::bf16, t, h),
        w1(DType::bf16, h, k),
        norm(DType::f32, 1, h),
        w2(DType::bf16, n2, h),
        z(DType::bf16, t, n2),
        h_out(DType::bf16, t, h),
        rstd(DType::f32, 1, t),
        grad_z(DType::bf16, t, n2),
        grad_h(DType::bf16, t, h),
        dx(DType::bf16, t, k),
        dr(DType::bf16, t, h),
        dw1(DType::bf16, h, k),
        dnorm(DType::f32, 1, h),
        dw2(DType::f32, n2, h) {
    x.random();
    residual.random(-2.0, 2.0);
    w1.random(-1.0 / std::sqrt(double(k)), 1.0 / std::sqrt(double(k)));
    w2.random(-1.0 / std::sqrt(double(h)), 1.0 / std::sqrt(double(h)));
    norm.random(0.5, 1.5);
    grad_z.random();
    grad_h.random();
    for (DeviceTensor* o : outputs()) o->poison();
  }

  std::vector<DeviceTensor*> outputs() { return {&z, &h_out, &rstd, &dx, &dr, &dw1, &dnorm, &dw2}; }
  blocks::NormPairWeights weights() const { return {w1.view(), norm.vector_view(), w2.view(), 1e-6f}; }
  blocks::NormPairSaved saved() const { return {h_out.view(), rstd.vector_view()}; }

  void run(DeviceBuffer& workspace, bool with_grad_h) {
    blocks::gemm_rmsnorm_gemm_forward(weights(), x.view(), residual.view(), z.view(), saved(), workspace.get(),
                                      workspace.bytes());
    blocks::gemm_rmsnorm_gemm_backward(
        weights(), x.view(), z.view(), saved(), grad_z.view(), with_grad_h ? grad_h.view() : TensorView{},
        {dx.view(), dr.view(), dw1.view(), dnorm.vector_view(), dw2.view()}, workspace.get(), workspace.bytes());
    CODA_CUDA_CHECK(cudaDeviceSynchronize());
    for (DeviceTensor* o : outputs()) o->download();
  }

  DeviceTensor x, residual, w1, norm, w2, z, h_out, rstd, grad_z, grad_h, dx, dr, dw1, dnorm, dw2;
};

void expect_close(const char* what, const reference::Matrix& got, const reference::Matrix& want, double tolerance) {
  EXPECT_LT(reference::relative_error(got, want), tolerance) << what;
}

TEST(NormPairGpu, ForwardAndBackwardMatchTheReference) {
  CODA_REQUIRE_HOPPER();
  for (const int64_t t : {1, 7, 129, 4095})
    for (const bool with_grad_h : {false, true}) {
      const int64_t k = 192, h = 256, n2 = 384;
      SCOPED_TRACE(::testing::Message() << "T=" << t << (with_grad_h ? " with" : " without") << " grad_h, "
                                        << seed_note());
      Pair p(t, k, h, n2);
      DeviceBuffer workspace(blocks::gemm_rmsnorm_gemm_workspace_bytes(p.weights(), t));
      workspace.garbage(21);
      p.run(workspace, with_grad_h);

      const reference::GemmRmsNormGemm layer{p.x.host.matrix(), p.w1.host.matrix(), p.residual.host.matrix(),
                                             values_of(p.norm), p.w2.host.matrix(), 1e-6};
      const reference::GemmRmsNormGemmForward want = reference::gemm_rmsnorm_gemm_forward(layer);
      expect_close("h", p.h_out.host.matrix(), want.residual_out, kForwardTolerance);
      expect_close("z", p.z.host.matrix(), want.output, kForwardTolerance);
      EXPECT_LT(reference::relative_error(values_of(p.rstd), want.rstd), 1e-3);
      // The backward from what the GPU's forward saved, as the block's backward sees it.
      const reference::GemmRmsNormGemmForward saved{p.h_out.host.matrix(), values_of(p.rstd), p.z.host.matrix()};
      const reference::Matrix grad_h = with_grad_h ? p.grad_h.host.matrix() : reference::Matrix(t, h);
      const reference::GemmRmsNormGemmGradients g =
          reference::gemm_rmsnorm_gemm_backward(layer, saved, p.grad_z.host.matrix(), grad_h);
      expect_close("dx", p.dx.host.matrix(), g.x, kGradientTolerance);
      expect_close("dr", p.dr.host.matrix(), g.residual, kGradientTolerance);
      expect_close("dW1", p.dw1.host.matrix(), g.w1, kGradientTolerance);
      expect_close("dW2", p.dw2.host.matrix(), g.w2, kGradientTolerance);
      EXPECT_LT(reference::relative_error(values_of(p.dnorm), g.norm_weight), kGradientTolerance) << "dg";

      std::vector<std::vector<unsigned char>> first;
      for (DeviceTensor* o : p.outputs()) first.push_back(o->host.bytes);
      workspace.garbage(22);
      p.run(workspace, with_grad_h);
      for (std::size_t i = 0; i < first.size(); ++i)
        EXPECT_EQ(p.outputs()[i]->host.bytes, first[i]) << "output " << i << " changed between two runs";
    }
}

}  // namespace
}  // namespace coda::test

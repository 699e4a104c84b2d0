// A user's own epilogue program, out = 2 (A B^T)^2, built against the installed headers: checked on
// the CPU executor against the plain computation, then launched on the GPU where there is one.
#include <cmath>
#include <cstdio>

#include "coda/core/device.hpp"
#include "coda/epilogue/launch.cuh"
#include "coda/reference/epilogue_executor.hpp"
#include "coda/reference/gemm.hpp"

namespace {

struct ScaledSquare {
  coda::epilogue::TileOut out;
  template <class Tile>
  CODA_HD void operator()(Tile& t) const {
    t.store(out, [](const coda::epilogue::Element& x) { return 2.0f * x.value * x.value; });
  }
};

}  // namespace

int run_scaled_square() {
  const int64_t m = 40, n = 24, k = 16;
  coda::reference::Matrix a(m, k), b(n, k);
  for (std::size_t i = 0; i < a.data.size(); ++i) a.data[i] = double(int(i % 7) - 3) / 4;
  for (std::size_t i = 0; i < b.data.size(); ++i) b.data[i] = double(int(i % 5) - 2) / 4;
  const coda::reference::Matrix product = coda::reference::gemm(a, coda::Major::k, b, coda::Major::k);
  std::vector<float> out(std::size_t(m * n));
  ScaledSquare program{{out.data(), coda::DType::f32, n, 0, 1.0f}};
  coda::reference::run_epilogue(program, product, 0, {coda::epilogue::kPartRows, coda::epilogue::kPartCols});
  double worst = 0;
  for (int64_t i = 0; i < m * n; ++i)
    worst = std::max(worst,
                     std::fabs(out[std::size_t(i)] - 2 * product.data[std::size_t(i)] * product.data[std::size_t(i)]));
  std::printf("ScaledSquare on the CPU executor: largest difference %g\n", worst);
  if (worst > 1e-5) return 1;
  if (!coda::hopper_available()) return 0;
  // On a Hopper GPU the same program runs inside the GEMM (its kernels built by this project).
  float* device = nullptr;
  __nv_bfloat16 *da = nullptr, *db = nullptr;
  cudaMalloc(&device, out.size() * 4);
  cudaMalloc(&da, std::size_t(m * k) * 2);
  cudaMalloc(&db, std::size_t(n * k) * 2);
  cudaMemset(da, 0, std::size_t(m * k) * 2);
  cudaMemset(db, 0, std::size_t(n * k) * 2);
  ScaledSquare gpu{coda::epilogue::tile_out(coda::TensorView::matrix(device, coda::DType::f32, m, n), "out")};
  coda::epilogue::gemm_program({coda::TensorView::matrix(da, coda::DType::bf16, m, k), coda::Major::k},
                               {coda::TensorView::matrix(db, coda::DType::bf16, n, k), coda::Major::k}, gpu, nullptr,
                               {}, coda::epilogue::OutputTypes<coda::DType::f32>{});
  const bool ok = cudaDeviceSynchronize() == cudaSuccess;
  std::printf("ScaledSquare on the GPU: %s\n", ok ? "ran" : "failed");
  return ok ? 0 : 1;
}

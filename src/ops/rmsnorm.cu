#include "coda/ops/rmsnorm.hpp"

#include "coda/epilogue/host_arguments.hpp"
#include "coda/epilogue/launch.cuh"
#include "coda/epilogue/programs/rmsnorm.hpp"
#include "op_checks.hpp"

namespace coda::ops {
namespace {

constexpr const char* kResidualRmsNorm = "coda::ops::gemm_residual_rmsnorm";
constexpr const char* kRowScale = "coda::ops::gemm_row_scale";

// rstd[m] = rsqrt(sum_b S[m, b] / N + eps), parts added in order: one thread per row. The
// parts are loaded eight at a time before they are added, so a row waits for about one memory
// latency per eight parts, not one per part.
__global__ void rstd_from_partials(const float* sum_squares, int64_t parts, int64_t rows, int64_t n, float eps,
                                   float* rstd) {
  const int64_t m = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (m >= rows) return;
  const float* row = sum_squares + m * parts;
  constexpr int kBatch = 8;
  float total = 0.0f;
  for (int64_t b = 0; b < parts; b += kBatch) {
    float batch[kBatch];
#pragma unroll
    for (int j = 0; j < kBatch; ++j) batch[j] = b + j < parts ? row[b + j] : 0.0f;
#pragma unroll
    for (int j = 0; j < kBatch; ++j) total += batch[j];
  }
  rstd[m] = rsqrtf(total / float(n) + eps);
}

}  // namespace

std::size_t residual_rmsnorm_workspace_bytes(int64_t m, int64_t n) {
  ArgumentCheck check("coda::ops::residual_rmsnorm_workspace_bytes");
  check.positive("m", m, "M").positive("n", n, "N");
  check.throw_if_error();
  return std::size_t(m) * std::size_t(parts_along(n)) * sizeof(float);
}

void gemm_residual_rmsnorm(const TensorView& x, const TensorView& w, const TensorView& residual,
                           const TensorView& weight, float eps, const TensorView& h, const TensorView& u,
                           const TensorView& rstd, void* workspace, std::size_t workspace_bytes, cudaStream_t stream,
                           const ResidualRmsNormOptions& options) {
  reported_by(kResidualRmsNorm, [&] {
    ArgumentCheck check(kResidualRmsNorm);
    const GemmShape g = check_projection(check, x, w);
    check_output(check, "residual", residual, g.m, g.n, x.dtype);
    check_output(check, "h", h, g.m, g.n, x.dtype);
    // Without u (g folded into the next GEMM's weight) the weight is not read: it may be empty too.
    if (u.data) check_output(check, "u", u, g.m, g.n, x.dtype);
    if (u.data || weight.data) check_vector(check, "weight", weight, g.n, {DType::f32, DType::bf16, DType::f16});
    check_vector(check, "rstd", rstd, g.m, {DType::f32});
    check.throw_if_error();
    const std::size_t needed = residual_rmsnorm_workspace_bytes(g.m, g.n);
    check.require(eps >= 0.0f, "eps", "is ", eps, " but must be >= 0");
    check_workspace(check, workspace, workspace_bytes, needed, "coda::ops::residual_rmsnorm_workspace_bytes");
    check.throw_if_error();
    const epilogue::ProgramPlan plan =
        epilogue::plan_program<epilogue::ResidualRmsNorm>({x, Major::k}, {w, Major::k}, options.gemm, kResidualRmsNorm);

    const int64_t parts = parts_along(g.n);
    epilogue::ResidualRmsNorm program;
    program.residual = epilogue::tile_in(residual, "residual");
    program.residual_out = epilogue::tile_out(h, "h");
    if (u.data) {
      program.out = epilogue::tile_out(u, "u");
      program.weight = epilogue::row_vector(weight, "weight");
    }
    program.sum_squares = epilogue::row_partials(TensorView::matrix(workspace, DType::f32, g.m, parts), "workspace");
    epilogue::launch_program(plan, program, stream);
    const int threads = 128;  // 128 CTAs at 16K rows: more SMs share the loads
    rstd_from_partials<<<unsigned((g.m + threads - 1) / threads), threads, 0, stream>>>(
        static_cast<const float*>(workspace), parts, g.m, g.n, eps, static_cast<float*>(rstd.data));
    CODA_CUDA_CHECK(cudaGetLastError());
  });
}

Status try_gemm_residual_rmsnorm(const TensorView& x, const TensorView& w, const TensorView& residual,
                                 const TensorView& weight, float eps, const TensorView& h, const TensorView& u,
                                 const TensorView& rstd, void* workspace, std::size_t workspace_bytes,
                                 cudaStream_t stream, const ResidualRmsNormOptions& options) {
  return status_of(kResidualRmsNorm, [&] {
    gemm_residual_rmsnorm(x, w, residual, weight, eps, h, u, rstd, workspace, workspace_bytes, stream, options);
  });
}

void gemm_row_scale(const TensorView& x, const TensorView& w, const TensorView& rstd, const TensorView& out,
                    cudaStream_t stream, const RowScaleOptions& options) {
  reported_by(kRowScale, [&] {
    ArgumentCheck check(kRowScale);
    const GemmShape g = check_projection(check, x, w);
    check_output(check, "out", out, g.m, g.n, x.dtype);
    check_vector(check, "rstd", rstd, g.m, {DType::f32});
    check.throw_if_error();
    const epilogue::ProgramPlan plan =
        epilogue::plan_program<epilogue::RowScale>({x, Major::k}, {w, Major::k}, options.gemm, kRowScale);
    epilogue::RowScale program;
    program.scale = epilogue::column_vector(rstd, "rstd");
    program.out = epilogue::tile_out(out, "out");
    epilogue::launch_program(plan, program, stream);
  });
}

Status try_gemm_row_scale(const TensorView& x, const TensorView& w, const TensorView& rstd, const TensorView& out,
                          cudaStream_t stream, const RowScaleOptions& options) {
  return status_of(kRowScale, [&] { gemm_row_scale(x, w, rstd, out, stream, options); });
}

}  // namespace coda::ops

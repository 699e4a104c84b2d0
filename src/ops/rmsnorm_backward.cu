// The GEMM-residual-RMSNorm-GEMM backward (epilogue/programs/rmsnorm.hpp, docs/kernels.md):
// gemm_residual_rmsnorm_backward (the correction c' from the row partials of <dZ, Z>, then
// D' = dZs W2 with ResidualRmsNormBackward) and gemm_rmsnorm_weight_gradients (G = dZs^T H with
// RmsNormWeightGradients, then dg from its column partials).
#include "coda/epilogue/host_arguments.hpp"
#include "coda/epilogue/launch.cuh"
#include "coda/epilogue/programs/rmsnorm.hpp"
#include "coda/ops/rmsnorm.hpp"
#include "op_checks.hpp"

namespace coda::ops {
namespace {

constexpr const char* kResidualBackward = "coda::ops::gemm_residual_rmsnorm_backward";
constexpr const char* kWeightGradients = "coda::ops::gemm_rmsnorm_weight_gradients";
constexpr const char* kRows = "one row per row of grad_output";
constexpr int kThreads = 128;

unsigned blocks_for(int64_t n) { return unsigned((n + kThreads - 1) / kThreads); }

// c'[m] = rstd[m]^2 (sum_b P[m, b]) / hidden, the parts added in order: one thread per row.
__global__ void correction_from_row_dots(const float* row_dots, int64_t ld, int64_t parts, const float* rstd,
                                         int64_t rows, int64_t hidden, float* correction) {
  const int64_t m = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (m >= rows) return;
  const float* row = row_dots + m * ld;
  float total = 0.0f;
  for (int64_t b = 0; b < parts; ++b) total += row[b];
  const float r = rstd[m];
  correction[m] = r * r * total / float(hidden);
}

// dg[n] = sum_b partials[b, n], the parts added in order: one thread per column (adjacent threads,
// adjacent columns: every part's row is read coalesced).
template <class Out>
__global__ void sum_column_partials(const float* partials, int64_t parts, int64_t columns, Out* out) {
  const int64_t n = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (n >= columns) return;
  float total = 0.0f;
  for (int64_t b = 0; b < parts; ++b) total += partials[b * columns + n];
  out[n] = Out(total);
}

// The norm weight's gradient in its dtype (f32, bf16 or f16: check_vector).
void launch_sum_column_partials(const float* partials, int64_t parts, const TensorView& out, cudaStream_t stream) {
  const int64_t n = out.shape[0];
  if (out.dtype == DType::f32)
    sum_column_partials<<<blocks_for(n), kThreads, 0, stream>>>(partials, parts, n, static_cast<float*>(out.data));
  else if (out.dtype == DType::bf16)
    sum_column_partials<<<blocks_for(n), kThreads, 0, stream>>>(partials, parts, n,
                                                                static_cast<__nv_bfloat16*>(out.data));
  else sum_column_partials<<<blocks_for(n), kThreads, 0, stream>>>(partials, parts, n, static_cast<__half*>(out.data));
  CODA_CUDA_CHECK(cudaGetLastError());
}

constexpr std::size_t kAlignment = 256;
std::size_t aligned(std::size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

}  // namespace

int64_t row_partial_count(int64_t n) {
  ArgumentCheck check("coda::ops::row_partial_count");
  check.positive("n", n, "the columns");
  check.throw_if_error();
  return parts_along(n);
}

std::size_t residual_rmsnorm_backward_workspace_bytes(int64_t m) {
  ArgumentCheck check("coda::ops::residual_rmsnorm_backward_workspace_bytes");
  check.positive("m", m, "M");
  check.throw_if_error();
  return aligned(std::size_t(m) * sizeof(float));
}

void gemm_residual_rmsnorm_backward(const TensorView& grad_output, const TensorView& w, const TensorView& h,
                                    const TensorView& weight, const TensorView& rstd, const TensorView& row_dots,
                                    const TensorView& grad_h, void* workspace, std::size_t workspace_bytes,
                                    cudaStream_t stream, const ResidualRmsNormBackwardOptions& options) {
  reported_by(kResidualBackward, [&] {
    ArgumentCheck check(kResidualBackward);
    const GemmShape g = check_gradient_projection(check, "grad_output", grad_output, "w", w);
    const DType type = grad_output.dtype;
    check_output(check, "h", h, g.m, g.n, type, kRows);
    check_output(check, "grad_h", grad_h, g.m, g.n, type, kRows);
    if (options.grad_residual.data)
      check_output(check, "options.grad_residual", options.grad_residual, g.m, g.n, type, kRows);
    check_vector(check, "weight", weight, g.n, {DType::f32, DType::bf16, DType::f16});
    check_vector(check, "rstd", rstd, g.m, {DType::f32});
    check.not_null("row_dots", row_dots.data).rank_in("row_dots", row_dots, 2, 2);
    if (!check.failed())
      check_partials(check, "row_dots", row_dots, g.m, row_dots.cols(), kRows, "any number of parts");
    check.throw_if_error();
    const std::size_t needed = residual_rmsnorm_backward_workspace_bytes(g.m);
    check_workspace(check, workspace, workspace_bytes, needed, "coda::ops::residual_rmsnorm_backward_workspace_bytes");
    check.throw_if_error();
    // From K = kCooperativeProgramMinK the program runs on the m128n256 tile, as an unstaged program
    // is planned (epilogue/plan.hpp), H then read from global memory.
    const bool cooperative =
        options.gemm.tile == GemmTile::m128n256 ||
        (options.gemm.tile == GemmTile::automatic && grad_output.cols() >= epilogue::kCooperativeProgramMinK);
    const GemmOperand a{grad_output, Major::k}, b{w, Major::mn};
    const epilogue::ProgramPlan plan =
        cooperative
            ? epilogue::plan_program<epilogue::ResidualRmsNormBackwardOf<false>>(a, b, options.gemm, kResidualBackward)
            : epilogue::plan_program<epilogue::ResidualRmsNormBackwardOf<true>>(a, b, options.gemm, kResidualBackward);

    float* correction = static_cast<float*>(workspace);
    correction_from_row_dots<<<blocks_for(g.m), kThreads, 0, stream>>>(
        static_cast<const float*>(row_dots.data), row_dots.ld(), row_dots.cols(), static_cast<const float*>(rstd.data),
        g.m, g.n, correction);
    CODA_CUDA_CHECK(cudaGetLastError());

    const auto launch = [&]<bool kStaged>() {
      epilogue::ResidualRmsNormBackwardOf<kStaged> program;
      program.residual = epilogue::tile_in(h, "h");
      if (options.grad_residual.data)
        program.grad_residual = epilogue::tile_in(options.grad_residual, "options.grad_residual");
      program.weight = epilogue::row_vector(weight, "weight");
      program.correction = epilogue::column_vector(TensorView::vector(correction, DType::f32, g.m), "workspace");
      if (!options.grad_output_scaled) program.row_scale = epilogue::column_vector(rstd, "rstd");
      program.grad_residual_out = epilogue::tile_out(grad_h, "grad_h");
      epilogue::launch_program(plan, program, stream, epilogue::OutputTypes<>{},
                               epilogue::OperandMajors<Major::k, Major::mn>{});
    };
    if (cooperative) launch.template operator()<false>();
    else launch.template operator()<true>();
  });
}

Status try_gemm_residual_rmsnorm_backward(const TensorView& grad_output, const TensorView& w, const TensorView& h,
                                          const TensorView& weight, const TensorView& rstd, const TensorView& row_dots,
                                          const TensorView& grad_h, void* workspace, std::size_t workspace_bytes,
                                          cudaStream_t stream, const ResidualRmsNormBackwardOptions& options) {
  return status_of(kResidualBackward, [&] {
    gemm_residual_rmsnorm_backward(grad_output, w, h, weight, rstd, row_dots, grad_h, workspace, workspace_bytes,
                                   stream, options);
  });
}

std::size_t rmsnorm_weight_gradients_workspace_bytes(int64_t n2, int64_t hidden) {
  ArgumentCheck check("coda::ops::rmsnorm_weight_gradients_workspace_bytes");
  check.positive("n2", n2, "N2").positive("hidden", hidden, "hidden");
  check.throw_if_error();
  return aligned(std::size_t(epilogue::parts_along_rows(n2)) * std::size_t(hidden) * sizeof(float));
}

void gemm_rmsnorm_weight_gradients(const TensorView& grad_output, const TensorView& h, const TensorView& w,
                                   const TensorView& weight, const TensorView& grad_w, const TensorView& grad_weight,
                                   void* workspace, std::size_t workspace_bytes, cudaStream_t stream,
                                   const RmsNormWeightGradientsOptions& options) {
  reported_by(kWeightGradients, [&] {
    ArgumentCheck check(kWeightGradients);
    const GemmShape g = check_weight_gradient(check, "grad_output", grad_output, "h", h);
    const DType type = grad_output.dtype;
    constexpr const char* kWeightRows = "one row per column of grad_output (W2 is N2 x hidden)";
    check_output(check, "w", w, g.m, g.n, type, kWeightRows);
    check.not_null("grad_w", grad_w.data).dtype_in("grad_w", grad_w.dtype, {type, DType::f32});
    if (!check.failed()) check_output(check, "grad_w", grad_w, g.m, g.n, grad_w.dtype, kWeightRows);
    check_vector(check, "weight", weight, g.n, {DType::f32, DType::bf16, DType::f16});
    check_vector(check, "grad_weight", grad_weight, g.n, {DType::f32, DType::bf16, DType::f16});
    check.throw_if_error();
    const std::size_t needed = rmsnorm_weight_gradients_workspace_bytes(g.m, g.n);
    check_workspace(check, workspace, workspace_bytes, needed, "coda::ops::rmsnorm_weight_gradients_workspace_bytes");
    check.throw_if_error();
    const epilogue::ProgramPlan plan = epilogue::plan_program<epilogue::RmsNormWeightGradients>(
        {grad_output, Major::mn}, {h, Major::mn}, options.gemm, kWeightGradients);

    const int64_t parts = epilogue::parts_along_rows(g.m);
    epilogue::RmsNormWeightGradients program;
    program.projection_weight = epilogue::tile_in(w, "w");
    program.norm_weight = epilogue::row_vector(weight, "weight");
    program.grad_projection_weight = epilogue::tile_out(grad_w, "grad_w");
    program.norm_weight_partials =
        epilogue::column_partials(TensorView::matrix(workspace, DType::f32, parts, g.n), "workspace");
    epilogue::launch_program(plan, program, stream, epilogue::OutputTypes<DType::f32>{},
                             epilogue::OperandMajors<Major::mn, Major::mn>{});
    launch_sum_column_partials(static_cast<const float*>(workspace), parts, grad_weight, stream);
  });
}

Status try_gemm_rmsnorm_weight_gradients(const TensorView& grad_output, const TensorView& h, const TensorView& w,
                                         const TensorView& weight, const TensorView& grad_w,
                                         const TensorView& grad_weight, void* workspace, std::size_t workspace_bytes,
                                         cudaStream_t stream, const RmsNormWeightGradientsOptions& options) {
  return status_of(kWeightGradients, [&] {
    gemm_rmsnorm_weight_gradients(grad_output, h, w, weight, grad_w, grad_weight, workspace, workspace_bytes, stream,
                                  options);
  });
}

}  // namespace coda::ops

// gemm_swiglu_backward: the GEMM dO = dP W_down with SwigluBackward (epilogue/programs/swiglu.hpp)
// as its epilogue. W_down is the forward's nn.Linear weight (H x F): this GEMM's B, read N-major.
#include "coda/epilogue/host_arguments.hpp"
#include "coda/epilogue/launch.cuh"
#include "coda/epilogue/programs/swiglu.hpp"
#include "coda/ops/swiglu.hpp"
#include "op_checks.hpp"

namespace coda::ops {
namespace {

constexpr const char* kFunction = "coda::ops::gemm_swiglu_backward";
constexpr const char* kRows = "one row per row of grad_output";

}  // namespace

void gemm_swiglu_backward(const TensorView& grad_output, const TensorView& w_down, const TensorView& pre_activation,
                          const TensorView& grad_pre_activation, cudaStream_t stream,
                          const SwigluBackwardOptions& options) {
  reported_by(kFunction, [&] {
    ArgumentCheck check(kFunction);
    const GemmShape g = check_gradient_projection(check, "grad_output", grad_output, "w_down", w_down);
    const DType type = grad_output.dtype;
    check_output(check, "pre_activation", pre_activation, g.m, 2 * g.n, type, kRows);
    check_output(check, "grad_pre_activation", grad_pre_activation, g.m, 2 * g.n, type, kRows);
    if (options.output.data) check_output(check, "options.output", options.output, g.m, g.n, type, kRows);
    if (options.row_scale.data) check_vector(check, "options.row_scale", options.row_scale, g.m, {DType::f32});
    if (options.row_dots.data)
      check_partials(check, "options.row_dots", options.row_dots, g.m, parts_along(g.n), kRows,
                     "one per 128 columns of dO: row_partial_count(F)");
    check.throw_if_error();
    const epilogue::ProgramPlan plan = epilogue::plan_program<epilogue::SwigluBackward>(
        {grad_output, Major::k}, {w_down, Major::mn}, options.gemm, kFunction);

    epilogue::SwigluBackward program;
    program.pre_activation = epilogue::tile_in(pre_activation, "pre_activation");
    program.grad_pre_activation = epilogue::tile_out(grad_pre_activation, "grad_pre_activation");
    if (options.row_dots.data) program.row_dots = epilogue::row_partials(options.row_dots, "options.row_dots");
    if (options.row_scale.data) program.row_scale = epilogue::column_vector(options.row_scale, "options.row_scale");
    if (options.output.data) program.output = epilogue::tile_out(options.output, "options.output");
    epilogue::launch_program(plan, program, stream, epilogue::OutputTypes<>{},
                             epilogue::OperandMajors<Major::k, Major::mn>{});
  });
}

Status try_gemm_swiglu_backward(const TensorView& grad_output, const TensorView& w_down,
                                const TensorView& pre_activation, const TensorView& grad_pre_activation,
                                cudaStream_t stream, const SwigluBackwardOptions& options) {
  return status_of(kFunction, [&] {
    gemm_swiglu_backward(grad_output, w_down, pre_activation, grad_pre_activation, stream, options);
  });
}

}  // namespace coda::ops

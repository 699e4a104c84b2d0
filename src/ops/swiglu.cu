#include "coda/ops/swiglu.hpp"

#include <cstring>

#include "coda/epilogue/host_arguments.hpp"
#include "coda/epilogue/launch.cuh"
#include "coda/epilogue/programs/swiglu.hpp"
#include "op_checks.hpp"

namespace coda::ops {
namespace {

constexpr const char* kFunction = "coda::ops::gemm_swiglu";

}  // namespace

void gemm_swiglu(const TensorView& x, const TensorView& w, const TensorView& out, cudaStream_t stream,
                 const SwigluOptions& options) {
  reported_by(kFunction, [&] {
    ArgumentCheck check(kFunction);
    const GemmShape g = check_projection(check, x, w);
    check.require(g.n % 2 == 0, "w", "has ", g.n, " rows but needs an even number (gate and up interleaved)");
    check_output(check, "out", out, g.m, g.n / 2, x.dtype);
    if (options.pre_activation.data)
      check_output(check, "options.pre_activation", options.pre_activation, g.m, g.n, x.dtype);
    if (options.row_scale.data) check_vector(check, "options.row_scale", options.row_scale, g.m, {DType::f32});
    check.throw_if_error();
    const epilogue::ProgramPlan plan =
        epilogue::plan_program<epilogue::Swiglu>({x, Major::k}, {w, Major::k}, options.gemm, kFunction);

    epilogue::Swiglu program;
    program.out = epilogue::tile_out(out, "out");
    if (options.pre_activation.data)
      program.pre_activation = epilogue::tile_out(options.pre_activation, "options.pre_activation");
    if (options.row_scale.data) program.row_scale = epilogue::column_vector(options.row_scale, "options.row_scale");
    epilogue::launch_program(plan, program, stream);
  });
}

Status try_gemm_swiglu(const TensorView& x, const TensorView& w, const TensorView& out, cudaStream_t stream,
                       const SwigluOptions& options) {
  return status_of(kFunction, [&] { gemm_swiglu(x, w, out, stream, options); });
}

void interleave_gate_up(const TensorView& gate, const TensorView& up, const TensorView& out) {
  constexpr const char* kInterleave = "coda::ops::interleave_gate_up";
  ArgumentCheck check(kInterleave);
  check.not_null("gate", gate.data)
      .not_null("up", up.data)
      .not_null("out", out.data)
      .rank_in("gate", gate, 2, 2)
      .rank_in("up", up, 2, 2)
      .rank_in("out", out, 2, 2)
      .require(up.dtype == gate.dtype && out.dtype == gate.dtype, "out", "gate, up and out must share one dtype")
      .dim_equals("up", up, 0, gate.rows(), "rows", "as many as gate")
      .dim_equals("up", up, 1, gate.cols(), "columns", "as many as gate")
      .dim_equals("out", out, 0, 2 * gate.rows(), "rows", "twice gate's")
      .dim_equals("out", out, 1, gate.cols(), "columns", "as many as gate")
      .inner_contiguous("gate", gate)
      .inner_contiguous("up", up)
      .inner_contiguous("out", out);
  check.throw_if_error();
  const std::size_t row_bytes = std::size_t(gate.cols()) * gate.element_bytes();
  for (int64_t r = 0; r < gate.rows(); ++r) {
    std::memcpy(row_address(out, 2 * r), row_address(gate, r), row_bytes);
    std::memcpy(row_address(out, 2 * r + 1), row_address(up, r), row_bytes);
  }
}

}  // namespace coda::ops

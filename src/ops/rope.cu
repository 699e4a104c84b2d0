#include "coda/ops/rope.hpp"

#include <cstring>

#include "coda/epilogue/host_arguments.hpp"
#include "coda/epilogue/launch.cuh"
#include "coda/epilogue/programs/rope.hpp"
#include "op_checks.hpp"

namespace coda::ops {
namespace {

constexpr const char* kFunction = "coda::ops::gemm_rope";

}  // namespace

void gemm_rope(const TensorView& x, const TensorView& w, const TensorView& positions, const TensorView& cos,
               const TensorView& sin, int head_dim, int rotated_heads, const TensorView& out, cudaStream_t stream,
               const RopeOptions& options) {
  reported_by(kFunction, [&] {
    ArgumentCheck check(kFunction);
    const GemmShape g = check_projection(check, x, w);
    if (!check.failed()) check_heads(check, "w", "rows", g.n, head_dim, rotated_heads);
    check_output(check, "out", out, g.m, g.n, x.dtype);
    check_vector(check, "positions", positions, g.m, {DType::i32});
    check_rope_tables(check, cos, sin, head_dim);
    if (options.row_scale.data) check_vector(check, "options.row_scale", options.row_scale, g.m, {DType::f32});
    check.throw_if_error();
    const epilogue::ProgramPlan plan =
        epilogue::plan_program<epilogue::Rope>({x, Major::k}, {w, Major::k}, options.gemm, kFunction);

    epilogue::Rope program;
    program.positions = epilogue::column_vector(positions, "positions");
    program.cos = epilogue::table(cos, "cos");
    program.sin = epilogue::table(sin, "sin");
    program.head_dim = Divisor(head_dim);
    program.rotated_heads = rotated_heads;
    if (options.row_scale.data) program.row_scale = epilogue::column_vector(options.row_scale, "options.row_scale");
    program.out = epilogue::tile_out(out, "out");
    epilogue::launch_program(plan, program, stream);
  });
}

Status try_gemm_rope(const TensorView& x, const TensorView& w, const TensorView& positions, const TensorView& cos,
                     const TensorView& sin, int head_dim, int rotated_heads, const TensorView& out, cudaStream_t stream,
                     const RopeOptions& options) {
  return status_of(kFunction,
                   [&] { gemm_rope(x, w, positions, cos, sin, head_dim, rotated_heads, out, stream, options); });
}

void permute_rotate_half_to_interleaved(const TensorView& w, int head_dim, int rotated_heads, const TensorView& out) {
  ArgumentCheck check("coda::ops::permute_rotate_half_to_interleaved");
  check.not_null("w", w.data)
      .not_null("out", out.data)
      .rank_in("w", w, 2, 2)
      .rank_in("out", out, 2, 2)
      .require(out.dtype == w.dtype, "out", "must have w's dtype")
      .require(head_dim >= 2 && head_dim % 2 == 0, "head_dim", "is ", head_dim, " but must be even and >= 2")
      .dim_equals("out", out, 0, w.rows(), "rows", "as many as w")
      .dim_equals("out", out, 1, w.cols(), "columns", "as many as w")
      .inner_contiguous("w", w)
      .inner_contiguous("out", out);
  if (!check.failed())
    check.require(w.rows() % head_dim == 0, "w", "has ", w.rows(), " rows, not a whole number of heads")
        .require(rotated_heads >= 0 && rotated_heads <= w.rows() / head_dim, "rotated_heads", "is ", rotated_heads,
                 " but w has ", w.rows() / head_dim, " heads");
  check.throw_if_error();
  const std::size_t row_bytes = std::size_t(w.cols()) * w.element_bytes();
  const int64_t half = head_dim / 2;
  for (int64_t r = 0; r < w.rows(); ++r) {
    const int64_t head = r / head_dim, i = r % head_dim;
    // Interleaved row 2j holds rotate-half row j, row 2j + 1 holds row j + d/2.
    const int64_t source = head < rotated_heads ? head * head_dim + (i % 2 == 0 ? i / 2 : half + i / 2) : r;
    std::memcpy(row_address(out, r), row_address(w, source), row_bytes);
  }
}

}  // namespace coda::ops

// The backward passes over a gradient that comes from outside rather than from a GEMM (attention's
// backward, the caller's loss): rope_backward (the inverse rotation of gemm_rope, the work
// RopeBackward, epilogue/programs/rope.hpp, does in a GEMM's epilogue) and row_scale_backward (no
// rotation). Both scale the gradient by a row scale and emit the row partials of <dY, Y>: the
// operand and the statistic the RMSNorm backward before them takes (rmsnorm.hpp). One kernel, one
// warp per row and part of 128 columns (the parts of the ops' row partials); each lane takes 4
// adjacent columns (two pairs) with one 8-byte load per tensor.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <type_traits>

#include "coda/core/device.hpp"
#include "coda/epilogue/parts.hpp"
#include "coda/ops/rmsnorm.hpp"
#include "coda/ops/rope.hpp"
#include "half_values.cuh"
#include "op_checks.hpp"

namespace coda::ops {
namespace {

constexpr const char* kRopeBackward = "coda::ops::rope_backward";
constexpr const char* kRowScaleBackward = "coda::ops::row_scale_backward";
constexpr const char* kRows = "one row per row of grad_output";
constexpr int kWarps = 8;
constexpr int kColumnsPerLane = 4;
static_assert(32 * kColumnsPerLane == epilogue::kPartCols, "a warp covers one part");

struct RowGradientArguments {
  const void* grad_output;
  int64_t grad_output_ld;
  const void* output;  // null: no row dots
  int64_t output_ld;
  void* grad_input;
  int64_t grad_input_ld;
  const int32_t* positions;  // null when nothing is rotated
  const float* cos;
  const float* sin;
  int64_t cos_ld;
  int64_t sin_ld;
  int64_t table_rows;
  int32_t head_dim;
  int32_t rotated_columns;  // 0: no rotation
  float* row_dots;          // null: none
  int64_t row_dots_ld;
  const float* row_scale;  // null: none
  int64_t rows;
  int64_t cols;
};

// The lane's 4 values of a row from `column` on (fewer past the row's end: zeros), one 8-byte load
// where all 4 are inside (rows are 16-byte aligned and column a multiple of 4).
template <class T>
__device__ void load4(const void* base, int64_t ld, int64_t row, int64_t column, int64_t cols, float (&v)[4]) {
  const T* p = static_cast<const T*>(base) + row * ld + column;
  if (column + 4 <= cols) {
    const uint2 bits = __ldg(reinterpret_cast<const uint2*>(p));
    const T* e = reinterpret_cast<const T*>(&bits);
#pragma unroll
    for (int k = 0; k < 4; ++k) v[k] = to_float(e[k]);
  } else {
#pragma unroll
    for (int k = 0; k < 4; ++k) v[k] = column + k < cols ? to_float(p[k]) : 0.0f;
  }
}

template <class T>
__global__ void __launch_bounds__(32 * kWarps) row_gradient_kernel(RowGradientArguments a) {
  const int64_t parts = epilogue::parts_along(a.cols);
  const int64_t task = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (task >= a.rows * parts) return;  // whole warps: the shuffles below see all 32 lanes
  const int lane = threadIdx.x % 32;
  const int64_t m = task / parts, part = task % parts;
  const int64_t column = part * epilogue::kPartCols + kColumnsPerLane * lane;

  float g[4];
  load4<T>(a.grad_output, a.grad_output_ld, m, column, a.cols, g);
  if (a.row_dots) {  // <dY, Y> over the part, before the rotation (it preserves the dot) and the scale
    float y[4];
    load4<T>(a.output, a.output_ld, m, column, a.cols, y);
    float dot = g[0] * y[0] + g[1] * y[1] + g[2] * y[2] + g[3] * y[3];
#pragma unroll
    for (int mask = 16; mask >= 1; mask /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, mask);
    if (lane == 0) a.row_dots[m * a.row_dots_ld + part] = dot;
  }
  if (column >= a.cols) return;
  const float scale = a.row_scale ? a.row_scale[m] : 1.0f;
  const int32_t position = column < a.rotated_columns ? a.positions[m] : 0;
  const bool known = position >= 0 && position < a.table_rows;
  float out[4];
#pragma unroll
  for (int pair = 0; pair < 2; ++pair) {
    const int64_t c = column + 2 * pair;  // even: a pair's first column
    const float y0 = g[2 * pair] * scale, y1 = g[2 * pair + 1] * scale;
    if (c < a.rotated_columns) {
      // R^T: the angle negated. A position outside the cache makes the pair NaN, as in the forward.
      const int64_t entry = (c % a.head_dim) / 2;
      const float cs = known ? __ldg(a.cos + position * a.cos_ld + entry) : NAN;
      const float sn = known ? __ldg(a.sin + position * a.sin_ld + entry) : NAN;
      out[2 * pair] = y0 * cs + y1 * sn;
      out[2 * pair + 1] = y1 * cs - y0 * sn;
    } else {
      out[2 * pair] = y0;
      out[2 * pair + 1] = y1;
    }
  }
  T* p = static_cast<T*>(a.grad_input) + m * a.grad_input_ld + column;
  if (column + 4 <= a.cols) {
    uint2 bits;
    T* e = reinterpret_cast<T*>(&bits);
#pragma unroll
    for (int k = 0; k < 4; ++k) e[k] = from_float<T>(out[k]);
    *reinterpret_cast<uint2*>(p) = bits;
  } else {
#pragma unroll
    for (int k = 0; k < 4; ++k)
      if (column + k < a.cols) p[k] = from_float<T>(out[k]);
  }
}

void launch_row_gradients(const RowGradientArguments& a, DType dtype, cudaStream_t stream) {
  const int64_t warps = a.rows * epilogue::parts_along(a.cols);
  const unsigned blocks = unsigned((warps + kWarps - 1) / kWarps);
  if (dtype == DType::bf16) row_gradient_kernel<__nv_bfloat16><<<blocks, 32 * kWarps, 0, stream>>>(a);
  else row_gradient_kernel<__half><<<blocks, 32 * kWarps, 0, stream>>>(a);
  CODA_CUDA_CHECK(cudaGetLastError());
}

// The gradient (M x N, 16-bit, TMA-aligned rows like every op's tiles), grad_input, and the options
// both ops share: output with row_dots, row_scale.
void check_row_gradient(ArgumentCheck& check, const TensorView& grad_output, const TensorView& grad_input,
                        const TensorView& output, const TensorView& row_dots, const TensorView& row_scale,
                        const char* output_name, const char* row_dots_name, const char* row_scale_name) {
  const int64_t m = grad_output.rows(), n = grad_output.cols();
  check_output(check, "grad_input", grad_input, m, n, grad_output.dtype, kRows);
  if (row_dots.data) {
    check_partials(check, row_dots_name, row_dots, m, epilogue::parts_along(n), kRows,
                   "one per 128 columns: row_partial_count(N)");
    check.require(output.data != nullptr, output_name, "is null, but ", row_dots_name,
                  " is <grad_output, output> over each part");
  }
  if (output.data) check_output(check, output_name, output, m, n, grad_output.dtype, kRows);
  if (row_scale.data) check_vector(check, row_scale_name, row_scale, m, {DType::f32});
}

void check_gradient(ArgumentCheck& check, const TensorView& grad_output) {
  check.not_null("grad_output", grad_output.data)
      .rank_in("grad_output", grad_output, 2, 2)
      .dtype_in("grad_output", grad_output.dtype, {DType::bf16, DType::f16})
      .inner_contiguous("grad_output", grad_output)
      .tma_aligned("grad_output", grad_output);
}

}  // namespace

void rope_backward(const TensorView& grad_output, const TensorView& positions, const TensorView& cos,
                   const TensorView& sin, int head_dim, int rotated_heads, const TensorView& grad_input,
                   cudaStream_t stream, const RopeBackwardOptions& options) {
  reported_by(kRopeBackward, [&] {
    ArgumentCheck check(kRopeBackward);
    check_gradient(check, grad_output);
    check.throw_if_error();
    const int64_t m = grad_output.rows(), n = grad_output.cols();
    check_heads(check, "grad_output", "columns", n, head_dim, rotated_heads);
    check_vector(check, "positions", positions, m, {DType::i32});
    check_rope_tables(check, cos, sin, head_dim);
    check_row_gradient(check, grad_output, grad_input, options.output, options.row_dots, options.row_scale,
                       "options.output", "options.row_dots", "options.row_scale");
    check.throw_if_error();
    require_hopper(kRopeBackward);
    launch_row_gradients(
        {grad_output.data, grad_output.ld(), options.row_dots.data ? options.output.data : nullptr,
         options.output.data ? options.output.ld() : 0, grad_input.data, grad_input.ld(),
         static_cast<const int32_t*>(positions.data), static_cast<const float*>(cos.data),
         static_cast<const float*>(sin.data), cos.ld(), sin.ld(), cos.rows(), head_dim, rotated_heads * head_dim,
         static_cast<float*>(options.row_dots.data), options.row_dots.data ? options.row_dots.ld() : 0,
         static_cast<const float*>(options.row_scale.data), m, n},
        grad_output.dtype, stream);
  });
}

Status try_rope_backward(const TensorView& grad_output, const TensorView& positions, const TensorView& cos,
                         const TensorView& sin, int head_dim, int rotated_heads, const TensorView& grad_input,
                         cudaStream_t stream, const RopeBackwardOptions& options) {
  return status_of(kRopeBackward, [&] {
    rope_backward(grad_output, positions, cos, sin, head_dim, rotated_heads, grad_input, stream, options);
  });
}

void row_scale_backward(const TensorView& grad_output, const TensorView& output, const TensorView& scale,
                        const TensorView& grad_input, const TensorView& row_dots, cudaStream_t stream) {
  reported_by(kRowScaleBackward, [&] {
    ArgumentCheck check(kRowScaleBackward);
    check_gradient(check, grad_output);
    check.throw_if_error();
    check_row_gradient(check, grad_output, grad_input, output, row_dots, scale, "output", "row_dots", "scale");
    check.not_null("scale", scale.data);
    check.throw_if_error();
    require_hopper(kRowScaleBackward);
    const int64_t m = grad_output.rows(), n = grad_output.cols();
    launch_row_gradients(
        {grad_output.data, grad_output.ld(), row_dots.data ? output.data : nullptr, output.data ? output.ld() : 0,
         grad_input.data, grad_input.ld(), nullptr, nullptr, nullptr, 0, 0, 0, 2, 0, static_cast<float*>(row_dots.data),
         row_dots.data ? row_dots.ld() : 0, static_cast<const float*>(scale.data), m, n},
        grad_output.dtype, stream);
  });
}

Status try_row_scale_backward(const TensorView& grad_output, const TensorView& output, const TensorView& scale,
                              const TensorView& grad_input, const TensorView& row_dots, cudaStream_t stream) {
  return status_of(kRowScaleBackward,
                   [&] { row_scale_backward(grad_output, output, scale, grad_input, row_dots, stream); });
}

}  // namespace coda::ops

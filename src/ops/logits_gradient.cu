// dZ of LM head + cross-entropy from stored logits (logits_gradient.hpp). One warp per row and part of
// 128 columns (the parts of the row partials), 4 adjacent columns a lane with one 8-byte load and
// store; the per-element formula is the epilogue's (cross_entropy_gradient), so the stored-logits and
// recomputing backwards differ only in the logits they read (16-bit rounded against fp32).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "coda/core/device.hpp"
#include "coda/epilogue/parts.hpp"
#include "coda/epilogue/programs/cross_entropy.hpp"
#include "half_values.cuh"
#include "logits_gradient.hpp"

namespace coda::ops {
namespace {

constexpr int kWarps = 8;
constexpr int kColumnsPerLane = 4;
static_assert(32 * kColumnsPerLane == epilogue::kPartCols, "a warp covers one part");

template <class T>
__global__ void __launch_bounds__(32 * kWarps) logits_gradient_kernel(LogitsGradient g) {
  const int64_t row = blockIdx.x;
  const int lane = threadIdx.x % 32;
  const int64_t part = int64_t(blockIdx.y) * kWarps + threadIdx.x / 32;
  const int64_t column = part * epilogue::kPartCols + lane * kColumnsPerLane;
  if (part * epilogue::kPartCols >= g.vocab) return;  // a whole warp past the row: no shuffle below

  const float* factors = g.row_factors + row * epilogue::kRowFactors;
  const float lse_log2 = factors[epilogue::kLseLog2], softmax_scale = factors[epilogue::kSoftmaxScale];
  const float smoothing = factors[epilogue::kSmoothing], target_factor = factors[epilogue::kTarget];
  const int64_t target = g.targets[row];
  const float scale = g.row_scale ? g.row_scale[row] : 1.0f;
  const float inverse_softcap = g.softcap > 0.0f ? 1.0f / g.softcap : 0.0f;
  const T* in = static_cast<const T*>(g.logits) + row * g.logits_ld + column;
  T* out = static_cast<T*>(g.grad_logits) + row * g.grad_logits_ld + column;

  const int64_t left = g.vocab - column;
  const int count = left <= 0 ? 0 : left < kColumnsPerLane ? int(left) : kColumnsPerLane;
  T y[kColumnsPerLane], d[kColumnsPerLane];
  if (count == kColumnsPerLane) {
    *reinterpret_cast<uint2*>(y) = *reinterpret_cast<const uint2*>(in);
  } else {
    for (int k = 0; k < count; ++k) y[k] = in[k];
  }
  float dot = 0.0f;
#pragma unroll
  for (int k = 0; k < kColumnsPerLane; ++k) {
    if (k >= count) break;
    const float z = to_float(y[k]);
    float dz =
        epilogue::cross_entropy_gradient(z, lse_log2, softmax_scale, smoothing, target_factor, column + k == target);
    if (g.softcap > 0.0f) dz *= epilogue::softcap_slope(z, inverse_softcap);
    dot += z * dz;
    d[k] = from_float<T>(dz * scale);
  }
  if (count == kColumnsPerLane) {
    *reinterpret_cast<uint2*>(out) = *reinterpret_cast<const uint2*>(d);
  } else {
    for (int k = 0; k < count; ++k) out[k] = d[k];
  }
  if (g.row_dots) {
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, offset);
    if (lane == 0) g.row_dots[row * g.row_dots_ld + part] = dot;
  }
}

}  // namespace

void launch_logits_gradient(const LogitsGradient& g, cudaStream_t stream) {
  const dim3 grid(unsigned(g.rows), unsigned((epilogue::parts_along(g.vocab) + kWarps - 1) / kWarps));
  if (g.dtype == DType::bf16) logits_gradient_kernel<__nv_bfloat16><<<grid, 32 * kWarps, 0, stream>>>(g);
  else logits_gradient_kernel<__half><<<grid, 32 * kWarps, 0, stream>>>(g);
  CODA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace coda::ops

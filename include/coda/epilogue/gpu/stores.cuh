// coda/epilogue/gpu/stores.cuh: the GPU executor's tile stores (GpuTile, tile.cuh).
//
// 64-row subtiles, 128 bytes wide, through a ring of staging buffers in the 128B-swizzled layout
// (each consumer's own, or with a staged input the region it was staged in), then TMA stores
// (clipped at the problem edge). The output type is part of the kernel (GpuPart::kOut, every
// TileOut; launch.cuh picks it from the program's stores) or of the descriptor's C++ type (a
// TileOutOf<T>, in T): with it chosen at run time, the compiler hoists the program's values above
// the type switch and the accumulators spill. fp8 outputs are scaled and saturated on the way.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#include "coda/epilogue/gpu/tile.cuh"
#include "coda/sm90/stmatrix.cuh"
#include "coda/sm90/tma.cuh"

namespace coda::epilogue {

namespace detail {

// Two adjacent 16-bit outputs packed in one register (mainloop::pack_16bit_pair, by DType).
template <DType Out>
__device__ __forceinline__ uint32_t pack2(float a, float b) {
  return mainloop::pack_16bit_pair<std::conditional_t<Out == DType::bf16, __nv_bfloat16, __half>>(a, b);
}

// One or two adjacent output values, converted to the output type `Out` and written to shared
// memory. fp8 outputs are scaled first and saturate (cvt.satfinite).
template <DType Out>
__device__ __forceinline__ void put1(uint32_t address, float scale, float v) {
  if constexpr (Out == DType::bf16) sm90::st_shared_b16(address, __bfloat16_as_ushort(__float2bfloat16_rn(v)));
  else if constexpr (Out == DType::f16) sm90::st_shared_b16(address, __half_as_ushort(__float2half_rn(v)));
  else if constexpr (Out == DType::f32) sm90::st_shared_f32(address, v);
  else
    sm90::st_shared_b8(address,
                       __nv_cvt_float_to_fp8(v * scale, __NV_SATFINITE, Out == DType::e4m3 ? __NV_E4M3 : __NV_E5M2));
}
template <DType Out>
__device__ __forceinline__ void put2(uint32_t address, float scale, float a, float b) {
  if constexpr (Out == DType::bf16 || Out == DType::f16) sm90::st_shared_b32(address, pack2<Out>(a, b));
  else if constexpr (Out == DType::f32) sm90::st_shared_v2_f32(address, a, b);
  else
    sm90::st_shared_b16(address, __nv_cvt_float2_to_fp8x2(make_float2(a * scale, b * scale), __NV_SATFINITE,
                                                          Out == DType::e4m3 ? __NV_E4M3 : __NV_E5M2));
}

}  // namespace detail

// Every output subtile (64 rows x 128 bytes; 64 bytes for a 1-byte pair output) of the part, in
// order: accumulator chunk j (eight columns) lands in exactly one output subtile, decided at
// compile time from its width.
template <class Part>
template <detail::StoreWidth W, DType T, class F, class Sink>
__device__ inline void GpuTile<Part>::store_as(const TileOut& out, F&& f, Sink&& sink) {
  constexpr int ElementBytes = int(size_of(T));
  // A pair output of 1-byte values has 64 bytes per part row, half a 128-byte box: it goes through
  // 64-byte boxes (out.half_width_map), unswizzled; the rest through 128-byte swizzled ones.
  constexpr bool kHalfBox = W == Width::half && ElementBytes == 1;
  constexpr int kSubtileCols = (kHalfBox ? 64 : 128) / ElementBytes;
  constexpr int kChunks = Acc::kCols / 8;
  constexpr int kOutChunkCols = W == Width::full ? 8 : W == Width::half ? 4 : 16;  // output columns per chunk
  constexpr int kSubtilesPerBlock = (kChunks * kOutChunkCols + kSubtileCols - 1) / kSubtileCols;
  // A TMA store writes whole boxes: a part's output rows must fill them, or the box's rest would
  // overwrite the next part's columns.
  static_assert((kChunks * kOutChunkCols) % kSubtileCols == 0, "a part's output rows must fill whole TMA boxes");
  const auto staged_at = [](int r, int byte) {
    return kHalfBox ? uint32_t(r * 64 + byte) : mainloop::swizzled_offset(r, byte);
  };
  const int lane = t_.thread % 32, warp = t_.thread / 32;
  const int64_t out_col0 = W == Width::full ? t_.col0 : W == Width::half ? t_.col0 / 2 : 2 * int64_t(t_.col0);
  // The prefetched input (program.hpp) is read at a wide store's output positions: the 16-bit
  // input's bytes under output subtile `sub`.
  constexpr bool kPrefetches = !kEdge && W == Width::wide;
  constexpr int kInputBytes = 2 * kSubtileCols;
  if constexpr (kPrefetches)
    if (prefetched_) prefetch_input(0, out_col0, kInputBytes);
  fresh_limits();
#pragma unroll
  for (int b = 0; b < Acc::kBlocks; ++b)
#pragma unroll
    for (int sub = 0; sub < kSubtilesPerBlock; ++sub) {
      if constexpr (kPrefetches) {
        const bool last_of_block = sub + 1 == kSubtilesPerBlock;
        if (prefetched_ && (!last_of_block || b + 1 < Acc::kBlocks))
          prefetch_input(last_of_block ? b + 1 : b, out_col0 + (last_of_block ? 0 : sub + 1) * kSubtileCols,
                         kInputBytes);
      }
      uint8_t* staging = staging_[next_buffer_];
      const uint32_t staging_address = sm90::shared_address(staging);
      if (t_.thread == 0) sm90::tma_store_wait_read<kBuffers - 1>();
      sync();
      pin_values();
      if constexpr (W == Width::full && ElementBytes == 2) {
        // 64 columns of 16-bit results: the accumulator layout packed as stmatrix takes it.
        uint32_t packed[16];
#pragma unroll
        for (int c = 0; c < 8; ++c)
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            const int i = 4 * (8 * sub + c) + 2 * half;
            Element x0{acc_.value[b][i], row(b, i), col(i), t_.batch};
            Element x1{acc_.value[b][i + 1], row(b, i + 1), col(i + 1), t_.batch};
            packed[2 * c + half] = detail::pack2<T>(inside(b, i) ? f(x0) : 0.0f, inside(b, i + 1) ? f(x1) : 0.0f);
          }
        mainloop::write_16bit_subtile(staging_address, packed, t_.thread);
      } else {
#pragma unroll
        for (int j = 0; j < kChunks; ++j) {
          if ((j * kOutChunkCols) / kSubtileCols != sub) continue;
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            const int r = 16 * warp + lane / 4 + 8 * half;  // row within the 64-row block
            const int i = 4 * j + 2 * half;                 // values i, i + 1 of the fragment:
            const int pc = 8 * j + 2 * (lane % 4);          // part columns pc, pc + 1
            Element x0{acc_.value[b][i], row(b, i), col(i), t_.batch};
            Element x1{acc_.value[b][i + 1], row(b, i + 1), col(i + 1), t_.batch};
            const bool in0 = inside(b, i), in1 = inside(b, i + 1);
            if constexpr (W == Width::full) {  // output columns pc, pc + 1
              const int oc = pc % kSubtileCols;
              detail::put2<T>(staging_address + staged_at(r, oc * ElementBytes), out.scale, in0 ? f(x0) : 0.0f,
                              in1 ? f(x1) : 0.0f);
            } else if constexpr (W == Width::half) {  // output column pc / 2
              const int oc = (pc / 2) % kSubtileCols;
              Pair p{acc_.value[b][i], acc_.value[b][i + 1], row(b, i), col(i), t_.batch};
              detail::put1<T>(staging_address + staged_at(r, oc * ElementBytes), out.scale, in0 ? f(p) : 0.0f);
            } else {  // output columns 2 pc .. 2 pc + 3
              const int oc = (2 * pc) % kSubtileCols;
              using Result = std::remove_cvref_t<decltype(f(x0))>;
              const Result r0 = in0 ? f(x0) : Result{}, r1 = in1 ? f(x1) : Result{};
              sink(b, half, j, 0, in0, r0);
              sink(b, half, j, 1, in1, r1);
              const Values2 v0 = detail::wide_of(r0), v1 = detail::wide_of(r1);
              detail::put2<T>(staging_address + staged_at(r, oc * ElementBytes), out.scale, v0.first, v0.second);
              detail::put2<T>(staging_address + staged_at(r, (oc + 2) * ElementBytes), out.scale, v1.first, v1.second);
            }
          }
        }
      }
      sm90::fence_shared_to_async();
      sync();
      if (t_.thread == 0) {
        sm90::tma_store(kHalfBox ? &out.half_width_map : &out.map, staging, int32_t(out_col0 + sub * kSubtileCols),
                        t_.row0 + 64 * b, t_.batch);
        sm90::tma_store_commit();
      }
      next_buffer_ = next_buffer_ + 1 == kBuffers ? 0 : next_buffer_ + 1;
    }
}

template <class Part>
__device__ inline void GpuTile<Part>::prefetch_input(int b, int64_t col, int bytes) const {
  const int lane = t_.thread % 32;
  const int half = lane % 2;  // lanes 4q and 4q + 1 of the quad holding rows r and r + 8
  if (lane % 4 >= 2) return;
  const TileIn& in = *prefetched_;
  const char* first =
      static_cast<const char*>(in.data) + 2 * ((t_.batch * in.batch_stride + row(b, 2 * half)) * in.ld + col);
  // Every 128-byte line the bytes touch (a row need not start on a line).
  for (int offset = 0; offset < bytes; offset += 128) asm volatile("prefetch.global.L1 [%0];" ::"l"(first + offset));
  asm volatile("prefetch.global.L1 [%0];" ::"l"(first + bytes - 1));
}

}  // namespace coda::epilogue

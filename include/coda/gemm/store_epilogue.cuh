// coda/gemm/store_epilogue.cuh: the identity epilogue: convert the fp32 accumulators to the
// output type and write them with TMA stores.
//
// Each consumer warpgroup cuts its part of the tile into 64-row subtiles 128 bytes wide (64
// 16-bit or 32 fp32 columns): registers -> shared memory (stmatrix for 16-bit outputs, in the
// 128B-swizzled layout the TMA store expects, so neither side has bank conflicts) -> asynchronous
// TMA stores, which complete while the warpgroup runs the next tile's mainloop. Rows and columns
// past the problem edge are clipped by the TMA unit.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "coda/arch/sm90/barrier.cuh"
#include "coda/arch/sm90/stmatrix.cuh"
#include "coda/arch/sm90/tma.cuh"
#include "coda/core/dtype.hpp"
#include "coda/gemm/epilogue_seam.cuh"

namespace coda::mainloop {

/// The store epilogue's parameters (the same for every staging depth).
struct StoreParams {
  CUtensorMap output;  // 3-D map of C, box (128 bytes of columns) x 64 rows
  DType output_type;   // bf16, f16 or f32
};

template <int Buffers>
struct StoreEpilogue {
  static constexpr int kStagingBytes = 64 * 128;  // one 64-row x 128-byte subtile
  static constexpr int kBuffers = Buffers;         // staging subtiles per consumer warpgroup
  static_assert(Buffers >= 2 && Buffers % 2 == 0, "staging alternates between two halves");

  using Params = StoreParams;

  struct SharedStorage {
    alignas(1024) uint8_t staging[2][Buffers][kStagingBytes];  // [consumer][buffer]
  };

  template <class Acc>
  __device__ void store_tile(const Params& p, SharedStorage& s, Acc& acc, const TileCoordinates& t) {
    switch (p.output_type) {
      case DType::bf16: store_subtiles<__nv_bfloat16>(p, s, acc, t); break;
      case DType::f16: store_subtiles<__half>(p, s, acc, t); break;
      default: store_subtiles<float>(p, s, acc, t); break;
    }
  }

  __device__ void finish(const Params&, SharedStorage&, const TileCoordinates& t) {
    if (t.thread == 0) sm90::tma_store_wait_all();
  }

 private:
  int half_ = 0;  // which half of the staging ring the next group uses (when a tile needs several)

  // One named barrier per consumer warpgroup (ids 1 and 2; 0 is __syncthreads).
  __device__ static void sync_warpgroup(const TileCoordinates& t) { sm90::named_barrier_sync(1 + t.consumer, 128); }

  // Subtiles are written in groups: registers -> staging for the whole group, one barrier, then
  // one thread issues the group's TMA stores. When the whole tile fits the staging (the common
  // case), a tile costs a single group, and the wait for the previous tile's stores never blocks:
  // they were issued a whole mainloop ago. Otherwise groups alternate between the two halves of
  // the staging, so writing one group overlaps the stores of the previous one.
  template <class Out, class Acc>
  __device__ void store_subtiles(const Params& p, SharedStorage& s, Acc& acc, const TileCoordinates& t) {
    constexpr int kSubtileCols = 128 / int(sizeof(Out));
    constexpr int kSubtilesPerBlock = Acc::kCols / kSubtileCols;
    constexpr int kSubtiles = Acc::kBlocks * kSubtilesPerBlock;
    constexpr bool kWholeTile = kSubtiles <= Buffers;
    constexpr int kGroup = kWholeTile ? kSubtiles : Buffers / 2;
    static_assert(kSubtiles % kGroup == 0);
#pragma unroll
    for (int group = 0; group < kSubtiles / kGroup; ++group) {
      const int first_buffer = kWholeTile ? 0 : half_ * kGroup;
      // The stores that last read these buffers must be done: with the whole tile staged that is
      // the previous tile's group; otherwise the group before the previous one.
      if (t.thread == 0) {
        if constexpr (kWholeTile) sm90::tma_store_wait_read<0>();
        else sm90::tma_store_wait_read<1>();
      }
      sync_warpgroup(t);
#pragma unroll
      for (int j = 0; j < kGroup; ++j) {
        const int sub = group * kGroup + j;
        uint8_t* staging = s.staging[t.consumer][first_buffer + j];
        if constexpr (sizeof(Out) == 2)
          write_16bit_subtile<Out>(staging, acc.value[sub / kSubtilesPerBlock], sub % kSubtilesPerBlock, t.thread);
        else
          write_f32_subtile(staging, acc.value[sub / kSubtilesPerBlock], sub % kSubtilesPerBlock, t.thread);
      }
      sm90::fence_shared_to_async();
      sync_warpgroup(t);
      if (t.thread == 0) {
#pragma unroll
        for (int j = 0; j < kGroup; ++j) {
          const int sub = group * kGroup + j;
          sm90::tma_store(&p.output, s.staging[t.consumer][first_buffer + j],
                          t.col0 + (sub % kSubtilesPerBlock) * kSubtileCols, t.row0 + (sub / kSubtilesPerBlock) * 64,
                          t.batch);
        }
        sm90::tma_store_commit();
      }
      if constexpr (!kWholeTile) half_ ^= 1;
    }
  }

  // Byte offset of 16-byte chunk `chunk` of row `row` in a 128B-swizzled 64 x 128-byte tile:
  // the TMA unit XORs the chunk index with the row index modulo 8.
  __device__ static uint32_t swizzled_offset(int row, int chunk) {
    return uint32_t(row * 128 + ((chunk ^ (row & 7)) << 4));
  }

  template <class Out>
  __device__ static uint32_t pack(float lo, float hi) {
    if constexpr (std::is_same_v<Out, __nv_bfloat16>) {
      __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
      return *reinterpret_cast<uint32_t*>(&v);
    } else {
      __half2 v = __floats2half2_rn(lo, hi);
      return *reinterpret_cast<uint32_t*>(&v);
    }
  }

  // 64 columns = 8 chunks of 8; stmatrix.x4 stores two chunks for the warp's 16 rows at once.
  template <class Out, int N>
  __device__ static void write_16bit_subtile(uint8_t* staging, const float (&v)[N], int sub, int thread) {
    const int warp = thread / 32, lane = thread % 32;
    const int matrix = lane / 8;  // which of the four 8x8 matrices this lane addresses
    const int row = 16 * warp + lane % 8 + 8 * (matrix & 1);
    const uint32_t base = sm90::shared_address(staging);
#pragma unroll
    for (int pair = 0; pair < 4; ++pair) {
      const int j = sub * 8 + 2 * pair;  // first 8-column chunk of the pair, in the fragment
      const uint32_t address = base + swizzled_offset(row, 2 * pair + (matrix >> 1));
      sm90::stmatrix_x4(address, pack<Out>(v[4 * j + 0], v[4 * j + 1]), pack<Out>(v[4 * j + 2], v[4 * j + 3]),
                        pack<Out>(v[4 * j + 4], v[4 * j + 5]), pack<Out>(v[4 * j + 6], v[4 * j + 7]));
    }
  }

  // 32 fp32 columns = 4 chunks of 8; each thread writes two adjacent values per row half.
  template <int N>
  __device__ static void write_f32_subtile(uint8_t* staging, const float (&v)[N], int sub, int thread) {
    const int warp = thread / 32, lane = thread % 32;
#pragma unroll
    for (int chunk = 0; chunk < 4; ++chunk) {
      const int j = sub * 4 + chunk;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = 16 * warp + lane / 4 + 8 * half;
        const int byte = chunk * 32 + (lane % 4) * 8;
        float2* dst = reinterpret_cast<float2*>(staging + swizzled_offset(row, byte / 16) + byte % 16);
        *dst = make_float2(v[4 * j + 2 * half], v[4 * j + 2 * half + 1]);
      }
    }
  }
};

}  // namespace coda::mainloop

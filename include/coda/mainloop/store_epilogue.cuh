// coda/mainloop/store_epilogue.cuh: the identity epilogue: convert the fp32 accumulators to the
// output type and write them with TMA stores.
//
// Each consumer warpgroup cuts its part of the tile into 64-row subtiles 128 bytes wide (64
// 16-bit or 32 fp32 columns): registers -> a ring of shared-memory staging buffers (stmatrix for
// 16-bit outputs, in the 128B-swizzled layout the TMA store expects, so neither side has bank
// conflicts) -> asynchronous TMA stores. The last two 16-bit subtiles are held back as packed
// registers and written between the next tile's first MMA groups, so that part of the epilogue
// costs no tensor-core time. Rows and columns past the problem edge are clipped by the TMA unit.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "coda/sm90/barrier.cuh"
#include "coda/sm90/stmatrix.cuh"
#include "coda/sm90/tma.cuh"
#include "coda/core/dtype.hpp"
#include "coda/mainloop/epilogue_seam.cuh"
#include "coda/mainloop/params.hpp"
#include "coda/mainloop/staging.cuh"

namespace coda::mainloop {

template <int Buffers>
struct StoreEpilogue {
  static constexpr int kStagingBytes = kStagingSubtileBytes;

  using Params = StoreParams;

  struct SharedStorage {
    alignas(1024) uint8_t staging[2][Buffers][kStagingBytes];  // [consumer][buffer]
  };

  // A 64 x 64 subtile of 16-bit results is 16 registers per thread (8 chunks x 2 rows, two
  // values each). At most two subtiles are held back for write(): with 128 accumulators already
  // live, more would spill.
  template <class Acc>
  static constexpr int kSubtiles16 = Acc::kBlocks * (Acc::kCols / 64);
  template <class Acc>
  static constexpr int kDeferred = kSubtiles16<Acc> < 2 ? kSubtiles16<Acc> : 2;

  /// The last kDeferred subtiles of a tile, converted and packed two values per register.
  template <class Acc>
  struct Pending {
    uint32_t packed[kDeferred<Acc>][16];
  };

  template <class Acc>
  __device__ void prepare(const Params& p, SharedStorage& s, Acc& acc, const TileCoordinates& t, Pending<Acc>& out) {
    switch (p.output_type) {
      case DType::bf16: prepare_16bit<__nv_bfloat16>(p, s, acc, t, out); break;
      case DType::f16: prepare_16bit<__half>(p, s, acc, t, out); break;
      default: {  // fp32 results cannot be held back in fewer registers: store all of them now
        constexpr int kPerBlock = Acc::kCols / 32;  // 64 x 32 fp32 subtiles
        constexpr int kGroup = Buffers;
        static_assert((Acc::kBlocks * kPerBlock) % kGroup == 0);
#pragma unroll
        for (int first = 0; first < Acc::kBlocks * kPerBlock; first += kGroup)
          stage_subtiles<kGroup>(
              p, s, t, [&](int j) { return position(first + j, kPerBlock, 32); },
              [&](int j, uint8_t* staging) {
                write_f32_subtile(staging, acc.value[(first + j) / kPerBlock], (first + j) % kPerBlock, t.thread);
              });
      }
    }
  }

  /// Write held-back subtile `step`; returns true once all are written.
  template <class Acc>
  __device__ bool write(const Params& p, SharedStorage& s, const Pending<Acc>& pending, const TileCoordinates& t,
                        int step) {
    if (p.output_type == DType::f32) return true;  // prepare() stored everything
    constexpr int kPerBlock = Acc::kCols / 64;
    constexpr int kFirst = kSubtiles16<Acc> - kDeferred<Acc>;
#pragma unroll
    for (int d = 0; d < kDeferred<Acc>; ++d)  // registers take constant indices only: select by step
      if (d == step)
        stage_subtiles<1>(
            p, s, t, [&](int) { return position(kFirst + d, kPerBlock, 64); },
            [&](int, uint8_t* staging) {
              write_16bit_subtile(sm90::shared_address(staging), pending.packed[d], t.thread);
            });
    return step + 1 >= kDeferred<Acc>;
  }

  __device__ void finish(const Params&, SharedStorage&, const TileCoordinates& t) {
    if (t.thread == 0) sm90::tma_store_wait_all();
  }

 private:
  int next_buffer_ = 0;  // position in the staging ring

  // One named barrier per consumer warpgroup (ids 1 and 2; 0 is __syncthreads).
  __device__ static void sync_warpgroup(const TileCoordinates& t) { sm90::named_barrier_sync(1 + t.consumer, 128); }

  // `Count` subtiles through the staging ring in one group: wait until the stores that last read
  // the next `Count` buffers are done (each subtile's store is its own bulk group, so at most
  // Buffers - Count may still be reading), let every thread write its parts, then one thread
  // issues the stores. `subtile(j)` gives subtile j's (block, column) and `write(j, staging)`
  // writes it.
  template <int Count, class Position, class WriteToStaging>
  __device__ void stage_subtiles(const Params& p, SharedStorage& s, const TileCoordinates& t, Position&& subtile,
                                 WriteToStaging&& write) {
    static_assert(Count >= 1 && Count <= Buffers);
    if (t.thread == 0) sm90::tma_store_wait_read<Buffers - Count>();
    sync_warpgroup(t);
#pragma unroll
    for (int j = 0; j < Count; ++j) write(j, s.staging[t.consumer][(next_buffer_ + j) % Buffers]);
    sm90::fence_shared_to_async();
    sync_warpgroup(t);
    if (t.thread == 0) {
#pragma unroll
      for (int j = 0; j < Count; ++j) {
        const auto [block, col] = subtile(j);
        sm90::tma_store(&p.output, s.staging[t.consumer][(next_buffer_ + j) % Buffers], t.col0 + col,
                        t.row0 + 64 * block, t.batch);
        sm90::tma_store_commit();
      }
    }
    next_buffer_ = (next_buffer_ + Count) % Buffers;
  }

  // The 16 packed registers of 64 x 64 subtile `sub` (in tile order) of block `block`.
  template <class Out, class Acc>
  __device__ static void pack_subtile(const Acc& acc, int sub, uint32_t (&packed)[16]) {
    constexpr int kPerBlock = Acc::kCols / 64;
    const float* v = acc.value[sub / kPerBlock] + (sub % kPerBlock) * 32;  // 8 chunks x 4 values
#pragma unroll
    for (int i = 0; i < 16; ++i) packed[i] = pack_16bit_pair<Out>(v[2 * i], v[2 * i + 1]);
  }

  // Subtile `sub` of a tile cut into `per_block` subtiles of `cols` columns per 64-row block.
  struct Position {
    int block;
    int col;
  };
  __device__ static Position position(int sub, int per_block, int cols) {
    return {sub / per_block, (sub % per_block) * cols};
  }

  template <class Out, class Acc>
  __device__ void prepare_16bit(const Params& p, SharedStorage& s, Acc& acc, const TileCoordinates& t,
                                Pending<Acc>& out) {
    constexpr int kPerBlock = Acc::kCols / 64;
    constexpr int kNow = kSubtiles16<Acc> - kDeferred<Acc>;
    static_assert(kNow <= Buffers, "the subtiles stored at once must fit the staging ring");
    if constexpr (kNow > 0)
      stage_subtiles<kNow>(
          p, s, t, [&](int j) { return position(j, kPerBlock, 64); },
          [&](int j, uint8_t* staging) {
            uint32_t packed[16];
            pack_subtile<Out>(acc, j, packed);
            write_16bit_subtile(sm90::shared_address(staging), packed, t.thread);
          });
#pragma unroll
    for (int d = 0; d < kDeferred<Acc>; ++d) pack_subtile<Out>(acc, kNow + d, out.packed[d]);
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
        float2* dst = reinterpret_cast<float2*>(staging + swizzled_offset(row, byte));
        *dst = make_float2(v[4 * j + 2 * half], v[4 * j + 2 * half + 1]);
      }
    }
  }
};

static_assert(SeamEpilogue<StoreEpilogue<2>, Accumulators<64, 256>>);

}  // namespace coda::mainloop

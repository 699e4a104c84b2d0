// coda/mainloop/transposed_epilogue.cuh: an epilogue of C run on a swapped tile (tiles.hpp: SwapAB).
//
// A swapped kernel computes C^T = B A^T: its accumulator rows are C's columns (the weight's rows)
// and its columns C's rows (the tokens). Transposed<Inner> turns each consumer's accumulators
// into C's layout through shared memory, swaps the coordinates back, and hands both to `Inner`,
// which then sees an ordinary tile of C: rows are tokens, columns are features.
//
//   // the store epilogue on a swapped tile whose consumers hold 64 kernel rows (src/mainloop/launch.cuh)
//   using Epilogue = mainloop::Transposed<mainloop::StoreEpilogue<2>, 64>;
//
// An epilogue program runs on it when each consumer holds 128 weight rows (epilogue/launch.cuh:
// SwappedProgramTile): transposed, a part of 64 tokens x 128 features, what a program sees of a
// 128 x 128 part whose rows past the problem's M are absent (M <= 64: one token tile).
//
// The transpose moves 64 kernel columns (64 rows of C) at a time through a buffer of 64 x
// (Rows + 8) fp32 per consumer: every value is written once and read once, against a mainloop that
// streams at least a 64-K block of 64 x Rows weights per 64 x 64 outputs, so it costs a few
// hundred cycles a tile. The 8-float pad puts the scalar writes at two-way bank conflicts at most
// and the 8-byte reads at none (lanes' rows step the bank by 8).
#pragma once

#include <cstdint>

#include "coda/mainloop/epilogue_seam.cuh"
#include "coda/sm90/barrier.cuh"

namespace coda::mainloop {

/// The accumulators of a tile of C whose kernel tile is `Acc` (rows and columns exchanged).
template <class Acc>
using TransposedAccumulators = Accumulators<Acc::kCols, Acc::kRows>;

/// Where a consumer's part of a tile of C lies, from where the swapped kernel's part lies.
__device__ __forceinline__ TileCoordinates transposed(const TileCoordinates& k) {
  TileCoordinates c = k;
  c.row0 = k.col0;
  c.col0 = k.row0;
  c.tile_m = k.tile_n;
  c.tile_n = k.tile_m;
  c.problem_m = k.problem_n;
  c.problem_n = k.problem_m;
  return c;
}

template <class Inner, int KernelRows>
struct Transposed {
  static_assert(!kStagesInput<Inner> && !kMarksTiles<Inner>,
                "Transposed forwards prepare, write and finish only (no staged input, no marks)");
  using Params = typename Inner::Params;
  static constexpr int kPitch = KernelRows + 8;  // floats per buffered row of C

  struct SharedStorage {
    typename Inner::SharedStorage inner;
    alignas(16) float transpose[2][64 * kPitch];  // [consumer]: 64 rows of C x the part's columns
  };

  template <class Acc>
  struct Pending {
    typename Inner::template Pending<TransposedAccumulators<Acc>> inner;
  };

  template <class Acc>
  __device__ void prepare(const Params& p, SharedStorage& s, Acc& acc, const TileCoordinates& k, Pending<Acc>& out) {
    static_assert(Acc::kRows == KernelRows);
    TransposedAccumulators<Acc> c;
    transpose(acc, c, s.transpose[k.consumer], k);
    inner_.prepare(p, s.inner, c, transposed(k), out.inner);
  }

  template <class Acc>
  __device__ bool write(const Params& p, SharedStorage& s, const Pending<Acc>& pending, const TileCoordinates& k,
                        int step) {
    return inner_.write(p, s.inner, pending.inner, transposed(k), step);
  }

  __device__ void finish(const Params& p, SharedStorage& s, const TileCoordinates& k) {
    inner_.finish(p, s.inner, transposed(k));
  }

 private:
  Inner inner_;

  // Block j of `out` (rows 64 j.. of C) is kernel columns 64 j.., values [32 j, 32 j + 32) of every
  // kernel block: written to the buffer at [column - 64 j][row], read back as C's fragment.
  template <class Acc>
  __device__ static void transpose(const Acc& in, TransposedAccumulators<Acc>& out, float* buffer,
                                   const TileCoordinates& k) {
    using Out = TransposedAccumulators<Acc>;
    const int t = k.thread;
    const uint32_t barrier = 1 + uint32_t(k.consumer);  // the consumer's own (store_epilogue.cuh uses it too)
#pragma unroll
    for (int j = 0; j < Out::kBlocks; ++j) {
      if (j > 0) sm90::named_barrier_sync(barrier, 128);  // block j - 1's reads are done
#pragma unroll
      for (int b = 0; b < Acc::kBlocks; ++b)
#pragma unroll
        for (int i = 32 * j; i < 32 * j + 32; ++i)
          buffer[(Acc::col(i, t) - 64 * j) * kPitch + Acc::row(b, i, t)] = in.value[b][i];
      sm90::named_barrier_sync(barrier, 128);
#pragma unroll
      for (int i = 0; i < Out::kValuesPerBlock; i += 2) {
        const float2 v = *reinterpret_cast<const float2*>(buffer + (Out::row(0, i, t)) * kPitch + Out::col(i, t));
        out.value[j][i] = v.x;
        out.value[j][i + 1] = v.y;
      }
    }
    sm90::named_barrier_sync(barrier, 128);  // the buffer is free for the next tile
  }
};

}  // namespace coda::mainloop

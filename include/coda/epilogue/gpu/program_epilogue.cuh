// coda/epilogue/gpu/program_epilogue.cuh: ProgramEpilogue, the mainloop epilogue (the seam of
// mainloop/epilogue_seam.cuh) that runs an epilogue program on each consumer warpgroup's part of a
// tile, on a GpuTile (tile.cuh) over the accumulator registers.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <type_traits>

#include "coda/epilogue/gpu/loads.cuh"
#include "coda/epilogue/gpu/reductions.cuh"
#include "coda/epilogue/gpu/stores.cuh"
#include "coda/epilogue/gpu/tile.cuh"
#include "coda/epilogue/parts.hpp"
#include "coda/mainloop/epilogue_seam.cuh"
#include "coda/sm90/barrier.cuh"
#include "coda/sm90/tma.cuh"

namespace coda::epilogue {

/// The mainloop Epilogue that runs `Program` (whose descriptors are the kernel's epilogue
/// parameters) on every consumer warpgroup's part of every tile; every TileIn is read as `In`, the
/// operands' type, and every TileOut written as `Out`. `StageInput`: stage the program's staged
/// input (program.hpp), if it names one, in shared memory; false on the cooperative tile (a
/// companion launch, launch.cuh), which reads it from global memory like any other input.
template <class Program, int Buffers, DType In, DType Out, bool StageInput = true>
struct ProgramEpilogue {
  using Params = Program;

  // Shared memory. Without a staged input: `Buffers` staging subtiles per consumer. With one staged
  // here (kStaged; program.hpp): one 32 KB region, taken by the two consumers in turn (kernel.cuh).
  // The producer fetches the tile's part of the input into it, kPartCols / 64 TMA boxes of
  // kPartRows rows x 128 bytes; the program reads it first (launch_program checks), and its stores
  // and reductions then use the same bytes as four staging subtiles. The ring keeps all six stages:
  // there is no room for a 32 KB input beside 32 KB of staging.
  static constexpr bool kStaged = StageInput && StagesAnInput<Program>;
  static constexpr int kInputBoxes = kPartCols / detail::kStagedBoxCols;
  static constexpr uint32_t kStagedInputBytes = kStaged ? uint32_t(kPartRows * kPartCols * 2) : 0u;
  static constexpr int kBuffers = kStaged ? int(kStagedInputBytes) / detail::kSubtileBytes : Buffers;
  struct StagingPerConsumer {
    alignas(1024) uint8_t staging[2][Buffers][detail::kSubtileBytes];  // [consumer][buffer]
  };
  struct SharedRegion {
    alignas(1024) uint8_t region[kBuffers][detail::kSubtileBytes];  // the input's box b is subtiles 2b, 2b + 1
  };
  using SharedStorage = std::conditional_t<kStaged, SharedRegion, StagingPerConsumer>;
  // The launch's K-block mask applies where the program declares kSkipsKBlocks (running_sum.hpp;
  // mainloop/params.hpp, KBlockMask).
  static constexpr bool kSkipsKBlocks = [] {
    if constexpr (requires { Program::kSkipsKBlocks; }) return Program::kSkipsKBlocks;
    else return false;
  }();

  /// One thread: fetch tile `t`'s part of the staged input, landing on `landed` (kernel.cuh).
  __device__ void fetch_input(const Params& program, SharedStorage& s, const mainloop::TileCoordinates& t,
                              uint64_t* landed) const {
    if constexpr (kStaged) {
      const CUtensorMap* map = &(program.*Program::staged_input).map;
#pragma unroll
      for (int box = 0; box < kInputBoxes; ++box)
        sm90::tma_load(s.region[2 * box], map, t.col0 + box * detail::kStagedBoxCols, t.row0, t.batch, landed);
    }
  }

  template <class Acc>
  struct Pending {};  // programs run whole in prepare(): nothing is held back

  template <class Acc>
  __device__ void prepare(const Params& program, SharedStorage& s, Acc& acc, const mainloop::TileCoordinates& t,
                          Pending<Acc>&) {
    if constexpr (kStaged) {
      static_assert(Acc::kRows == kPartRows && Acc::kCols == kPartCols && kPartRows * 128 == 2 * detail::kSubtileBytes,
                    "the staged part is a whole part, each TMA box two staging subtiles");
      run(program, acc, t, s.region, &(program.*Program::staged_input), &s.region[0][0]);
      // The next tile's input may land here once the stores have read their subtiles.
      if (t.thread == 0) sm90::tma_store_wait_read<0>();
      sm90::named_barrier_sync(1 + t.consumer, 128);
    } else {
      run(program, acc, t, s.staging[t.consumer], nullptr, nullptr);
    }
  }

  template <class Acc>
  __device__ bool write(const Params&, SharedStorage&, const Pending<Acc>&, const mainloop::TileCoordinates&, int) {
    return true;
  }

  __device__ void finish(const Params&, SharedStorage&, const mainloop::TileCoordinates& t) {
    if (t.thread == 0) sm90::tma_store_wait_all();
  }

 private:
  template <class Acc>
  __device__ void run(const Params& program, Acc& acc, const mainloop::TileCoordinates& t,
                      uint8_t (&staging)[kBuffers][detail::kSubtileBytes], const TileIn* staged,
                      const uint8_t* staged_part) {
    // A cluster's CTAs may overhang the problem (the scheduler's padded grid of cluster tiles): a
    // part wholly outside it has nothing to write, and its reductions' identity results would land
    // past the partials' last row or column.
    if (t.row0 >= t.problem_m || t.col0 >= t.problem_n) return;
    const RowVector* staged_vector = nullptr;
    if constexpr (StagesARowVector<Program>) staged_vector = &(program.*Program::staged_row_vector);
    const TileIn* prefetched = nullptr;
    if constexpr (PrefetchesAnInput<Program>) prefetched = &(program.*Program::prefetched_input);
    if (t.row0 + Acc::kRows <= t.problem_m && t.col0 + Acc::kCols <= t.problem_n) {
      GpuTile<GpuPart<Acc, kBuffers, In, Out, false, kStaged, StagesARowVector<Program>>> tile(
          acc, t, staging, next_buffer_, staged, staged_part, staged_vector, prefetched);
      program(tile);
    } else {
      GpuTile<GpuPart<Acc, kBuffers, In, Out, true, kStaged, StagesARowVector<Program>>> tile(
          acc, t, staging, next_buffer_, staged, staged_part, staged_vector, prefetched);
      program(tile);
    }
  }

  int next_buffer_ = 0;
};
// The tile and the epilogue meet their contracts (program.hpp, mainloop/epilogue_seam.cuh).
static_assert(
    EpilogueTile<GpuTile<GpuPart<mainloop::Accumulators<kPartRows, kPartCols>, 2, DType::bf16, DType::bf16, false>>>);
static_assert(mainloop::SeamEpilogue<ProgramEpilogue<contract::EmptyProgram, 2, DType::bf16, DType::bf16>,
                                     mainloop::Accumulators<kPartRows, kPartCols>>);

}  // namespace coda::epilogue

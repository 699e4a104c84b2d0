// coda/mainloop/epilogue_seam.cuh: what the mainloop hands an epilogue for each finished tile.
//
// The mainloop kernel is a template on an Epilogue type with this shape:
//
//   struct MyEpilogue {
//     struct Params { ... };         // built on the host, passed by value in the kernel parameters
//     struct SharedStorage { ... };  // carved out of the CTA's shared memory (staging space)
//     template <class Acc> struct Pending { ... };  // what prepare() keeps for write()
//     // Once per tile, by each consumer warpgroup, as soon as its accumulators are final:
//     template <class Acc>
//     __device__ void prepare(const Params&, SharedStorage&, Acc&, const TileCoordinates&, Pending<Acc>&);
//     // After each MMA group the warpgroup issues for its next tile, step = 0, 1, ... until it
//     // returns true (and repeatedly at the end, or when the next tile is shorter than the write):
//     template <class Acc>
//     __device__ bool write(const Params&, SharedStorage&, const Pending<Acc>&, const TileCoordinates&, int step);
//     __device__ void finish(const Params&, SharedStorage&, const TileCoordinates&);  // before exit
//     // Optional, for measurements (bench/tile_timeline.cu): told, by every thread of a consumer
//     // warpgroup, when a tile's MMAs begin, when its accumulators are final and when prepare()
//     // (and, ping-pong, every write()) of the tile is done:
//     __device__ void mark(const Params&, TileEvent, const TileCoordinates&);
//     // Optional, ping-pong schedule only: a tile input staged in shared memory (kernel.cuh). Its
//     // buffer is part of SharedStorage, and the two consumers' epilogues take it in turn: one
//     // producer thread fetches each tile's input into it, while the tile's MMAs run, once the
//     // epilogue of the tile before (the other consumer's) has returned from prepare():
//     static constexpr uint32_t kStagedInputBytes;  // one tile's fetch (0: none)
//     __device__ void fetch_input(const Params&, SharedStorage&, const TileCoordinates&, uint64_t* landed);
//     // Optional: whether the launch's K-block mask (params.hpp, KBlockMask) applies: the kernel
//     // leaves out the K blocks it clears (cooperative, unswapped configurations only).
//     static constexpr bool kSkipsKBlocks;
//     // Optional: whether every K segment of a split-K tile finishes some of its rows (segments.cuh,
//     // share_tile_rows), prepare() then selecting by TileCoordinates::row_halves; for an epilogue
//     // whose per-row work outweighs the segments' wait for each other (cooperative, unswapped).
//     static constexpr bool kSharesTileRows;
//   };
//
// prepare() does everything that needs the accumulators (the math; converting and packing the
// results into a few registers); write() does the memory traffic (shared-memory staging, TMA
// stores) in steps, each hidden behind one group of the next tile's MMAs. An epilogue with
// nothing to defer does all its work in prepare() and has write() return true at once.
//
// Accumulators are fp32 register fragments in the wgmma accumulator layout (below). The contract
// is the concept SeamEpilogue (at the end): launch_kernel checks it, and each epilogue states it.
#pragma once

#include <concepts>
#include <cstdint>

namespace coda::mainloop {

/// Where a consumer warpgroup's part of an output tile lies.
struct TileCoordinates {
  int32_t row0;        // first output row of this warpgroup's part
  int32_t col0;        // first output column
  int32_t batch;
  int32_t tile_m;      // output tile indices
  int32_t tile_n;
  int32_t problem_m;   // the problem's M and N: rows/columns at or past these are padding
  int32_t problem_n;
  int32_t consumer;    // which consumer warpgroup (0 or 1)
  int32_t thread;      // thread index within the warpgroup, 0..127
  // The thread's row halves (values i with (i / 2) % 2 == h: bit h) whose accumulators are whole: 3,
  // unless the segments of a split tile share its rows out (kSharesTileRows).
  uint32_t row_halves;
};

/// The moments of a tile an epilogue's mark() hears of, in order.
enum class TileEvent : int { mma_begin = 0, accumulators_final = 1, epilogue_done = 2 };

/// The accumulators of one consumer warpgroup: Rows x Cols fp32 values spread over 128 threads
/// as (Rows / 64) blocks of the wgmma m64nCols fragment.
///
/// In block b, thread t (warp w = t / 32, lane l = t % 32) holds value i (0 <= i < Cols / 2) of
///   row    64 b + 16 w + l / 4 + 8 ((i / 2) % 2)
///   column 8 (i / 4) + 2 (l % 4) + i % 2
/// (PTX ISA 9.7.15.5.1.1, accumulator D of wgmma .m64nNk16). Values 2j and 2j+1 are adjacent
/// columns of one row: pairwise epilogue maps need no data exchange.
template <int Rows, int Cols>
struct Accumulators {
  static constexpr int kRows = Rows;
  static constexpr int kCols = Cols;
  static constexpr int kBlocks = Rows / 64;
  static constexpr int kValuesPerBlock = Cols / 2;

  float value[kBlocks][kValuesPerBlock];

  __device__ static int row(int block, int i, int thread) {
    return row_offset(block, i) + 16 * (thread / 32) + (thread % 32) / 4;
  }
  __device__ static int col(int i, int thread) { return col_offset(i) + 2 * (thread % 4); }
  // Value i of block b from the thread's first one (value 0 of block 0): the same for every thread.
  __device__ static constexpr int row_offset(int block, int i) { return 64 * block + 8 * ((i / 2) % 2); }
  __device__ static constexpr int col_offset(int i) { return 8 * (i / 4) + i % 2; }
};

/// What the mainloop calls on an epilogue `E` whose tiles hold `Acc` (the contract above). A staged
/// tile input is optional; an epilogue that declares kStagedInputBytes fetches it.
template <class E, class Acc>
concept SeamEpilogue =
    requires(E e, const typename E::Params& params, typename E::SharedStorage& shared, Acc& acc,
             const TileCoordinates& coords, typename E::template Pending<Acc>& pending, int step) {
      e.prepare(params, shared, acc, coords, pending);
      { e.write(params, shared, pending, coords, step) } -> std::same_as<bool>;
      e.finish(params, shared, coords);
    } &&
    (!requires { E::kStagedInputBytes; } ||
     requires(E e, const typename E::Params& params, typename E::SharedStorage& shared, const TileCoordinates& coords,
              uint64_t* landed) { e.fetch_input(params, shared, coords, landed); });

/// Whether the epilogue stages a tile input in shared memory (fetch_input() above).
template <class Epilogue>
constexpr bool kStagesInput = [] {
  if constexpr (requires { Epilogue::kStagedInputBytes; }) return Epilogue::kStagedInputBytes > 0;
  else return false;
}();

/// Whether the epilogue listens to a tile's moments (mark() above).
template <class Epilogue>
constexpr bool kMarksTiles = requires(Epilogue e, const typename Epilogue::Params& p, const TileCoordinates& t) {
  e.mark(p, TileEvent::mma_begin, t);
};

/// Whether the epilogue asks for the launch's K-block mask to be honoured (kSkipsKBlocks above).
template <class Epilogue>
constexpr bool kSkipsKBlocks = [] {
  if constexpr (requires { Epilogue::kSkipsKBlocks; }) return Epilogue::kSkipsKBlocks;
  else return false;
}();

/// Whether every K segment of a split tile finishes some of its rows (kSharesTileRows above).
template <class Epilogue>
constexpr bool kSharesTileRows = [] {
  if constexpr (requires { Epilogue::kSharesTileRows; }) return Epilogue::kSharesTileRows;
  else return false;
}();

}  // namespace coda::mainloop

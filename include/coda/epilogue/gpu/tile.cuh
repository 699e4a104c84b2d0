// coda/epilogue/gpu/tile.cuh: the Tile a program sees on the GPU (GpuTile): one consumer
// warpgroup's part of an output tile, in its registers. Here the part and the maps; the other
// primitive classes are defined in loads.cuh, stores.cuh and reductions.cuh, and ProgramEpilogue
// (program_epilogue.cuh) runs a program on it. Include coda/epilogue/gpu_executor.cuh.
//
// The part is Rows x Cols fp32 values over 128 threads in the wgmma accumulator layout
// (mainloop/epilogue_seam.cuh). map and map_pairs are unrolled over the thread's fragment; pairs are
// values 2j, 2j+1 (adjacent columns of one row), so they need no data exchange. Elements outside
// the problem are never handed to the program.
#pragma once

#include <cstdint>

#include "coda/core/dtype.hpp"
#include "coda/epilogue/arguments.hpp"
#include "coda/epilogue/program.hpp"
#include "coda/mainloop/epilogue_seam.cuh"
#include "coda/mainloop/staging.cuh"
#include "coda/sm90/barrier.cuh"
#include "coda/sm90/wgmma.cuh"

namespace coda::epilogue {

namespace detail {

constexpr int kSubtileBytes = mainloop::kStagingSubtileBytes;
// A staged input's TMA box: 128 bytes of 16-bit values wide (the 128B swizzle), a part tall.
constexpr int kStagedBoxCols = 128 / 2;

// How many output columns a store writes per accumulator column: 1, 1/2 (pairs), 2 (wide).
enum class StoreWidth { full, half, wide };

struct NoSink {
  template <class... Args>
  __device__ void operator()(Args&&...) const {}
};

// What a wide store writes: f's pair, or the pair of a WideAndRowValue.
__device__ __forceinline__ Values2 wide_of(const Values2& v) { return v; }
__device__ __forceinline__ Values2 wide_of(const WideAndRowValue& v) { return v.wide; }

}  // namespace detail

/// The static facts of a part GpuTile runs a program on: the accumulators, the staging buffers,
/// the operands' type (every TileIn's) and the launch's output type (every TileOut's), whether it
/// straddles the problem's edge, and whether the program's staged input and row vector are staged.
template <class Acc_, int Buffers_, DType In_, DType Out_, bool Edge_, bool StagedInput_ = false,
          bool StagedVector_ = false>
struct GpuPart {
  using Acc = Acc_;
  static constexpr int kBuffers = Buffers_;
  static constexpr DType kIn = In_;
  static constexpr DType kOut = Out_;
  static constexpr bool kEdge = Edge_;
  static constexpr bool kStagedInput = StagedInput_;
  static constexpr bool kStagedVector = StagedVector_;
};

/// The Tile a program sees on the GPU: one consumer warpgroup's part, in its registers. Edge
/// parts straddle the problem's last row or column and check every element; interior parts (all
/// but a few) are compiled without any check: per-element predicates would not fit in registers
/// next to the accumulators.
template <class Part>
class GpuTile {
 public:
  using Acc = typename Part::Acc;
  static constexpr int kBuffers = Part::kBuffers;
  static constexpr DType kIn = Part::kIn;
  static constexpr DType kOut = Part::kOut;
  static constexpr bool kEdge = Part::kEdge;
  static constexpr bool kStagedInput = Part::kStagedInput;
  static constexpr bool kStagedVector = Part::kStagedVector;
  using Coordinates = mainloop::TileCoordinates;

  /// `staged` is the program's staged input (or null), whose part is at `staged_part` (kernel.cuh);
  /// `staged_vector` its staged row vector (or null), read here; `prefetched` the input its stores
  /// prefetch (or null; program.hpp).
  __device__ GpuTile(Acc& acc, const Coordinates& t, uint8_t (&staging)[kBuffers][detail::kSubtileBytes],
                     int& next_buffer, const TileIn* staged, const uint8_t* staged_part, const RowVector* staged_vector,
                     const TileIn* prefetched)
      : acc_(acc),
        t_(t),
        staging_(staging),
        next_buffer_(next_buffer),
        staged_(staged),
        staged_part_(staged_part),
        staged_vector_(staged_vector),
        prefetched_(prefetched),
        first_row_(t.row0 + Acc::row(0, 0, t.thread)),
        first_col_(t.col0 + Acc::col(0, t.thread)),
        rows_left_(t.problem_m - first_row_),
        cols_left_(t.problem_n - first_col_) {
    if constexpr (kStagedVector)
      if (staged_vector_->data) stage_row_vector(*staged_vector_);
  }

  // ---- 0. the part
  __device__ ColumnRange part_columns() const { return {t_.col0, min(t_.col0 + Acc::kCols, t_.problem_n)}; }

  // ---- 1. maps
  // The first map of a program with a staged input reads that input a group of eight values at a
  // time (read_staged_group), one ldmatrix in place of four shared loads; the program reads the
  // input before anything else writes the buffer (launch_program checks), so in its first map.
  template <class F>
  __device__ void map(F&& f) {
    fresh_limits();
    const bool read_groups = kStagedInput && !staged_groups_read_;
    staged_groups_read_ = true;
#pragma unroll
    for (int b = 0; b < Acc::kBlocks; ++b)
#pragma unroll
      for (int i = 0; i < Acc::kValuesPerBlock; ++i) {
        if (read_groups && i % 8 == 0) read_staged_group(b, i / 8);
        if (inside(b, i)) {
          Element x{acc_.value[b][i], row(b, i), col(i), t_.batch};
          f(x);
        }
      }
  }

  template <class F>
  __device__ void map_pairs(F&& f) {
    fresh_limits();
#pragma unroll
    for (int b = 0; b < Acc::kBlocks; ++b)
#pragma unroll
      for (int i = 0; i < Acc::kValuesPerBlock; i += 2) {
        if (inside(b, i)) {
          Pair p{acc_.value[b][i], acc_.value[b][i + 1], row(b, i), col(i), t_.batch};
          f(p);
        }
      }
  }

  template <class F>
  __device__ void map_pairs(const PairTables& tables, F&& f);

  // ---- 2 and 3. loads
  template <class At>
  __device__ float load(const TileIn& in, const At& x) const;
  template <class At>
  __device__ Values2 load_wide(const TileIn& in, const At& x) const;
  template <class At>
  __device__ float load(const RowVector& v, const At& x) const;
  template <class At>
  __device__ float load(const ColumnVector& v, const At& x) const;
  template <class At>
  __device__ int32_t load_index(const ColumnVector& v, const At& x) const;
  __device__ float load(const Table& table, int32_t i, int32_t j) const;

  // ---- 3. stores (store_as, stores.cuh): a TileOut in the launch's type kOut, a TileOutOf<T> in T
  __device__ void store(const TileOut& out) {
    store_as<Width::full, kOut>(out, [](const Element& x) { return x.value; });
  }
  template <class F>
  __device__ void store(const TileOut& out, F&& f) {
    store_as<Width::full, kOut>(out, f);
  }
  template <class F>
  __device__ void store_pairs(const TileOut& out, F&& f) {
    store_as<Width::half, kOut>(out, f);
  }
  template <class F>
  __device__ void store_wide(const TileOut& out, F&& f) {
    store_as<Width::wide, kOut>(out, f);
  }
  template <DType T>
  __device__ void store(const TileOutOf<T>& out) {
    store_as<Width::full, T>(out, [](const Element& x) { return x.value; });
  }
  template <DType T, class F>
  __device__ void store(const TileOutOf<T>& out, F&& f) {
    store_as<Width::full, T>(out, f);
  }
  template <DType T, class F>
  __device__ void store_pairs(const TileOutOf<T>& out, F&& f) {
    store_as<Width::half, T>(out, f);
  }
  template <DType T, class F>
  __device__ void store_wide(const TileOutOf<T>& out, F&& f) {
    store_as<Width::wide, T>(out, f);
  }

  // ---- 4 and 5. reductions
  template <class Monoid, class F>
  __device__ void row_reduce(const Partials& out, Monoid, F&& f);

  // store_wide and row_reduce from one call of f per element (reductions.cuh).
  template <class Monoid, class F>
  __device__ void store_wide_row_reduce(const TileOut& out, const Partials& partials, Monoid, F&& f);

  template <class Monoid, class F>
  __device__ void column_reduce(const Partials& out, Monoid, F&& f);

  template <class Monoid, class F>
  __device__ void reduce(const Partials& out, Monoid, F&& f);

 private:
  using Width = detail::StoreWidth;

  __device__ uint32_t tile_word(const TileIn& in, int32_t batch, int32_t dr, int32_t dc, int32_t first_col) const;
  __device__ uint32_t staged_word(int32_t dr, int32_t dc) const;
  __device__ void stage_row_vector(const RowVector& v);

  __device__ void read_staged_group(int b, int g);

  __device__ static float half_of(uint32_t word, int high);

  // With a staged input or row vector, from the thread's first row and column held in registers:
  // the distance between two elements' positions is then a constant the compiler sees (t_'s
  // fields may be read again from memory after any store), as the register indices of the staged
  // values need. Other programs keep the coordinates' form: in registers, the general
  // LinearCombination's kernel serialized its wgmmas (ptxas C7520) and ran 30x slower.
  __device__ int32_t row(int b, int i) const {
    if constexpr (kStagedInput || kStagedVector) return first_row_ + Acc::row_offset(b, i);
    else return t_.row0 + Acc::row(b, i, t_.thread);
  }
  __device__ int32_t col(int i) const {
    if constexpr (kStagedInput || kStagedVector) return first_col_ + Acc::col_offset(i);
    else return t_.col0 + Acc::col(i, t_.thread);
  }
  __device__ Values2 load_pair(const PairTables& tables, const Pair& p) const;
  __device__ static bool quad_loads_fit(const PairTables& tables);
  template <class F>
  __device__ void map_pairs_by_quad_loads(const PairTables& tables, F& f);
  // Pin the program's values in place: nothing computed from them may be moved across this point.
  // Without it the compiler computes a later store's converted values early, inside an earlier
  // store's barrier phase, and those extra registers spill next to the 128 accumulators.
  __device__ void pin_values() {
#pragma unroll
    for (int b = 0; b < Acc::kBlocks; ++b) sm90::accumulators_fence(acc_.value[b]);
  }
  // Edge parts: make the compiler recompute the (cheap) bounds checks in every primitive rather
  // than keep one per element alive from the previous primitive.
  __device__ void fresh_limits() {
    if constexpr (kEdge) asm volatile("" : "+r"(rows_left_), "+r"(cols_left_));
  }
  // Acc::row(b, i) - (this thread's first row) and Acc::col(i) - 2 (lane % 4) are constants.
  __device__ bool inside(int b, int i) const {
    if constexpr (!kEdge) return true;
    else return 64 * b + 8 * ((i / 2) % 2) < rows_left_ && 8 * (i / 4) + i % 2 < cols_left_;
  }
  __device__ int64_t part_m() const { return t_.row0 / Acc::kRows; }
  // The slot of a partial: `row` a problem row or a part index along M, `column` a problem column
  // or a part index along N (which ones: the reduction's kind, arguments.hpp).
  __device__ float* partial_slot(const Partials& out, int64_t row, int64_t column) const {
    return out.data + (t_.batch * out.batch_stride + row * out.row_stride + column * out.tile_stride);
  }
  __device__ int64_t part_n() const { return t_.col0 / Acc::kCols; }
  __device__ void sync() const { sm90::named_barrier_sync(1 + t_.consumer, 128); }

  template <class State>
  __device__ State* scratch_for();

  // `sink(b, half, j, k, inside, r)` sees each wide store's f result r, value k of chunk j of the
  // thread's row `half` of block b, in the order a row_reduce folds them (store_wide_row_reduce).
  template <Width W, DType T, class F, class Sink = detail::NoSink>
  __device__ void store_as(const TileOut& out, F&& f, Sink&& sink = Sink{});

  // Ask L1 for the prefetched input's `bytes` from column `col` of this thread's rows of block b
  // (interior parts only: every such row and column is inside the problem).
  __device__ void prefetch_input(int b, int64_t col, int bytes) const;

  // The end of a row reduction: the quad holding the row combines its states; one lane writes.
  template <class Monoid>
  __device__ void write_row_partial(const Partials& out, int b, int half, typename Monoid::State s);

  Acc& acc_;
  const Coordinates& t_;
  uint8_t (&staging_)[kBuffers][detail::kSubtileBytes];
  int& next_buffer_;
  const TileIn* staged_;
  const uint8_t* staged_part_;
  const RowVector* staged_vector_;
  const TileIn* prefetched_;
  float staged_values_[Acc::kCols / 4];  // the staged row vector at this thread's columns
  bool staged_groups_read_ = false;      // the first map has run (read_staged_group)
  uint32_t group_words_[4];              // the staged input's words last read by read_staged_group,
  int group_block_ = -1;                 // for its block and group of eight values
  int group_ = -1;
  int32_t first_row_;  // this thread's first row and column (value 0 of block 0)
  int32_t first_col_;
  int32_t rows_left_;  // rows of the problem from this thread's first row on
  int32_t cols_left_;  // columns of the problem from this thread's first column on
};

}  // namespace coda::epilogue

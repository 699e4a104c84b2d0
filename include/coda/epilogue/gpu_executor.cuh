// coda/epilogue/gpu_executor.cuh: the GPU executor of epilogue programs: an Epilogue for the
// mainloop's seam (gemm/epilogue_seam.cuh) that runs a program on each consumer warpgroup's part
// of a tile, straight on the accumulator registers.
//
//   // bf16 operands (and tile inputs), e4m3 tile outputs:
//   using Epilogue = coda::epilogue::ProgramEpilogue<MyProgram, /*staging buffers=*/2, DType::bf16, DType::e4m3>;
//   gemm_kernel<Config, Element, Major::k, Major::k, Epilogue><<<...>>>(params);  // params.epilogue: MyProgram
//
// How each primitive maps onto the hardware (the part is Rows x Cols fp32 values over 128
// threads in the wgmma accumulator layout, epilogue_seam.cuh):
//   map, map_pairs       unrolled over the thread's fragment; pairs are values 2j, 2j+1 (adjacent
//                        columns of one row), so they need no data exchange. With PairTables, the
//                        four lanes of a row read each table 64 bytes at a time and trade entries
//                        by quad shuffles (map_pairs_by_quad_loads)
//   tile loads           every TileIn is of the operands' 16-bit type `In` (launch_program checks the
//                        ones tile_inputs() lists, and the CPU executor that a program lists all
//                        it reads). The program's staged input (program.hpp) is, on the ping-pong
//                        tile, in shared memory when the part's program starts, fetched by the
//                        mainloop's producer while the MMAs ran (kernel.cuh), 128B-swizzled: the
//                        program's first map reads it with one conflict-free ldmatrix.x4 per eight
//                        values (the accumulator layout), later reads with one 32-bit shared load
//                        per pair of adjacent columns. Other inputs (and the staged one on the
//                        m128n256 tile of a companion launch): one
//                        read-only 32-bit global load per pair, at the thread's first word plus a
//                        compile-time offset. (An L2 prefetch of the part's rows as its MMAs
//                        began, cp.async.bulk.prefetch, measured slower: tile load + store 1.30
//                        -> 1.09 of the GEMM without it, H200.)
//   vector loads         the program's staged row vector (program.hpp): the thread's 32 columns
//                        read once per part into registers, 16 loads. Others: direct read-only
//                        global loads, one per element visited, without a
//                        branch on the element type, so that an unrolled map issues them all
//                        before the first value is needed (all of a part's loads at once: on
//                        the H200 that beat issuing them in batches of 32 values, residual +
//                        RMSNorm 1.40 -> 1.32 of the GEMM, with no spills at 128 x 128 parts)
//   row_reduce           fold over the thread's values of a row, then two quad shuffles (the four
//                        lanes sharing a row); one lane per row writes (a multi-word state, a
//                        running top-k, is shuffled word by word)
//   column_reduce        fold over the thread's two rows per 64-row block, shuffles across the
//                        eight lanes sharing a column, then shared memory across the four warps
//   reduce               warp shuffles, then shared memory across the four warps
//   stores               64-row subtiles, 128 bytes wide, through a ring of staging buffers in
//                        the 128B-swizzled layout (each consumer's own, or with a staged input
//                        the region it was staged in), then TMA stores (clipped at the problem edge).
//                        The output type is part of the kernel (`Out`, every TileOut; launch.cuh
//                        picks it from the program's stores) or of the descriptor's C++ type (a
//                        TileOutOf<T>, in T): with it chosen at run time, the compiler hoists the
//                        program's values above the type switch and the accumulators spill. fp8
//                        outputs are scaled and saturated on the way.
// Elements outside the problem are never handed to the program.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "coda/arch/sm90/barrier.cuh"
#include "coda/arch/sm90/stmatrix.cuh"
#include "coda/arch/sm90/tma.cuh"
#include "coda/arch/sm90/wgmma.cuh"
#include "coda/epilogue/parts.hpp"
#include "coda/epilogue/program.hpp"
#include "coda/gemm/epilogue_seam.cuh"
#include "coda/gemm/staging.cuh"

namespace coda::epilogue {

namespace detail {

constexpr int kSubtileBytes = mainloop::kStagingSubtileBytes;
// A staged input's TMA box: 128 bytes of 16-bit values wide (the 128B swizzle), a part tall.
constexpr int kStagedBoxCols = 128 / 2;

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

// One element of a 16/32-bit float or int32 array as fp32. The type is the same for every element
// of a descriptor, but a switch on it puts each load behind its own branch: an unrolled map's
// loads then go out one memory latency apart, and equal loads (a row's vector value, read for
// every column) are not merged. So every type takes one unconditional read-only load of the
// aligned 32-bit word that holds the element (for a 16-bit element, the half picked by a shift;
// a word never straddles a page, so it is always addressable) and the conversions are selects.
__device__ __forceinline__ float load_element(const void* data, DType dtype, int64_t index) {
  const uintptr_t element_bytes = dtype == DType::f32 || dtype == DType::i32 ? 4 : 2;
  const uintptr_t address = reinterpret_cast<uintptr_t>(data) + uintptr_t(index) * element_bytes;
  const uint32_t word = __ldg(reinterpret_cast<const uint32_t*>(address & ~uintptr_t(3)));
  const uint32_t bits = word >> (8 * (address & 2));
  const float from_f16 = __half2float(__ushort_as_half(uint16_t(bits)));
  const float from_bf16 = __uint_as_float(bits << 16);
  const float from_i32 = float(int32_t(bits));
  return dtype == DType::f32 ? __uint_as_float(bits)
         : dtype == DType::i32 ? from_i32
         : dtype == DType::bf16 ? from_bf16
                                : from_f16;
}

// Whether a reduction can hand the monoid a row's values at once: f gives floats and the monoid
// has fold() (monoids.hpp).
template <class Monoid, class F>
constexpr bool folds_floats() {
  if constexpr (std::is_invocable_v<F&, const Element&>)
    return std::is_same_v<std::invoke_result_t<F&, const Element&>, float> &&
           requires(const float (&v)[4]) { Monoid::fold(v); };
  else
    return false;
}

// Exchange a monoid state with lane ^ mask (states are made of 32-bit words), moved as floats:
// a state is often an accumulator itself (a row's max), and reading one as an integer let the
// compiler carry that accumulator through the K loop in an integer register, copied while a
// wgmma still wrote it (PTX ISA: accumulators are readable only after wgmma.wait_group). Seen as
// wrong even columns from the Reductions program (standard_gpu_test.cu).
template <class State>
__device__ __forceinline__ State shuffle_xor(const State& s, int mask) {
  static_assert(sizeof(State) % 4 == 0, "monoid states are whole 32-bit words");
  float words[sizeof(State) / 4];
  memcpy(words, &s, sizeof(State));
#pragma unroll
  for (int w = 0; w < int(sizeof(State) / 4); ++w) words[w] = __shfl_xor_sync(0xffffffffu, words[w], mask);
  State out;
  memcpy(&out, words, sizeof(State));
  return out;
}

// A 4 x 4 transpose across the four lanes of a quad: lane q holds row q of M in v and ends with
// column q of it (v[r] = M[r][q]). Two butterfly rounds, with lane q ^ 2 and then q ^ 1, each
// moving two values a lane; the selects on the lane's bits place them, since a register cannot be
// indexed at run time.
__device__ __forceinline__ void quad_transpose(float (&v)[4], int q) {
  const bool high = q & 2, odd = q & 1;
  // Round 1: keep the columns whose bit 1 is q's, trade the other two for the partner's.
  const float keep0 = high ? v[2] : v[0], keep1 = high ? v[3] : v[1];
  const float got0 = __shfl_xor_sync(0xffffffffu, high ? v[0] : v[2], 2);
  const float got1 = __shfl_xor_sync(0xffffffffu, high ? v[1] : v[3], 2);
  // Now M[q][c], M[q ^ 2][c] for the two columns c with c's bit 1 = q's. Round 2: keep column q,
  // trade column q ^ 1.
  const float own = odd ? keep1 : keep0, across = odd ? got1 : got0;  // M[q][q], M[q ^ 2][q]
  const float next = __shfl_xor_sync(0xffffffffu, odd ? keep0 : keep1, 1);   // M[q ^ 1][q]
  const float far = __shfl_xor_sync(0xffffffffu, odd ? got0 : got1, 1);      // M[q ^ 3][q]
  // v[r] = M[r][q]: row r = q ^ x for x = 0 (own), 1 (next), 2 (across), 3 (far).
  const float even_rows0 = odd ? next : own, even_rows1 = odd ? far : across;  // v[0], v[2] (swapped if q >= 2)
  const float odd_rows0 = odd ? own : next, odd_rows1 = odd ? across : far;    // v[1], v[3] (likewise)
  v[0] = high ? even_rows1 : even_rows0;
  v[1] = high ? odd_rows1 : odd_rows0;
  v[2] = high ? even_rows0 : even_rows1;
  v[3] = high ? odd_rows0 : odd_rows1;
}

}  // namespace detail

/// The Tile a program sees on the GPU: one consumer warpgroup's part, in its registers. `Edge`
/// parts straddle the problem's last row or column and check every element; interior parts (all
/// but a few) are compiled without any check: per-element predicates would not fit in registers
/// next to the accumulators.
template <class Acc, int Buffers, DType In, DType Out, bool Edge, bool StagedInput = false, bool StagedVector = false>
class GpuTile {
 public:
  using Coordinates = mainloop::TileCoordinates;

  /// `staged` is the program's staged input (or null), whose part is at `staged_part` (kernel.cuh);
  /// `staged_vector` its staged row vector (or null), read here (program.hpp).
  __device__ GpuTile(Acc& acc, const Coordinates& t, uint8_t (&staging)[Buffers][detail::kSubtileBytes],
                     int& next_buffer, const TileIn* staged, const uint8_t* staged_part,
                     const RowVector* staged_vector)
      : acc_(acc),
        t_(t),
        staging_(staging),
        next_buffer_(next_buffer),
        staged_(staged),
        staged_part_(staged_part),
        staged_vector_(staged_vector),
        first_row_(t.row0 + Acc::row(0, 0, t.thread)),
        first_col_(t.col0 + Acc::col(0, t.thread)),
        rows_left_(t.problem_m - first_row_),
        cols_left_(t.problem_n - first_col_) {
    if constexpr (StagedVector)
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
    const bool read_groups = StagedInput && !staged_groups_read_;
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

  // Pairs with their entries of two tables at a row picked per output row (PairTables). Where each
  // chunk of 16 pairs (32 columns) of a row lies inside one period and the tables allow 16-byte
  // loads, the four lanes holding a row read a chunk's 16 entries of a table with one 16-byte load
  // each (lane q: entries 4q .. 4q + 3 of the chunk) and a quad transpose hands each lane its own
  // pairs' entries (the part's pair 4 j + q is entry 4 (j % 4) + q of chunk j / 4): 8 loads per row
  // where one per pair and table took 32, each of a different row of a warp's eight. Beside the
  // per-pair loads the other consumer's MMAs ran 9% longer (RoPE, coda bench timeline, H200);
  // beside these, as long as beside a plain store.
  template <class F>
  __device__ void map_pairs(const PairTables& tables, F&& f) {
    if constexpr (!Edge)
      if (quad_loads_fit(tables)) return map_pairs_by_quad_loads(tables, f);
    map_pairs([&](Pair& p) { f(p, load_pair(tables, p)); });
  }

  // ---- 2 and 3. loads
  // Tile inputs hold `In` (16-bit) values with even ld and batch stride (launch_program checks),
  // so an element pair (2j, 2j + 1) is one aligned 32-bit word. Each word is addressed as the
  // thread's first word plus (rows below it) * ld / 2 + (columns right of it) / 2: once a map is
  // unrolled those distances are constants, so both elements of a pair read the same word (one
  // load) and the column part folds into the load's immediate offset.
  // `staged_` is the address of one of the program's members (or null), and so is `&in`: the
  // comparison is decided at compile time, with no branch in the unrolled map.
  template <class At>
  __device__ float load(const TileIn& in, const At& x) const {
    const int32_t dr = x.row - row(0, 0), dc = x.col - col(0);
    uint32_t word;
    if (!StagedInput || &in != staged_) word = tile_word(in, x.batch, dr, dc, col(0));
    else if (dr >= 0 && dc >= 0 && dr / 64 == group_block_ && dc / 16 == group_ && dr % 64 < 16 && dr % 8 == 0 &&
             dc % 8 < 2)
      word = group_words_[2 * ((dc / 8) % 2) + (dr % 64) / 8];  // in the group read last (map)
    else word = staged_word(dr, dc);
    return half_of(word, dc % 2);
  }
  template <class At>
  __device__ Values2 load_wide(const TileIn& in, const At& x) const {  // columns 2 x.col, 2 x.col + 1
    const uint32_t word = tile_word(in, x.batch, x.row - row(0, 0), 2 * (x.col - col(0)), 2 * col(0));
    return {half_of(word, 0), half_of(word, 1)};
  }
  // The staged row vector at one of this thread's columns (col(0) + 8 j + k, k < 2: a constant
  // offset in an unrolled map) comes from the registers staged at the part's start.
  template <class At>
  __device__ float load(const RowVector& v, const At& x) const {
    const int32_t dc = x.col - col(0);
    if (StagedVector && &v == staged_vector_ && dc >= 0 && dc < Acc::kCols && dc % 8 < 2)
      return staged_values_[2 * (dc / 8) + dc % 8];
    return detail::load_element(v.data, v.dtype, x.col);
  }
  template <class At>
  __device__ float load(const ColumnVector& v, const At& x) const {
    return detail::load_element(v.data, v.dtype, x.batch * v.batch_stride + x.row);
  }
  template <class At>
  __device__ int32_t load_index(const ColumnVector& v, const At& x) const {  // int32 (the CPU executor checks)
    return __ldg(static_cast<const int32_t*>(v.data) + (x.batch * v.batch_stride + x.row));
  }
  __device__ float load(const Table& table, int32_t i, int32_t j) const {
    return __ldg(table.data + (i * table.ld + j));
  }

  // ---- 3. stores
  // A TileOut is written in the launch's type `Out`, a TileOutOf<T> in its own T.
  __device__ void store(const TileOut& out) {
    store_as<Width::full, Out>(out, [](const Element& x) { return x.value; });
  }
  template <class F>
  __device__ void store(const TileOut& out, F&& f) { store_as<Width::full, Out>(out, f); }
  template <class F>
  __device__ void store_pairs(const TileOut& out, F&& f) { store_as<Width::half, Out>(out, f); }
  template <class F>
  __device__ void store_wide(const TileOut& out, F&& f) { store_as<Width::wide, Out>(out, f); }
  template <DType T>
  __device__ void store(const TileOutOf<T>& out) {
    store_as<Width::full, T>(out, [](const Element& x) { return x.value; });
  }
  template <DType T, class F>
  __device__ void store(const TileOutOf<T>& out, F&& f) { store_as<Width::full, T>(out, f); }
  template <DType T, class F>
  __device__ void store_pairs(const TileOutOf<T>& out, F&& f) { store_as<Width::half, T>(out, f); }
  template <DType T, class F>
  __device__ void store_wide(const TileOutOf<T>& out, F&& f) { store_as<Width::wide, T>(out, f); }

  // ---- 4 and 5. reductions
  template <class Monoid, class F>
  __device__ void row_reduce(const Partials& out, Monoid, F&& f) {
    fresh_limits();
    const int lane = t_.thread % 32;
#pragma unroll
    for (int b = 0; b < Acc::kBlocks; ++b)
#pragma unroll
      for (int half = 0; half < 2; ++half) {  // the thread's two rows of the block: lane / 4 and + 8
        typename Monoid::State s = Monoid::identity();
        if constexpr (!Edge && detail::folds_floats<Monoid, F>()) {
          float values[Acc::kValuesPerBlock / 2];  // the thread's values of this row
#pragma unroll
          for (int i = 2 * half, v = 0; i < Acc::kValuesPerBlock; i += 4)
#pragma unroll
            for (int k = 0; k < 2; ++k, ++v) {
              Element x{acc_.value[b][i + k], row(b, i + k), col(i + k), t_.batch};
              values[v] = f(x);
            }
          s = Monoid::fold(values);
        } else {
#pragma unroll
          for (int i = 2 * half; i < Acc::kValuesPerBlock; i += 4)
#pragma unroll
            for (int k = 0; k < 2; ++k)
              if (inside(b, i + k)) {
                Element x{acc_.value[b][i + k], row(b, i + k), col(i + k), t_.batch};
                s = Monoid::combine(s, as_state<Monoid>(f(x)));
              }
        }
        s = Monoid::combine(s, detail::shuffle_xor(s, 1));  // the quad holding the row
        s = Monoid::combine(s, detail::shuffle_xor(s, 2));
        const int32_t r = row(b, 2 * half);
        if (lane % 4 == 0 && r < t_.problem_m && Monoid::present(s))
          write_partial<Monoid>(partial_slot(out, r, part_n()), s);
      }
  }

  template <class Monoid, class F>
  __device__ void column_reduce(const Partials& out, Monoid, F&& f) {
    using State = typename Monoid::State;
    const int lane = t_.thread % 32, warp = t_.thread / 32;
    State* scratch = scratch_for<State>();  // [warp][column of the part], reused staging
    fresh_limits();
#pragma unroll
    for (int i = 0; i < Acc::kValuesPerBlock; ++i) {
      if ((i / 2) % 2 != 0) continue;  // i and i + 2 are the same column, rows r and r + 8
      State s = Monoid::identity();
#pragma unroll
      for (int b = 0; b < Acc::kBlocks; ++b)
#pragma unroll
        for (int k = 0; k < 4; k += 2)
          if (inside(b, i + k)) {
            Element x{acc_.value[b][i + k], row(b, i + k), col(i + k), t_.batch};
            s = Monoid::combine(s, as_state<Monoid>(f(x)));
          }
      s = Monoid::combine(s, detail::shuffle_xor(s, 4));  // the eight lanes sharing the column
      s = Monoid::combine(s, detail::shuffle_xor(s, 8));
      s = Monoid::combine(s, detail::shuffle_xor(s, 16));
      if (lane < 4) scratch[warp * Acc::kCols + Acc::col(i, t_.thread)] = s;
    }
    sync();
    for (int c = t_.thread; c < Acc::kCols; c += 128) {  // warps in order: deterministic
      State s = scratch[c];
#pragma unroll
      for (int w = 1; w < 4; ++w) s = Monoid::combine(s, scratch[w * Acc::kCols + c]);
      const int32_t column = t_.col0 + c;
      if (column < t_.problem_n && Monoid::present(s))
        write_partial<Monoid>(partial_slot(out, part_m(), column), s);
    }
    sync();  // the scratch is staging space again
  }

  template <class Monoid, class F>
  __device__ void reduce(const Partials& out, Monoid, F&& f) {
    using State = typename Monoid::State;
    const int lane = t_.thread % 32, warp = t_.thread / 32;
    State s = Monoid::identity();
    map([&](Element& x) { s = Monoid::combine(s, as_state<Monoid>(f(x))); });
#pragma unroll
    for (int mask = 1; mask < 32; mask *= 2) s = Monoid::combine(s, detail::shuffle_xor(s, mask));
    State* scratch = scratch_for<State>();
    if (lane == 0) scratch[warp] = s;
    sync();
    if (t_.thread == 0) {
      State all = scratch[0];
#pragma unroll
      for (int w = 1; w < 4; ++w) all = Monoid::combine(all, scratch[w]);
      if (Monoid::present(all))
        write_partial<Monoid>(partial_slot(out, part_m(), part_n()), all);
    }
    sync();
  }

 private:
  enum class Width { full, half, wide };  // output columns per accumulator column: 1, 1/2, 2

  // The 32-bit word of a 16-bit tile input holding column first_col + dc of row row(0, 0) + dr
  // (first_col, ld and the batch stride are even; dr and dc are constants in an unrolled map).
  __device__ uint32_t tile_word(const TileIn& in, int32_t batch, int32_t dr, int32_t dc, int32_t first_col) const {
    const int64_t first_word = (batch * in.batch_stride + int64_t(row(0, 0)) * in.ld + first_col) >> 1;
    return __ldg(static_cast<const uint32_t*>(in.data) + first_word + dr * (in.ld >> 1) + (dc >> 1));
  }
  // The staged part's word holding column col(0) + dc of row row(0, 0) + dr: box dc / 64 (128 rows
  // of 128 bytes), 16-byte chunk (dc % 64) / 8 of the row, moved by the 128B swizzle to chunk
  // ^ (row % 8) (CUtensorMapSwizzle 128B; the part is 1024-byte aligned). Every row of a thread
  // is lane / 4 mod 8 (dr is a multiple of 8), so the eight row groups of a warp land on eight
  // different chunks: a warp's 32 loads hit 32 different banks.
  __device__ uint32_t staged_word(int32_t dr, int32_t dc) const {
    constexpr int kBoxCols = detail::kStagedBoxCols, kBoxBytes = Acc::kRows * 128;
    const int lane = t_.thread % 32;
    const int part_row = 16 * (t_.thread / 32) + lane / 4 + dr;
    const int chunk = ((dc % kBoxCols) / 8) ^ (lane / 4);
    const auto* box = reinterpret_cast<const uint32_t*>(staged_part_ + (dc / kBoxCols) * kBoxBytes);
    return box[part_row * 32 + chunk * 4 + lane % 4];
  }
  // This thread's columns of the staged row vector: value 2 j + k is column col(0) + 8 j + k. A
  // pair is one 8-byte (fp32) or 4-byte (16-bit) load where the vector is aligned for it (col(0)
  // is even); edge parts read only the columns inside the problem, one by one.
  __device__ void stage_row_vector(const RowVector& v) {
    constexpr int kPairs = Acc::kCols / 8;
    const uintptr_t address = reinterpret_cast<uintptr_t>(v.data);
    if constexpr (!Edge) {
      if (v.dtype == DType::f32 && address % 8 == 0) {
#pragma unroll
        for (int j = 0; j < kPairs; ++j) {
          const float2 pair = __ldg(static_cast<const float2*>(v.data) + (col(0) + 8 * j) / 2);
          staged_values_[2 * j] = pair.x;
          staged_values_[2 * j + 1] = pair.y;
        }
        return;
      }
      if (v.dtype != DType::f32 && address % 4 == 0) {  // bf16 or f16 (row_vector() checks)
#pragma unroll
        for (int j = 0; j < kPairs; ++j) {
          const uint32_t word = __ldg(static_cast<const uint32_t*>(v.data) + (col(0) + 8 * j) / 2);
          const bool bf16 = v.dtype == DType::bf16;
          staged_values_[2 * j] = bf16 ? __uint_as_float(word << 16) : __half2float(__ushort_as_half(uint16_t(word)));
          staged_values_[2 * j + 1] =
              bf16 ? __uint_as_float(word & 0xffff0000u) : __half2float(__ushort_as_half(uint16_t(word >> 16)));
        }
        return;
      }
    }
#pragma unroll
    for (int j = 0; j < kPairs; ++j)
#pragma unroll
      for (int k = 0; k < 2; ++k)
        staged_values_[2 * j + k] =
            8 * j + k < cols_left_ ? detail::load_element(v.data, v.dtype, col(0) + 8 * j + k) : 0.0f;
  }

  // The staged part's words for values [8 g, 8 g + 8) of block b (columns 16 g .. 16 g + 15 of the
  // thread's rows 64 b + {0, 8} of its first): one ldmatrix.x4 whose matrix 2 c + h is chunk
  // 2 g + c (8 columns), rows 8 h .. 8 h + 7 of the warp's 16, each lane receiving exactly the word
  // its accumulators hold there (stmatrix.cuh). Lane l addresses row l % 8 of matrix l / 8, at its
  // 128B-swizzled chunk (staged_word): the eight rows of a matrix are eight different chunks.
  __device__ void read_staged_group(int b, int g) {
    constexpr int kBoxBytes = Acc::kRows * 128;
    const int lane = t_.thread % 32, matrix = lane / 8, row_in_matrix = lane % 8;
    const int chunk = 2 * g + matrix / 2;
    const int part_row = 64 * b + 16 * (t_.thread / 32) + 8 * (matrix % 2) + row_in_matrix;
    const uint32_t address = sm90::shared_address(staged_part_) + (chunk / 8) * kBoxBytes + part_row * 128 +
                             (((chunk % 8) ^ row_in_matrix) << 4);
    sm90::ldmatrix_x4(address, group_words_);
    group_block_ = b;
    group_ = g;
  }

  // The low (even column) or high (odd column) 16-bit value of a word, as fp32.
  __device__ static float half_of(uint32_t word, int high) {
    static_assert(In == DType::bf16 || In == DType::f16, "program kernels take bf16 or f16 operands");
    if constexpr (In == DType::bf16) return __uint_as_float(high ? word & 0xffff0000u : word << 16);
    else return __half2float(__ushort_as_half(uint16_t(high ? word >> 16 : word & 0xffffu)));
  }

  // With a staged input or row vector, from the thread's first row and column held in registers:
  // the distance between two elements' positions is then a constant the compiler sees (t_'s
  // fields may be read again from memory after any store), as the register indices of the staged
  // values need. Other programs keep the coordinates' form: in registers, the general
  // LinearCombination's kernel serialized its wgmmas (ptxas C7520) and ran 30x slower.
  __device__ int32_t row(int b, int i) const {
    if constexpr (StagedInput || StagedVector) return first_row_ + Acc::row_offset(b, i);
    else return t_.row0 + Acc::row(b, i, t_.thread);
  }
  __device__ int32_t col(int i) const {
    if constexpr (StagedInput || StagedVector) return first_col_ + Acc::col_offset(i);
    else return t_.col0 + Acc::col(i, t_.thread);
  }
  // PairTables, one pair at a time. Every pair loads, from row 0 where the index is outside the
  // tables: without a branch, an unrolled map issues all of its loads before the first is needed.
  __device__ Values2 load_pair(const PairTables& tables, const Pair& p) const {
    const int32_t index = load_index(tables.index, p);
    const bool known = uint32_t(index) < uint32_t(min(tables.first.rows, tables.second.rows));
    const int32_t row = known ? index : 0, entry = tables.period.remainder(p.col) >> 1;  // p.col is even
    const float first = __ldg(tables.first.data + (row * tables.first.ld + entry));
    const float second = __ldg(tables.second.data + (row * tables.second.ld + entry));
    return {known ? first : NAN, known ? second : NAN};
  }
  // The part's columns start at a multiple of 32 (Acc::kCols is), so a period that is one too
  // keeps each chunk of 32 columns inside one period; float4 loads need rows 16-byte aligned.
  __device__ static bool quad_loads_fit(const PairTables& tables) {
    static_assert(Acc::kCols % 32 == 0);
    return tables.period.value() % 32 == 0 && tables.first.ld % 4 == 0 && tables.second.ld % 4 == 0 &&
           (reinterpret_cast<uintptr_t>(tables.first.data) | reinterpret_cast<uintptr_t>(tables.second.data)) % 16 == 0;
  }
  template <class F>
  __device__ void map_pairs_by_quad_loads(const PairTables& tables, F& f) {
    constexpr int kChunks = Acc::kCols / 32;
    const int q = t_.thread % 4;
    int32_t chunk_entry[kChunks];  // the table column of each chunk's first pair
#pragma unroll
    for (int k = 0; k < kChunks; ++k) chunk_entry[k] = tables.period.remainder(t_.col0 + 32 * k) >> 1;
    const int32_t rows = min(tables.first.rows, tables.second.rows);
#pragma unroll
    for (int b = 0; b < Acc::kBlocks; ++b)
#pragma unroll
      for (int half = 0; half < 2; ++half) {  // the thread's two rows of the block
        const int32_t r = row(b, 2 * half);
        const int32_t index = load_index(tables.index, Element{acc_.value[b][0], r, 0, t_.batch});
        const bool known = uint32_t(index) < uint32_t(rows);
        const int32_t table_row = known ? index : 0;
        const float* first = tables.first.data + (table_row * tables.first.ld + 4 * q);
        const float* second = tables.second.data + (table_row * tables.second.ld + 4 * q);
#pragma unroll
        for (int k = 0; k < kChunks; ++k) {
          const float4 a = __ldg(reinterpret_cast<const float4*>(first + chunk_entry[k]));
          const float4 c = __ldg(reinterpret_cast<const float4*>(second + chunk_entry[k]));
          float firsts[4] = {a.x, a.y, a.z, a.w}, seconds[4] = {c.x, c.y, c.z, c.w};
          detail::quad_transpose(firsts, q);
          detail::quad_transpose(seconds, q);
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int i = 4 * (4 * k + e) + 2 * half;  // values i, i + 1: the part's pair 4 (4 k + e) + q
            Pair p{acc_.value[b][i], acc_.value[b][i + 1], r, col(i), t_.batch};
            f(p, Values2{known ? firsts[e] : NAN, known ? seconds[e] : NAN});
          }
        }
      }
  }
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
    if constexpr (Edge) asm volatile("" : "+r"(rows_left_), "+r"(cols_left_));
  }
  // Acc::row(b, i) - (this thread's first row) and Acc::col(i) - 2 (lane % 4) are constants.
  __device__ bool inside(int b, int i) const {
    if constexpr (!Edge) return true;
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

  // Reductions borrow the staging ring as scratch once every store reading it has finished.
  template <class State>
  __device__ State* scratch_for() {
    static_assert(4 * Acc::kCols * sizeof(State) <= Buffers * detail::kSubtileBytes, "scratch exceeds the staging");
    if (t_.thread == 0) sm90::tma_store_wait_read<0>();
    sync();
    return reinterpret_cast<State*>(&staging_[0][0]);
  }

  // Every output subtile (64 rows x 128 bytes; 64 bytes for a 1-byte pair output) of the part, in
  // order: accumulator chunk j (eight columns) lands in exactly one output subtile, decided at
  // compile time from its width.
  template <Width W, DType T, class F>
  __device__ void store_as(const TileOut& out, F&& f) {
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
    fresh_limits();
#pragma unroll
    for (int b = 0; b < Acc::kBlocks; ++b)
#pragma unroll
      for (int sub = 0; sub < kSubtilesPerBlock; ++sub) {
        uint8_t* staging = staging_[next_buffer_];
        const uint32_t staging_address = sm90::shared_address(staging);
        if (t_.thread == 0) sm90::tma_store_wait_read<Buffers - 1>();
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
                detail::put2<T>(staging_address + staged_at(r, oc * ElementBytes), out.scale,
                                in0 ? f(x0) : 0.0f, in1 ? f(x1) : 0.0f);
              } else if constexpr (W == Width::half) {  // output column pc / 2
                const int oc = (pc / 2) % kSubtileCols;
                Pair p{acc_.value[b][i], acc_.value[b][i + 1], row(b, i), col(i), t_.batch};
                detail::put1<T>(staging_address + staged_at(r, oc * ElementBytes), out.scale,
                                in0 ? f(p) : 0.0f);
              } else {  // output columns 2 pc .. 2 pc + 3
                const int oc = (2 * pc) % kSubtileCols;
                const Values2 v0 = in0 ? f(x0) : Values2{0.0f, 0.0f};
                const Values2 v1 = in1 ? f(x1) : Values2{0.0f, 0.0f};
                detail::put2<T>(staging_address + staged_at(r, oc * ElementBytes), out.scale,
                                v0.first, v0.second);
                detail::put2<T>(staging_address + staged_at(r, (oc + 2) * ElementBytes), out.scale,
                                v1.first, v1.second);
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
        next_buffer_ = next_buffer_ + 1 == Buffers ? 0 : next_buffer_ + 1;
      }
  }

  Acc& acc_;
  const Coordinates& t_;
  uint8_t (&staging_)[Buffers][detail::kSubtileBytes];
  int& next_buffer_;
  const TileIn* staged_;
  const uint8_t* staged_part_;
  const RowVector* staged_vector_;
  float staged_values_[Acc::kCols / 4];  // the staged row vector at this thread's columns
  bool staged_groups_read_ = false;  // the first map has run (read_staged_group)
  uint32_t group_words_[4];      // the staged input's words last read by read_staged_group,
  int group_block_ = -1;              // for its block and group of eight values
  int group_ = -1;
  int32_t first_row_;  // this thread's first row and column (value 0 of block 0)
  int32_t first_col_;
  int32_t rows_left_;  // rows of the problem from this thread's first row on
  int32_t cols_left_;  // columns of the problem from this thread's first column on
};

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
    if (t.row0 + Acc::kRows <= t.problem_m && t.col0 + Acc::kCols <= t.problem_n) {
      GpuTile<Acc, kBuffers, In, Out, false, kStaged, StagesARowVector<Program>> tile(
          acc, t, staging, next_buffer_, staged, staged_part, staged_vector);
      program(tile);
    } else {
      GpuTile<Acc, kBuffers, In, Out, true, kStaged, StagesARowVector<Program>> tile(
          acc, t, staging, next_buffer_, staged, staged_part, staged_vector);
      program(tile);
    }
  }

  int next_buffer_ = 0;
};

}  // namespace coda::epilogue

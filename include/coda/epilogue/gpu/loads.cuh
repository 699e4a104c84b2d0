// coda/epilogue/gpu/loads.cuh: the GPU executor's tile, vector and table loads (GpuTile, tile.cuh).
//
//   tile loads     every TileIn is of the operands' 16-bit type (launch_program checks the ones
//                  tile_inputs() lists, and the CPU executor that a program lists all it reads).
//                  The program's staged input (program.hpp) is, on the ping-pong tile, in shared
//                  memory when the part's program starts, fetched by the mainloop's producer while
//                  the MMAs ran (mainloop/kernel.cuh), 128B-swizzled: the program's first map reads
//                  it with one conflict-free ldmatrix.x4 per eight values (the accumulator layout),
//                  later reads with one 32-bit shared load per pair of adjacent columns. Other inputs
//                  (and the staged one on the m128n256 tile of a companion launch): one read-only
//                  32-bit global load per pair, at the thread's first word plus a compile-time
//                  offset. (An L2 prefetch of the part's rows as its MMAs began,
//                  cp.async.bulk.prefetch, measured slower: tile load + store 1.30 -> 1.09 of the
//                  GEMM without it, H200.)
//   vector loads   the program's staged row vector (program.hpp): the thread's 32 columns read
//                  once per part into registers, 16 loads. Others: direct read-only global loads,
//                  one per element visited, without a branch on the element type, so that an
//                  unrolled map issues them all before the first value is needed (all of a part's
//                  loads at once: on the H200 that beat issuing them in batches of 32 values,
//                  residual + RMSNorm 1.40 -> 1.32 of the GEMM, with no spills at 128 x 128 parts)
//   table loads    with PairTables, the four lanes of a row read each table 64 bytes at a time and
//                  trade entries by quad shuffles (map_pairs_by_quad_loads)
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>

#include "coda/epilogue/gpu/tile.cuh"
#include "coda/sm90/stmatrix.cuh"

namespace coda::epilogue {

namespace detail {

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
  return dtype == DType::f32    ? __uint_as_float(bits)
         : dtype == DType::i32  ? from_i32
         : dtype == DType::bf16 ? from_bf16
                                : from_f16;
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
  const float own = odd ? keep1 : keep0, across = odd ? got1 : got0;        // M[q][q], M[q ^ 2][q]
  const float next = __shfl_xor_sync(0xffffffffu, odd ? keep0 : keep1, 1);  // M[q ^ 1][q]
  const float far = __shfl_xor_sync(0xffffffffu, odd ? got0 : got1, 1);     // M[q ^ 3][q]
  // v[r] = M[r][q]: row r = q ^ x for x = 0 (own), 1 (next), 2 (across), 3 (far).
  const float even_rows0 = odd ? next : own, even_rows1 = odd ? far : across;  // v[0], v[2] (swapped if q >= 2)
  const float odd_rows0 = odd ? own : next, odd_rows1 = odd ? across : far;    // v[1], v[3] (likewise)
  v[0] = high ? even_rows1 : even_rows0;
  v[1] = high ? odd_rows1 : odd_rows0;
  v[2] = high ? even_rows0 : even_rows1;
  v[3] = high ? odd_rows0 : odd_rows1;
}

}  // namespace detail

// Pairs with their entries of two tables at a row picked per output row (PairTables). Where each
// chunk of 16 pairs (32 columns) of a row lies inside one period and the tables allow 16-byte
// loads, the four lanes holding a row read a chunk's 16 entries of a table with one 16-byte load
// each (lane q: entries 4q .. 4q + 3 of the chunk) and a quad transpose hands each lane its own
// pairs' entries (the part's pair 4 j + q is entry 4 (j % 4) + q of chunk j / 4): 8 loads per row
// where one per pair and table took 32, each of a different row of a warp's eight. Beside the
// per-pair loads the other consumer's MMAs ran 9% longer (RoPE, coda bench timeline, H200);
// beside these, as long as beside a plain store.
template <class Part>
template <class F>
__device__ inline void GpuTile<Part>::map_pairs(const PairTables& tables, F&& f) {
  if constexpr (!kEdge)
    if (quad_loads_fit(tables)) return map_pairs_by_quad_loads(tables, f);
  map_pairs([&](Pair& p) { f(p, load_pair(tables, p)); });
}

// Tile inputs hold `In` (16-bit) values with even ld and batch stride (launch_program checks),
// so an element pair (2j, 2j + 1) is one aligned 32-bit word. Each word is addressed as the
// thread's first word plus (rows below it) * ld / 2 + (columns right of it) / 2: once a map is
// unrolled those distances are constants, so both elements of a pair read the same word (one
// load) and the column part folds into the load's immediate offset.
// `staged_` is the address of one of the program's members (or null), and so is `&in`: the
// comparison is decided at compile time, with no branch in the unrolled map.
template <class Part>
template <class At>
__device__ inline float GpuTile<Part>::load(const TileIn& in, const At& x) const {
  const int32_t dr = x.row - row(0, 0), dc = x.col - col(0);
  uint32_t word;
  if (!kStagedInput || &in != staged_) word = tile_word(in, x.batch, dr, dc, col(0));
  else if (dr >= 0 && dc >= 0 && dr / 64 == group_block_ && dc / 16 == group_ && dr % 64 < 16 && dr % 8 == 0 &&
           dc % 8 < 2)
    word = group_words_[2 * ((dc / 8) % 2) + (dr % 64) / 8];  // in the group read last (map)
  else word = staged_word(dr, dc);
  return half_of(word, dc % 2);
}

template <class Part>
template <class At>
__device__ inline Values2 GpuTile<Part>::load_wide(const TileIn& in,
                                                   const At& x) const {  // columns 2 x.col, 2 x.col + 1
  const uint32_t word = tile_word(in, x.batch, x.row - row(0, 0), 2 * (x.col - col(0)), 2 * col(0));
  return {half_of(word, 0), half_of(word, 1)};
}

// The staged row vector at one of this thread's columns (col(0) + 8 j + k, k < 2: a constant
// offset in an unrolled map) comes from the registers staged at the part's start.
template <class Part>
template <class At>
__device__ inline float GpuTile<Part>::load(const RowVector& v, const At& x) const {
  const int32_t dc = x.col - col(0);
  if (kStagedVector && &v == staged_vector_ && dc >= 0 && dc < Acc::kCols && dc % 8 < 2)
    return staged_values_[2 * (dc / 8) + dc % 8];
  return detail::load_element(v.data, v.dtype, x.col);
}

template <class Part>
template <class At>
__device__ inline float GpuTile<Part>::load(const ColumnVector& v, const At& x) const {
  return detail::load_element(v.data, v.dtype, x.batch * v.batch_stride + x.row);
}

template <class Part>
template <class At>
__device__ inline int32_t GpuTile<Part>::load_index(const ColumnVector& v,
                                                    const At& x) const {  // int32 (the CPU executor checks)
  return __ldg(static_cast<const int32_t*>(v.data) + (x.batch * v.batch_stride + x.row));
}

template <class Part>
__device__ inline float GpuTile<Part>::load(const Table& table, int32_t i, int32_t j) const {
  return __ldg(table.data + (i * table.ld + j));
}

// The 32-bit word of a 16-bit tile input holding column first_col + dc of row row(0, 0) + dr
// (first_col, ld and the batch stride are even; dr and dc are constants in an unrolled map).
template <class Part>
__device__ inline uint32_t GpuTile<Part>::tile_word(const TileIn& in, int32_t batch, int32_t dr, int32_t dc,
                                                    int32_t first_col) const {
  const int64_t first_word = (batch * in.batch_stride + int64_t(row(0, 0)) * in.ld + first_col) >> 1;
  return __ldg(static_cast<const uint32_t*>(in.data) + first_word + dr * (in.ld >> 1) + (dc >> 1));
}

// The staged part's word holding column col(0) + dc of row row(0, 0) + dr: box dc / 64 (128 rows
// of 128 bytes), 16-byte chunk (dc % 64) / 8 of the row, moved by the 128B swizzle to chunk
// ^ (row % 8) (CUtensorMapSwizzle 128B; the part is 1024-byte aligned). Every row of a thread
// is lane / 4 mod 8 (dr is a multiple of 8), so the eight row groups of a warp land on eight
// different chunks: a warp's 32 loads hit 32 different banks.
template <class Part>
__device__ inline uint32_t GpuTile<Part>::staged_word(int32_t dr, int32_t dc) const {
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
template <class Part>
__device__ inline void GpuTile<Part>::stage_row_vector(const RowVector& v) {
  constexpr int kPairs = Acc::kCols / 8;
  const uintptr_t address = reinterpret_cast<uintptr_t>(v.data);
  if constexpr (!kEdge) {
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
template <class Part>
__device__ inline void GpuTile<Part>::read_staged_group(int b, int g) {
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
template <class Part>
__device__ inline float GpuTile<Part>::half_of(uint32_t word, int high) {
  static_assert(kIn == DType::bf16 || kIn == DType::f16, "program kernels take bf16 or f16 operands");
  if constexpr (kIn == DType::bf16) return __uint_as_float(high ? word & 0xffff0000u : word << 16);
  else return __half2float(__ushort_as_half(uint16_t(high ? word >> 16 : word & 0xffffu)));
}

// PairTables, one pair at a time. Every pair loads, from row 0 where the index is outside the
// tables: without a branch, an unrolled map issues all of its loads before the first is needed.
template <class Part>
__device__ inline Values2 GpuTile<Part>::load_pair(const PairTables& tables, const Pair& p) const {
  const int32_t index = load_index(tables.index, p);
  const bool known = uint32_t(index) < uint32_t(min(tables.first.rows, tables.second.rows));
  const int32_t row = known ? index : 0, entry = tables.period.remainder(p.col) >> 1;  // p.col is even
  const float first = __ldg(tables.first.data + (row * tables.first.ld + entry));
  const float second = __ldg(tables.second.data + (row * tables.second.ld + entry));
  return {known ? first : NAN, known ? second : NAN};
}

// The part's columns start at a multiple of 32 (Acc::kCols is), so a period that is one too
// keeps each chunk of 32 columns inside one period; float4 loads need rows 16-byte aligned.
template <class Part>
__device__ inline bool GpuTile<Part>::quad_loads_fit(const PairTables& tables) {
  static_assert(Acc::kCols % 32 == 0);
  return tables.period.value() % 32 == 0 && tables.first.ld % 4 == 0 && tables.second.ld % 4 == 0 &&
         (reinterpret_cast<uintptr_t>(tables.first.data) | reinterpret_cast<uintptr_t>(tables.second.data)) % 16 == 0;
}

template <class Part>
template <class F>
__device__ inline void GpuTile<Part>::map_pairs_by_quad_loads(const PairTables& tables, F& f) {
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

}  // namespace coda::epilogue

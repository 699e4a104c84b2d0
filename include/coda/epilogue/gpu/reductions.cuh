// coda/epilogue/gpu/reductions.cuh: the GPU executor's tile reductions and stateful transforms
// (GpuTile, tile.cuh).
//
//   row_reduce     fold over the thread's values of a row, then two quad shuffles (the four lanes
//                  sharing a row); one lane per row writes (a multi-word state, a running top-k, is
//                  shuffled word by word)
//   column_reduce  fold over the thread's two rows per 64-row block, shuffles across the eight
//                  lanes sharing a column, then shared memory across the four warps
//   reduce         warp shuffles, then shared memory across the four warps
// Every fold runs in a fixed order: the same bits run after run.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "coda/epilogue/gpu/tile.cuh"
#include "coda/epilogue/monoids.hpp"
#include "coda/sm90/tma.cuh"

namespace coda::epilogue {

namespace detail {

// Whether a reduction can hand the monoid a row's values at once: f gives floats and the monoid
// has fold() (monoids.hpp).
template <class Monoid, class F>
constexpr bool folds_floats() {
  if constexpr (std::is_invocable_v<F&, const Element&>)
    return std::is_same_v<std::invoke_result_t<F&, const Element&>, float> && requires(const float(&v)[4]) {
      Monoid::fold(v);
    };
  else return false;
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

}  // namespace detail

template <class Part>
template <class Monoid, class F>
__device__ inline void GpuTile<Part>::row_reduce(const Partials& out, Monoid, F&& f) {
  fresh_limits();
#pragma unroll
  for (int b = 0; b < Acc::kBlocks; ++b)
#pragma unroll
    for (int half = 0; half < 2; ++half) {  // the thread's two rows of the block: lane / 4 and + 8
      typename Monoid::State s = Monoid::identity();
      if constexpr (!kEdge && detail::folds_floats<Monoid, F>()) {
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
      write_row_partial<Monoid>(out, b, half, s);
    }
}

template <class Part>
template <class Monoid>
__device__ inline void GpuTile<Part>::write_row_partial(const Partials& out, int b, int half,
                                                        typename Monoid::State s) {
  s = Monoid::combine(s, detail::shuffle_xor(s, 1));  // the quad holding the row
  s = Monoid::combine(s, detail::shuffle_xor(s, 2));
  const int32_t r = row(b, 2 * half);
  if (t_.thread % 4 == 0 && r < t_.problem_m && Monoid::present(s))
    write_partial<Monoid>(partial_slot(out, r, part_n()), s);
}

// The row states live across the store: a Sum in Sum::fold's four chains (value v of a row into
// chain v % 4, the order row_reduce folds a full part in: the same bits), any other monoid (and
// every monoid on an edge part) combined value by value in the row's order, as row_reduce does.
template <class Part>
template <class Monoid, class F>
__device__ inline void GpuTile<Part>::store_wide_row_reduce(const TileOut& out, const Partials& partials, Monoid,
                                                            F&& f) {
  using State = typename Monoid::State;
  constexpr bool kChains = !kEdge && std::is_same_v<Monoid, Sum>;
  float chains[Acc::kBlocks][2][4];
  State states[Acc::kBlocks][2];
#pragma unroll
  for (int b = 0; b < Acc::kBlocks; ++b)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      states[b][half] = Monoid::identity();
#pragma unroll
      for (int c = 0; c < 4; ++c) chains[b][half][c] = 0.0f;
    }
  store_as<Width::wide, kOut>(out, f, [&](int b, int half, int j, int k, bool inside, const WideAndRowValue& r) {
    if constexpr (kChains) chains[b][half][(2 * j + k) % 4] += r.row_value;
    else if (inside) states[b][half] = Monoid::combine(states[b][half], as_state<Monoid>(r.row_value));
  });
#pragma unroll
  for (int b = 0; b < Acc::kBlocks; ++b)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const float(&c)[4] = chains[b][half];
      if constexpr (kChains) write_row_partial<Monoid>(partials, b, half, (c[0] + c[1]) + (c[2] + c[3]));
      else write_row_partial<Monoid>(partials, b, half, states[b][half]);
    }
}

template <class Part>
template <class Monoid, class F>
__device__ inline void GpuTile<Part>::column_reduce(const Partials& out, Monoid, F&& f) {
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
    if (column < t_.problem_n && Monoid::present(s)) write_partial<Monoid>(partial_slot(out, part_m(), column), s);
  }
  sync();  // the scratch is staging space again
}

template <class Part>
template <class Monoid, class F>
__device__ inline void GpuTile<Part>::reduce(const Partials& out, Monoid, F&& f) {
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
    if (Monoid::present(all)) write_partial<Monoid>(partial_slot(out, part_m(), part_n()), all);
  }
  sync();
}

// Reductions borrow the staging ring as scratch once every store reading it has finished.
template <class Part>
template <class State>
__device__ inline State* GpuTile<Part>::scratch_for() {
  static_assert(4 * Acc::kCols * sizeof(State) <= kBuffers * detail::kSubtileBytes, "scratch exceeds the staging");
  if (t_.thread == 0) sm90::tma_store_wait_read<0>();
  sync();
  return reinterpret_cast<State*>(&staging_[0][0]);
}

}  // namespace coda::epilogue

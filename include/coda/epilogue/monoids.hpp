// coda/epilogue/monoids.hpp: the reductions epilogue programs use, as monoids.
//
// A monoid has a State, an identity, `lift` (one value -> State), an associative `combine`,
// `finish` (State -> the value written) and `present` (whether a tile writes its result at all);
// optionally `fold` (an array of values -> State at once, where that is cheaper than combining).
// A result of several words (TopK: values and indices) has `kWords` and `write` (State -> the
// partial slot's words) instead of `finish`, and no `lift`: its f returns States.
// Executors fold a tile's elements in any order and shape they like (per thread, across a quad,
// across warps, across the subtiles of a tile): associativity is all the program may assume, so
// the GPU and CPU executors agree up to fp32 rounding order.
//
//   t.row_reduce(sum_squares, Sum{}, [](const auto& x) { return x.value * x.value; });
//   t.row_reduce(lse_parts, LogSumExp{}, [](const auto& x) { return x.value; });  // online max/sum-exp
//   t.row_reduce(target_logit, Pick{}, [&](const auto& x) { return Pick::State{x.value, x.col == target}; });
//   t.row_reduce(top4, TopK<4>{}, [](const auto& x) { return TopK<4>::one(x.value, x.col); });  // running top-k
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "coda/core/host_device.hpp"

namespace coda::epilogue {

struct Sum {
  using State = float;
  CODA_HD static State identity() { return 0.0f; }
  CODA_HD static State lift(float v) { return v; }
  CODA_HD static State combine(State a, State b) { return a + b; }
  CODA_HD static float finish(State s) { return s; }
  CODA_HD static bool present(State) { return true; }
  /// Many values at once: four running sums, so the additions are four short dependent chains
  /// instead of one as long as the row (a 128-column part gives each thread 32 values per row).
  template <int N>
  CODA_HD static State fold(const float (&v)[N]) {
    float sums[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int i = 0; i < N; ++i) sums[i % 4] += v[i];
    return (sums[0] + sums[1]) + (sums[2] + sums[3]);
  }
};

/// Max that propagates NaN (a NaN anywhere makes the result NaN, as the reference does).
struct Max {
  using State = float;
  CODA_HD static State identity() { return -INFINITY; }
  CODA_HD static State lift(float v) { return v; }
  CODA_HD static State combine(State a, State b) { return (a > b || a != a) ? a : b; }
  CODA_HD static float finish(State s) { return s; }
  CODA_HD static bool present(State) { return true; }
};

/// Online log-sum-exp: (running max, sum of exp(x - max)); finish gives max + log(sum).
struct LogSumExp {
  struct State {
    float max;
    float sum;
  };
  CODA_HD static State identity() { return {-INFINITY, 0.0f}; }
  CODA_HD static State lift(float v) { return {v, 1.0f}; }
  CODA_HD static State combine(State a, State b) {
    const float m = a.max > b.max ? a.max : b.max;
    // The side holding the max scales by exactly 1: no inf - inf when the max is +inf (the
    // result is +inf, as the reference gives) or -inf (both sides empty). Both exps are computed
    // and then selected (see fold).
    const float scale_a = expf(a.max - m), scale_b = expf(b.max - m);
    return {m, a.sum * (a.max == m ? 1.0f : scale_a) + b.sum * (b.max == m ? 1.0f : scale_b)};
  }
  CODA_HD static float finish(State s) { return s.max + logf(s.sum); }
  CODA_HD static bool present(State) { return true; }
  /// Many values at once, the same as lifting and combining them (up to rounding): the max first,
  /// then one exp per value. Folding one by one rescales the running sum at every step, a
  /// dependent chain of two exps per value; executors use this where they hold a row's values.
  template <int N>
  CODA_HD static State fold(const float (&v)[N]) {
    // fmaxf skips NaN (one instruction); a NaN value still makes the sum NaN below, so the
    // result is NaN as in combine.
    float m = v[0];
    for (int i = 1; i < N; ++i) m = fmaxf(m, v[i]);
    // Every exp is computed and then selected: with the exp inside the condition the compiler
    // branches around each one, and a warp then waits out every exp's latency in turn. The terms
    // are then added as Sum::fold adds a row (four running sums, not one dependent chain).
    // exp(v - m) = 2^(v log2(e) - m log2(e)): one fused multiply-add and the hardware's 2^x, a
    // third of expf's instructions. The rounding of m log2(e) costs about |m| x 1e-7 relative
    // (1e-5 for logits near 100), within what fp32 partials of a bf16 GEMM promise.
    constexpr float kLog2e = 1.44269504088896341f;
    const float m_log2e = m * kLog2e;
    float terms[N];
    for (int i = 0; i < N; ++i) {
      const float e = exp2f(fmaf(v[i], kLog2e, -m_log2e));
      terms[i] = v[i] == m ? 1.0f : e;
    }
    return {m, Sum::fold(terms)};
  }
};

/// The one element a predicate picks (the target logit): only the tile holding it writes.
struct Pick {
  struct State {
    float value;
    bool found;
  };
  CODA_HD static State identity() { return {0.0f, false}; }
  CODA_HD static State combine(State a, State b) { return a.found ? a : b; }
  CODA_HD static float finish(State s) { return s.value; }
  CODA_HD static bool present(State s) { return s.found; }
};

/// Running top-k: the K largest values with their indices (a column, for a row reduction), best
/// first; equal values go to the lower index first and NaN is never kept (the MoE routing rules,
/// coda/reference/moe.hpp). f returns `TopK<K>::one(value, index)`. Entries nothing filled hold
/// index -1 (value -inf): a part's row with fewer than K non-NaN values. A partial is K values
/// then the K indices (int32 bit patterns): 2K words, `kWords`, so its Partials need
/// tile_stride >= 2K (row_partials(view, name, TopK<K>::kWords)).
///
///   t.row_reduce(top4, TopK<4>{}, [](const auto& x) { return TopK<4>::one(x.value, x.col); });
template <int K>
struct TopK {
  static_assert(K >= 1 && K <= 16, "top-k keeps 1 to 16 entries");
  struct State {
    float value[K];
    int32_t index[K];
  };
  static constexpr int kWords = 2 * K;

  CODA_HD static State identity() {
    State s;
    for (int j = 0; j < K; ++j) {
      s.value[j] = -INFINITY;
      s.index[j] = -1;
    }
    return s;
  }
  /// One candidate (a NaN value: none). It combines into a State by one insertion; it converts to
  /// the State that holds it alone where a State is wanted.
  struct Candidate {
    float value;
    int32_t index;
    CODA_HD operator State() const {
      State s = identity();
      if (value == value) {
        s.value[0] = value;
        s.index[0] = index;
      }
      return s;
    }
  };
  CODA_HD static Candidate one(float value, int32_t index) { return {value, index}; }
  /// One candidate into a: a single insertion (a reduction's f returns candidates, and the K^2
  /// compares of merging a whole State per element made the compiler spend minutes per kernel).
  CODA_HD static State combine(State a, const Candidate& c) {
    if (c.value == c.value) insert(a, c.value, c.index);
    return a;
  }
  /// b's entries go into a one by one, empty ones skipped. No early exit, so the loop unrolls and
  /// every entry index is a constant (a register, never local memory).
  CODA_HD static State combine(State a, const State& b) {
    for (int j = 0; j < K; ++j)
      if (b.index[j] >= 0) insert(a, b.value[j], b.index[j]);
    return a;
  }
  CODA_HD static bool present(const State&) { return true; }
  CODA_HD static void write(const State& s, float* slot) {
    for (int j = 0; j < K; ++j) {
      slot[j] = s.value[j];
      int32_t index = s.index[j];
      memcpy(&slot[K + j], &index, sizeof(index));
    }
  }

 private:
  // Whether (value, index) ranks before entry j of s: larger, or equal with a lower index; every
  // real entry ranks before an empty one.
  CODA_HD static bool before(float value, int32_t index, const State& s, int j) {
    return s.index[j] < 0 || value > s.value[j] || (value == s.value[j] && index < s.index[j]);
  }
  // Insertion into a sorted list with register-resident entries (no run-time indexing): entry j
  // becomes the candidate where it ranks before j but not before j - 1, entry j - 1 where it ranks
  // before both, and stays where it ranks after j. The last entry falls off.
  CODA_HD static void insert(State& s, float value, int32_t index) {
    bool ahead[K];
    for (int j = 0; j < K; ++j) ahead[j] = before(value, index, s, j);
    for (int j = K - 1; j >= 0; --j) {
      if (!ahead[j]) continue;
      const bool shift = j > 0 && ahead[j - 1];
      s.value[j] = shift ? s.value[j - 1] : value;
      s.index[j] = shift ? s.index[j - 1] : index;
    }
  }
};

}  // namespace coda::epilogue

namespace coda::epilogue {

/// A reduction's result written to its partial slot: one word (finish), or a multi-word monoid's
/// kWords consecutive words (write).
template <class Monoid>
CODA_HD void write_partial(float* slot, const typename Monoid::State& s) {
  if constexpr (requires { Monoid::kWords; }) Monoid::write(s, slot);
  else *slot = Monoid::finish(s);
}

/// Whether Value is Monoid's one-candidate type (TopK's Candidate).
template <class Value, class Monoid>
concept CandidateOf = requires { typename Monoid::Candidate; } && std::is_same_v<Value, typename Monoid::Candidate>;

/// What a reduction's `f` returned, as what the monoid combines into its State: a State as is, a
/// monoid's own partial value (TopK's Candidate, which combines by one insertion) as is, anything
/// else lifted.
template <class Monoid, class Value>
CODA_HD auto as_state(const Value& v) {
  if constexpr (std::is_same_v<Value, typename Monoid::State>) return v;
  else if constexpr (CandidateOf<Value, Monoid>) return v;
  else return Monoid::lift(float(v));
}

}  // namespace coda::epilogue

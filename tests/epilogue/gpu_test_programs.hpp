// Test programs for GPU executor paths that neither the fused ops nor the standard set's GPU
// tests take, run by both executors in standard_gpu_test.cu / standard_programs_on_cpu.cpp.
#pragma once

#include <cmath>

#include "coda/epilogue/program.hpp"

namespace coda::test {

/// D = acc + X[:, 2c] - X[:, 2c + 1] / 2 of an M x 2N input X, and the M x 2N output
/// E[:, 2c] = acc, E[:, 2c + 1] = X[:, 2c + 1]; with store_wide_row_reduce, F = (X[:, 2c], acc) with
/// the row sums of acc X[:, 2c] (a Sum: chains on full parts) and G = (acc, acc) with the row maxima
/// of X[:, 2c + 1] - acc (any other monoid).
struct WideInput {
  epilogue::TileIn wide{};       // X, M x 2N
  epilogue::TileOut out{};       // D, M x N
  epilogue::TileOut wide_out{};  // E, M x 2N
  epilogue::TileOut summed{};    // F, M x 2N
  epilogue::Partials row_sums{};
  epilogue::TileOut maxed{};  // G, M x 2N
  epilogue::Partials row_max{};

  template <class Inputs>
  CODA_HD void tile_inputs(Inputs& in) const { in(wide); }

  template <class Tile>
  CODA_HD void operator()(Tile& t) const {
    t.store(out, [&](const epilogue::Element& x) {
      const epilogue::Values2 v = t.load_wide(wide, x);
      return x.value + v.first - 0.5f * v.second;
    });
    t.store_wide(wide_out, [&](const epilogue::Element& x) {
      return epilogue::Values2{x.value, t.load_wide(wide, x).second};
    });
    t.store_wide_row_reduce(summed, row_sums, epilogue::Sum{}, [&](const epilogue::Element& x) {
      const epilogue::Values2 v = t.load_wide(wide, x);
      return epilogue::WideAndRowValue{{v.first, x.value}, x.value * v.first};
    });
    t.store_wide_row_reduce(maxed, row_max, epilogue::Max{}, [&](const epilogue::Element& x) {
      return epilogue::WideAndRowValue{{x.value, x.value}, t.load_wide(wide, x).second - x.value};
    });
  }
};

/// D = silu(acc + column bias), its pre-activation, and the amax of D per part: LinearCombination's
/// fp8 use (standard.hpp) with its options fixed at compile time, so that the kernel of each output
/// type compiles in seconds (the general program's kernels spill and take minutes each).
struct ScaledOutputs {
  epilogue::RowVector column_bias{};
  epilogue::TileOut pre_activation{};
  epilogue::Partials amax{};
  epilogue::TileOut out{};

  template <class Tile>
  CODA_HD void operator()(Tile& t) const {
    t.map([&](epilogue::Element& x) { x.value += t.load(column_bias, x); });
    t.store(pre_activation);
    t.map([](epilogue::Element& x) { x.value = epilogue::silu(x.value); });
    t.reduce(amax, epilogue::Max{}, [](const epilogue::Element& x) { return fabsf(x.value); });
    t.store(out);
  }
};

/// D = silu(acc + column bias) in the launch's type (e4m3 in the test), with its pre-activation and
/// the gate-times-up pairs of it in bf16 whatever that type is (TileOutOf): two output types, and
/// two widths, in one launch.
struct TypedAuxOutputs {
  epilogue::RowVector column_bias{};
  epilogue::TileOutOf<DType::bf16> pre_activation{};  // M x N
  epilogue::TileOutOf<DType::bf16> gated{};           // M x N/2: silu(pre[2c]) pre[2c + 1]
  epilogue::TileOut out{};

  template <class Tile>
  CODA_HD void operator()(Tile& t) const {
    t.map([&](epilogue::Element& x) { x.value += t.load(column_bias, x); });
    t.store(pre_activation);
    t.store_pairs(gated, [](const epilogue::Pair& p) { return epilogue::silu(p.first) * p.second; });
    t.store(out, [](const epilogue::Element& x) { return epilogue::silu(x.value); });
  }
};

}  // namespace coda::test

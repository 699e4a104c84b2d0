// examples/custom_epilogues.cpp: how to write an epilogue program of your own, and run it.
//
// What an epilogue program is
// ---------------------------
// A GEMM produces its M x N output a tile at a time, as fp32 accumulators held in registers. An
// epilogue program says what happens to them before anything reaches memory: scale them, add a
// residual, apply an activation, write one or several outputs, reduce them. It is a small struct:
//
//   - its members describe the tensors it reads and writes besides the accumulators
//     (coda/epilogue/arguments.hpp): TileIn / TileOut (M x N inputs and outputs, any layout
//     through ld and batch_stride), RowVector (one value per column, a bias), ColumnVector (one
//     value per row, a scale), Partials (per-part reductions), Table and PairTables (two tables
//     read along a row's column pairs at a row picked per output row: RoPE's cos/sin), and
//     TileOutOf<T> (an output always written in T); plain members (floats, flags) travel too;
//   - its call operator, templated on the executor's Tile, says what to do with one part of a
//     tile through the primitives of `t` (coda/epilogue/program.hpp lists them all): maps
//     (t.map, t.map_pairs, t.map_pairs with PairTables), loads (t.load of a TileIn, RowVector,
//     ColumnVector or Table), stores
//     (t.store, t.store_pairs at half width, t.store_wide at double width) and reductions
//     (t.row_reduce, t.column_reduce, t.reduce with a monoid from coda/epilogue/monoids.hpp);
//   - if it reads TileIns, a `tile_inputs` member that lists them: the GPU executor fetches them
//     early and checks them (they must have the operands' 16-bit type there), and the CPU
//     executor refuses a program that reads a TileIn it does not list.
//
// A program sees one part of the output at a time and may only do work local to it: anything
// global (a row's norm over all N columns, a loss over the vocabulary) becomes per-part partials
// that a tiny reduction combines afterwards. Elements are visited in no particular order; a
// program may depend on an element's (row, col) but not on when it is visited.
//
// One program, two executors
// --------------------------
// The same struct runs on the CPU and on the GPU:
//   - coda::reference::run_epilogue (coda/reference/epilogue_executor.hpp) runs it on the CPU over the
//     accumulators of a reference GEMM, plainly, loop by loop. That is what this example does,
//     and how CI, which has no GPU, tests every program;
//   - coda::epilogue::gemm_program (coda/epilogue/launch.cuh) runs it on a Hopper GPU inside the GEMM
//     kernel, straight on the accumulator registers, with descriptors made from device tensors
//     by coda/epilogue/host_arguments.hpp. Mark the call operator CODA_HD so nvcc compiles it
//     for the device too (gemm_program also runs it once on the host, on a tile that only
//     records which outputs it stores). Tile outputs are written in the operands' type unless
//     the call names others: gemm_program(a, b, program, stream, {}, OutputTypes<DType::e4m3>{})
//     builds an e4m3 kernel too (every TileOut of one launch has the same type; a TileOutOf<T>
//     member is written in T, so an e4m3 D can come with a bf16 auxiliary output). Operands are
//     K-major (X W^T) unless the call names other majors, one kernel per pair: a data gradient's
//     weight is N-major, gemm_program(dy, w, program, stream, {}, OutputTypes<>{},
//     OperandMajors<Major::k, Major::mn>{}).
//
// Before writing one, look at the ready ones: coda/epilogue/programs/ holds the fused ops' programs
// and the standard set (standard.hpp), e.g. bias + GELU with its pre-activation for the backward,
// a kernel of exactly those terms:
//
//   coda::epilogue::LinearCombinationOf<coda::epilogue::LinearCombinationTerms{
//       .column_bias = true, .pre_activation = true, .activation = coda::epilogue::Activation::gelu_tanh}> p;
//
// A .cu file of your own builds the GPU kernels: with an installed coda, link coda::coda and call
// coda_target_cuda_options(<target>) for nvcc's flags (README, "Writing an epilogue program").
//
// This file writes two programs, runs each on a small random problem with the CPU executor,
// checks the results against a plain double-precision computation and prints a short report:
//   (a) a gated SiLU (SwiGLU), in a dozen lines;
//   (b) a program with two outputs: D = alpha * acc + beta * C + x_factor * X, and Y = acc.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "coda/core/dtype.hpp"
#include "coda/core/layout.hpp"
#include "coda/epilogue/parts.hpp"
#include "coda/epilogue/program.hpp"
#include "coda/reference/epilogue_executor.hpp"
#include "coda/reference/gemm.hpp"

namespace {

using coda::DType;
using coda::epilogue::Element;
using coda::epilogue::Pair;

// ---- (a) gated SiLU ------------------------------------------------------------------------------
// O[m, j] = silu(Y[m, 2j]) * Y[m, 2j + 1]: the GEMM's weight rows interleave gate and up
// projections, so each gate value sits next to its up value in the accumulators. store_pairs
// hands the function every pair of adjacent columns (2j, 2j + 1) of a row and writes what it
// returns at column j: an M x N/2 output. (On the GPU each thread holds both values of a pair,
// so this needs no data exchange.)
struct GatedSilu {
  coda::epilogue::TileOut out{};  // M x N/2

  template <class Tile>
  CODA_HD void operator()(Tile& t) const {
    t.store_pairs(out, [](const Pair& p) { return coda::epilogue::silu(p.first) * p.second; });
  }
};

// ---- (b) two outputs -----------------------------------------------------------------------------
// D = alpha * acc + beta * C + x_factor * X and Y = acc (the raw accumulator, kept for later).
// t.store(y) writes every element's current value; no map has changed it yet, so that is the
// accumulator. t.store(d, f) writes f of each element; t.load(c, e) reads C at e's (row, col,
// batch). Each output is rounded once, to its own dtype.
struct AlphaBetaWithAccumulator {
  coda::epilogue::TileIn c{};  // C, M x N
  coda::epilogue::TileIn x{};  // X, M x N
  float alpha = 1.0f;
  float beta = 0.0f;
  float x_factor = 0.0f;
  coda::epilogue::TileOut d{};  // D, M x N
  coda::epilogue::TileOut y{};  // Y, M x N

  template <class Inputs>
  CODA_HD void tile_inputs(Inputs& in) const {
    in(c);
    in(x);
  }

  template <class Tile>
  CODA_HD void operator()(Tile& t) const {
    t.store(y);
    t.store(d, [&](const Element& e) { return alpha * e.value + beta * t.load(c, e) + x_factor * t.load(x, e); });
  }
};

// ---- a small random problem ----------------------------------------------------------------------
std::mt19937_64 generator(20240601);  // fixed: the report reads the same every run

double uniform() { return std::uniform_real_distribution<double>(-1.0, 1.0)(generator); }

// A rows x cols matrix of random values that bf16 represents exactly (what a GEMM's operands hold).
coda::reference::Matrix random_bf16_matrix(int64_t rows, int64_t cols) {
  coda::reference::Matrix m(rows, cols);
  for (double& v : m.data) v = coda::round_to(DType::bf16, float(uniform()));
  return m;
}

// A batch of matrices in one host buffer of bf16 bits, batch b at b * rows * cols.
std::vector<uint16_t> to_bf16_buffer(const std::vector<coda::reference::Matrix>& batch) {
  std::vector<uint16_t> bits;
  for (const coda::reference::Matrix& m : batch)
    for (double v : m.data) bits.push_back(coda::float_to_bf16_bits(float(v)));
  return bits;
}

std::vector<double> from_bf16_buffer(const std::vector<uint16_t>& bits) {
  std::vector<double> values;
  for (uint16_t b : bits) values.push_back(coda::bf16_bits_to_float(b));
  return values;
}

// Largest |got - want| relative to the largest |want|: one number per output for the report.
double max_relative_error(const std::vector<double>& got, const std::vector<double>& want) {
  double error = 0, scale = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    error = std::max(error, std::isnan(got[i]) ? INFINITY : std::abs(got[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return error / scale;
}

// One output's line of the report; true when within `bound`.
bool report(const char* what, double error, double bound) {
  const bool ok = error <= bound;
  std::printf("  %-44s max error %.2e (bound %.0e)  %s\n", what, error, bound, ok ? "ok" : "WRONG");
  return ok;
}

// fp32 math then one rounding: a bf16 output is off by at most half a bf16 ulp (2^-8 relative),
// an f32 output by a few fp32 ulps.
constexpr double kBf16Bound = 5e-3;
constexpr double kF32Bound = 1e-6;

// The part shape the GPU executor uses; the CPU executor is given the same, so per-part results
// (none in these two programs) would match the GPU's.
constexpr coda::reference::PartShape kPart{coda::epilogue::kPartRows, coda::epilogue::kPartCols};

bool run_gated_silu() {
  const int64_t m = 100, n = 192, k = 64;  // N = 2F interleaved; neither M nor N a multiple of the part
  const coda::reference::Matrix acc =
      coda::reference::gemm(random_bf16_matrix(m, k), coda::Major::k, random_bf16_matrix(n, k), coda::Major::k);

  std::vector<float> out(std::size_t(m * n / 2), NAN);
  const GatedSilu program{.out = {.data = out.data(), .dtype = DType::f32, .ld = n / 2}};
  coda::reference::run_epilogue(program, acc, /*batch=*/0, kPart);

  std::vector<double> got(out.begin(), out.end()), want;
  for (int64_t r = 0; r < m; ++r)
    for (int64_t j = 0; j < n / 2; ++j) {
      const double gate = acc(r, 2 * j), up = acc(r, 2 * j + 1);
      want.push_back(gate / (1.0 + std::exp(-gate)) * up);
    }
  std::printf("(a) gated SiLU, O = silu(G) * U: %lld x %lld accumulators -> %lld x %lld\n", (long long)m, (long long)n,
              (long long)m, (long long)(n / 2));
  return report("O (f32)", max_relative_error(got, want), kF32Bound);
}

bool run_two_outputs() {
  const int64_t batch = 2, m = 100, n = 160, k = 64;
  const float alpha = 2.0f, beta = 1.0f, x_factor = 3.0f;  // the seed example's values
  std::vector<coda::reference::Matrix> acc, c, x;
  for (int64_t b = 0; b < batch; ++b) {
    acc.push_back(
        coda::reference::gemm(random_bf16_matrix(m, k), coda::Major::k, random_bf16_matrix(n, k), coda::Major::k));
    c.push_back(random_bf16_matrix(m, n));
    x.push_back(random_bf16_matrix(m, n));
  }
  const std::vector<uint16_t> c_bits = to_bf16_buffer(c), x_bits = to_bf16_buffer(x);
  std::vector<uint16_t> d_bits(std::size_t(batch * m * n), 0xFFFF);  // NaN until written
  std::vector<float> y(std::size_t(batch * m * n), NAN);

  // Row-major M x N matrices, batch after batch: ld = N, batch_stride = M * N (in elements).
  const AlphaBetaWithAccumulator program{
      .c = {.data = c_bits.data(), .dtype = DType::bf16, .ld = n, .batch_stride = m * n},
      .x = {.data = x_bits.data(), .dtype = DType::bf16, .ld = n, .batch_stride = m * n},
      .alpha = alpha,
      .beta = beta,
      .x_factor = x_factor,
      .d = {.data = d_bits.data(), .dtype = DType::bf16, .ld = n, .batch_stride = m * n},
      .y = {.data = y.data(), .dtype = DType::f32, .ld = n, .batch_stride = m * n}};
  for (int64_t b = 0; b < batch; ++b) coda::reference::run_epilogue(program, acc[std::size_t(b)], int32_t(b), kPart);

  std::vector<double> want_d, want_y;
  for (int64_t b = 0; b < batch; ++b)
    for (std::size_t i = 0; i < acc[std::size_t(b)].data.size(); ++i) {
      const double a = acc[std::size_t(b)].data[i];
      want_d.push_back(alpha * a + beta * c[std::size_t(b)].data[i] + x_factor * x[std::size_t(b)].data[i]);
      want_y.push_back(a);
    }
  std::printf("(b) two outputs, D = %g acc + %g C + %g X and Y = acc: %lld batches of %lld x %lld\n", alpha, beta,
              x_factor, (long long)batch, (long long)m, (long long)n);
  const bool d_ok = report("D (bf16)", max_relative_error(from_bf16_buffer(d_bits), want_d), kBf16Bound);
  const bool y_ok = report("Y (f32)", max_relative_error(std::vector<double>(y.begin(), y.end()), want_y), kF32Bound);
  return d_ok && y_ok;
}

}  // namespace

int main() {
  std::printf("custom epilogue programs on the CPU executor (parts of %lld x %lld)\n", (long long)kPart.rows,
              (long long)kPart.cols);
  const bool gated_silu_ok = run_gated_silu();
  const bool two_outputs_ok = run_two_outputs();
  const bool ok = gated_silu_ok && two_outputs_ok;
  std::printf("%s\n", ok ? "all outputs match the double-precision computation" : "MISMATCH");
  return ok ? 0 : 1;
}

// coda demo's CPU path, shared by its two halves: reproducible random data, and the sections that
// run each kernel's epilogue program on the CPU executor (demo_cpu_programs.cpp). cpu_sections()
// (demo_cpu.cpp) puts each program's checks first in its kernel's section, then the fp64
// reference's own identities.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "coda/reference/cross_entropy.hpp"
#include "coda/reference/gemm_rmsnorm_gemm.hpp"
#include "coda/reference/matrix.hpp"
#include "demo.hpp"

namespace coda::cli::cpu {

// ---- random data: one fixed seed, so the demo prints the same numbers on every run -------------
double uniform(double lo, double hi);
reference::Vector random_vector(int64_t n, double lo = -1, double hi = 1);
reference::Matrix random_matrix(int64_t rows, int64_t cols, double lo = -1, double hi = 1);
/// One index in [0, classes) per row: targets, positions.
std::vector<int32_t> random_indices(int64_t rows, int64_t classes);
/// The output of a GEMM of random operands (rows x depth times (cols x depth)^T): what a program
/// is given as its accumulators.
reference::Matrix random_gemm_output(int64_t rows, int64_t cols, int64_t depth = 64);
/// A GEMM-residual-RMSNorm-GEMM layer of random values; its residual is bf16 and its norm weight
/// f32 values, the types the programs read them in, so the programs and the reference see the
/// same inputs.
reference::GemmRmsNormGemm random_layer(int64_t m, int64_t k, int64_t hidden, int64_t n2);
/// Every option a real loss uses at once: label smoothing, z-loss, soft-capping (mean reduction).
reference::CrossEntropyOptions full_loss_options();

// Limits: identities that hold exactly in real arithmetic differ by fp64 rounding; finite
// differences by their O(h^2) truncation.
constexpr double kExact = 1e-12;
constexpr double kFiniteDifference = 1e-7;

// The elements of a Matrix or a Vector, for code written once for both.
inline std::vector<double>& values(reference::Matrix& x) { return x.data; }
inline std::vector<double>& values(reference::Vector& x) { return x; }
inline const std::vector<double>& values(const reference::Matrix& x) { return x.data; }
inline const std::vector<double>& values(const reference::Vector& x) { return x; }

double dot(const std::vector<double>& a, const std::vector<double>& b);
inline double dot(const reference::Matrix& a, const reference::Matrix& b) { return dot(a.data, b.data); }
double max_abs_difference(const reference::Vector& a, const reference::Vector& b);

// How far a backward formula is from the loss it differentiates: |<gradient, d> - D_d loss(x)|,
// the directional derivative along a random direction d by central differences (error O(h^2)).
template <class Parameter, class Loss>
double backward_error(Loss&& loss, const Parameter& x, const Parameter& gradient) {
  constexpr double h = 1e-5;
  Parameter direction = x, up = x, down = x;
  for (std::size_t i = 0; i < values(direction).size(); ++i) {
    values(direction)[i] = uniform(-1, 1);
    values(up)[i] += h * values(direction)[i];
    values(down)[i] -= h * values(direction)[i];
  }
  return std::abs(dot(values(gradient), values(direction)) - (loss(up) - loss(down)) / (2 * h));
}

// ---- each kernel's epilogue program on the CPU executor, against the fp64 reference -----------
void bias_activation_programs(SectionChecks& checks);  // LinearCombination, ActivationBackward
void rope_program(SectionChecks& checks);
void swiglu_program(SectionChecks& checks);
void cross_entropy_program(SectionChecks& checks);  // CrossEntropyPartials, then the finish
void rmsnorm_programs(SectionChecks& checks);       // ResidualRmsNorm, rstd, RowScale
void layer_section(SectionChecks& checks);          // the layer's reference routes (demo_layer.cpp)

}  // namespace coda::cli::cpu

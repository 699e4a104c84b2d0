// coda demo's CPU path, shared by its two halves: reproducible random data, and the sections that
// run each kernel's epilogue program on the CPU executor (demo_cpu_programs.cpp). cpu_sections()
// (demo_cpu.cpp) puts each program's checks first in its kernel's section, then the fp64
// reference's own identities.
#pragma once

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

// ---- each kernel's epilogue program on the CPU executor, against the fp64 reference -----------
void bias_activation_programs(SectionChecks& checks);  // LinearCombination, ActivationBackward
void rope_program(SectionChecks& checks);
void swiglu_program(SectionChecks& checks);
void cross_entropy_program(SectionChecks& checks);     // CrossEntropyPartials, then the finish
void rmsnorm_programs(SectionChecks& checks);          // ResidualRmsNorm, rstd, RowScale
void layer_section(SectionChecks& checks);             // the layer's reference routes (demo_layer.cpp)

}  // namespace coda::cli::cpu

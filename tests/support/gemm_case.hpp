// One GEMM test case on the GPU: random operands, a poisoned output, the fp64 reference.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "coda/gemm.hpp"
#include "coda/reference/matrix.hpp"

namespace coda::test {

struct GemmCase {
  int64_t m = 1, n = 1, k = 1, batch = 1;
  Major a_major = Major::k, b_major = Major::k;
  DType input = DType::bf16, output = DType::bf16;
  int64_t pad = 0;               // extra elements per row of every operand (keeps 16-byte alignment)
  GemmOptions options;
  int64_t sampled_rows = 0;      // 0: check every row against the reference; else this many random rows
  std::string describe() const;
};

struct GemmOutcome {
  double relative_error = 0;     // over the checked rows, every batch
  int64_t unwritten = 0;         // output elements still holding the poison (NaN) anywhere
  std::vector<unsigned char> output_bits;  // the raw output, for bitwise comparisons
  GemmPlan plan;
};

/// Run `c` on the current device (the workspace is allocated here when split-K needs one).
GemmOutcome run_gemm_case(const GemmCase& c, int repeats = 1);

/// The error bound a correct kernel meets for this output type (fp32 accumulation of exact
/// products, then one rounding to the output type).
double gemm_tolerance(DType output);

}  // namespace coda::test

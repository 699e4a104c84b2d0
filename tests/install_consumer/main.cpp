// Calls the C ABI, the C++ API and a program of its own (scaled_square.cu) from an installed coda.
// gemm.hpp includes <cuda_runtime_api.h>, so this also proves coda::coda carries the CUDA toolkit's
// include path; program.hpp needs C++20, which coda::coda requires of its consumers.
#include <cstdio>
#include <string>

#include "coda/coda.h"
#include "coda/epilogue/program.hpp"
#include "coda/gemm.hpp"

int run_scaled_square();  // scaled_square.cu

int main() {
  std::printf("coda %s, %s\n", coda_version(), std::string(coda::name(coda::DType::bf16)).c_str());
  return run_scaled_square();
}

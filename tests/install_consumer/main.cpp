// Calls one function of the C ABI and one of the C++ API of an installed coda. gemm.hpp includes
// <cuda_runtime_api.h>, so this also proves coda::coda carries the CUDA toolkit's include path.
#include <cstdio>
#include <string>

#include "coda/coda.h"
#include "coda/gemm/gemm.hpp"

int main() {
  std::printf("coda %s, %s\n", coda_version(), std::string(coda::name(coda::DType::bf16)).c_str());
  return 0;
}

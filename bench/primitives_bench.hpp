// coda bench primitives: the cost of each epilogue primitive class inside the GEMM.
#pragma once

namespace coda::bench {

int primitives_benchmark();

}  // namespace coda::bench

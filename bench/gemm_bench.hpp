// `coda bench gemm`: coda's GEMM against cuBLAS on the same shapes, majors and data, in one run.
#pragma once

namespace coda::bench {

/// Options: --set {transformer,square,decode,backward,quick,all} (default all), --dtype {bf16,f16},
/// --json PATH (default bench_gemm.json), --tile NAME (force a configuration), --split N (split-K),
/// --raster N (tile-order group height), --max-ctas N (cap the persistent grid, whole clusters).
int gemm_benchmark(int argc, char** argv);

}  // namespace coda::bench

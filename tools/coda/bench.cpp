// coda bench <what> [options]: the benchmarks of bench/, run from the command line.
#include <cstdio>
#include <string_view>

#include "commands.hpp"
#include "gemm_bench.hpp"
#include "ops_bench.hpp"
#include "primitives_bench.hpp"
#include "tile_timeline.hpp"

namespace coda::cli {

int bench(int argc, char** argv) {
  if (argc >= 2 && std::string_view(argv[1]) == "gemm") return coda::bench::gemm_benchmark(argc - 1, argv + 1);
  if (argc >= 2 && std::string_view(argv[1]) == "ops") return coda::bench::ops_benchmark(argc - 1, argv + 1);
  if (argc >= 2 && std::string_view(argv[1]) == "primitives")
    return coda::bench::primitives_benchmark(argc - 1, argv + 1);
  if (argc >= 2 && std::string_view(argv[1]) == "timeline") return coda::bench::timeline_benchmark(argc - 1, argv + 1);
  std::fprintf(stderr,
               "usage: coda bench gemm [--set transformer|square|decode|backward|quick|all] [--dtype bf16|f16]"
               " [--tile NAME] [--split N] [--raster N] [--max-ctas N] [--json PATH] [--warmup-ms MS]\n"
               "       coda bench ops [--json PATH] [--warmup-ms MS]\n"
               "       coda bench primitives\n"
               "       coda bench timeline\n");
  return 2;
}

}  // namespace coda::cli

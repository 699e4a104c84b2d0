// coda: the command line. `coda info`, `coda demo`, `coda bench ...`, `coda --version`.
#include <cstdio>
#include <exception>
#include <string_view>

#include "coda/coda.h"
#include "coda/core/status.hpp"
#include "commands.hpp"

namespace {

struct Command {
  const char* name;
  int (*run)(int, char**);
  const char* help;
};

const Command kCommands[] = {
    {"info", coda::cli::info, "list CUDA devices and whether coda's kernels can run on them"},
    {"demo", coda::cli::demo, "run the fused-kernel suite with verification (CPU executor without a GPU)"},
    {"bench", coda::cli::bench, "benchmarks against cuBLAS and the unfused sequence (`coda bench --help`)"},
};

int usage(FILE* out) {
  std::fprintf(out,
               "usage: coda <command> [options]     (coda <command> --help: its options)\n"
               "       coda --version\n\ncommands:\n");
  for (const Command& c : kCommands) std::fprintf(out, "  %-8s %s\n", c.name, c.help);
  return out == stdout ? 0 : 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage(stderr);
  const std::string_view name = argv[1];
  if (name == "-h" || name == "--help" || name == "help") return usage(stdout);
  if (name == "--version" || name == "version") {
    std::printf("coda %s (kernels built for sm_90a)\n", coda_version());
    return 0;
  }
  for (const Command& c : kCommands) {
    if (name != c.name) continue;
    try {
      return c.run(argc - 1, argv + 1);
    } catch (const coda::Error& e) {
      std::fprintf(stderr, "coda %s: %s\n", c.name, e.what());
      return 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "coda %s: unexpected error: %s\n", c.name, e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "coda: unknown command '%s'\n\n", argv[1]);
  return usage(stderr);
}

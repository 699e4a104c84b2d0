// coda demo: placeholder until the fused suite exists.
#include <cstdio>

#include "commands.hpp"

namespace coda::cli {

int demo(int, char**) {
  std::printf("coda demo\n");
  return 0;
}

}  // namespace coda::cli

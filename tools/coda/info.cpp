// coda info: the CUDA devices this process sees and whether coda's kernels run on them.
#include <cstdio>
#include <string>

#include "coda/coda.h"
#include "coda/core/device.hpp"
#include "commands.hpp"
#include "options.hpp"

namespace coda::cli {

int info(int argc, char** argv) {
  const OptionParser options("coda info",
                             "List the CUDA devices this process sees and whether coda's kernels run on "
                             "them (sm_90: H100, H200).");
  if (const auto exit = options.parse(argc, argv)) return *exit;
  std::printf("coda %s (kernels built for sm_90a)\n", coda_version());
  std::string why;
  const auto devices = list_devices(&why);
  if (devices.empty()) {
    std::printf("no CUDA device: %s\n", why.c_str());
    return 0;
  }
  for (const DeviceInfo& d : devices) {
    std::printf("device %d: %s, %d SMs, compute capability %d.%d, %.1f GiB, L2 %.0f MiB%s\n", d.index,
                d.name.c_str(), d.sm_count, d.major, d.minor, double(d.memory_bytes) / (1u << 30),
                double(d.l2_bytes) / (1u << 20),
                d.is_hopper() ? "" : "  [unsupported for the fused kernels: they need sm_90 (H100/H200)]");
  }
  return 0;
}

}  // namespace coda::cli

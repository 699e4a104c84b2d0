// coda demo: the main job. On a Hopper GPU it runs the GPU suite (the GEMM and the fused ops,
// verified against the fp64 reference, timed against cuBLAS); anywhere else it says so and runs
// the CPU path (each fused kernel's epilogue program on the CPU executor at small sizes, checked
// against the fp64 reference, and the reference's own identities). Exit code 1 when a check fails.
#include "demo.hpp"

#include <cstdio>
#include <string>

#include "coda/core/device.hpp"
#include "commands.hpp"
#include "options.hpp"

namespace coda::cli {
namespace {

// Why the GPU suite cannot run here, or "" when it can.
std::string why_no_gpu_suite() {
  std::string why;
  const auto devices = list_devices(&why);
  if (devices.empty()) return "no CUDA GPU found: " + why;
  if (hopper_available()) return "";
  const DeviceInfo& d = current_device();
  return "device " + std::to_string(d.index) + " is " + d.name + " (sm_" + std::to_string(d.major) +
         std::to_string(d.minor) + "), not a Hopper GPU (sm_90: H100/H200), which coda's kernels need";
}

}  // namespace

int demo(int argc, char** argv) {
  const OptionParser options("coda demo",
                             "Run the fused-kernel suite, every result checked against the fp64 reference: on "
                             "a Hopper GPU\nthe GPU kernels (and their times beside cuBLAS), elsewhere the "
                             "epilogue programs on the CPU executor.\nExit code 1 when a check fails.");
  if (const auto exit = options.parse(argc, argv)) return *exit;
  const std::string why_not = why_no_gpu_suite();
  const bool on_gpu = why_not.empty();
  if (on_gpu) {
    const DeviceInfo& d = current_device();
    std::printf(
        "coda demo on %s (%d SMs): the GPU suite. Every row is checked against the fp64 reference on\n"
        "sampled rows of poisoned outputs, then timed against cuBLAS on the same data (median of CUDA-graph\n"
        "replays; `coda bench gemm` and `coda bench ops` measure properly). For a fused op, coda ms is the\n"
        "whole op, cuBLAS ms cuBLAS's GEMMs of the same shapes (bf16 out), and coda GEMM ms coda's own\n"
        "GEMMs alone: the difference is the epilogue's cost (docs/kernels.md says what each op computes).\n\n",
        d.name.c_str(), d.sm_count);
  } else {
    std::printf(
        "coda demo: %s, so the epilogue programs run on the CPU executor (fp32 math on a reference GEMM)."
        "\nNo GPU kernel runs. Each program runs at small sizes, its outputs checked against the fp64\n"
        "reference (limits: one bf16 rounding for bf16 outputs, fp32 rounding for f32 partials), then the\n"
        "reference's own identities (fused == plain, backward == finite difference). docs/kernels.md\n"
        "says what each op computes.\n\n",
        why_not.c_str());
  }
  CheckTable table(on_gpu ? gpu_note_heading() : "");
  for (const DemoSection& section : on_gpu ? gpu_sections() : cpu_sections()) {
    SectionChecks checks(table, section.kernel);
    section.run(checks);
  }
  table.print();
  const int failures = table.failures();
  std::printf("\n%d of %d checks passed%s\n", table.size() - failures, table.size(),
              on_gpu ? "" : " (CPU path: epilogue programs on the CPU executor, no GPU kernel ran)");
  return failures == 0 ? 0 : 1;
}

}  // namespace coda::cli

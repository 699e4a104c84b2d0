// The CPU executor's half of standard_gpu_test.cu, in a C++ file: instantiated in a CUDA file,
// the programs' host-and-device call operators would call the host-only CPU tile from device code.
#include "coda/epilogue/parts.hpp"
#include "coda/epilogue/programs/rmsnorm.hpp"
#include "coda/epilogue/programs/standard.hpp"
#include "coda/epilogue/programs/swiglu.hpp"
#include "coda/reference/epilogue_executor.hpp"
#include "gpu_test_programs.hpp"

namespace coda::test {

namespace {
template <class Program>
void run(const Program& program, const reference::Matrix& accumulators) {
  reference::run_epilogue(program, accumulators, 0, {epilogue::kPartRows, epilogue::kPartCols});
}
}  // namespace

void run_on_cpu(const epilogue::LinearCombination& p, const reference::Matrix& acc) { run(p, acc); }
void run_on_cpu(const epilogue::ActivationBackward& p, const reference::Matrix& acc) { run(p, acc); }
void run_on_cpu(const epilogue::Reductions& p, const reference::Matrix& acc) { run(p, acc); }
void run_on_cpu(const WideInput& p, const reference::Matrix& acc) { run(p, acc); }
void run_on_cpu(const ScaledOutputs& p, const reference::Matrix& acc) { run(p, acc); }
void run_on_cpu(const TypedAuxOutputs& p, const reference::Matrix& acc) { run(p, acc); }
void run_on_cpu(const epilogue::Swiglu& p, const reference::Matrix& acc) { run(p, acc); }
void run_on_cpu(const epilogue::ResidualRmsNorm& p, const reference::Matrix& acc) { run(p, acc); }

}  // namespace coda::test

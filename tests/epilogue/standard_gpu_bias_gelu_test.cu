// The training forward's bias + GELU on the lean kernel of those terms alone (LinearCombinationOf
// the column bias, the pre-activation and GELU-tanh), against the CPU executor's general
// LinearCombination given the same arguments (standard_gpu_case.hpp).
#include "standard_gpu_case.hpp"

namespace coda::test {
namespace {

using namespace standard_gpu;

TEST(StandardProgramsGpu, BiasGeluOfItsTermsMatchesTheCpuExecutor) {
  CODA_REQUIRE_HOPPER();
  using BiasGelu = epilogue::LinearCombinationOf<epilogue::LinearCombinationTerms{
      .column_bias = true, .pre_activation = true, .activation = epilogue::Activation::gelu_tanh}>;
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(::testing::Message() << "M=" << s.m << " N=" << s.n << " K=" << s.k << ", " << seed_note());
    Case c(s);
    DeviceTensor column_bias(DType::f32, 1, s.n);
    column_bias.random();
    DeviceTensor& out = c.output(DType::bf16, s.m, s.n);
    DeviceTensor& pre = c.output(DType::bf16, s.m, s.n);
    c.run_and_compare(with_bias_gelu(BiasGelu{}, true, c, column_bias, out, pre),
                      with_bias_gelu(epilogue::LinearCombination{}, false, c, column_bias, out, pre));
  }
}

}  // namespace
}  // namespace coda::test

// Programs on operands of every major (coda::OperandMajors, launch.cuh), against the CPU executor
// on the same product: a data gradient dX = dY W takes W as an N-major B, and the training step's
// dGELU with its bias gradient runs there; A M-major on bias + GELU.
#include "standard_gpu_case.hpp"

namespace coda::test {
namespace {

using namespace standard_gpu;

// dX = acc * gelu_tanh'(pre), the column bias gradient as per-part column sums, on A K-major and
// B MN-major (the dgrad GEMM whose epilogue it is).
TEST(StandardProgramsGpu, ActivationBackwardOnADataGradient) {
  CODA_REQUIRE_HOPPER();
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(::testing::Message() << "M=" << s.m << " N=" << s.n << " K=" << s.k << ", B MN-major, " << seed_note());
    Case c(s, Major::k, Major::mn);
    DeviceTensor pre(DType::bf16, s.m, s.n);
    pre.random(-3.0, 3.0);
    DeviceTensor& dx = c.output(DType::bf16, s.m, s.n);
    DeviceTensor& bias_gradient = c.output(DType::f32, parts(s.m, kPartRows), s.n);
    auto program = [&](bool gpu, auto p) {
      p.pre_activation = gpu ? device_in(pre) : host_in(pre);
      p.activation.kind = epilogue::Activation::gelu_tanh;
      p.out = gpu ? device_out(dx) : host_out(c.expected_of(dx));
      p.bias_gradient = gpu ? device_partials(bias_gradient) : host_partials(c.expected_of(bias_gradient));
      return p;
    };
    c.run_and_compare(program(true, epilogue::ActivationBackwardOf<epilogue::Activation::gelu_tanh>{}),
                      program(false, epilogue::ActivationBackward{}), epilogue::OutputTypes<>{},
                      epilogue::OperandMajors<Major::k, Major::mn>{});
  }
}

// D = gelu_tanh(acc + column bias) with its pre-activation, on A M-major (B K-major, then MN-major).
TEST(StandardProgramsGpu, LinearCombinationOnAnMMajorA) {
  CODA_REQUIRE_HOPPER();
  using BiasGelu = epilogue::LinearCombinationOf<epilogue::LinearCombinationTerms{
      .column_bias = true, .pre_activation = true, .activation = epilogue::Activation::gelu_tanh}>;
  for (const Major b_major : {Major::k, Major::mn})
    for (const Shape& s : kShapes) {
      SCOPED_TRACE(::testing::Message() << "M=" << s.m << " N=" << s.n << " K=" << s.k << ", A MN-major, B "
                                        << name(b_major) << ", " << seed_note());
      Case c(s, Major::mn, b_major);
      DeviceTensor column_bias(DType::f32, 1, s.n);
      column_bias.random();
      DeviceTensor& out = c.output(DType::bf16, s.m, s.n);
      DeviceTensor& pre = c.output(DType::bf16, s.m, s.n);
      const BiasGelu on_gpu = with_bias_gelu(BiasGelu{}, true, c, column_bias, out, pre);
      const auto on_cpu = with_bias_gelu(epilogue::LinearCombination{}, false, c, column_bias, out, pre);
      if (b_major == Major::k)
        c.run_and_compare(on_gpu, on_cpu, epilogue::OutputTypes<>{}, epilogue::OperandMajors<Major::mn, Major::k>{});
      else
        c.run_and_compare(on_gpu, on_cpu, epilogue::OutputTypes<>{}, epilogue::OperandMajors<Major::mn, Major::mn>{});
    }
}

// The launch refuses operands of majors its kernels are not built for, naming the operand
// (checked before the plan, so before anything reaches the GPU).
TEST(StandardProgramsGpu, ALaunchRefusesOperandsOfOtherMajors) {
  CODA_REQUIRE_HOPPER();
  Case c(kShapes[1], Major::k, Major::mn);
  DeviceTensor& out = c.output(DType::bf16, c.shape.m, c.shape.n);
  epilogue::Reductions program;
  program.out = device_out(out);
  try {
    epilogue::gemm_program({c.x.view(), Major::k}, {c.w.view(), Major::mn}, program);
    ADD_FAILURE() << "an MN-major B reached a launch built for K-major operands";
  } catch (const coda::Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("argument 'b': this launch's kernels take a K-major B"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace coda::test

// The standard set's backward and reduction programs and a wide tile input on the GPU executor,
// against the CPU executor (standard_gpu_case.hpp): column and whole-part reductions, an
// activation's derivative, t.load_wide and a wide output.
#include "standard_gpu_case.hpp"

namespace coda::test {

// A program that asks for a companion launch (program.hpp), to check one whose reductions are
// written by both launches (kShapes' last shape has one on the ping-pong tile). Outside the
// anonymous namespace: nvcc's front end there warns that the member is never referenced (#177-D).
template <class Program>
struct WithCompanion : Program {
  static constexpr double companion_speed = 0.92;
};

namespace {

using namespace standard_gpu;

// dX = acc * silu'(pre) with the bias gradient as column sums (per-column bias) and as row sums;
// with the kind read at run time (ActivationBackward) and fixed (ActivationBackwardOf, its own kernel).
TEST(StandardProgramsGpu, ActivationBackwardMatchesTheCpuExecutor) {
  CODA_REQUIRE_HOPPER();
  for (const bool fixed_kind : {false, true})
    for (const Shape& s : kShapes)
      for (bool per_row : {false, true}) {
        SCOPED_TRACE(::testing::Message() << (fixed_kind ? "ActivationBackwardOf" : "ActivationBackward") << ", M=" << s.m
                                          << " N=" << s.n << " K=" << s.k << " bias per " << (per_row ? "row" : "column")
                                          << ", " << seed_note());
        Case c(s);
        DeviceTensor pre(DType::bf16, s.m, s.n);
        pre.random(-3.0, 3.0);
        DeviceTensor& dx = c.output(DType::bf16, s.m, s.n);
        DeviceTensor& bias_gradient = per_row ? c.output(DType::f32, s.m, parts(s.n, kPartCols))
                                              : c.output(DType::f32, parts(s.m, kPartRows), s.n);
        auto program = [&](bool gpu, auto p) {
          p.pre_activation = gpu ? device_in(pre) : host_in(pre);
          p.activation.kind = epilogue::Activation::silu;
          p.out = gpu ? device_out(dx) : host_out(c.expected_of(dx));
          p.bias_gradient = gpu ? device_partials(bias_gradient) : host_partials(c.expected_of(bias_gradient));
          p.bias_per_row = per_row;
          return p;
        };
        const epilogue::ActivationBackward on_cpu = program(false, epilogue::ActivationBackward{});
        if (fixed_kind) c.run_and_compare(program(true, epilogue::ActivationBackwardOf<epilogue::Activation::silu>{}), on_cpu);
        else c.run_and_compare(program(true, epilogue::ActivationBackward{}), on_cpu);
      }
}

// Row sums, sums of squares and maxima and column sums of acc, beside acc itself. (This program
// once got wrong even columns in `out`: see shuffle_xor in gpu_executor.cuh.) With a companion
// launch as well, on the last shape.
TEST(StandardProgramsGpu, ReductionsMatchTheCpuExecutor) {
  CODA_REQUIRE_HOPPER();
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(::testing::Message() << "M=" << s.m << " N=" << s.n << " K=" << s.k << ", " << seed_note());
    Case c(s);
    DeviceTensor& out = c.output(DType::bf16, s.m, s.n);
    DeviceTensor& sums = c.output(DType::f32, s.m, parts(s.n, kPartCols));
    DeviceTensor& squares = c.output(DType::f32, s.m, parts(s.n, kPartCols));
    DeviceTensor& maxima = c.output(DType::f32, s.m, parts(s.n, kPartCols));
    DeviceTensor& column_sums = c.output(DType::f32, parts(s.m, kPartRows), s.n);
    auto program = [&](bool gpu) {
      auto partials = [&](DeviceTensor& t) { return gpu ? device_partials(t) : host_partials(c.expected_of(t)); };
      epilogue::Reductions p;
      p.out = gpu ? device_out(out) : host_out(c.expected_of(out));
      p.row_sums = partials(sums);
      p.row_sums_of_squares = partials(squares);
      p.row_max = partials(maxima);
      p.column_sums = partials(column_sums);
      return p;
    };
    c.run_and_compare(program(true), program(false));
    if (&s == &kShapes[3]) {
      SCOPED_TRACE("a program asking for a companion launch");
      c.run_and_compare(WithCompanion<epilogue::Reductions>{program(true)}, program(false));
    }
  }
}

// A wide (M x 2N) tile input read by t.load_wide, and wide outputs, two with row reductions.
TEST(StandardProgramsGpu, WideTileInputMatchesTheCpuExecutor) {
  CODA_REQUIRE_HOPPER();
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(::testing::Message() << "M=" << s.m << " N=" << s.n << " K=" << s.k << ", " << seed_note());
    Case c(s);
    DeviceTensor wide(DType::bf16, s.m, 2 * s.n);
    wide.random();
    DeviceTensor& out = c.output(DType::bf16, s.m, s.n);
    DeviceTensor& wide_out = c.output(DType::bf16, s.m, 2 * s.n);
    DeviceTensor& summed = c.output(DType::bf16, s.m, 2 * s.n);
    DeviceTensor& maxed = c.output(DType::bf16, s.m, 2 * s.n);
    DeviceTensor& sums = c.output(DType::f32, s.m, parts(s.n, kPartCols));
    DeviceTensor& maxima = c.output(DType::f32, s.m, parts(s.n, kPartCols));
    auto program = [&](bool gpu) {
      auto out_of = [&](DeviceTensor& t) { return gpu ? device_out(t) : host_out(c.expected_of(t)); };
      auto partials = [&](DeviceTensor& t) { return gpu ? device_partials(t) : host_partials(c.expected_of(t)); };
      WideInput p;
      p.wide = gpu ? device_in(wide) : host_in(wide);
      p.out = out_of(out);
      p.wide_out = out_of(wide_out);
      p.summed = out_of(summed);
      p.row_sums = partials(sums);
      p.maxed = out_of(maxed);
      p.row_max = partials(maxima);
      return p;
    };
    c.run_and_compare(program(true), program(false));
  }
}

// A program that stages a tile input and a row vector (residual + RMSNorm, which asks for a
// companion), with a companion: the ping-pong launch stages the residual in shared memory, the
// companion's cooperative tile reads it from global memory; both against the CPU executor, and the
// same bits as the ping-pong launch alone. M = 33 x 128: the companion's one tile row is whole, so
// its parts but the last column's are interior ones (kShapes' companion shape gives it only edge parts).
TEST(StandardProgramsGpu, StagedInputWithACompanionMatchesTheCpuExecutor) {
  CODA_REQUIRE_HOPPER();
  const Shape s{33 * 128, 1100, 72};
  SCOPED_TRACE(::testing::Message() << "M=" << s.m << " N=" << s.n << " K=" << s.k << ", " << seed_note());
  Case c(s);
  DeviceTensor residual(DType::bf16, s.m, s.n), weight(DType::f32, 1, s.n);
  residual.random();
  weight.random();
  DeviceTensor& h = c.output(DType::bf16, s.m, s.n);
  DeviceTensor& u = c.output(DType::bf16, s.m, s.n);
  DeviceTensor& squares = c.output(DType::f32, s.m, parts(s.n, kPartCols));
  auto program = [&](bool gpu) {
    epilogue::ResidualRmsNorm p;
    p.residual = gpu ? device_in(residual) : host_in(residual);
    p.residual_out = gpu ? device_out(h) : host_out(c.expected_of(h));
    p.sum_squares = gpu ? device_partials(squares) : host_partials(c.expected_of(squares));
    p.weight = gpu ? device_row_vector(weight) : host_row_vector(weight);
    p.out = gpu ? device_out(u) : host_out(c.expected_of(u));
    return p;
  };
  const epilogue::ProgramPlan plan =
      epilogue::plan_program<epilogue::ResidualRmsNorm>({c.x.view(), Major::k}, {c.w.view(), Major::k}, {}, "test");
  if (current_device().sm_count == 132) EXPECT_EQ(plan.companion_ctas(), 10);  // one tile row
  c.run_and_compare(program(true), program(false));
}

}  // namespace
}  // namespace coda::test

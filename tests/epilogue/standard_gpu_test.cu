// The standard epilogue set (programs/standard.hpp) on the GPU executor, against the CPU executor
// running the same program on the same GEMM product: residue shapes, M = 1, poisoned outputs, and
// the GPU executor's paths no fused op takes (column and whole-part reductions, vector scales,
// two tile inputs, a wide input and a wide output, an activation and its derivative).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "coda/epilogue/launch.cuh"
#include "coda/epilogue/parts.hpp"
#include "coda/epilogue/programs/standard.hpp"
#include "coda/reference/gemm.hpp"
#include "coda/reference/matrix.hpp"
#include "support/device_tensor.hpp"
#include "gpu_test_programs.hpp"

namespace coda::test {

// standard_programs_on_cpu.cpp
void run_on_cpu(const epilogue::LinearCombination& program, const ref::Matrix& accumulators);
void run_on_cpu(const epilogue::ActivationBackward& program, const ref::Matrix& accumulators);
void run_on_cpu(const epilogue::Reductions& program, const ref::Matrix& accumulators);
void run_on_cpu(const WideInput& program, const ref::Matrix& accumulators);
void run_on_cpu(const ScaledOutputs& program, const ref::Matrix& accumulators);

namespace {

using epilogue::kPartCols;
using epilogue::kPartRows;

// GPU and CPU executors see accumulators that differ by fp32 summation order only: 16-bit and fp8
// outputs then differ by one ulp of their type here and there, fp32 ones (tile outputs and
// partials) by a few fp32 roundings.
double tolerance(DType output) {
  if (output == DType::f32) return 1e-5;
  return is_fp8(output) ? 1e-2 : 2e-3;
}

struct Shape {
  int64_t m, n, k;
};
constexpr Shape kShapes[] = {{1, 264, 64}, {200, 600, 136}, {129, 1030, 264}};

int64_t parts(int64_t extent, int64_t part) { return (extent + part - 1) / part; }

// The tensors of one case: the operands, their fp64 product (the CPU executor's accumulators),
// and every output twice, a device copy (poisoned) and a host copy the CPU executor fills.
struct Case {
  explicit Case(const Shape& s) : shape(s), x(DType::bf16, s.m, s.k), w(DType::bf16, s.n, s.k) {
    outputs.reserve(kMaxOutputs);
    expected.reserve(kMaxOutputs);
    x.random();
    w.random();
    product = ref::gemm(x.host.matrix(), Major::k, w.host.matrix(), Major::k);
  }
  DeviceTensor& output(DType dtype, int64_t rows, int64_t cols) {
    EXPECT_LT(outputs.size(), kMaxOutputs) << "descriptors point into `outputs`: it must not reallocate";
    outputs.emplace_back(dtype, rows, cols).poison();
    expected.emplace_back(dtype, rows, cols, outputs.back().host.view.ld());
    return outputs.back();
  }
  HostTensor& expected_of(const DeviceTensor& out) { return expected[std::size_t(&out - outputs.data())]; }

  // Run `gpu` (device descriptors) through the GEMM and `cpu` (host descriptors) on the product,
  // then compare every output.
  template <class GpuProgram, class CpuProgram, DType... Also>
  void run_and_compare(const GpuProgram& gpu, const CpuProgram& cpu, OutputTypes<Also...> output_types = {}) {
    const mainloop::LaunchPlan plan = plan_program({x.view(), Major::k}, {w.view(), Major::k}, {}, "test");
    launch_program(plan, gpu, nullptr, output_types);
    CODA_CUDA_CHECK(cudaDeviceSynchronize());
    run_on_cpu(cpu, product);
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      outputs[i].download();
      const ref::Matrix got = outputs[i].host.matrix(), want = expected[i].matrix();
      int64_t unwritten = 0;
      for (double v : got.data) unwritten += std::isnan(v) ? 1 : 0;
      EXPECT_EQ(unwritten, 0) << "output " << i;
      EXPECT_LT(ref::relative_error(got, want), tolerance(outputs[i].host.view.dtype)) << "output " << i;
    }
  }

  static constexpr std::size_t kMaxOutputs = 8;
  Shape shape;
  DeviceTensor x, w;
  ref::Matrix product;
  std::vector<DeviceTensor> outputs;  // kMaxOutputs reserved up front: descriptors point into them
  std::vector<HostTensor> expected;
};

// Descriptors of a tensor for each executor.
epilogue::TileOut device_out(const DeviceTensor& t, float scale = 1.0f) { return epilogue::tile_out(t.view(), "out", scale); }
epilogue::TileOut host_out(HostTensor& t, float scale = 1.0f) { return {t.bytes.data(), t.view.dtype, t.view.ld(), 0, scale}; }
epilogue::TileIn device_in(const DeviceTensor& t) { return epilogue::tile_in(t.view(), "in"); }
epilogue::TileIn host_in(const DeviceTensor& t) { return {t.host.bytes.data(), t.host.view.dtype, t.host.view.ld(), 0}; }
epilogue::Partials device_partials(const DeviceTensor& t) {
  return {static_cast<float*>(t.view().data), t.host.view.ld(), 1, 0};
}
epilogue::Partials host_partials(HostTensor& t) { return {reinterpret_cast<float*>(t.bytes.data()), t.view.ld(), 1, 0}; }

// D = gelu_tanh(alpha acc + beta[row] C + gamma X2 + column bias + row bias), with the
// pre-activation and the amax of D per part: two tile inputs, vector scales, a whole-part reduction.
// Twice: with the activation's kind read at run time (LinearCombination) and fixed at compile time
// (LinearCombinationWith, a kernel of its own), each against the CPU executor's LinearCombination.
TEST(StandardProgramsGpu, LinearCombinationMatchesTheCpuExecutor) {
  CODA_REQUIRE_HOPPER();
  for (const bool fixed_activation : {false, true})
    for (const Shape& s : kShapes) {
      SCOPED_TRACE(::testing::Message() << (fixed_activation ? "LinearCombinationWith" : "LinearCombination")
                                        << ", M=" << s.m << " N=" << s.n << " K=" << s.k << ", " << seed_note());
      Case c(s);
      DeviceTensor source(DType::bf16, s.m, s.n), second(DType::bf16, s.m, s.n), column_bias(DType::f32, 1, s.n),
          row_bias(DType::bf16, 1, s.m), beta(DType::f32, 1, s.m);
      for (DeviceTensor* t : {&source, &second, &column_bias, &row_bias, &beta}) t->random();
      DeviceTensor& out = c.output(DType::bf16, s.m, s.n);
      DeviceTensor& pre = c.output(DType::bf16, s.m, s.n);
      DeviceTensor& amax = c.output(DType::f32, parts(s.m, kPartRows), parts(s.n, kPartCols));

      auto program = [&](bool gpu, auto p) {
        p.alpha = epilogue::Scale::constant(1.5f);
        p.source = gpu ? device_in(source) : host_in(source);
        p.beta.per_row = gpu ? epilogue::column_vector(beta.vector_view(), "beta")
                             : epilogue::ColumnVector{beta.host.bytes.data(), DType::f32, 0};
        p.second_source = gpu ? device_in(second) : host_in(second);
        p.gamma = epilogue::Scale::constant(0.25f);
        p.column_bias = gpu ? epilogue::row_vector(column_bias.vector_view(), "column_bias")
                            : epilogue::RowVector{column_bias.host.bytes.data(), DType::f32};
        p.row_bias = gpu ? epilogue::column_vector(row_bias.vector_view(), "row_bias")
                         : epilogue::ColumnVector{row_bias.host.bytes.data(), DType::bf16, 0};
        p.activation.kind = epilogue::Activation::gelu_tanh;
        p.out = gpu ? device_out(out) : host_out(c.expected_of(out));
        p.pre_activation = gpu ? device_out(pre) : host_out(c.expected_of(pre));
        p.amax = gpu ? device_partials(amax) : host_partials(c.expected_of(amax));
        return p;
      };
      const epilogue::LinearCombination on_cpu = program(false, epilogue::LinearCombination{});
      if (fixed_activation)
        c.run_and_compare(program(true, epilogue::LinearCombinationWith<epilogue::Activation::gelu_tanh>{}), on_cpu);
      else
        c.run_and_compare(program(true, epilogue::LinearCombination{}), on_cpu);
    }
}

// Each non-16-bit output type, through ScaledOutputs (LinearCombination's fp8 use): D and its
// pre-activation in the type, with the amax of D per part (before the scale). e4m3's scale makes
// the largest values saturate at 448; e5m2's keeps them in range.
TEST(StandardProgramsGpu, OutputTypesMatchTheCpuExecutor) {
  CODA_REQUIRE_HOPPER();
  struct Output {
    DType dtype;
    float scale;
  };
  for (const Output o : {Output{DType::f32, 1.0f}, Output{DType::e4m3, 100.0f}, Output{DType::e5m2, 0.25f}})
    for (const Shape& s : kShapes) {
      SCOPED_TRACE(::testing::Message() << name(o.dtype) << " out, M=" << s.m << " N=" << s.n << " K=" << s.k << ", "
                                        << seed_note());
      Case c(s);
      DeviceTensor column_bias(DType::f32, 1, s.n);
      column_bias.random();
      DeviceTensor& out = c.output(o.dtype, s.m, s.n);
      DeviceTensor& pre = c.output(o.dtype, s.m, s.n);
      DeviceTensor& amax = c.output(DType::f32, parts(s.m, kPartRows), parts(s.n, kPartCols));
      auto program = [&](bool gpu) {
        ScaledOutputs p;
        p.column_bias = gpu ? epilogue::row_vector(column_bias.vector_view(), "column_bias")
                            : epilogue::RowVector{column_bias.host.bytes.data(), DType::f32};
        p.out = gpu ? device_out(out, o.scale) : host_out(c.expected_of(out), o.scale);
        p.pre_activation = gpu ? device_out(pre, o.scale) : host_out(c.expected_of(pre), o.scale);
        p.amax = gpu ? device_partials(amax) : host_partials(c.expected_of(amax));
        return p;
      };
      c.run_and_compare(program(true), program(false), OutputTypes<DType::f32, DType::e4m3, DType::e5m2>{});
      if (is_fp8(o.dtype)) {  // the scale made some values saturate (else this case tests less than it says)
        const ref::Matrix d = out.host.matrix();
        const double largest = o.dtype == DType::e4m3 ? 448.0 : 57344.0;
        int64_t saturated = 0;
        for (double v : d.data) saturated += std::fabs(v) == largest ? 1 : 0;
        if (o.dtype == DType::e4m3) EXPECT_GT(saturated, 0);
        else EXPECT_EQ(saturated, 0);
      }
    }
}

// dX = acc * silu'(pre) with the bias gradient as column sums (per-column bias) and as row sums.
TEST(StandardProgramsGpu, ActivationBackwardMatchesTheCpuExecutor) {
  CODA_REQUIRE_HOPPER();
  for (const Shape& s : kShapes)
    for (bool per_row : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "M=" << s.m << " N=" << s.n << " K=" << s.k << " bias per "
                                        << (per_row ? "row" : "column") << ", " << seed_note());
      Case c(s);
      DeviceTensor pre(DType::bf16, s.m, s.n);
      pre.random(-3.0, 3.0);
      DeviceTensor& dx = c.output(DType::bf16, s.m, s.n);
      DeviceTensor& bias_gradient = per_row ? c.output(DType::f32, s.m, parts(s.n, kPartCols))
                                            : c.output(DType::f32, parts(s.m, kPartRows), s.n);
      auto program = [&](bool gpu) {
        epilogue::ActivationBackward p;
        p.pre_activation = gpu ? device_in(pre) : host_in(pre);
        p.activation.kind = epilogue::Activation::silu;
        p.out = gpu ? device_out(dx) : host_out(c.expected_of(dx));
        p.bias_gradient = gpu ? device_partials(bias_gradient) : host_partials(c.expected_of(bias_gradient));
        p.bias_per_row = per_row;
        return p;
      };
      c.run_and_compare(program(true), program(false));
    }
}

// Row sums, sums of squares and maxima and column sums of acc, beside acc itself. (This program
// once got wrong even columns in `out`: see shuffle_xor in gpu_executor.cuh.)
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
  }
}

// A wide (M x 2N) tile input read by t.load_wide, and a wide output.
TEST(StandardProgramsGpu, WideTileInputMatchesTheCpuExecutor) {
  CODA_REQUIRE_HOPPER();
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(::testing::Message() << "M=" << s.m << " N=" << s.n << " K=" << s.k << ", " << seed_note());
    Case c(s);
    DeviceTensor wide(DType::bf16, s.m, 2 * s.n);
    wide.random();
    DeviceTensor& out = c.output(DType::bf16, s.m, s.n);
    DeviceTensor& wide_out = c.output(DType::bf16, s.m, 2 * s.n);
    auto program = [&](bool gpu) {
      WideInput p;
      p.wide = gpu ? device_in(wide) : host_in(wide);
      p.out = gpu ? device_out(out) : host_out(c.expected_of(out));
      p.wide_out = gpu ? device_out(wide_out) : host_out(c.expected_of(wide_out));
      return p;
    };
    c.run_and_compare(program(true), program(false));
  }
}

}  // namespace
}  // namespace coda::test

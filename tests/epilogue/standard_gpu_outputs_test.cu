// The GPU executor's f32 and fp8 tile outputs against the CPU executor (standard_gpu_case.hpp).
#include "standard_gpu_case.hpp"

namespace coda::test {
namespace {

using namespace standard_gpu;

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
        p.column_bias = gpu ? device_row_vector(column_bias) : host_row_vector(column_bias);
        p.out = gpu ? device_out(out, o.scale) : host_out(c.expected_of(out), o.scale);
        p.pre_activation = gpu ? device_out(pre, o.scale) : host_out(c.expected_of(pre), o.scale);
        p.amax = gpu ? device_partials(amax) : host_partials(c.expected_of(amax));
        return p;
      };
      c.run_and_compare(program(true), program(false), epilogue::OutputTypes<DType::f32, DType::e4m3, DType::e5m2>{});
      if (is_fp8(o.dtype)) {  // the scale made some values saturate (else this case tests less than it says)
        const reference::Matrix d = out.host.matrix();
        const double largest = o.dtype == DType::e4m3 ? 448.0 : 57344.0;
        int64_t saturated = 0;
        for (double v : d.data) saturated += std::fabs(v) == largest ? 1 : 0;
        if (o.dtype == DType::e4m3) EXPECT_GT(saturated, 0);
        else EXPECT_EQ(saturated, 0);
      }
    }
}

// An e4m3 result with bf16 outputs beside it in one launch (TileOutOf<bf16>): a test program's
// full- and half-width ones, then the standard set's bias + GELU with its pre-activation in bf16
// (the terms fix its type) against the CPU executor's LinearCombination given the same tensors.
TEST(StandardProgramsGpu, TypedOutputsBesideTheLaunchsType) {
  CODA_REQUIRE_HOPPER();
  using BiasGelu = epilogue::LinearCombinationOf<epilogue::LinearCombinationTerms{
      .column_bias = true, .pre_activation = true, .pre_activation_typed = true,
      .pre_activation_type = DType::bf16, .activation = epilogue::Activation::gelu_tanh}>;
  static_assert(std::is_same_v<decltype(BiasGelu::pre_activation), epilogue::TileOutOf<DType::bf16>>);
  for (const bool standard_set : {false, true})
    for (const Shape& s : kShapes) {
      SCOPED_TRACE(::testing::Message() << (standard_set ? "LinearCombinationOf" : "TypedAuxOutputs") << ", M=" << s.m
                                        << " N=" << s.n << " K=" << s.k << ", " << seed_note());
      Case c(s);
      DeviceTensor column_bias(DType::f32, 1, s.n);
      column_bias.random();
      DeviceTensor& out = c.output(DType::e4m3, s.m, s.n);
      DeviceTensor& pre = c.output(DType::bf16, s.m, s.n);
      if (standard_set) {
        c.run_and_compare(with_bias_gelu(BiasGelu{}, true, c, column_bias, out, pre, 16.0f),
                          with_bias_gelu(epilogue::LinearCombination{}, false, c, column_bias, out, pre, 16.0f),
                          epilogue::OutputTypes<DType::e4m3>{});
        continue;
      }
      DeviceTensor& gated = c.output(DType::bf16, s.m, s.n / 2);
      auto program = [&](bool gpu) {
        TypedAuxOutputs p;
        p.column_bias = gpu ? device_row_vector(column_bias) : host_row_vector(column_bias);
        p.out = gpu ? device_out(out, 8.0f) : host_out(c.expected_of(out), 8.0f);
        p.pre_activation = {gpu ? device_out(pre) : host_out(c.expected_of(pre))};
        p.gated = {gpu ? device_out(gated) : host_out(c.expected_of(gated))};
        return p;
      };
      c.run_and_compare(program(true), program(false), epilogue::OutputTypes<DType::e4m3>{});
    }
}

// store_pairs to a 1-byte output: 64 bytes per part row, through the TileOut's map of 64-byte boxes.
// The library's SwiGLU program with O = silu(gate) up in e4m3 and e5m2.
TEST(StandardProgramsGpu, Fp8PairOutputsMatchTheCpuExecutor) {
  CODA_REQUIRE_HOPPER();
  for (const DType fp8 : {DType::e4m3, DType::e5m2})
    for (const Shape& s : kShapes) {
      SCOPED_TRACE(::testing::Message() << name(fp8) << " O, M=" << s.m << " N=" << s.n << " K=" << s.k << ", "
                                        << seed_note());
      Case c(s);
      DeviceTensor& out = c.output(fp8, s.m, s.n / 2);
      const float scale = fp8 == DType::e4m3 ? 64.0f : 2.0f;
      auto program = [&](bool gpu) {
        epilogue::Swiglu p;
        p.out = gpu ? device_out(out, scale) : host_out(c.expected_of(out), scale);
        return p;
      };
      c.run_and_compare(program(true), program(false), epilogue::OutputTypes<DType::e4m3, DType::e5m2>{});
    }
}

}  // namespace
}  // namespace coda::test

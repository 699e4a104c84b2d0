// The standard epilogue set (programs/standard.hpp) on the GPU executor, against the CPU executor
// running the same program on the same GEMM product (standard_gpu_case.hpp): LinearCombination
// with two tile inputs, vector scales, an activation and a whole-part reduction.
#include "standard_gpu_case.hpp"

#include "coda/epilogue/programs/rmsnorm.hpp"
#include "coda/epilogue/programs/rope.hpp"

namespace coda::test {
namespace {

using namespace standard_gpu;

// D = gelu_tanh(alpha acc + beta[row] C + gamma X2 + column bias + row bias), with the
// pre-activation and the amax of D per part: two tile inputs, vector scales, a whole-part reduction
// (LinearCombination, every term compiled, the activation's kind read at run time), against the CPU
// executor's LinearCombination given the same arguments. (The lean kernel of bias + GELU alone:
// standard_gpu_bias_gelu_test.cu, its own translation unit, so the two kernels build in parallel.)
TEST(StandardProgramsGpu, LinearCombinationMatchesTheCpuExecutor) {
  CODA_REQUIRE_HOPPER();
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(::testing::Message() << "M=" << s.m << " N=" << s.n << " K=" << s.k << ", " << seed_note());
    Case c(s);
    DeviceTensor source(DType::bf16, s.m, s.n), second(DType::bf16, s.m, s.n), column_bias(DType::f32, 1, s.n),
        row_bias(DType::bf16, 1, s.m), beta(DType::f32, 1, s.m);
    for (DeviceTensor* t : {&source, &second, &column_bias, &row_bias, &beta}) t->random();
    DeviceTensor& out = c.output(DType::bf16, s.m, s.n);
    DeviceTensor& pre = c.output(DType::bf16, s.m, s.n);
    DeviceTensor& amax = c.output(DType::f32, parts(s.m, kPartRows), parts(s.n, kPartCols));

    auto program = [&](bool gpu) {
      epilogue::LinearCombination p;
      p.alpha = epilogue::Scale::constant(1.5f);
      p.source = gpu ? device_in(source) : host_in(source);
      p.beta.per_row = gpu ? epilogue::column_vector(beta.vector_view(), "beta")
                           : epilogue::ColumnVector{beta.host.bytes.data(), DType::f32, 0};
      p.second_source = gpu ? device_in(second) : host_in(second);
      p.gamma = epilogue::Scale::constant(0.25f);
      p.row_bias = gpu ? epilogue::column_vector(row_bias.vector_view(), "row_bias")
                       : epilogue::ColumnVector{row_bias.host.bytes.data(), DType::bf16, 0};
      p.amax = gpu ? device_partials(amax) : host_partials(c.expected_of(amax));
      return with_bias_gelu(p, gpu, c, column_bias, out, pre);
    };
    c.run_and_compare(program(true), program(false));
  }
}

// plan_program picks a program's tile by K (plan.hpp): ping-pong below kCooperativeProgramMinK,
// the cooperative m128n256 from it (K read along either major of A), and ping-pong whatever K for a
// program that stages a tile input.
TEST(StandardProgramsGpu, ProgramsPickTheirTileByK) {
  CODA_REQUIRE_HOPPER();
  const int64_t k = epilogue::kCooperativeProgramMinK;
  DeviceTensor x(DType::bf16, 128, k), x_m_major(DType::bf16, k, 128), w(DType::bf16, 256, k);
  auto tile = [&]<class Program>(const DeviceTensor& a, Major a_major, int64_t k_used) {
    TensorView a_view = a.view(), w_view = w.view();
    if (a_major == Major::k) a_view.shape[1] = k_used;
    else a_view.shape[0] = k_used;
    w_view.shape[1] = k_used;
    return epilogue::plan_program<Program>({a_view, a_major}, {w_view, Major::k}, {}, "test").main.summary.tile;
  };
  EXPECT_EQ(tile.operator()<epilogue::Swiglu>(x, Major::k, k - 64), GemmTile::pingpong_m128n128);
  EXPECT_EQ(tile.operator()<epilogue::Swiglu>(x, Major::k, k), GemmTile::m128n256);
  EXPECT_EQ(tile.operator()<epilogue::Swiglu>(x_m_major, Major::mn, k), GemmTile::m128n256);
  EXPECT_EQ(tile.operator()<epilogue::Swiglu>(x_m_major, Major::mn, k - 64), GemmTile::pingpong_m128n128);
  EXPECT_EQ(tile.operator()<epilogue::ResidualRmsNorm>(x, Major::k, k), GemmTile::pingpong_m128n128);
}

// A program that asks for it (program.hpp: SwiGLU, RoPE, residual + RMSNorm) gets a companion
// launch on the ping-pong tile (epilogue/plan.hpp) where the 4-CTA clusters leave SMs over, as on the
// H100 and H200 (132 SMs, 120 in clusters), and the problem has the tile rows to share; not when the
// options say no or cap the CTAs. The run_and_compare cases of kShapes' last shape check its bits.
TEST(StandardProgramsGpu, CompanionLaunchWhereSmsAreLeftOver) {
  CODA_REQUIRE_HOPPER();
  const Shape s = std::end(kShapes)[-1];  // the one with tile rows to share
  DeviceTensor x(DType::bf16, s.m, s.k), w(DType::bf16, s.n, s.k);
  auto companion_ctas = [&]<class Program>(GemmOptions options) {
    return epilogue::plan_program<Program>({x.view(), Major::k}, {w.view(), Major::k}, options, "test")
        .companion_ctas();
  };
  const int sms = current_device().sm_count;
  if (sms == 132) {
    EXPECT_EQ(companion_ctas.operator()<epilogue::Swiglu>({}), 10);  // a row of five 2-CTA clusters
    EXPECT_EQ(companion_ctas.operator()<epilogue::ResidualRmsNorm>({}), 10);  // stages an input: read from global
    EXPECT_EQ(companion_ctas.operator()<epilogue::Rope>({}), 10);
  }
  else GTEST_LOG_(INFO) << "device of " << sms << " SMs: companion of " << companion_ctas.operator()<epilogue::Swiglu>({}) << " CTAs";
  EXPECT_EQ(companion_ctas.operator()<epilogue::Swiglu>({.companion = false}), 0);
  EXPECT_EQ(companion_ctas.operator()<epilogue::Swiglu>({.max_ctas = 64}), 0);
  EXPECT_EQ(companion_ctas.operator()<epilogue::Swiglu>({.tile = GemmTile::m128n256}), 0);
  EXPECT_EQ(companion_ctas.operator()<epilogue::LinearCombination>({}), 0);  // does not ask for one

  // A plan given a companion by hand is refused to a program that does not ask for one: its
  // companion's rows would go unwritten.
  epilogue::ProgramPlan plan =
      epilogue::plan_program<epilogue::LinearCombination>({x.view(), Major::k}, {w.view(), Major::k}, {}, "test");
  epilogue::plan_companion(plan, {x.view(), Major::k}, {w.view(), Major::k}, {}, 0.92, "test");
  if (plan.companion_ctas() == 0) GTEST_SKIP() << "no companion on a device of " << sms << " SMs";
  try {
    epilogue::launch_program(plan, epilogue::LinearCombination{}, nullptr);
    ADD_FAILURE() << "a program that does not ask for a companion was launched with one";
  } catch (const coda::Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("argument 'plan': has a companion launch"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace coda::test

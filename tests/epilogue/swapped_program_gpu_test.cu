// Epilogue programs on the swapped tile (epilogue/launch.cuh: SwappedProgramTile): SwiGLU at every
// M from 1 to 64, where the planner takes it, both majors of the weight, against the CPU executor
// on the fp64 product and against the other program tiles; the same bits when run again. From M =
// 65 the unswapped tiles (a few M there too).
#include <gmock/gmock.h>

#include "standard_gpu_case.hpp"
#include "support/refusal.hpp"

namespace coda::test {
namespace {

using namespace standard_gpu;
using ::testing::HasSubstr;

template <Major B>
void expect_swiglu_right_and_repeatable(int64_t m) {
  const Shape s{m, 264 + 16 * (m % 3), 64 + 8 * (m % 5)};  // N and K residues of the 128 x 64 tile
  SCOPED_TRACE(::testing::Message() << "M=" << s.m << " N=" << s.n << " K=" << s.k << ", B " << name(B) << ", "
                                    << seed_note());
  Case c(s, Major::k, B);
  DeviceTensor& out = c.output(DType::bf16, s.m, s.n / 2);
  epilogue::Swiglu on_gpu, on_cpu;
  on_gpu.out = device_out(out);
  on_cpu.out = host_out(c.expected_of(out));
  const epilogue::OperandMajors<Major::k, B> majors;
  c.run_and_compare(on_gpu, on_cpu, epilogue::OutputTypes<>{}, majors);

  const epilogue::ProgramPlan plan =
      epilogue::plan_program<epilogue::Swiglu>({c.x.view(), Major::k}, {c.w.view(), B}, {}, "test");
  EXPECT_EQ(plan.main.swap_ab, m <= epilogue::kSwappedProgramMaxM) << plan.main.summary.tile;
  std::vector<uint8_t> runs[2];
  for (std::vector<uint8_t>& bytes : runs) {
    out.poison();
    epilogue::launch_program(plan, on_gpu, nullptr, epilogue::OutputTypes<>{}, majors);
    CODA_CUDA_CHECK(cudaDeviceSynchronize());
    out.download();
    bytes = out.host.bytes;
  }
  EXPECT_TRUE(runs[0] == runs[1]) << "not the same bits when run again";
}

TEST(SwappedProgramGpu, SwigluEveryMFrom1To64AndSomePast) {
  CODA_REQUIRE_HOPPER();
  for (int64_t m = 1; m <= 64; ++m) {
    expect_swiglu_right_and_repeatable<Major::k>(m);
    expect_swiglu_right_and_repeatable<Major::mn>(m);
  }
  for (const int64_t m : {65, 100, 128}) expect_swiglu_right_and_repeatable<Major::k>(m);
}

// A swapped plan above M = 64 has two token tiles, whose 64-row parts would write partials the
// host does not expect: the launch refuses it, naming the plan.
TEST(SwappedProgramGpu, RefusesASwappedPlanPastOneTokenTile) {
  CODA_REQUIRE_HOPPER();
  Case c({100, 264, 64});
  DeviceTensor& out = c.output(DType::bf16, 100, 132);
  epilogue::Swiglu program;
  program.out = device_out(out);
  EXPECT_THAT(refusal_of<Unsupported>(
                  [&] {
                    epilogue::plan_program<epilogue::Swiglu>({c.x.view(), Major::k}, {c.w.view(), Major::k},
                                                             {.tile = GemmTile::swap_m64n128}, "test");
                  },
                  "swap_m64n128 planned for a program at M = 100"),
              HasSubstr("options.tile"));
  epilogue::ProgramPlan plan{
      mainloop::plan_launch({c.x.view(), Major::k}, {c.w.view(), Major::k}, {.tile = GemmTile::swap_m64n128}, "test"),
      {}};
  EXPECT_THAT(refusal_of<Unsupported>([&] { epilogue::launch_program(plan, program, nullptr); },
                                      "a program launched on a swapped plan at M = 100"),
              HasSubstr("plan"));
}

// A plan whose token box does not tile the kernel's 64 token rows would leave each slot's expected
// bytes unmet and hang the consumers: the launch refuses it, naming the field.
TEST(SwappedProgramGpu, RefusesATokenBoxThatDoesNotTileTheTokenRows) {
  CODA_REQUIRE_HOPPER();
  Case c({37, 264, 64});
  DeviceTensor& out = c.output(DType::bf16, 37, 132);
  epilogue::Swiglu program;
  program.out = device_out(out);
  epilogue::ProgramPlan plan =
      epilogue::plan_program<epilogue::Swiglu>({c.x.view(), Major::k}, {c.w.view(), Major::k}, {}, "test");
  for (int32_t rows : {0, 12, 24, 128}) {  // 24 neither divides 64 nor holds 37 rows
    plan.main.token_box_rows = rows;
    EXPECT_THAT(refusal_of<InvalidArgument>([&] { epilogue::launch_program(plan, program, nullptr); },
                                            "a launch with a token box of " + std::to_string(rows) + " rows"),
                HasSubstr("token_box_rows"));
  }
}

}  // namespace
}  // namespace coda::test

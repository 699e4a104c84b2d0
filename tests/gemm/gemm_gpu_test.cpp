// The mainloop on the GPU against the fp64 reference: every tile configuration, dtype and
// operand major, residue shapes, padded strides, batches, split-K, indices past 2^31 elements,
// and bitwise determinism. Outputs are poisoned (NaN) before each run.
#include <gtest/gtest.h>

#include <tuple>

#include "support/gemm_case.hpp"
#include "support/gpu.hpp"
#include "support/random.hpp"

namespace coda::test {
namespace {

constexpr GemmTile kTiles[] = {GemmTile::m128n256, GemmTile::m256n128, GemmTile::m128n128, GemmTile::m64n256,
                               GemmTile::pingpong_m128n128};
constexpr Major kMajors[] = {Major::k, Major::mn};

void expect_correct(const GemmCase& c) {
  SCOPED_TRACE(c.describe());
  const GemmOutcome r = run_gemm_case(c);
  EXPECT_EQ(r.unwritten, 0) << "output elements never written";
  EXPECT_LT(r.relative_error, gemm_tolerance(c.output));
}

// `c` run `repeats` times (new garbage in the workspace before each), checked against the reference,
// then once more from the same inputs: the same bits. Returns the first outcome.
GemmOutcome expect_correct_and_repeatable(const GemmCase& c, int repeats = 1) {
  SCOPED_TRACE(c.describe());
  const uint64_t state = rng()();
  rng().seed(state);
  const GemmOutcome first = run_gemm_case(c, repeats);
  EXPECT_EQ(first.unwritten, 0) << "output elements never written";
  EXPECT_LT(first.relative_error, gemm_tolerance(c.output));
  rng().seed(state);
  const GemmOutcome second = run_gemm_case(c, 1);
  EXPECT_EQ(first.output_bits, second.output_bits) << "the same inputs gave other bits";
  return first;
}

// Every configuration x input dtype x A major x B major, on shapes with residues in M, N and K.
class GemmEveryKernel : public ::testing::TestWithParam<std::tuple<GemmTile, DType, Major, Major>> {};

TEST_P(GemmEveryKernel, ResidueShapesAgainstReference) {
  CODA_REQUIRE_HOPPER();
  const auto [tile, input, a_major, b_major] = GetParam();
  const DType outputs[] = {DType::bf16, DType::f16, DType::f32};
  const int64_t shapes[][3] = {{1, 1, 1}, {7, 65, 8}, {65, 7, 129}, {129, 129, 65}, {257, 263, 200}, {300, 520, 1000}};
  int which = 0;
  for (const auto& s : shapes) {
    GemmCase c;
    c.m = s[0], c.n = s[1], c.k = s[2];
    c.a_major = a_major, c.b_major = b_major, c.input = input;
    c.output = outputs[which++ % 3];
    c.options.tile = tile;
    c.pad = which % 2 ? 8 : 0;
    expect_correct(c);
  }
}

INSTANTIATE_TEST_SUITE_P(AllKernels, GemmEveryKernel,
                         ::testing::Combine(::testing::ValuesIn(kTiles), ::testing::Values(DType::bf16, DType::f16),
                                            ::testing::ValuesIn(kMajors), ::testing::ValuesIn(kMajors)),
                         [](const auto& info) {
                           return std::string(name(std::get<0>(info.param))) + "_" +
                                  std::string(name(std::get<1>(info.param))) + "_A" +
                                  (std::get<2>(info.param) == Major::k ? "k" : "m") + "_B" +
                                  (std::get<3>(info.param) == Major::k ? "k" : "n");
                         });

// Each dimension through {1, 7, 8, 65, 129, 4095, 8193} with the others at residue sizes.
TEST(Gemm, DimensionSweep) {
  CODA_REQUIRE_HOPPER();
  const int64_t sizes[] = {1, 7, 8, 65, 129, 4095, 8193};
  for (int dim = 0; dim < 3; ++dim)
    for (int64_t size : sizes) {
      GemmCase c;
      int64_t shape[3] = {97, 136, 72};
      shape[dim] = size;
      c.m = shape[0], c.n = shape[1], c.k = shape[2];
      c.a_major = size % 2 ? Major::k : Major::mn;
      c.b_major = dim == 1 ? Major::mn : Major::k;
      c.output = size % 3 == 0 ? DType::f32 : DType::bf16;
      expect_correct(c);
    }
}

TEST(Gemm, LargeSquareEveryTileSampledRows) {
  CODA_REQUIRE_HOPPER();
  for (GemmTile tile : kTiles) {
    GemmCase c;
    c.m = 4095, c.n = 4097 + 7, c.k = 4095;
    c.options.tile = tile;
    c.sampled_rows = 48;
    expect_correct(c);
  }
}

TEST(Gemm, AutomaticPlanOnTransformerAndDecodeShapes) {
  CODA_REQUIRE_HOPPER();
  const int64_t shapes[][3] = {{1, 4096, 4096}, {16, 12288, 4096}, {64, 4096, 14336}, {128, 4096, 4096},
                               {2048, 6144, 2048}, {16384, 2048, 2048}};
  for (const auto& s : shapes) {
    GemmCase c;
    c.m = s[0], c.n = s[1], c.k = s[2];
    c.sampled_rows = 32;
    expect_correct(c);
  }
}

TEST(Gemm, BatchedWithPaddedStrides) {
  CODA_REQUIRE_HOPPER();
  for (GemmTile tile : {GemmTile::m128n256, GemmTile::m128n128, GemmTile::pingpong_m128n128}) {
    GemmCase c;
    c.m = 200, c.n = 300, c.k = 136, c.batch = 3, c.pad = 24;
    c.a_major = Major::mn;
    c.options.tile = tile;
    expect_correct(c);
  }
}

TEST(Gemm, SplitKMatchesReferenceAndIsDeterministic) {
  CODA_REQUIRE_HOPPER();
  for (GemmTile tile : {GemmTile::m128n128, GemmTile::m64n256, GemmTile::pingpong_m128n128}) {
    for (int splits : {2, 5, 16}) {
      GemmCase c;
      c.m = tile == GemmTile::m64n256 ? 33 : 250, c.n = 520, c.k = 4100;
      c.b_major = splits == 5 ? Major::mn : Major::k;
      c.output = DType::f32;
      c.options.tile = tile;
      c.options.split_k = splits;
      SCOPED_TRACE(c.describe());
      const GemmOutcome first = run_gemm_case(c, 3);
      EXPECT_EQ(first.plan.split_k, splits);
      EXPECT_EQ(first.unwritten, 0);
      EXPECT_LT(first.relative_error, gemm_tolerance(c.output));
    }
  }
}

// A stream-K tail: a cap on the CTAs leaves a partial last wave, whose K iterations are dealt
// out over every cluster. Repeated runs reuse the workspace (new garbage each time) and must give
// the same bits.
TEST(Gemm, StreamKTailMatchesReferenceAndIsDeterministic) {
  CODA_REQUIRE_HOPPER();
  struct Shape { GemmTile tile; int max_ctas; int64_t m, n, k; Major a, b; };
  const Shape shapes[] = {{GemmTile::m128n256, 8, 1280 - 3, 512, 1000, Major::k, Major::k},     // 10 cluster tiles, 4 clusters
                          {GemmTile::m256n128, 6, 1024, 1024 + 5, 777, Major::mn, Major::k},   // 20 cluster tiles, 3 clusters
                          {GemmTile::m128n128, 7, 500, 600, 3000, Major::k, Major::mn},        // 20 tiles, 7 CTAs
                          {GemmTile::m64n256, 5, 64, 2000, 4100, Major::mn, Major::mn},        // 8 tiles, 5 CTAs
                          {GemmTile::pingpong_m128n128, 8, 700, 1100, 900, Major::k, Major::k}}; // 27 cluster tiles, 4 clusters
  for (const Shape& shape : shapes) {
    GemmCase c;
    c.m = shape.m, c.n = shape.n, c.k = shape.k, c.a_major = shape.a, c.b_major = shape.b;
    c.output = DType::f32;
    c.options.tile = shape.tile;
    c.options.max_ctas = shape.max_ctas;
    c.options.stream_k = true;
    EXPECT_GT(expect_correct_and_repeatable(c, 3).plan.stream_k_tiles, 0) << c.describe();
  }
}

TEST(Gemm, SplitKWithFewValidRows) {
  CODA_REQUIRE_HOPPER();
  for (int64_t m : {1, 2, 3, 17}) {
    GemmCase c;
    c.m = m, c.n = 777, c.k = 2500;
    c.options.tile = GemmTile::m64n256;
    c.options.split_k = 6;
    expect_correct(c);
  }
}

TEST(Gemm, HeuristicSplitsDecodeShapes) {
  CODA_REQUIRE_HOPPER();
  GemmCase c;
  c.m = 16, c.n = 4096, c.k = 4096;
  const GemmOutcome r = run_gemm_case(c);
  EXPECT_GT(r.plan.split_k, 1) << "few output tiles and a long K should split";
  EXPECT_EQ(r.unwritten, 0);
  EXPECT_LT(r.relative_error, gemm_tolerance(c.output));
}

// What a user met: the workspace gemm_workspace_bytes asks for, in memory nobody cleared (as
// torch.empty hands it out): split-K must be right and give the same bits whatever it held.
// (run_gemm_case fills the workspace with new garbage before every run.)
TEST(Gemm, SplitKOverAGarbageWorkspace) {
  CODA_REQUIRE_HOPPER();
  GemmCase c;
  c.m = 16, c.n = 4096, c.k = 8192;
  EXPECT_GT(expect_correct_and_repeatable(c, 3).plan.split_k, 1);
}

// A workspace smaller than the plan needs is no error (gemm.hpp): whole tiles, the same values.
TEST(Gemm, WorkspaceTooSmallComputesWholeTiles) {
  CODA_REQUIRE_HOPPER();
  DeviceBuffer workspace(4096);
  GemmCase c;
  c.m = 16, c.n = 4096, c.k = 8192;
  c.options.workspace = workspace.get();
  c.options.workspace_bytes = workspace.bytes();
  const GemmOutcome r = run_gemm_case(c);
  EXPECT_EQ(r.plan.split_k, 1);
  EXPECT_EQ(r.plan.workspace_bytes, 0u);
  EXPECT_EQ(r.unwritten, 0);
  EXPECT_LT(r.relative_error, gemm_tolerance(c.output));
}

TEST(Gemm, BitwiseIdenticalAcrossRuns) {
  CODA_REQUIRE_HOPPER();
  for (int splits : {0, 4}) {
    GemmCase c;
    c.m = 64, c.n = 1000, c.k = 3000;
    c.options.tile = GemmTile::m64n256;
    c.options.split_k = splits;
    c.output = DType::f32;
    expect_correct_and_repeatable(c);
  }
}

TEST(Gemm, IndicesPastTwoToTheThirtyOne) {
  CODA_REQUIRE_HOPPER();
  if (current_device().memory_bytes < (std::size_t(12) << 30)) GTEST_SKIP() << "needs 12 GiB of device memory";
  GemmCase c;
  c.m = 65537, c.n = 32768 + 8, c.k = 40;  // C has 2^31 + 524296 elements
  c.sampled_rows = 24;
  expect_correct(c);
}

}  // namespace
}  // namespace coda::test

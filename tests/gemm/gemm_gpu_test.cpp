// The mainloop on the GPU against the fp64 reference: every tile configuration, dtype and
// operand major, residue shapes, padded strides, batches, split-K, indices past 2^31 elements,
// and bitwise determinism. Outputs are poisoned (NaN) before each run.
#include <gmock/gmock.h>

#include <algorithm>
#include <tuple>

#include "support/gemm_case.hpp"
#include "support/gpu.hpp"
#include "support/random.hpp"
#include "support/refusal.hpp"

namespace coda::test {
namespace {

constexpr GemmTile kTiles[] = {GemmTile::m128n256,    GemmTile::m256n128,          GemmTile::m128n128,
                               GemmTile::m64n256,     GemmTile::pingpong_m128n128, GemmTile::swap_m64n128,
                               GemmTile::swap_m64n64, GemmTile::swap_m128n64};
constexpr GemmTile kSwappedTiles[] = {GemmTile::swap_m64n128, GemmTile::swap_m64n64, GemmTile::swap_m128n64};
bool swapped(GemmTile t) {
  return std::find(std::begin(kSwappedTiles), std::end(kSwappedTiles), t) != std::end(kSwappedTiles);
}
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
  const int64_t shapes[][3] = {{1, 4096, 4096},   {16, 12288, 4096},  {64, 4096, 14336},
                               {128, 4096, 4096}, {2048, 6144, 2048}, {16384, 2048, 2048}};
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
  struct Shape {
    GemmTile tile;
    int max_ctas;
    int64_t m, n, k;
    Major a, b;
  };
  const Shape shapes[] = {
      {GemmTile::m128n256, 8, 1280 - 3, 512, 1000, Major::k, Major::k},       // 10 cluster tiles, 4 clusters
      {GemmTile::m256n128, 6, 1024, 1024 + 5, 777, Major::mn, Major::k},      // 20 cluster tiles, 3 clusters
      {GemmTile::m128n128, 7, 500, 600, 3000, Major::k, Major::mn},           // 20 tiles, 7 CTAs
      {GemmTile::m64n256, 5, 64, 2000, 4100, Major::mn, Major::mn},           // 8 tiles, 5 CTAs
      {GemmTile::pingpong_m128n128, 8, 700, 1100, 900, Major::k, Major::k}};  // 27 cluster tiles, 4 clusters
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

// Decode shapes run swapped; K is split only where few weight tiles would leave the memory idle
// (across a cluster's CTAs where their partials fit, else through the workspace).
TEST(Gemm, HeuristicSwapsDecodeShapes) {
  CODA_REQUIRE_HOPPER();
  enum class Split { none, cluster, workspace };
  struct Shape {
    int64_t m, n, k;
    Split split;
  };
  const Shape shapes[] = {
      {1, 4096, 4096, Split::none},     // 64 tiles of swap_m64n64 (in clusters of 2: slower on an H100)
      {16, 12288, 4096, Split::none},   // 96 tiles of swap_m64n128
      {64, 4096, 4096, Split::none},    // 64 tokens: no slots for a cluster's partials
      {128, 4096, 4096, Split::none},   // two token tiles
      {100, 4096, 14336, Split::none},  // the second one part-filled
      {8, 256, 7168, Split::cluster},   // a router's logits: 4 weight tiles in clusters of 4
      {3, 1024, 8192, Split::cluster},  // 16 weight tiles
      {40, 256, 7168, Split::workspace},
  };
  for (const Shape& shape : shapes) {
    GemmCase c;
    c.m = shape.m, c.n = shape.n, c.k = shape.k;
    const GemmOutcome r = run_gemm_case(c);
    SCOPED_TRACE(c.describe());
    EXPECT_TRUE(swapped(r.plan.tile)) << r.plan.tile;
    const Split split = r.plan.split_k == 1         ? Split::none
                        : r.plan.split_k_in_cluster ? Split::cluster
                                                    : Split::workspace;
    EXPECT_EQ(int(split), int(shape.split))
        << "split " << r.plan.split_k << (r.plan.split_k_in_cluster ? " in a cluster" : "");
    EXPECT_EQ(r.unwritten, 0);
    EXPECT_LT(r.relative_error, gemm_tolerance(c.output));
  }
  GemmCase c;
  c.m = 129, c.n = 4096, c.k = 4096;
  EXPECT_FALSE(swapped(run_gemm_case(c).plan.tile)) << "the swapped tiles serve M <= 128";

  // 65-128 tokens: one tile of 128 (each weight tile read once) where the weight has the tiles to
  // fill the GPU, two of 64 where it has few (planned only: no memory is touched).
  auto tile_for = [](int64_t m, int64_t n, int64_t k) {
    void* any = reinterpret_cast<void*>(uintptr_t(4096));
    const TensorView a = TensorView::matrix(any, DType::bf16, m, k), w = TensorView::matrix(any, DType::bf16, n, k);
    return plan_gemm({a, Major::k}, {w, Major::k}, TensorView::matrix(any, DType::bf16, m, n)).tile;
  };
  EXPECT_EQ(tile_for(128, 28672, 4096), GemmTile::swap_m128n64);
  EXPECT_EQ(tile_for(100, 57344, 8192), GemmTile::swap_m128n64);
  EXPECT_EQ(tile_for(128, 4096, 4096), GemmTile::swap_m64n64);
  EXPECT_NE(tile_for(64, 28672, 4096), GemmTile::swap_m128n64);
}

// The swapped tile at every M from 1 to 128 (the tokens on wgmma's N side, clipped in the store and
// the split-K fixup; past 64, several token tiles), both majors of each operand, both input types,
// the three output types, split or whole, over a workspace of garbage: right, and the same bits
// when run again.
TEST(Gemm, SwappedEveryMFrom1To128) {
  CODA_REQUIRE_HOPPER();
  for (GemmTile tile : kSwappedTiles)
    for (int64_t m = 1; m <= 128; ++m) {
      GemmCase c;
      c.m = m, c.n = 136 + 8 * (m % 5), c.k = 520 + 64 * (m % 3);
      c.a_major = m % 8 == 0 && m % 16 != 0 ? Major::mn : Major::k;  // M-major A at M = 8, 24, ... 120
      c.b_major = m % 2 ? Major::k : Major::mn;
      c.output = m % 3 == 0 ? DType::f32 : m % 3 == 1 ? DType::bf16 : DType::f16;
      c.input = m % 4 == 3 ? DType::f16 : DType::bf16;
      c.options.tile = tile;
      c.options.split_k = m % 5 == 0 ? 3 : 1;
      const GemmOutcome r = expect_correct_and_repeatable(c, 2);
      EXPECT_EQ(r.plan.split_k, c.options.split_k) << c.describe();
    }
}

// Few weight tiles and a long K: 32 K segments per tile, added in segment order.
TEST(Gemm, SwappedManySegmentsPerTile) {
  CODA_REQUIRE_HOPPER();
  for (GemmTile tile : kSwappedTiles) {
    GemmCase c;
    c.m = 5, c.n = 130, c.k = 8192 + 40;
    c.output = DType::f32;
    c.options.tile = tile;
    c.options.split_k = 32;
    EXPECT_EQ(expect_correct_and_repeatable(c, 3).plan.split_k, 32);
  }
}

// A swapped tile with split-K asked for, with batches, and without a workspace (whole tiles).
TEST(Gemm, SwappedSplitBatchedAndWithoutWorkspace) {
  CODA_REQUIRE_HOPPER();
  GemmCase split;
  split.m = 40, split.n = 1000, split.k = 3000;
  split.options.tile = GemmTile::swap_m64n128;
  split.options.split_k = 3;
  split.a_major = Major::mn;
  EXPECT_EQ(expect_correct_and_repeatable(split, 2).plan.split_k, 3);

  GemmCase batched;
  batched.m = 50, batched.n = 300, batched.k = 200, batched.batch = 3, batched.pad = 8;
  batched.options.tile = GemmTile::swap_m64n128;
  batched.b_major = Major::mn;
  expect_correct(batched);

  DeviceBuffer none(16);
  GemmCase whole;
  whole.m = 9, whole.n = 1024, whole.k = 8192;  // 8 weight tiles: would split with a workspace
  whole.options.workspace = none.get();
  whole.options.workspace_bytes = 16;
  whole.options.split_k_in_cluster = false;
  const GemmOutcome r = run_gemm_case(whole);
  EXPECT_TRUE(swapped(r.plan.tile)) << r.plan.tile;
  EXPECT_EQ(r.plan.split_k, 1);
  EXPECT_EQ(r.unwritten, 0);
  EXPECT_LT(r.relative_error, gemm_tolerance(whole.output));

  // In a cluster, K splits without a workspace.
  whole.options.split_k_in_cluster = true;
  const GemmOutcome clustered = expect_correct_and_repeatable(whole, 2);
  EXPECT_GT(clustered.plan.split_k, 1);
  EXPECT_TRUE(clustered.plan.split_k_in_cluster);
  EXPECT_EQ(clustered.plan.workspace_bytes, 0u);
}

// K split across the CTAs of a cluster (segments.cuh): every swapped tile, every M whose partials
// fit CTA 0's slots (1-24 tokens), 2 to 4 splits, both majors, the three output types; right, the
// same bits when run again, and the same bits as the same split through the workspace (both add
// the segments in order).
TEST(Gemm, SwappedSplitInClusterEveryMAndSplit) {
  CODA_REQUIRE_HOPPER();
  int which = 0;
  for (GemmTile tile : kSwappedTiles)
    for (int splits = 2; splits <= 4; ++splits)
      for (int64_t m = 1; m <= 24; ++m) {
        if ((splits - 1) * ((m + 7) / 8) > 3) continue;  // gemm.hpp: the slots CTA 0 has
        ++which;
        GemmCase c;
        c.m = m, c.n = 136 + 72 * (which % 4), c.k = 600 + 64 * (which % 5) + 8 * (which % 3);
        c.a_major = which % 3 == 0 ? Major::mn : Major::k;
        c.b_major = which % 2 ? Major::k : Major::mn;
        c.output = which % 3 == 0 ? DType::f32 : which % 3 == 1 ? DType::bf16 : DType::f16;
        c.input = which % 4 == 3 ? DType::f16 : DType::bf16;
        c.options.tile = tile;
        c.options.split_k = splits;
        const uint64_t inputs = rng()();  // both runs below draw the same operands
        rng().seed(inputs);
        const GemmOutcome in_cluster = expect_correct_and_repeatable(c, 2);
        EXPECT_EQ(in_cluster.plan.split_k, splits);
        EXPECT_TRUE(in_cluster.plan.split_k_in_cluster) << c.describe();
        EXPECT_EQ(in_cluster.plan.workspace_bytes, 0u);
        c.options.split_k_in_cluster = false;
        rng().seed(inputs);
        rng().seed(rng()());  // as expect_correct_and_repeatable seeds its first run
        const GemmOutcome through_workspace = run_gemm_case(c);
        EXPECT_FALSE(through_workspace.plan.split_k_in_cluster);
        EXPECT_EQ(in_cluster.output_bits, through_workspace.output_bits) << c.describe();
      }
}

// Many tiles a cluster (a cap on the CTAs): the slots and their barriers go round many phases, in
// both consumers of the ping-pong tiles; batches too.
TEST(Gemm, SwappedSplitInClusterManyTilesPerCluster) {
  CODA_REQUIRE_HOPPER();
  for (GemmTile tile : kSwappedTiles)
    for (const int max_ctas : {4, 32, 0}) {
      GemmCase c;
      c.m = 7, c.n = 64 * 37 + 24, c.k = 2048 + 40, c.batch = max_ctas == 32 ? 2 : 1;
      c.output = DType::f32;
      c.options.tile = tile;
      c.options.split_k = 4;
      c.options.max_ctas = max_ctas;
      const GemmOutcome r = expect_correct_and_repeatable(c, 2);
      EXPECT_TRUE(r.plan.split_k_in_cluster) << c.describe();
      if (max_ctas > 0) {
        EXPECT_LE(r.plan.ctas, max_ctas);
      }
    }
}

// A split that does not fit a cluster's slots (or is not asked to) goes through the workspace;
// without one, asked for, it is an error naming the workspace.
TEST(Gemm, SwappedSplitPastTheClusterSlots) {
  CODA_REQUIRE_HOPPER();
  GemmCase c;
  c.m = 20, c.n = 304, c.k = 1000;  // 3 slots a CTA: one more CTA fits, not two
  c.options.tile = GemmTile::swap_m64n64;
  c.options.split_k = 3;
  const GemmOutcome r = expect_correct_and_repeatable(c);
  EXPECT_FALSE(r.plan.split_k_in_cluster);
  EXPECT_GT(r.plan.workspace_bytes, 0u);
  void* any = reinterpret_cast<void*>(uintptr_t(4096));
  const TensorView a = TensorView::matrix(any, DType::bf16, c.m, c.k),
                   w = TensorView::matrix(any, DType::bf16, c.n, c.k);
  EXPECT_THAT(refusal_of<InvalidArgument>(
                  [&] {
                    plan_gemm({a, Major::k}, {w, Major::k}, TensorView::matrix(any, DType::bf16, c.m, c.n), c.options);
                  },
                  "a split past the slots without a workspace"),
              ::testing::HasSubstr("argument 'options.workspace'"));
}

// What a user met: the workspace gemm_workspace_bytes asks for, in memory nobody cleared (as
// torch.empty hands it out): split-K must be right and give the same bits whatever it held.
// (run_gemm_case fills the workspace with new garbage before every run.)
TEST(Gemm, SplitKOverAGarbageWorkspace) {
  CODA_REQUIRE_HOPPER();
  GemmCase c;
  c.m = 16, c.n = 4096, c.k = 8192;
  c.options.tile = GemmTile::m64n256;
  EXPECT_GT(expect_correct_and_repeatable(c, 3).plan.split_k, 1);
  c.options.tile = GemmTile::automatic;  // swapped, 8 weight tiles: split
  c.n = 1024;
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
  c.options.split_k_in_cluster = false;  // a split that needs no workspace
  const GemmOutcome r = run_gemm_case(c);
  EXPECT_EQ(r.plan.split_k, 1);
  EXPECT_EQ(r.plan.stream_k_tiles, 0);
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

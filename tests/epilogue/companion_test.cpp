// The companion launch's share of the tile rows (epilogue/companion.hpp): pure arithmetic, so it runs
// in CI. The GPU side (both launches' outputs equal to one launch's, bit for bit) is in
// epilogue/standard_gpu_case.hpp.
#include "coda/epilogue/companion.hpp"

#include <gtest/gtest.h>

#include <algorithm>

namespace coda::epilogue {
namespace {

// An H100's split: the ping-pong tile's 4-CTA clusters get 120 SMs, 12 are left over. SwiGLU's
// companion speed (programs/swiglu.hpp).
constexpr int kPrimary = 120, kLeftOver = 12;
constexpr double kSpeed = 0.92;

double finish_time(int64_t tile_rows, int64_t companion_rows, double speed) {
  return std::max(double(tile_rows - companion_rows) / kPrimary, double(companion_rows) / (kLeftOver * speed));
}

TEST(CompanionRows, TheTransformerShapeOfTheMeasurement) {
  // T = 16384 tokens: 128 tile rows; 10 to the companion (13.1 us a row on 120 SMs against 142 on 12).
  EXPECT_EQ(companion_tile_rows(128, 64, kPrimary, kLeftOver, kSpeed), 10);
}

TEST(CompanionRows, NoBetterSplitExists) {
  for (const double speed : {0.5, 0.7, kSpeed, 1.0})
    for (int64_t rows = 1; rows <= 1200; ++rows) {
      const int64_t cols = 64;
      const int64_t chosen = companion_tile_rows(rows, cols, kPrimary, kLeftOver, speed);
      SCOPED_TRACE(::testing::Message() << rows << " tile rows, speed " << speed << ", companion " << chosen);
      ASSERT_GE(chosen, 0);
      ASSERT_LT(chosen, rows);
      if (chosen == 0) {
        // No split is faster, or the fastest leaves the primary's 30 clusters fewer than two waves.
        int64_t fastest = 0;
        for (int64_t other = rows % 2; other < rows; other += 2)
          if (finish_time(rows, other, speed) < finish_time(rows, fastest, speed)) fastest = other;
        if (fastest > 0) {
          EXPECT_LT((rows - fastest) / 2 * ((cols + 1) / 2), 2 * (kPrimary / 4)) << "companion " << fastest;
        }
        continue;
      }
      EXPECT_EQ((rows - chosen) % 2, 0) << "the primary's 2 x 2 clusters would overhang into the companion's rows";
      for (int64_t other = rows % 2; other < rows; other += 2)
        EXPECT_LE(finish_time(rows, chosen, speed), finish_time(rows, other, speed) + 1e-12)
            << "companion " << other << " rows is faster";
      EXPECT_LT(finish_time(rows, chosen, speed), finish_time(rows, 0, speed));
    }
}

TEST(CompanionRows, ASlowerProgramGetsNoMoreRows) {
  int64_t previous = 0;
  for (const double speed : {0.3, 0.5, 0.7, 0.92, 1.0}) {
    const int64_t rows = companion_tile_rows(128, 64, kPrimary, kLeftOver, speed);
    EXPECT_GE(rows, previous) << "speed " << speed;
    previous = rows;
  }
  EXPECT_LT(companion_tile_rows(128, 64, kPrimary, kLeftOver, 0.3),
            companion_tile_rows(128, 64, kPrimary, kLeftOver, kSpeed));
  EXPECT_EQ(companion_tile_rows(128, 64, kPrimary, kLeftOver, 0.5), 6);  // 122 / 120 against 6 / 6
  EXPECT_EQ(companion_tile_rows(128, 64, kPrimary, kLeftOver, 0.0), 0);  // a program that does not ask
}

TEST(CompanionRows, NoneWithoutSmsLeftOverOrWork) {
  EXPECT_EQ(companion_tile_rows(128, 64, 132, 0, kSpeed), 0);  // every SM in the primary's clusters
  EXPECT_EQ(companion_tile_rows(128, 64, 120, 1, kSpeed), 0);  // no whole 2-CTA cluster
  EXPECT_EQ(companion_tile_rows(8, 64, 120, 12, kSpeed), 0);   // too few rows to share
  // The primary must keep its grid busy for two waves: 2 x 30 cluster tiles of 2 x 2 tiles.
  EXPECT_EQ(companion_tile_rows(128, 2, 120, 12, kSpeed), 0);  // 118 rows x 2 columns: 59 cluster tiles
  EXPECT_GT(companion_tile_rows(128, 3, 120, 12, kSpeed), 0);  // 59 x 2
}

}  // namespace
}  // namespace coda::epilogue

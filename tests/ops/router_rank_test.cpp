// The rule of the router's ranked epilogue rows (src/ops/router_rank.hpp: each lane of a row's pair
// ranks half of it by three ranges of comparisons) on the CPU, against a direct count: every row of
// 8 codes over four of them (65,536 rows: ties everywhere, NaN's code 0, -inf's, +0's and +inf's, the
// largest code), and random rows of 16. The ranks must match and be a permutation (one writer a
// slot). Then the merge of wide rows' tile candidates (merged_rank) against a whole row's
// selection. The selection around them is checked on the GPU (router_gpu_test.cpp).
#include "ops/router_rank.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace coda::ops::router_detail {
namespace {

// Codes as ordered_code gives them (router_select_common.cuh), NaN as the ranked rows map it.
constexpr std::array<uint32_t, 4> kCodes = {0u, 0x007fffffu /* -inf */, 0x80000000u /* +0 */, 0xff800000u /* +inf */};

template <int kWidth>
int direct_rank(const uint32_t (&code)[kWidth], int i) {
  int rank = 0;
  for (int j = 0; j < kWidth; ++j) rank += code[j] > code[i] || (code[j] == code[i] && j < i) ? 1 : 0;
  return rank;
}

template <int kWidth>
void expect_ranks(const uint32_t (&code)[kWidth]) {
  int writers[kWidth] = {};
  for (int h = 0; h < 2; ++h) {
    const RowRanks<kWidth> ranks(code, h);
    for (int u = 0; u < kWidth / 2; ++u) {
      const int i = h * (kWidth / 2) + u, got = ranks.rank(u);
      ASSERT_EQ(got, direct_rank(code, i)) << "expert " << i << " (lane " << h << ", u " << u << ")";
      ASSERT_TRUE(got >= 0 && got < kWidth);
      ++writers[got];
    }
  }
  for (int r = 0; r < kWidth; ++r) ASSERT_EQ(writers[r], 1) << "rank " << r;
}

TEST(RouterRank, EveryRowOfEightOverFourCodes) {
  uint32_t code[8];
  for (uint32_t row = 0; row < (1u << 16); ++row) {
    for (int j = 0; j < 8; ++j) code[j] = kCodes[row >> (2 * j) & 3u];
    SCOPED_TRACE(::testing::Message() << "row " << row);
    expect_ranks(code);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(RouterRank, RandomRowsOfSixteen) {
  std::mt19937 rng(16);
  uint32_t code[16];
  for (int row = 0; row < 20000; ++row) {
    // half the rows over the four codes (ties), half over any code up to +inf's
    for (uint32_t& c : code) c = row % 2 ? kCodes[rng() % 4] : uint32_t(rng() % (0xff800000ull + 1));
    SCOPED_TRACE(::testing::Message() << "row " << row);
    expect_ranks(code);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// Wide rows (E = 257 to 512, two tiles of 256): each tile's k best, sorted, merged by merged_rank
// must give the whole row's k best in order (larger first, ties to the lower id, NaN never), every
// place written once. Rows over a few values (ties within and across tiles, +0 and -0), rows of
// random floats, NaN scattered, whole NaN tiles and rows.
TEST(RouterRank, WideRowsMergeTheirTilesBest) {
  constexpr int kTiles = 2, kK = 8, kTileWidth = 256;
  std::mt19937 rng(512);
  const float kFew[] = {-1.0f, -0.0f, 0.0f, 1.0f, 2.0f};
  for (int row = 0; row < 20000; ++row) {
    const int experts = 257 + int(rng() % 256), k = 1 + int(rng() % kK);
    const int kind = row % 4;  // 0: few values, 1: random, 2: random with a NaN tile, 3: NaN row
    std::vector<float> score(static_cast<std::size_t>(experts));
    for (int e = 0; e < experts; ++e) {
      const bool nan = kind == 3 || (kind == 2 && e < kTileWidth) || rng() % 16 == 0;
      score[std::size_t(e)] = nan         ? NAN
                              : kind == 0 ? kFew[rng() % 5]
                                          : std::uniform_real_distribution<float>(-4.0f, 4.0f)(rng);
    }
    const auto before = [&](int a, int b) {  // a ranks before b (both not NaN)
      return score[std::size_t(a)] > score[std::size_t(b)] || (score[std::size_t(a)] == score[std::size_t(b)] && a < b);
    };
    const auto best = [&](int first, int end) {  // the filled experts of [first, end), best first
      std::vector<int> ids;
      for (int e = first; e < end; ++e)
        if (!std::isnan(score[std::size_t(e)])) ids.push_back(e);
      std::sort(ids.begin(), ids.end(), before);
      return ids;
    };
    float tile_score[kTiles][kK];
    int32_t tile_id[kTiles][kK];
    for (int t = 0; t < kTiles; ++t) {
      const std::vector<int> ids = best(t * kTileWidth, std::min(experts, (t + 1) * kTileWidth));
      for (int i = 0; i < kK; ++i) {
        const bool filled = i < k && i < int(ids.size());
        tile_id[t][i] = filled ? ids[std::size_t(i)] : -1;
        tile_score[t][i] = filled ? score[std::size_t(ids[std::size_t(i)])] : 0.0f;
      }
    }
    std::vector<int> slot(std::size_t(k), -1);
    for (int t = 0; t < kTiles; ++t)
      for (int i = 0; i < kK; ++i) {
        if (tile_id[t][i] < 0) continue;
        const int place = merged_rank(tile_score, tile_id, t, i, tile_score[t][i], tile_id[t][i]);
        if (place >= k) continue;
        ASSERT_EQ(slot[std::size_t(place)], -1) << "row " << row << ": place " << place << " written twice";
        slot[std::size_t(place)] = tile_id[t][i];
      }
    const std::vector<int> want = best(0, experts);
    for (int j = 0; j < k; ++j)
      ASSERT_EQ(slot[std::size_t(j)], j < int(want.size()) ? want[std::size_t(j)] : -1)
          << "row " << row << " (E " << experts << ", k " << k << ", kind " << kind << "): slot " << j;
  }
}

}  // namespace
}  // namespace coda::ops::router_detail

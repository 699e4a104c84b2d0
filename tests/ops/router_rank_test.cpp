// The rule of the router's ranked epilogue rows (src/ops/router_rank.hpp: each lane of a row's pair
// ranks half of it by three ranges of comparisons) on the CPU, against a direct count: every row of
// 8 codes over four of them (65,536 rows: ties everywhere, NaN's code 0, -inf's, +0's and +inf's, the
// largest code), and random rows of 16. The ranks must match and be a permutation (one writer a
// slot). The selection around it is checked on the GPU (router_gpu_test.cpp).
#include "ops/router_rank.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <random>

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

}  // namespace
}  // namespace coda::ops::router_detail

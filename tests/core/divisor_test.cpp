#include "coda/core/divisor.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace coda {
namespace {

// Every divisor up to 4096 (head dimensions, tile widths, vocabulary chunks) and a spread of larger
// ones, against the dividends where a multiply-and-shift division goes wrong first: around every
// multiple of the divisor, near 2^31, and random ones.
TEST(Divisor, MatchesIntegerDivision) {
  std::vector<int32_t> divisors;
  for (int32_t d = 1; d <= 4096; ++d) divisors.push_back(d);
  for (int32_t d : {65535, 65536, 65537, 1000003, 16777215, 16777217, 1 << 30, (1 << 30) + 1, INT32_MAX - 1, INT32_MAX})
    divisors.push_back(d);
  std::mt19937 rng(2026);
  int64_t checked = 0;
  for (const int32_t d : divisors) {
    const Divisor divisor(d);
    std::vector<int32_t> dividends = {0, 1, d - 1, d, INT32_MAX, INT32_MAX - 1, INT32_MAX - d};
    for (int64_t q : {int64_t(1), int64_t(2), int64_t(INT32_MAX) / d, int64_t(INT32_MAX) / d - 1})
      for (int64_t delta : {-1, 0, 1}) {
        const int64_t n = q * d + delta;
        if (n >= 0 && n <= INT32_MAX) dividends.push_back(int32_t(n));
      }
    for (int i = 0; i < 64; ++i) dividends.push_back(int32_t(rng() & 0x7fffffffu));
    for (const int32_t n : dividends) {
      if (n < 0) continue;
      ASSERT_EQ(divisor.divide(n), n / d) << n << " / " << d;
      ASSERT_EQ(divisor.remainder(n), n % d) << n << " % " << d;
      ++checked;
    }
  }
  EXPECT_GT(checked, 4096 * 70);
}

TEST(Divisor, KeepsItsValue) {
  EXPECT_EQ(Divisor(128).value(), 128);
  EXPECT_EQ(Divisor().value(), 1);
  EXPECT_EQ(Divisor().divide(77), 77);
}

}  // namespace
}  // namespace coda

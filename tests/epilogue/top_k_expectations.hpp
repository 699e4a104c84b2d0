// What a running top-k (TopK, monoids.hpp) must give, for the CPU and GPU tests: the candidates
// sorted as TopK orders them, and a written partial slot compared with that bit for bit.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace coda::test {

struct TopKEntry {
  float value;
  int32_t index;
};

/// Every non-NaN candidate sorted (value descending, index ascending), the first k, padded with
/// (-inf, -1).
inline std::vector<TopKEntry> expected_top(std::vector<TopKEntry> candidates, int k) {
  std::erase_if(candidates, [](const TopKEntry& e) { return std::isnan(e.value); });
  std::sort(candidates.begin(), candidates.end(), [](const TopKEntry& a, const TopKEntry& b) {
    return a.value > b.value || (a.value == b.value && a.index < b.index);
  });
  candidates.resize(std::size_t(k), TopKEntry{-INFINITY, -1});
  return candidates;
}

/// A slot's k values, then its k indices as int32 bits, equal `want` bit for bit.
inline ::testing::AssertionResult slot_is(const float* slot, const std::vector<TopKEntry>& want) {
  const int k = int(want.size());
  for (int j = 0; j < k; ++j) {
    int32_t index;
    std::memcpy(&index, &slot[k + j], sizeof(index));
    if (std::memcmp(&slot[j], &want[std::size_t(j)].value, sizeof(float)) != 0 || index != want[std::size_t(j)].index)
      return ::testing::AssertionFailure() << "entry " << j << ": (" << slot[j] << ", " << index << "), want ("
                                           << want[std::size_t(j)].value << ", " << want[std::size_t(j)].index << ")";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace coda::test

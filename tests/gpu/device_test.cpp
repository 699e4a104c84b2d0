#include <gtest/gtest.h>

#include "coda/core/device.hpp"
#include "support/gpu.hpp"

namespace coda {
namespace {

TEST(Device, HopperPropertiesAreReadable) {
  CODA_REQUIRE_HOPPER();
  const DeviceInfo& d = current_device();
  EXPECT_EQ(d.major, 9);
  EXPECT_GT(d.sm_count, 100);
  EXPECT_GE(d.shared_memory_per_block_optin, std::size_t(227 * 1024));
}

}  // namespace
}  // namespace coda

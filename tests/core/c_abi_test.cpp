#include <gtest/gtest.h>

#include <string>

#include "coda/coda.h"

extern "C" int coda_c_header_is_c(void);

namespace {

TEST(CAbi, VersionAndStatusNames) {
  EXPECT_STREQ(coda_version(), "0.1.0");
  EXPECT_STREQ(coda_status_name(CODA_INVALID_ARGUMENT), "invalid argument");
  EXPECT_STREQ(coda_status_name(static_cast<coda_status>(99)), "unknown status");
  EXPECT_GE(coda_device_count(), 0);
  EXPECT_GE(coda_c_header_is_c(), 0);
}

}  // namespace

#include <gtest/gtest.h>

#include "coda/core/status.hpp"

namespace coda {
namespace {

TEST(Status, TypedErrorsRoundTrip) {
  EXPECT_NO_THROW(Status::success().throw_if_error());
  EXPECT_THROW(Status(StatusCode::invalid_argument, "x").throw_if_error(), InvalidArgument);
  EXPECT_THROW(Status(StatusCode::unsupported, "x").throw_if_error(), Unsupported);
  EXPECT_THROW(Status(StatusCode::cuda_error, "x").throw_if_error(), CudaError);
  EXPECT_THROW(Status(StatusCode::internal, "x").throw_if_error(), InternalError);
  try {
    Status(StatusCode::unsupported, "coda::gemm: argument 'a': too big").throw_if_error();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), StatusCode::unsupported);
    EXPECT_STREQ(e.what(), "coda::gemm: argument 'a': too big");
  }
}

TEST(Status, StatusOfCatchesTypedErrors) {
  Status s = status_of([] { throw Unsupported("no"); });
  EXPECT_EQ(s.code(), StatusCode::unsupported);
  EXPECT_EQ(s.message(), "no");
  EXPECT_TRUE(status_of([] {}).ok());
  EXPECT_EQ(name(StatusCode::cuda_error), "CUDA error");
}

}  // namespace
}  // namespace coda

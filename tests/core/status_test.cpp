#include "coda/core/status.hpp"

#include <gtest/gtest.h>

#include <new>
#include <sstream>

#include "coda/core/validate.hpp"

namespace coda {
namespace {

TEST(Status, TypedErrorsRoundTrip) {
  EXPECT_NO_THROW(Status::success().throw_if_error());
  EXPECT_THROW(Status(StatusCode::invalid_argument, "f", "x").throw_if_error(), InvalidArgument);
  EXPECT_THROW(Status(StatusCode::unsupported, "f", "x").throw_if_error(), Unsupported);
  EXPECT_THROW(Status(StatusCode::cuda_error, "f", "x").throw_if_error(), CudaError);
  EXPECT_THROW(Status(StatusCode::internal, "f", "x").throw_if_error(), InternalError);
  try {
    Status(StatusCode::unsupported, "coda::gemm", "argument 'a': too big").throw_if_error();
    ADD_FAILURE() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), StatusCode::unsupported);
    EXPECT_STREQ(e.what(), "coda::gemm: argument 'a': too big");
    EXPECT_EQ(e.detail(), "argument 'a': too big");
  }
}

TEST(Status, StatusOfReportsUnderTheEntryPointsName) {
  Status s = status_of("coda::outer", [] { throw Unsupported("coda::inner", "no"); });
  EXPECT_EQ(s.code(), StatusCode::unsupported);
  EXPECT_EQ(s.message(), "coda::outer: no");
  EXPECT_EQ(s.detail(), "no");
  EXPECT_TRUE(status_of("f", [] {}).ok());
  EXPECT_EQ(status_of("f", [] { throw std::bad_alloc(); }).message(), "f: out of host memory");
  EXPECT_EQ(status_of("f", [] { throw std::bad_alloc(); }).code(), StatusCode::internal);
  EXPECT_EQ(name(StatusCode::cuda_error), "CUDA error");
  EXPECT_EQ(Status(StatusCode::internal, "a", "b").reported_by("c").message(), "c: b");
}

TEST(Status, ReportedByRethrowsTheSameTypeUnderTheNewName) {
  try {
    reported_by("coda::ops::gemm_swiglu",
                [] { throw InvalidArgument("coda epilogue argument", "argument 'out': bad"); });
    ADD_FAILURE() << "no throw";
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "coda::ops::gemm_swiglu: argument 'out': bad");
  }
  EXPECT_EQ(reported_by("f", [] { return 42; }), 42);
}

// A rule's text is formatted only when the rule fails: a stream-insertable part counts the times
// it is written.
struct CountsWrites {
  int* writes;
};
std::ostream& operator<<(std::ostream& out, const CountsWrites& c) {
  ++*c.writes;
  return out << "part";
}

TEST(Validate, PassingRulesFormatNothing) {
  int writes = 0;
  ArgumentCheck check("coda::test");
  check.require(true, "a", "is ", CountsWrites{&writes}).require(true, phrase("b", CountsWrites{&writes}), "x");
  EXPECT_EQ(writes, 0);
  EXPECT_FALSE(check.failed());
  check.require(false, phrase("input ", 3), "has ", CountsWrites{&writes}, " of ", 7);
  EXPECT_EQ(writes, 1);
  EXPECT_EQ(check.status().message(), "coda::test: argument 'input 3': has part of 7");
  check.require(false, "c", CountsWrites{&writes});  // the first failure stands
  EXPECT_EQ(writes, 1);
  EXPECT_EQ(text("x = ", 2, ", y = ", 0.5), "x = 2, y = 0.5");
}

}  // namespace
}  // namespace coda

// The C ABI: status codes, the per-thread message, and coda_gemm's argument rules. Validation
// runs before the device is touched, so these run in CI without a GPU.
#include <cuda_runtime_api.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "coda/coda.h"

extern "C" int coda_c_header_is_c(void);

namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(CAbi, VersionAndStatusNames) {
  EXPECT_STREQ(coda_version(), CODA_TEST_VERSION);
  EXPECT_STREQ(coda_status_name(CODA_INVALID_ARGUMENT), "invalid argument");
  EXPECT_STREQ(coda_status_name(static_cast<coda_status>(99)), "unknown status");
  EXPECT_GE(coda_device_count(), 0);
  EXPECT_GE(coda_c_header_is_c(), 0);
}

alignas(256) unsigned char memory[1 << 16];

// A valid problem: A (64 x 32) K-major, B (48 x 32) K-major, C (64 x 48), all bf16.
struct GemmCall {
  coda_tensor a{memory, CODA_BF16, 2, {64, 32}, {32, 1}};
  coda_tensor b{memory, CODA_BF16, 2, {48, 32}, {32, 1}};
  coda_tensor c{memory, CODA_BF16, 2, {64, 48}, {48, 1}};
  const coda_tensor* a_arg = &a;
  const coda_tensor* b_arg = &b;
  const coda_tensor* c_arg = &c;
  coda_major a_major = CODA_K_MAJOR;
  coda_major b_major = CODA_K_MAJOR;

  coda_status gemm() const { return coda_gemm(a_arg, a_major, b_arg, b_major, c_arg, nullptr, 0, nullptr); }
};

// The status must be `expected`; returns the message coda_last_error() holds.
std::string error_of(const GemmCall& call, coda_status expected = CODA_INVALID_ARGUMENT) {
  EXPECT_EQ(call.gemm(), expected) << coda_last_error();
  return coda_last_error();
}

TEST(CAbiGemm, NullTensorPointers) {
  GemmCall x;
  x.a_arg = nullptr;
  EXPECT_EQ(error_of(x), "coda_gemm: argument 'a': is a null pointer");
  GemmCall y;
  y.c_arg = nullptr;
  EXPECT_EQ(error_of(y), "coda_gemm: argument 'c': is a null pointer");
}

TEST(CAbiGemm, RankOutsideTwoToThree) {
  GemmCall x;
  x.b.rank = 4;  // more than coda_tensor can hold
  EXPECT_EQ(error_of(x), "coda_gemm: argument 'b': must have rank 2 to 3, got rank 4");
  GemmCall y;
  y.a.rank = 1;
  EXPECT_EQ(error_of(y), "coda_gemm: argument 'a': must have rank 2 to 3, got rank 1");
}

TEST(CAbiGemm, UnknownEnumCodes) {
  GemmCall x;
  x.c.dtype = static_cast<coda_dtype>(17);
  EXPECT_EQ(error_of(x), "coda_gemm: argument 'c': dtype code 17 is not a coda_dtype (0 to 5)");
  GemmCall y;
  y.b_major = static_cast<coda_major>(2);
  EXPECT_EQ(error_of(y), "coda_gemm: argument 'b_major': code 2 is not a coda_major (CODA_K_MAJOR 0 or CODA_MN_MAJOR 1)");
}

// What the C side cannot judge reaches coda::gemm's own validation, which names the argument too.
TEST(CAbiGemm, SharedRulesComeFromTheGemmValidation) {
  GemmCall x;
  x.b.shape[1] = 40;
  x.b.stride[0] = 40;
  EXPECT_THAT(error_of(x),
              StartsWith("coda_gemm: argument 'b': shape (48, 40) bf16, strides (40, 1) (K-major): its columns "
                         "are K = 40 but a has K = 32"));
  GemmCall y;
  y.a.dtype = CODA_F32;
  EXPECT_THAT(error_of(y, CODA_UNSUPPORTED), StartsWith("coda_gemm: argument 'a': dtype f32 is not supported here"));
  GemmCall z;  // the major reaches it: an N-major B is stored (K x N), so its rows are K
  z.b_major = CODA_MN_MAJOR;
  EXPECT_THAT(error_of(z), HasSubstr("argument 'b': shape (48, 32) bf16, strides (32, 1) (MN-major): its rows are K = 48 but a has K = 32"));
}

TEST(CAbiGemm, WorkspaceWithoutPointer) {
  const GemmCall x;
  EXPECT_EQ(coda_gemm(x.a_arg, x.a_major, x.b_arg, x.b_major, x.c_arg, nullptr, 64, nullptr), CODA_INVALID_ARGUMENT);
  EXPECT_STREQ(coda_last_error(), "coda_gemm: argument 'options.workspace': is null but workspace_bytes is not 0");
}

TEST(CAbiGemm, WorkspaceBytesChecksItsArguments) {
  const GemmCall x;
  EXPECT_EQ(coda_gemm_workspace_bytes(x.a_arg, x.a_major, x.b_arg, x.b_major, x.c_arg, nullptr), CODA_INVALID_ARGUMENT);
  EXPECT_STREQ(coda_last_error(), "coda_gemm_workspace_bytes: argument 'bytes': is a null pointer");
  size_t bytes = 123;
  EXPECT_EQ(coda_gemm_workspace_bytes(nullptr, x.a_major, x.b_arg, x.b_major, x.c_arg, &bytes), CODA_INVALID_ARGUMENT);
  EXPECT_STREQ(coda_last_error(), "coda_gemm_workspace_bytes: argument 'a': is a null pointer");
  EXPECT_EQ(bytes, 0u);
}

// Valid arguments on a machine without a GPU: unsupported, saying why (never a crash or success).
TEST(CAbiGemm, ValidArgumentsWithoutGpuAreUnsupported) {
  if (coda_device_count() > 0) GTEST_SKIP() << "a CUDA device is present; the GPU tests run coda_gemm for real";
  const GemmCall x;
  EXPECT_THAT(error_of(x, CODA_UNSUPPORTED), StartsWith("coda_gemm: no CUDA device: "));
  size_t bytes = 123;
  EXPECT_EQ(coda_gemm_workspace_bytes(x.a_arg, x.a_major, x.b_arg, x.b_major, x.c_arg, &bytes), CODA_UNSUPPORTED);
  EXPECT_THAT(coda_last_error(), StartsWith("coda_gemm_workspace_bytes: no CUDA device: "));
  coda_gemm_plan_info plan{};
  EXPECT_EQ(coda_gemm_plan(x.a_arg, x.a_major, x.b_arg, x.b_major, x.c_arg, 0, &plan), CODA_UNSUPPORTED);
  EXPECT_THAT(coda_last_error(), StartsWith("coda_gemm_plan: no CUDA device: "));
}

// With no NVIDIA driver at all (CI's machines), the message says so, not that a driver is too old.
TEST(CAbiGemm, NoDriverIsSaidPlainly) {
  if (coda_device_count() > 0) GTEST_SKIP() << "a CUDA device is present";
  const GemmCall x;
  ASSERT_EQ(x.gemm(), CODA_UNSUPPORTED);
  const std::string message = coda_last_error();
  if (message.find("cudaErrorInsufficientDriver") != std::string::npos) {
    ADD_FAILURE() << "a missing driver reported as an old one: " << message;
  }
  int driver = -1;
  if (cudaDriverGetVersion(&driver) == cudaSuccess && driver == 0) {  // none installed
    EXPECT_EQ(message, "coda_gemm: no CUDA device: no NVIDIA driver is installed (libcuda.so.1 was not found)");
  }
}

TEST(CAbiGemm, PlanChecksItsArguments) {
  const GemmCall x;
  coda_gemm_plan_info plan{};
  EXPECT_EQ(coda_gemm_plan(x.a_arg, x.a_major, x.b_arg, x.b_major, x.c_arg, 0, nullptr), CODA_INVALID_ARGUMENT);
  EXPECT_STREQ(coda_last_error(), "coda_gemm_plan: argument 'plan': is a null pointer");
  EXPECT_EQ(coda_gemm_plan(x.a_arg, static_cast<coda_major>(3), x.b_arg, x.b_major, x.c_arg, 0, &plan),
            CODA_INVALID_ARGUMENT);
  EXPECT_THAT(coda_last_error(), StartsWith("coda_gemm_plan: argument 'a_major': code 3 is not a coda_major"));
  EXPECT_EQ(plan.tile, nullptr);
}

// coda_gemm_prepare checks by coda_gemm's rules; a run checks its handle; destroy takes NULL.
TEST(CAbiGemm, PreparedChecksItsArguments) {
  GemmCall x;
  coda_gemm_prepared* prepared = reinterpret_cast<coda_gemm_prepared*>(&x);  // must be overwritten
  coda_gemm_plan_info plan{};
  plan.split_k = 99;
  x.b_arg = nullptr;
  EXPECT_EQ(coda_gemm_prepare(x.a_arg, x.a_major, x.b_arg, x.b_major, x.c_arg, 0, &prepared, &plan),
            CODA_INVALID_ARGUMENT);
  EXPECT_STREQ(coda_last_error(), "coda_gemm_prepare: argument 'b': is a null pointer");
  EXPECT_EQ(prepared, nullptr);
  EXPECT_EQ(plan.split_k, 0);
  const GemmCall y;
  EXPECT_EQ(coda_gemm_prepare(y.a_arg, y.a_major, y.b_arg, y.b_major, y.c_arg, 0, nullptr, nullptr),
            CODA_INVALID_ARGUMENT);
  EXPECT_STREQ(coda_last_error(), "coda_gemm_prepare: argument 'prepared': is a null pointer");
  EXPECT_EQ(coda_gemm_prepared_run(nullptr, memory, memory, memory, nullptr, nullptr), CODA_INVALID_ARGUMENT);
  EXPECT_STREQ(coda_last_error(), "coda_gemm_prepared_run: argument 'prepared': is a null pointer");
  coda_gemm_prepared_destroy(nullptr);
  if (coda_device_count() == 0) {
    EXPECT_EQ(coda_gemm_prepare(y.a_arg, y.a_major, y.b_arg, y.b_major, y.c_arg, 0, &prepared, &plan),
              CODA_UNSUPPORTED);
    EXPECT_THAT(coda_last_error(), StartsWith("coda_gemm_prepare: no CUDA device: "));
    EXPECT_EQ(prepared, nullptr);
  }
}

TEST(CAbi, LastErrorIsPerThread) {
  GemmCall x;
  x.a_arg = nullptr;
  ASSERT_EQ(x.gemm(), CODA_INVALID_ARGUMENT);
  std::string seen_by_other_thread = "unset";
  std::thread([&] { seen_by_other_thread = coda_last_error(); }).join();
  EXPECT_EQ(seen_by_other_thread, "");
  EXPECT_STRNE(coda_last_error(), "");
}

}  // namespace

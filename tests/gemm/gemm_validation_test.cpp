// coda::gemm's argument rules. Validation runs before the device is touched, so these run in CI
// without a GPU: each feeds one bad argument and checks the error names it and the rule.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "coda/core/device.hpp"
#include "coda/gemm.hpp"
#include "coda/mainloop/params.hpp"
#include "coda/prepared_gemm.hpp"

namespace coda {
namespace {

using ::testing::HasSubstr;

alignas(256) unsigned char memory[1 << 16];

struct Args {
  GemmOperand a{TensorView::matrix(memory, DType::bf16, 64, 32), Major::k};
  GemmOperand b{TensorView::matrix(memory, DType::bf16, 48, 32), Major::k};
  TensorView c = TensorView::matrix(memory, DType::bf16, 64, 48);
  GemmOptions options;
};

std::string error_of(const Args& x, StatusCode expected = StatusCode::invalid_argument) {
  const Status s = try_gemm(x.a, x.b, x.c, nullptr, x.options);
  EXPECT_EQ(s.code(), expected) << s.message();
  return s.message();
}

TEST(GemmValidation, NullPointers) {
  Args x;
  x.a.view.data = nullptr;
  EXPECT_EQ(error_of(x), "coda::gemm: argument 'a': is a null pointer");
  Args y;
  y.c.data = nullptr;
  EXPECT_EQ(error_of(y), "coda::gemm: argument 'c': is a null pointer");
}

TEST(GemmValidation, Dtypes) {
  Args x;
  x.a.view.dtype = DType::f32;
  EXPECT_THAT(error_of(x, StatusCode::unsupported), HasSubstr("argument 'a': dtype f32 is not supported here (expected one of: bf16, f16)"));
  Args y;
  y.b.view.dtype = DType::f16;
  EXPECT_THAT(error_of(y), HasSubstr("argument 'b': dtype f16 must match a's dtype bf16"));
  Args z;
  z.c.dtype = DType::e4m3;
  EXPECT_THAT(error_of(z, StatusCode::unsupported), HasSubstr("argument 'c': dtype e4m3 is not supported here"));
}

TEST(GemmValidation, Ranks) {
  Args x;
  x.b.view = TensorView::vector(memory, DType::bf16, 32);
  EXPECT_THAT(error_of(x), HasSubstr("argument 'b': must have rank 2 to 3, got rank 1"));
}

TEST(GemmValidation, KMustAgree) {
  Args x;
  x.b.view = TensorView::matrix(memory, DType::bf16, 48, 40);
  EXPECT_THAT(error_of(x), HasSubstr("argument 'b': shape (48, 40) bf16, strides (40, 1) (K-major): its columns are K = 40 but a has K = 32"));
  Args y;  // with an N-major B, K is its row count
  y.b = {TensorView::matrix(memory, DType::bf16, 40, 48), Major::mn};
  EXPECT_THAT(error_of(y), HasSubstr("its rows are K = 40 but a has K = 32"));
}

TEST(GemmValidation, OutputShape) {
  Args x;
  x.c = TensorView::matrix(memory, DType::bf16, 64, 56);
  EXPECT_THAT(error_of(x), HasSubstr("argument 'c': shape (64, 56) bf16, strides (56, 1): N (columns) is 56 but must be 48"));
  Args y;  // an M-major A is (K x M): M is its column count
  y.a = {TensorView::matrix(memory, DType::bf16, 32, 72), Major::mn};
  EXPECT_THAT(error_of(y), HasSubstr("argument 'c': shape (64, 48) bf16, strides (48, 1): M (rows) is 64 but must be 72"));
}

TEST(GemmValidation, EmptyDimensions) {
  Args x;
  x.a.view = TensorView::matrix(memory, DType::bf16, 0, 32);
  x.c = TensorView::matrix(memory, DType::bf16, 0, 48);
  EXPECT_THAT(error_of(x), HasSubstr("argument 'a': M is 0 but must be at least 1"));
}

TEST(GemmValidation, BatchesMustAgree) {
  Args x;
  x.c = TensorView::batched(memory, DType::bf16, 2, 64, 48);
  EXPECT_THAT(error_of(x), HasSubstr("argument 'a': batch 1 must equal c's batch 2"));
}

TEST(GemmValidation, TmaAlignment) {
  Args x;  // K = 7: rows of 14 bytes
  x.a.view = TensorView::matrix(memory, DType::bf16, 64, 7);
  x.b.view = TensorView::matrix(memory, DType::bf16, 48, 7);
  EXPECT_THAT(error_of(x), HasSubstr("argument 'a': row stride of 7 elements (14 bytes) is not a multiple of 16 bytes"));
  Args y;  // the same shape with a padded leading dimension is fine up to the device check
  y.a.view = TensorView::matrix(memory, DType::bf16, 64, 7, 8);
  y.b.view = TensorView::matrix(memory, DType::bf16, 48, 7, 8);
  const Status s = try_gemm(y.a, y.b, y.c);
  EXPECT_THAT(s.message(), ::testing::Not(HasSubstr("argument")));
  Args z;
  z.c.data = memory + 8;
  EXPECT_THAT(error_of(z), HasSubstr("argument 'c': base address 0x"));
  Args w;
  w.c = TensorView::matrix(memory, DType::f32, 64, 48, 50);
  EXPECT_THAT(error_of(w), HasSubstr("argument 'c': row stride of 50 elements (200 bytes) is not a multiple of 16 bytes"));
}

TEST(GemmValidation, Contiguity) {
  Args x;
  x.a.view.stride[1] = 2;
  EXPECT_THAT(error_of(x), HasSubstr("argument 'a': shape (64, 32) bf16, strides (32, 2): the last dimension must be contiguous"));
}

TEST(GemmValidation, Options) {
  Args x;
  x.options.split_k = -1;
  EXPECT_THAT(error_of(x), HasSubstr("argument 'options.split_k': is -1 but must be >= 0"));
  Args y;
  y.options.workspace_bytes = 1024;
  EXPECT_THAT(error_of(y), HasSubstr("argument 'options.workspace': is null but workspace_bytes is not 0"));
  Args z;
  z.options.raster_group = -3;
  EXPECT_THAT(error_of(z), HasSubstr("argument 'options.raster_group'"));
}

// (Host memory stands in for device memory here, so this only runs where no Hopper GPU would launch.)
// Which K splits the CTAs of a cluster can add up (gemm.hpp: options.split_k_in_cluster): each
// CTA but the first sends one 16-byte slot a thread per 8 tokens (per 64-row block), into 3 slots.
TEST(GemmValidation, ClusterSplitsFitTheSlots) {
  using mainloop::cluster_split_fits;
  for (int64_t m = 1; m <= 8; ++m) {
    EXPECT_FALSE(cluster_split_fits(1, m, 64)) << "one segment is no split";
    for (int splits = 2; splits <= 4; ++splits) EXPECT_TRUE(cluster_split_fits(splits, m, 64)) << m << " " << splits;
    EXPECT_FALSE(cluster_split_fits(5, m, 64)) << "at most four CTAs";
    EXPECT_FALSE(cluster_split_fits(3, m, 64, 2)) << "two blocks a consumer: one more CTA";
    EXPECT_TRUE(cluster_split_fits(2, m, 64, 2));
  }
  for (int64_t m = 9; m <= 24; ++m) {
    EXPECT_TRUE(cluster_split_fits(2, m, 64));
    EXPECT_FALSE(cluster_split_fits(3, m, 64));
  }
  for (int64_t m : {25, 64, 128, 1000}) EXPECT_FALSE(cluster_split_fits(2, m, 64)) << m;
  EXPECT_TRUE(cluster_split_fits(4, 1000, 8)) << "a tile of 8 tokens";
}

TEST(GemmValidation, ValidArgumentsReachTheDeviceCheck) {
  if (hopper_available()) GTEST_SKIP() << "a Hopper GPU is present: the device check passes";
  Args x;
  const Status s = try_gemm(x.a, x.b, x.c);
  EXPECT_EQ(s.code(), StatusCode::unsupported);
  EXPECT_THAT(s.message(), HasSubstr("coda::gemm: no CUDA device"));
}

// PreparedGemm checks its arguments by coda::gemm's rules, under its own name.
std::string prepare_error(const Args& x, StatusCode expected = StatusCode::invalid_argument) {
  try {
    const PreparedGemm gemm(x.a, x.b, x.c, x.options);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), expected) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

TEST(PreparedGemmValidation, CodaGemmsRulesUnderItsName) {
  Args x;
  x.a.view.data = nullptr;
  EXPECT_EQ(prepare_error(x), "coda::PreparedGemm: argument 'a': is a null pointer");
  Args y;
  y.c = TensorView::matrix(memory, DType::bf16, 64, 56);
  EXPECT_THAT(
      prepare_error(y),
      HasSubstr(
          "coda::PreparedGemm: argument 'c': shape (64, 56) bf16, strides (56, 1): N (columns) is 56 but must be 48"));
  Args z;
  z.options.workspace_bytes = 1024;
  EXPECT_THAT(prepare_error(z), HasSubstr("argument 'options.workspace': is null but workspace_bytes is not 0"));
  if (!hopper_available()) {
    EXPECT_THAT(prepare_error(Args{}, StatusCode::unsupported), HasSubstr("coda::PreparedGemm: no CUDA device"));
  }
}

}  // namespace
}  // namespace coda

// Each validation rule: feed the bad input, check the status code and that the message names
// the function, the argument and the rule.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "coda/core/validate.hpp"

namespace coda {
namespace {

using ::testing::HasSubstr;

alignas(16) unsigned char buffer[1 << 12];

TEST(Validate, NullPointerNamesTheArgument) {
  ArgumentCheck c("coda::test_op");
  c.not_null("weight", nullptr);
  ASSERT_TRUE(c.failed());
  EXPECT_EQ(c.status().code(), StatusCode::invalid_argument);
  EXPECT_EQ(c.status().message(), "coda::test_op: argument 'weight': is a null pointer");
}

TEST(Validate, DtypeListsWhatIsAllowed) {
  ArgumentCheck c("coda::gemm");
  c.dtype_in("a", DType::e4m3, {DType::bf16, DType::f16});
  EXPECT_EQ(c.status().code(), StatusCode::unsupported);
  EXPECT_EQ(c.status().message(),
            "coda::gemm: argument 'a': dtype e4m3 is not supported here (expected one of: bf16, f16)");
}

TEST(Validate, RankRule) {
  ArgumentCheck c("coda::gemm");
  c.rank_in("b", TensorView::vector(buffer, DType::bf16, 8), 2, 3);
  EXPECT_THAT(c.status().message(), HasSubstr("argument 'b': must have rank 2 to 3, got rank 1"));
}

TEST(Validate, ShapeAgreementExplainsWhy) {
  ArgumentCheck c("coda::gemm");
  c.dim_equals("b", TensorView::matrix(buffer, DType::bf16, 64, 40), -1, 32, "K", "a and b must agree on K");
  EXPECT_EQ(c.status().message(),
            "coda::gemm: argument 'b': shape (64, 40) bf16, strides (40, 1): K is 40 but must be 32 "
            "(a and b must agree on K)");
}

TEST(Validate, PositiveSize) {
  ArgumentCheck c("coda::gemm");
  c.positive("a", 0, "M");
  EXPECT_EQ(c.status().message(), "coda::gemm: argument 'a': M is 0 but must be at least 1");
}

TEST(Validate, InnerDimensionMustBeContiguous) {
  TensorView v = TensorView::matrix(buffer, DType::bf16, 4, 8);
  v.stride[1] = 2;
  ArgumentCheck c("coda::gemm");
  c.inner_contiguous("c", v);
  EXPECT_THAT(c.status().message(), HasSubstr("argument 'c': shape (4, 8) bf16, strides (8, 2): the last dimension must be contiguous"));
}

TEST(Validate, OverlappingRowsAreRejected) {
  ArgumentCheck c("coda::gemm");
  c.inner_contiguous("a", TensorView::matrix(buffer, DType::bf16, 4, 8, 6));
  EXPECT_THAT(c.status().message(), HasSubstr("row stride 6 is smaller than the row length 8"));
}

TEST(Validate, TmaNeedsSixteenByteRowStrides) {
  ArgumentCheck c("coda::gemm");
  c.tma_aligned("a", TensorView::matrix(buffer, DType::bf16, 4, 7));
  EXPECT_EQ(c.status().message(),
            "coda::gemm: argument 'a': row stride of 7 elements (14 bytes) is not a multiple of 16 bytes "
            "(TMA needs 16-byte-aligned strides; pad to a multiple of 8 elements)");
}

TEST(Validate, TmaNeedsSixteenByteBatchStrides) {
  ArgumentCheck c("coda::gemm");
  c.tma_aligned("a", TensorView::batched(buffer, DType::f32, 2, 3, 4, 4, 13));
  EXPECT_THAT(c.status().message(), HasSubstr("batch stride of 13 elements (52 bytes) is not a multiple of 16 bytes"));
}

TEST(Validate, TmaNeedsAlignedBase) {
  ArgumentCheck c("coda::gemm");
  c.tma_aligned("b", TensorView::matrix(buffer + 2, DType::bf16, 4, 8));
  EXPECT_THAT(c.status().message(), HasSubstr("argument 'b': base address 0x"));
  EXPECT_THAT(c.status().message(), HasSubstr("is not 16-byte aligned"));
}

TEST(Validate, FirstFailureWinsAndValidInputPasses) {
  ArgumentCheck ok("coda::gemm");
  ok.not_null("a", buffer).dtype_in("a", DType::bf16, {DType::bf16}).tma_aligned("a", TensorView::matrix(buffer, DType::bf16, 4, 8));
  EXPECT_FALSE(ok.failed());
  EXPECT_NO_THROW(ok.throw_if_error());

  ArgumentCheck c("coda::gemm");
  c.not_null("a", nullptr).positive("b", 0, "N");
  EXPECT_THAT(c.status().message(), HasSubstr("argument 'a'"));
  EXPECT_THROW(c.throw_if_error(), InvalidArgument);
}

TEST(Validate, GeneralRequire) {
  ArgumentCheck c("coda::rope");
  c.require(false, "head_dim", "must be even (RoPE rotates pairs)");
  EXPECT_EQ(c.status().message(), "coda::rope: argument 'head_dim': must be even (RoPE rotates pairs)");
}

}  // namespace
}  // namespace coda

// The fp64 GEMM oracle: hand-computed cases, every operand major, and restricted rows.
#include <gtest/gtest.h>

#include "coda/core/status.hpp"
#include "coda/reference/gemm.hpp"
#include "support/random.hpp"

namespace coda::reference {
namespace {

TEST(ReferenceGemm, HandComputed) {
  Matrix a(2, 3), b(2, 3);
  a.data = {1, 2, 3, 4, 5, 6};
  b.data = {1, 0, -1, 2, 1, 0};
  const Matrix c = gemm(a, Major::k, b, Major::k);  // c = a * b^T
  ASSERT_EQ(c.rows, 2);
  ASSERT_EQ(c.cols, 2);
  EXPECT_EQ(c(0, 0), 1 - 3);
  EXPECT_EQ(c(0, 1), 2 + 2);
  EXPECT_EQ(c(1, 0), 4 - 6);
  EXPECT_EQ(c(1, 1), 8 + 5);
}

TEST(ReferenceGemm, EveryMajorGivesTheSameProduct) {
  const Matrix a = test::random_matrix(13, 29), b = test::random_matrix(17, 29);
  const Matrix want = gemm(a, Major::k, b, Major::k);
  EXPECT_LT(relative_error(gemm(a.transposed(), Major::mn, b, Major::k), want), 1e-15);
  EXPECT_LT(relative_error(gemm(a, Major::k, b.transposed(), Major::mn), want), 1e-15);
  EXPECT_LT(relative_error(gemm(a.transposed(), Major::mn, b.transposed(), Major::mn), want), 1e-15);
}

TEST(ReferenceGemm, SelectedRows) {
  const Matrix a = test::random_matrix(9, 5), b = test::random_matrix(4, 5);
  const Matrix full = gemm(a, Major::k, b, Major::k);
  const Matrix some = gemm_rows(a, Major::k, b, Major::k, {7, 0, 3});
  ASSERT_EQ(some.rows, 3);
  for (int64_t n = 0; n < 4; ++n) {
    EXPECT_EQ(some(0, n), full(7, n));
    EXPECT_EQ(some(1, n), full(0, n));
    EXPECT_EQ(some(2, n), full(3, n));
  }
  EXPECT_THROW(gemm_rows(a, Major::k, b, Major::k, {9}), InvalidArgument);
  EXPECT_THROW(gemm(a, Major::k, test::random_matrix(4, 6), Major::k), InvalidArgument);
}

TEST(ReferenceMatrix, RelativeErrorCatchesNaNAndShape) {
  Matrix r(2, 2, 1.0), o(2, 2, 1.0);
  EXPECT_EQ(relative_error(o, r), 0.0);
  o(1, 1) = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(std::isinf(relative_error(o, r)));
  EXPECT_TRUE(std::isinf(relative_error(Matrix(2, 3), r)));
  o(1, 1) = 2.0;
  EXPECT_NEAR(relative_error(o, r), 0.5, 1e-15);
}

TEST(ReferenceMatrix, ReadsAndWritesStridedTensorsOfEveryDtype) {
  for (DType t : {DType::f32, DType::bf16, DType::f16, DType::e4m3, DType::e5m2}) {
    test::HostTensor h(t, 3, 5, 8);
    h.fill_random();
    const Matrix m = h.matrix();
    Matrix twice(3, 5);
    for (std::size_t i = 0; i < m.data.size(); ++i) twice.data[i] = 2 * m.data[i];  // exact in binary
    store(twice, h.view);
    const Matrix back = h.matrix();
    for (std::size_t i = 0; i < m.data.size(); ++i) {
      if (std::fabs(twice.data[i]) <= max_finite(t)) {
        EXPECT_EQ(back.data[i], twice.data[i]) << name(t);
      }
    }
  }
}

}  // namespace
}  // namespace coda::reference

// Shared by the epilogue program tests: host operands for a program (inputs with poisoned padding,
// outputs and partials poisoned everywhere), batched runs on the CPU executor, and the comparisons
// against the fp64 reference.
//
//   const auto acc = test::random_accumulators({150, 300, 2});              // one GEMM per batch
//   HostTensor out = test::poisoned_output(DType::bf16, 150, 150, 2);
//   epilogue::Swiglu program{.out = test::tile_out(out)};
//   test::run_batches(program, acc, {64, 256});
//   test::expect_output(out, {reference::swiglu(acc[0]), reference::swiglu(acc[1])});  // every element, one rounding
//
// Poison is the byte 0xFF: NaN in f32, bf16, f16, e4m3 and e5m2, so an element nobody wrote shows
// up as NaN, and a write outside the logical output (into a row's padding, or into a gap of a
// partials buffer) shows up as a changed poison byte.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "coda/epilogue/program.hpp"
#include "coda/reference/epilogue_executor.hpp"
#include "coda/reference/matrix.hpp"
#include "support/random.hpp"

namespace coda::reference {
/// gtest prints a part shape parameter as "64 x 256".
inline void PrintTo(const PartShape& part, std::ostream* os) { *os << part.rows << " x " << part.cols; }
}  // namespace coda::reference

namespace coda::test {

/// Part shapes programs must give the same results on (partials aside, which are per part): the
/// GPU executor's (coda/epilogue/parts.hpp: a whole 128 x 128 ping-pong tile) and the parts of the
/// other tile configurations, 64 x 256 and 64 x 128.
inline const std::vector<reference::PartShape> kPartShapes = {{64, 256}, {64, 128}, {128, 128}};
/// "Part64x256": a test name suffix for a part shape parameter.
std::string part_shape_name(const ::testing::TestParamInfo<reference::PartShape>& info);

/// The base of the tests that run once per part shape (INSTANTIATE_TEST_SUITE_P with kPartShapes
/// and part_shape_name): part(), and the seed in every failure's trace.
class PartShapeTest : public ::testing::TestWithParam<reference::PartShape> {
 protected:
  reference::PartShape part() const { return GetParam(); }

 private:
  const ::testing::ScopedTrace seed_trace_{__FILE__, __LINE__, seed_note()};
};

/// Rows x cols of the output, `batch` GEMMs.
struct ProblemShape {
  int64_t rows;
  int64_t cols;
  int64_t batch = 2;
};

/// The executor tests' problem: 150 x 300 in two batches, extents a multiple of no part's, so every
/// test meets narrower parts at the bottom and right edges.
inline constexpr ProblemShape kExecutorShape{150, 300, 2};
/// The tolerance of outputs whose every value a test computes exactly as the program does (copies,
/// and the same fp32 operations in the same order).
inline constexpr double kExactly = 0.0;
inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// The accumulators of `shape.batch` GEMMs of depth `depth` with random bf16-representable
/// operands in [-1, 1): exact products, of the magnitude real accumulators have.
std::vector<reference::Matrix> random_accumulators(const ProblemShape& shape, int64_t depth = 32);

/// Run `program` on the CPU executor over every batch: batch b gets accumulators[b].
template <class Program>
void run_batches(const Program& program, const std::vector<reference::Matrix>& accumulators,
                 reference::PartShape part) {
  for (std::size_t b = 0; b < accumulators.size(); ++b)
    reference::run_epilogue(program, accumulators[b], int32_t(b), part);
}

/// f(accumulators[b], b) for every batch: a reference result per batch.
template <class F>
std::vector<reference::Matrix> per_batch(const std::vector<reference::Matrix>& accumulators, F&& f) {
  std::vector<reference::Matrix> out;
  for (std::size_t b = 0; b < accumulators.size(); ++b) out.push_back(f(accumulators[b], int64_t(b)));
  return out;
}

/// The accumulators as the executor hands them to a program: rounded to fp32.
std::vector<reference::Matrix> fp32_values(const std::vector<reference::Matrix>& accumulators);

// ---- host operands ------------------------------------------------------------------------------
/// Elements of padding at the end of every row of the tensors made here.
inline constexpr int64_t kRowPadding = 8;

/// A batch of rows x cols inputs, uniform in [lo, hi) and rounded to `dtype`; the padding of
/// every row is poisoned, so a program that reads past a row's end sees NaN.
HostTensor random_input(DType dtype, int64_t rows, int64_t cols, int64_t batch = 1, double lo = -1.0, double hi = 1.0);
/// A batch of rows x cols outputs (padded rows), every byte poisoned.
HostTensor poisoned_output(DType dtype, int64_t rows, int64_t cols, int64_t batch = 1);

/// A copy of `m` in `dtype` (rounded), its rows padded and the padding poisoned.
HostTensor host_copy(DType dtype, const reference::Matrix& m);

epilogue::TileIn tile_in(const HostTensor& t);
epilogue::TileOut tile_out(HostTensor& t, float scale = 1.0f);

/// One value per output column (a bias, the RMSNorm weight): 1 x cols, uniform in [lo, hi).
HostTensor random_row_vector(DType dtype, int64_t cols, double lo = -1.0, double hi = 1.0);
epilogue::RowVector row_vector(const HostTensor& t);
/// Its values, for the reference.
reference::Vector row_vector_values(const HostTensor& t);

/// One value per output row of every batch (rstd, a per-row scale): a batch x rows tensor with
/// padded rows, so batch b's values start at b * ld, the ColumnVector's batch_stride.
HostTensor random_column_vector(DType dtype, int64_t rows, int64_t batch, double lo = -1.0, double hi = 1.0);
/// The same of given values, values[b][row] (rstd computed by a test, int32 positions and targets).
HostTensor column_vector_of(DType dtype, const std::vector<reference::Vector>& values);
epilogue::ColumnVector column_vector(const HostTensor& t);
/// Batch b's values, for the reference.
reference::Vector column_vector_values(const HostTensor& t, int64_t b);

/// Every logical element of `t` written (no longer all poison bytes) and every padding byte still
/// poison, in every batch.
void expect_written_exactly(const HostTensor& t);

/// fp32 partial results of every batch: `major` x `minor` logical slots per batch (row partials:
/// rows x parts; column partials: parts x columns; whole-part reductions: parts along M x parts
/// along N), poisoned. A gap of one slot follows every major index and every batch, so a write
/// with a wrong stride lands on poison. `minor_major` lays the slots out transposed (tile_stride
/// > 1, row_stride 1).
class PartialsBuffer {
 public:
  PartialsBuffer(int64_t major, int64_t minor, int64_t batch = 1, bool minor_major = false);

  epilogue::Partials partials();
  /// Batch b's slots as a major x minor matrix (NaN where nothing was written).
  reference::Matrix matrix(int64_t b) const;
  /// Every logical slot written and every gap slot still poison.
  void expect_written_exactly() const;
  /// Every gap slot still poison (for results some parts legitimately do not write).
  void expect_gaps_untouched() const;

 private:
  int64_t index(int64_t b, int64_t major_index, int64_t minor_index) const;
  bool written(int64_t b, int64_t major_index, int64_t minor_index) const;

  int64_t major_, minor_, batch_;
  int64_t row_stride_, tile_stride_, batch_stride_;
  std::vector<float> data_;
};

/// Parts along an extent: ceil(extent / part).
inline int64_t part_count(int64_t extent, int64_t part) { return (extent + part - 1) / part; }

// ---- comparisons --------------------------------------------------------------------------------
/// The error bound for fp32 epilogue math against the fp64 reference, relative to an element's
/// scale (its magnitude plus the rms of the whole result, so that values which cancel to near zero
/// are judged against the size of what cancelled). The accumulators are rounded to fp32 once and a
/// program does a handful of fp32 operations, or a sum of a few hundred terms, on each: errors of
/// a few 1e-7. Any wrong formula, index, broadcast or intermediate rounding to 16 bits is orders
/// of magnitude larger.
inline constexpr double kFp32Tolerance = 1e-5;

/// Every element of `out` within tolerance of `want` (NaN and infinities exactly where `want` has them).
void expect_close(const reference::Matrix& out, const reference::Matrix& want, double tolerance = kFp32Tolerance);
void expect_close(const reference::Vector& out, const reference::Vector& want, double tolerance = kFp32Tolerance);

/// As expect_close, with each element's scale given: for a long sum, the same sum of the terms'
/// magnitudes (fp32 summation error grows with it, not with the result).
void expect_close_to_scale(const reference::Matrix& out, const reference::Matrix& want, const reference::Matrix& scales,
                           double tolerance = kFp32Tolerance);

/// Every element of `stored` (the values read back from an output of type `dtype`) is one
/// rounding to `dtype` of a value within tolerance of want * scale: fp32 math then one store,
/// with fp8 outputs scaled first (`scale`) and saturating. Checked exactly, whatever the dtype:
/// the stored value must lie between the roundings of want * scale -/+ the tolerance (rounding
/// is monotone).
void expect_stored(const reference::Matrix& stored, const reference::Matrix& want, DType dtype, double scale = 1.0,
                   double tolerance = kFp32Tolerance);

/// expect_written_exactly(out), then expect_stored for every batch: want[b] is batch b's reference.
void expect_output(const HostTensor& out, const std::vector<reference::Matrix>& want, double scale = 1.0,
                   double tolerance = kFp32Tolerance);

/// expect_written_exactly(), then expect_close for every batch: want[b] is batch b's reference.
void expect_partials(const PartialsBuffer& partials, const std::vector<reference::Matrix>& want,
                     double tolerance = kFp32Tolerance);

/// The value a store of x in `dtype` keeps (fp8 saturating to the largest finite value).
double rounded(DType dtype, double x);

}  // namespace coda::test

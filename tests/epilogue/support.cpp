#include "epilogue/support.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <sstream>
#include <utility>

#include "coda/core/layout.hpp"
#include "coda/reference/epilogues.hpp"
#include "coda/reference/gemm.hpp"

namespace coda::test {
namespace {

constexpr unsigned char kPoison = 0xFF;
constexpr int kReportedMismatches = 5;

bool all_poison(const void* data, std::size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i)
    if (p[i] != kPoison) return false;
  return true;
}

// Collects the places that break a rule and reports them, the first few spelled out, as one test
// failure when it goes out of scope (so a check cannot forget to report).
class Mismatches {
 public:
  explicit Mismatches(std::string what) : what_(std::move(what)) {}
  template <class Describe>
  void check(bool ok, Describe&& describe) {
    if (ok) return;
    if (count_++ < kReportedMismatches) {
      details_ << "\n  ";
      describe(details_);
    }
  }
  ~Mismatches() { EXPECT_EQ(count_, 0) << what_ << details_.str(); }

 private:
  std::string what_;
  int64_t count_ = 0;
  std::ostringstream details_;
};

// Where element (b, r, c) of t starts in t.bytes.
std::size_t byte_offset(const HostTensor& t, int64_t b, int64_t r, int64_t c) {
  return std::size_t((b * t.view.batch_stride() + r * t.view.ld() + c) * int64_t(t.view.element_bytes()));
}

// Root mean square of the finite entries: the scale of a whole result.
double rms(const std::vector<double>& values) {
  double sum = 0;
  int64_t n = 0;
  for (double v : values)
    if (std::isfinite(v)) {
      sum += v * v;
      ++n;
    }
  return n > 0 ? std::sqrt(sum / double(n)) : 0.0;
}

// The scale of each element of a result: its magnitude plus the rms of the whole result.
reference::Matrix default_scales(const reference::Matrix& want) {
  const double whole = rms(want.data);
  reference::Matrix scales = want;
  for (double& v : scales.data) v = std::abs(v) + whole;
  return scales;
}

// out must be NaN or infinite where want is, and elsewhere lie between round(target -/+ allowed),
// with target = want * output_scale and allowed = tolerance * scales * output_scale.
void expect_rounding_of(const reference::Matrix& out, const reference::Matrix& want, const reference::Matrix& scales,
                        double output_scale, double tolerance, const std::function<double(double)>& round,
                        const std::string& what) {
  ASSERT_EQ(out.rows, want.rows) << what;
  ASSERT_EQ(out.cols, want.cols) << what;
  Mismatches mismatches(what);
  for (int64_t r = 0; r < want.rows; ++r)
    for (int64_t c = 0; c < want.cols; ++c) {
      const double got = out(r, c), wanted = want(r, c);
      if (!std::isfinite(wanted)) {  // NaN and infinities exactly
        const bool same = std::isnan(wanted) ? std::isnan(got) : got == wanted * output_scale;
        mismatches.check(same,
                         [&](std::ostream& os) { os << "(" << r << ", " << c << "): " << got << ", want " << wanted; });
        continue;
      }
      const double target = wanted * output_scale, allowed = tolerance * scales(r, c) * output_scale;
      const double lo = round(target - allowed), hi = round(target + allowed);
      mismatches.check(got >= lo && got <= hi, [&](std::ostream& os) {
        os << "(" << r << ", " << c << "): " << got << ", want " << target << " (allowed [" << lo << ", " << hi << "])";
      });
    }
}

double unrounded(double x) { return x; }

reference::Matrix as_row(const reference::Vector& v) {
  reference::Matrix m(1, int64_t(v.size()));
  m.data = v;
  return m;
}

}  // namespace

std::string part_shape_name(const ::testing::TestParamInfo<reference::PartShape>& info) {
  return "Part" + std::to_string(info.param.rows) + "x" + std::to_string(info.param.cols);
}

std::vector<reference::Matrix> random_accumulators(const ProblemShape& shape, int64_t depth) {
  std::vector<reference::Matrix> out;
  for (int64_t b = 0; b < shape.batch; ++b) {
    const reference::Matrix x = reference::round_matrix(random_matrix(shape.rows, depth), DType::bf16);
    const reference::Matrix w = reference::round_matrix(random_matrix(shape.cols, depth), DType::bf16);
    out.push_back(reference::gemm(x, Major::k, w, Major::k));
  }
  return out;
}

std::vector<reference::Matrix> fp32_values(const std::vector<reference::Matrix>& accumulators) {
  return per_batch(accumulators,
                   [](const reference::Matrix& y, int64_t) { return reference::round_matrix(y, DType::f32); });
}

HostTensor random_input(DType dtype, int64_t rows, int64_t cols, int64_t batch, double lo, double hi) {
  HostTensor t(dtype, rows, cols, cols + kRowPadding, batch);
  t.fill_random(lo, hi);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t r = 0; r < rows; ++r)
      std::memset(t.bytes.data() + byte_offset(t, b, r, cols), kPoison,
                  std::size_t(kRowPadding) * t.view.element_bytes());
  return t;
}

HostTensor poisoned_output(DType dtype, int64_t rows, int64_t cols, int64_t batch) {
  HostTensor t(dtype, rows, cols, cols + kRowPadding, batch);
  std::memset(t.bytes.data(), kPoison, t.bytes.size());
  return t;
}

HostTensor host_copy(DType dtype, const reference::Matrix& m) {
  HostTensor t = poisoned_output(dtype, m.rows, m.cols);
  reference::store(m, t.view);
  return t;
}

epilogue::TileIn tile_in(const HostTensor& t) {
  return {.data = t.view.data, .dtype = t.view.dtype, .ld = t.view.ld(), .batch_stride = t.view.batch_stride()};
}

epilogue::TileOut tile_out(HostTensor& t, float scale) {
  return {.data = t.view.data,
          .dtype = t.view.dtype,
          .ld = t.view.ld(),
          .batch_stride = t.view.batch_stride(),
          .scale = scale};
}

HostTensor random_row_vector(DType dtype, int64_t cols, double lo, double hi) {
  return random_input(dtype, 1, cols, 1, lo, hi);
}

epilogue::RowVector row_vector(const HostTensor& t) { return {.data = t.view.data, .dtype = t.view.dtype}; }

reference::Vector row_vector_values(const HostTensor& t) { return t.matrix().data; }

HostTensor random_column_vector(DType dtype, int64_t rows, int64_t batch, double lo, double hi) {
  return random_input(dtype, batch, rows, 1, lo, hi);
}

HostTensor column_vector_of(DType dtype, const std::vector<reference::Vector>& values) {
  reference::Matrix all(int64_t(values.size()), int64_t(values.front().size()));
  for (int64_t b = 0; b < all.rows; ++b)
    std::copy(values[std::size_t(b)].begin(), values[std::size_t(b)].end(), all.row(b));
  return host_copy(dtype, all);
}

epilogue::ColumnVector column_vector(const HostTensor& t) {
  return {.data = t.view.data, .dtype = t.view.dtype, .batch_stride = t.view.ld()};
}

reference::Vector column_vector_values(const HostTensor& t, int64_t b) {
  const reference::Matrix all = t.matrix();
  return reference::Vector(all.row(b), all.row(b) + all.cols);
}

void expect_written_exactly(const HostTensor& t) {
  const std::size_t bytes = t.view.element_bytes();
  Mismatches unwritten("elements never written (still poison)");
  Mismatches stray("padding elements written (no longer poison)");
  for (int64_t b = 0; b < t.view.batch(); ++b)
    for (int64_t r = 0; r < t.view.rows(); ++r)
      for (int64_t c = 0; c < t.view.ld(); ++c) {
        const bool poison = all_poison(t.bytes.data() + byte_offset(t, b, r, c), bytes);
        const auto where = [&](std::ostream& os) { os << "batch " << b << ", (" << r << ", " << c << ")"; };
        if (c < t.view.cols())
          unwritten.check(!poison, where);
        else
          stray.check(poison, where);
      }
}

PartialsBuffer::PartialsBuffer(int64_t major, int64_t minor, int64_t batch, bool minor_major)
    : major_(major), minor_(minor), batch_(batch) {
  if (minor_major) {
    row_stride_ = 1;
    tile_stride_ = major + 1;
    batch_stride_ = minor * tile_stride_ + 1;
  } else {
    row_stride_ = minor + 1;
    tile_stride_ = 1;
    batch_stride_ = major * row_stride_ + 1;
  }
  data_.resize(std::size_t(batch * batch_stride_));
  std::memset(data_.data(), kPoison, data_.size() * sizeof(float));
}

epilogue::Partials PartialsBuffer::partials() {
  return {.data = data_.data(), .row_stride = row_stride_, .tile_stride = tile_stride_, .batch_stride = batch_stride_};
}

int64_t PartialsBuffer::index(int64_t b, int64_t major_index, int64_t minor_index) const {
  return b * batch_stride_ + major_index * row_stride_ + minor_index * tile_stride_;
}

reference::Matrix PartialsBuffer::matrix(int64_t b) const {
  reference::Matrix m(major_, minor_);
  for (int64_t i = 0; i < major_; ++i)
    for (int64_t j = 0; j < minor_; ++j) m(i, j) = data_[std::size_t(index(b, i, j))];
  return m;
}

bool PartialsBuffer::written(int64_t b, int64_t major_index, int64_t minor_index) const {
  return !all_poison(&data_[std::size_t(index(b, major_index, minor_index))], sizeof(float));
}

void PartialsBuffer::expect_gaps_untouched() const {
  std::vector<bool> logical(data_.size(), false);
  for (int64_t b = 0; b < batch_; ++b)
    for (int64_t i = 0; i < major_; ++i)
      for (int64_t j = 0; j < minor_; ++j) logical[std::size_t(index(b, i, j))] = true;
  Mismatches stray("gap slots of the partials written (no longer poison)");
  for (std::size_t at = 0; at < data_.size(); ++at)
    if (!logical[at])
      stray.check(all_poison(&data_[at], sizeof(float)), [&](std::ostream& os) { os << "slot " << at; });
}

void PartialsBuffer::expect_written_exactly() const {
  expect_gaps_untouched();
  Mismatches unwritten("partials never written (still poison)");
  for (int64_t b = 0; b < batch_; ++b)
    for (int64_t i = 0; i < major_; ++i)
      for (int64_t j = 0; j < minor_; ++j)
        unwritten.check(written(b, i, j),
                        [&](std::ostream& os) { os << "batch " << b << ", (" << i << ", " << j << ")"; });
}

double rounded(DType dtype, double x) {
  unsigned char stored[4];
  store_element(dtype, stored, x);
  return load_element(dtype, stored);
}

void expect_close(const reference::Matrix& out, const reference::Matrix& want, double tolerance) {
  expect_close_to_scale(out, want, default_scales(want), tolerance);
}

void expect_close(const reference::Vector& out, const reference::Vector& want, double tolerance) {
  expect_close(as_row(out), as_row(want), tolerance);
}

void expect_close_to_scale(const reference::Matrix& out, const reference::Matrix& want, const reference::Matrix& scales,
                           double tolerance) {
  expect_rounding_of(out, want, scales, 1.0, tolerance, unrounded, "values off the reference");
}

void expect_stored(const reference::Matrix& stored, const reference::Matrix& want, DType dtype, double scale,
                   double tolerance) {
  expect_rounding_of(
      stored, want, default_scales(want), scale, tolerance, [dtype](double x) { return rounded(dtype, x); },
      "stored values that are no rounding to " + std::string(name(dtype)) + " of the reference");
}

void expect_output(const HostTensor& out, const std::vector<reference::Matrix>& want, double scale, double tolerance) {
  expect_written_exactly(out);
  ASSERT_EQ(int64_t(want.size()), out.view.batch());
  for (int64_t b = 0; b < out.view.batch(); ++b) {
    SCOPED_TRACE("batch " + std::to_string(b));
    expect_stored(out.matrix(b), want[std::size_t(b)], out.view.dtype, scale, tolerance);
  }
}

void expect_partials(const PartialsBuffer& partials, const std::vector<reference::Matrix>& want, double tolerance) {
  partials.expect_written_exactly();
  for (std::size_t b = 0; b < want.size(); ++b) {
    SCOPED_TRACE("batch " + std::to_string(b));
    expect_close(partials.matrix(int64_t(b)), want[b], tolerance);
  }
}

}  // namespace coda::test

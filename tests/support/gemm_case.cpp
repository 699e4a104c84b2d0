#include "support/gemm_case.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "coda/reference/gemm.hpp"
#include "support/gpu.hpp"
#include "support/random.hpp"

namespace coda::test {

std::string GemmCase::describe() const {
  std::ostringstream s;
  s << "M=" << m << " N=" << n << " K=" << k << " L=" << batch << " A " << name(a_major) << " B " << name(b_major)
    << " " << name(input) << "->" << name(output) << " tile " << name(options.tile) << " split " << options.split_k
    << (options.split_k_in_cluster ? "" : " (workspace only)") << " pad " << pad << ", " << seed_note();
  return s.str();
}

double gemm_tolerance(DType output) {
  switch (output) {
    case DType::bf16: return 6e-3;  // one bf16 rounding: ~2^-9 relative per element
    case DType::f16: return 8e-4;   // 2^-12
    default: return 2e-5;           // fp32 accumulation over K <= ~16k
  }
}

namespace {

// A rows x cols matrix (per batch) whose rows are padded by `pad` elements, then rounded up to
// 16 bytes as TMA requires.
HostTensor make_padded(DType t, int64_t rows, int64_t cols, int64_t pad, int64_t batch) {
  const int64_t align = 16 / int64_t(size_of(t));
  const int64_t ld = ((cols + pad + align - 1) / align) * align;
  return HostTensor(t, rows, cols, ld, batch);
}

// An operand stored as its major says: K contiguous, or M/N contiguous.
HostTensor make_operand(DType t, int64_t mn, int64_t k, Major major, int64_t pad, int64_t batch) {
  return major == Major::k ? make_padded(t, mn, k, pad, batch) : make_padded(t, k, mn, pad, batch);
}

double element(const TensorView& v, int64_t row, int64_t col) {
  return load_element(v.dtype, static_cast<const unsigned char*>(v.data) + (row * v.ld() + col) * int64_t(v.element_bytes()));
}

std::vector<int64_t> rows_to_check(const GemmCase& c) {
  std::vector<int64_t> rows;
  if (c.sampled_rows == 0 || c.sampled_rows >= c.m) {
    for (int64_t r = 0; r < c.m; ++r) rows.push_back(r);
    return rows;
  }
  rows = {0, c.m - 1};  // the edges always, plus random rows
  while (int64_t(rows.size()) < c.sampled_rows) rows.push_back(uniform_int(0, c.m - 1));
  return rows;
}

}  // namespace

GemmOutcome run_gemm_case(const GemmCase& c, int repeats) {
  HostTensor a = make_operand(c.input, c.m, c.k, c.a_major, c.pad, c.batch);
  HostTensor b = make_operand(c.input, c.n, c.k, c.b_major, c.pad, c.batch);
  HostTensor out = make_padded(c.output, c.m, c.n, c.pad, c.batch);
  a.fill_random();
  b.fill_random();

  DeviceBuffer da(a.bytes.size()), db(b.bytes.size()), dc(out.bytes.size());
  da.upload(a.bytes);
  db.upload(b.bytes);
  TensorView va = a.view, vb = b.view, vc = out.view;
  va.data = da.get();
  vb.data = db.get();
  vc.data = dc.get();

  GemmOptions options = c.options;
  GemmOutcome result;
  const std::size_t workspace = gemm_workspace_bytes({va, c.a_major}, {vb, c.b_major}, vc, options);
  DeviceBuffer dw(std::max<std::size_t>(workspace, 1));
  if (workspace > 0 && options.workspace == nullptr) {
    options.workspace = dw.get();
    options.workspace_bytes = workspace;
  }
  result.plan = plan_gemm({va, c.a_major}, {vb, c.b_major}, vc, options);
  for (int r = 0; r < repeats; ++r) {
    dc.poison();
    dw.garbage(uint64_t(r) + 1);  // a workspace's contents never matter (gemm.hpp)
    gemm({va, c.a_major}, {vb, c.b_major}, vc, nullptr, options);
    CODA_CUDA_CHECK(cudaGetLastError());
    CODA_CUDA_CHECK(cudaDeviceSynchronize());
  }
  dc.download(out.bytes.data(), out.bytes.size());
  result.output_bits = out.bytes;

  // Poison check over every element of every row (padding excluded).
  for (int64_t l = 0; l < c.batch; ++l) {
    const TensorView v = out.matrix_view(l);
    for (int64_t r = 0; r < c.m; ++r)
      for (int64_t col = 0; col < c.n; ++col)
        if (std::isnan(element(v, r, col))) ++result.unwritten;
  }
  // Reference over the checked rows of every batch.
  const std::vector<int64_t> rows = rows_to_check(c);
  double diff = 0, norm = 0;
  for (int64_t l = 0; l < c.batch; ++l) {
    const reference::Matrix want = reference::gemm_rows(a.matrix(l), c.a_major, b.matrix(l), c.b_major, rows);
    const TensorView got = out.matrix_view(l);
    for (std::size_t i = 0; i < rows.size(); ++i)
      for (int64_t col = 0; col < c.n; ++col) {
        const double d = element(got, rows[i], col) - want(int64_t(i), col);
        diff += d * d;
        norm += want(int64_t(i), col) * want(int64_t(i), col);
      }
  }
  result.relative_error = std::isfinite(diff) ? std::sqrt(diff / std::max(norm, 1e-300)) : INFINITY;
  return result;
}

}  // namespace coda::test

#include "coda/reference/gemm.hpp"

#include <algorithm>
#include <thread>

#include "coda/core/status.hpp"
#include "coda/core/validate.hpp"

namespace coda::reference {
namespace {

// Both operands as K-contiguous rows: A (M x K), B (N x K), so every dot product walks memory
// in order.
Matrix k_major(const Matrix& m, Major major) { return major == Major::k ? m : m.transposed(); }

void multiply_rows(const Matrix& a, const Matrix& b, const std::vector<int64_t>& rows, Matrix& c) {
  const int64_t k = a.cols;
  const unsigned workers = std::max(1u, std::min<unsigned>(std::thread::hardware_concurrency(), unsigned(rows.size())));
  auto work = [&](unsigned w) {
    for (std::size_t i = w; i < rows.size(); i += workers) {
      const double* x = a.row(rows[i]);
      double* out = c.row(int64_t(i));
      for (int64_t n = 0; n < b.rows; ++n) {
        const double* y = b.row(n);
        double sum = 0;
        for (int64_t j = 0; j < k; ++j) sum += x[j] * y[j];
        out[n] = sum;
      }
    }
  };
  std::vector<std::thread> threads;
  for (unsigned w = 1; w < workers; ++w) threads.emplace_back(work, w);
  work(0);
  for (auto& t : threads) t.join();
}

}  // namespace

Matrix gemm_rows(const Matrix& a, Major a_major, const Matrix& b, Major b_major, const std::vector<int64_t>& rows) {
  const Matrix ak = k_major(a, a_major);
  const Matrix bk = k_major(b, b_major);
  if (ak.cols != bk.cols)
    throw InvalidArgument("coda::reference::gemm", text("argument 'b': K is ", bk.cols, " but a has K = ", ak.cols));
  for (int64_t r : rows)
    if (r < 0 || r >= ak.rows)
      throw InvalidArgument("coda::reference::gemm_rows",
                            text("argument 'rows': row ", r, " is outside [0, ", ak.rows, ")"));
  Matrix c(int64_t(rows.size()), bk.rows);
  multiply_rows(ak, bk, rows, c);
  return c;
}

Matrix gemm(const Matrix& a, Major a_major, const Matrix& b, Major b_major) {
  const int64_t m = a_major == Major::k ? a.rows : a.cols;
  std::vector<int64_t> rows(static_cast<std::size_t>(m));
  for (int64_t i = 0; i < m; ++i) rows[std::size_t(i)] = i;
  return gemm_rows(a, a_major, b, b_major, rows);
}

}  // namespace coda::reference

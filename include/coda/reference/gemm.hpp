// coda/reference/gemm.hpp: the fp64 GEMM oracle, for both operand majors.
//
//   // C = A * B^T with A stored (M x K) and B stored (N x K), the nn.Linear forward
//   Matrix c = coda::reference::gemm(a, Major::k, b, Major::k);
//   // dX = dY * W: A = dY (M x N_out), K-major; B = W stored (N_out x K_in): N-major for this GEMM
//   Matrix dx = coda::reference::gemm(dy, Major::k, w, Major::mn);
//
// Rows can be restricted (for sampled checks of very large products) with gemm_rows().
#pragma once

#include <vector>

#include "coda/core/layout.hpp"
#include "coda/reference/matrix.hpp"

namespace coda::reference {

/// C[m, n] = sum_k A[m, k] * B[n, k] in fp64. `a` is stored (M x K) when K-major, (K x M) when
/// M-major; `b` is stored (N x K) when K-major, (K x N) when N-major. Uses all host cores.
Matrix gemm(const Matrix& a, Major a_major, const Matrix& b, Major b_major);

/// The rows `rows` of the same product, in the order given (result is rows.size() x N).
Matrix gemm_rows(const Matrix& a, Major a_major, const Matrix& b, Major b_major, const std::vector<int64_t>& rows);

}  // namespace coda::reference

// coda/core/layout.hpp: how a GEMM operand is laid out in memory.
//
// coda computes C[m, n] = sum_k A[m, k] * B[n, k]. Each operand is a row-major matrix whose
// contiguous dimension is either K or the other one:
//   A K-major:  stored (M x K)   (activations X)          A M-major: stored (K x M)  (dY^T in dW = dY^T X)
//   B K-major:  stored (N x K)   (nn.Linear weight W)      B N-major: stored (K x N)  (W in dX = dY W)
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string_view>

#include "coda/core/api.hpp"

namespace coda {

enum class Major : uint8_t {
  k,   // K is the contiguous dimension
  mn,  // M (for A) or N (for B) is the contiguous dimension
};

constexpr std::string_view name(Major m) { return m == Major::k ? "K-major" : "MN-major"; }
/// Writes name(m).
CODA_API std::ostream& operator<<(std::ostream& out, Major m);

}  // namespace coda

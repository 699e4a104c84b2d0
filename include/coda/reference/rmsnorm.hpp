// coda/reference/rmsnorm.hpp: the fp64 reference of RMSNorm, plain and in the fused forms:
// GEMM + residual + partial RMSNorm + weight, the rstd reduction, GEMM + row scale, and GEMM +
// residual + RMSNorm backward with its coefficient c.
//
//   ResidualRmsNorm first = coda::reference::residual_rmsnorm(y, r, g, /*bn=*/128);  // H, S partials, U = H*g
//   Vector rstd = coda::reference::rstd_from_partials(first.sum_squares, hidden, 1e-6);
//   Matrix z = coda::reference::row_scale(coda::reference::gemm(first.weighted, Major::k, w2, Major::k), rstd);
//   // backward: P = row partials of <dZ, Z>; c = (1/hidden) sum_b P
//   Vector c = coda::reference::rmsnorm_backward_coefficient(p, hidden);
//   ResidualRmsNormBackward back = coda::reference::residual_rmsnorm_backward(d, first.residual, rstd, g, c, dr_in,
//   /*bm=*/128);
//
// RMSNorm: rstd[m] = 1 / sqrt(mean_n H[m, n]^2 + eps), N = rstd * H ⊙ g (g broadcast per column).
#pragma once

#include <cstdint>

#include "coda/reference/matrix.hpp"

namespace coda::reference {

// ---- plain ---------------------------------------------------------------------------------------
/// rstd[m] = 1 / sqrt(mean_n h[m, n]^2 + eps).
Vector rmsnorm_rstd(const Matrix& h, double eps);
/// N = rstd ⊙ h ⊙ g.
Matrix rmsnorm(const Matrix& h, const Vector& weight, double eps);

struct RmsNormBackward {
  Matrix grad_input;   // dH = rstd (dN ⊙ g) - rstd^3 H (1/hidden) sum_n (dN ⊙ g ⊙ H)
  Vector grad_weight;  // dg = sum_m dN ⊙ (rstd H)
};
/// The standard RMSNorm backward, from the input h (not from saved statistics).
RmsNormBackward rmsnorm_backward(const Matrix& grad_output, const Matrix& h, const Vector& weight, double eps);

// ---- GEMM + residual + partial RMSNorm + weight ------------------------------------------------
struct ResidualRmsNorm {
  Matrix residual;     // H = Y + R, the new residual stream
  Matrix sum_squares;  // S[m, b] = sum_{n in tile b} H[m, n]^2, M x ceil(N/bn)
  Matrix weighted;     // U = H ⊙ g
};
ResidualRmsNorm residual_rmsnorm(const Matrix& y, const Matrix& residual, const Vector& weight, int64_t bn);

/// The auxiliary reduction: rstd[m] = 1 / sqrt(sum_b S[m, b] / hidden + eps).
Vector rstd_from_partials(const Matrix& sum_squares, int64_t hidden, double eps);

// ---- GEMM + row scale ---------------------------------------------------------------------------
/// Z[m, n] = scale[m] * Y[m, n].
Matrix row_scale(const Matrix& y, const Vector& scale);

struct RowScaleBackward {
  Matrix grad_input;  // dY = scale ⊙ dZ
  Vector grad_scale;  // dscale[m] = <dZ[m], Y[m]>
};
RowScaleBackward row_scale_backward(const Matrix& grad_output, const Matrix& y, const Vector& scale);

// ---- GEMM + residual + RMSNorm backward ---------------------------------------------------------
/// c[m] = (1/hidden) sum_b P[m, b], from the row partials P of <dZ, Z> (which equals
/// (1/hidden) <dN ⊙ g, rstd H> because Z = N W2^T and dN = dZ W2).
Vector rmsnorm_backward_coefficient(const Matrix& row_dot_partials, int64_t hidden);

struct ResidualRmsNormBackward {
  Matrix grad_residual;         // dH = dR_in + rstd ⊙ (D ⊙ g - rstd H c)
  Matrix weight_grad_partials;  // ceil(M/bm) x hidden: column partials of dg = sum_m D ⊙ (rstd H)
  Matrix normalized;            // N = rstd H ⊙ g, for dW2 = dZ^T N (the GPU stores it only when asked)
};
/// Kernel 9: d = dZ W2 (M x hidden, the GEMM output), h the saved residual stream, rstd, the
/// weight g, c from rmsnorm_backward_coefficient, grad_residual_in the gradient already flowing
/// into the residual stream (zeros if none); bm the GEMM's tile height.
ResidualRmsNormBackward residual_rmsnorm_backward(const Matrix& d, const Matrix& h, const Vector& rstd,
                                                  const Vector& weight, const Vector& c,
                                                  const Matrix& grad_residual_in, int64_t bm);

}  // namespace coda::reference

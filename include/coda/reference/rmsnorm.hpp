// coda/reference/rmsnorm.hpp: the fp64 reference of RMSNorm, plain and in the fused forms:
// GEMM + residual + partial RMSNorm + weight, the rstd reduction, GEMM + row scale, and the backward
// as the fused kernels compute it (docs/kernels.md, "Backward"): the correction from the row
// partials of <dZ, Z>, GEMM + residual + RMSNorm backward on D' = (rstd ⊙ dZ) W2, and the weight
// gradients of GEMM 2 (dW2 and dg) in the epilogue of G = (rstd ⊙ dZ)^T H.
//
//   ResidualRmsNorm first = coda::reference::residual_rmsnorm(y, r, g, /*bn=*/128);  // H, S partials, U = H*g
//   Vector rstd = coda::reference::rstd_from_partials(first.sum_squares, hidden, 1e-6);
//   Matrix z = coda::reference::row_scale(coda::reference::gemm(first.weighted, Major::k, w2, Major::k), rstd);
//   // backward: P = row partials of <dZ, Z>, dZs = rstd ⊙ dZ
//   Vector c = coda::reference::rmsnorm_backward_correction(p, rstd, hidden);     // rstd^2 <dZ, Z> / hidden
//   Matrix dh = coda::reference::residual_rmsnorm_backward(gemm(dzs, Major::k, w2, Major::mn), first.residual,
//                                                          g, c, dh_out);
//   RmsNormWeightGradients wg = coda::reference::rmsnorm_weight_gradients(
//       gemm(dzs, Major::mn, first.residual, Major::mn), w2, g, /*bm=*/128);    // dW2, dg partials
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

// ---- GEMM + residual + RMSNorm backward (docs/kernels.md) -------------------------------------
/// c'[m] = rstd[m]^2 (1/hidden) sum_b P[m, b], from the row partials P of <dZ, Z> (which equals
/// <dN, N>, N = rstd H ⊙ g, because Z = N W2^T and dN = dZ W2): the coefficient of H in dH.
Vector rmsnorm_backward_correction(const Matrix& row_dot_partials, const Vector& rstd, int64_t hidden);

/// The GEMM + residual + RMSNorm backward's epilogue: `d` = (rstd ⊙ dZ) W2 (M x hidden, the GEMM
/// output), h the saved residual stream, the weight g, the correction c' above, and
/// grad_residual_in the gradient already reaching H from later layers (zeros if none):
///   dH = grad_residual_in + d ⊙ g - c' ⊙ H
/// (= dH_out + rstd (dN ⊙ g) - rstd^3 H <dN ⊙ g, H> / hidden, the plain backward).
Matrix residual_rmsnorm_backward(const Matrix& d, const Matrix& h, const Vector& weight, const Vector& correction,
                                 const Matrix& grad_residual_in);

struct RmsNormWeightGradients {
  Matrix grad_projection_weight;  // dW2 = G ⊙ g (g per column), N2 x hidden
  Matrix norm_weight_partials;    // ceil(N2/bm) x hidden: column partials of dg = sum_i G ⊙ W2
};
/// The weight gradients of GEMM 2 (Z = N W2^T, N = rstd H ⊙ g) from the epilogue of the GEMM
/// G = (rstd ⊙ dZ)^T H (`product`, N2 x hidden): dW2 = dZ^T N = G ⊙ g, and dg = sum_m dN ⊙ (rstd H)
/// = sum_i W2 ⊙ G, column partials over row tiles of height bm of G.
RmsNormWeightGradients rmsnorm_weight_gradients(const Matrix& product, const Matrix& projection_weight,
                                                const Vector& weight, int64_t bm);

}  // namespace coda::reference

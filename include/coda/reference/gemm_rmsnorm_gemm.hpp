// coda/reference/gemm_rmsnorm_gemm.hpp: the fp64 reference of the whole GEMM–residual–RMSNorm–GEMM
// pattern, forward and backward, each computed two ways: plainly (RMSNorm, then the GEMM) and
// reparameterized as the fused kernels do it (residual + RMSNorm partials -> rstd -> row scale;
// <dZ, Z> -> c -> the residual + RMSNorm backward). Also GEMM 2's compositions: row scale + SwiGLU,
// row scale + RoPE and row scale + partial cross-entropy.
//
//   GemmRmsNormGemm layer{x, w1, r, g, w2, /*eps=*/1e-6};
//   GemmRmsNormGemmForward f = coda::reference::gemm_rmsnorm_gemm_forward(layer);          // plain
//   GemmRmsNormGemmForward k = coda::reference::gemm_rmsnorm_gemm_forward_fused(layer, 128);  // == f
//   GemmRmsNormGemmGradients g = coda::reference::gemm_rmsnorm_gemm_backward(layer, f, dz, dh_out);
//
// Forward:  H = X W1^T + R,  rstd = 1/sqrt(mean_n H^2 + eps),  N = rstd H ⊙ g,  Z = N W2^T.
// Backward, given dZ and dH_out (the gradient reaching the residual stream H from later layers):
//   dW2 = dZ^T N, dN = dZ W2, dH = dH_out + RMSNorm backward, dg = sum_m dN ⊙ (rstd H),
//   dX = dH W1, dW1 = dH^T X, dR = dH. (Fused: see gemm_rmsnorm_gemm_backward_fused.)
#pragma once

#include <cstdint>
#include <vector>

#include "coda/reference/cross_entropy.hpp"
#include "coda/reference/matrix.hpp"
#include "coda/reference/rope.hpp"

namespace coda::reference {

/// One instance of the pattern: its input, residual and parameters.
struct GemmRmsNormGemm {
  Matrix x;            // M x K, input of GEMM 1
  Matrix w1;           // hidden x K
  Matrix residual;     // R, M x hidden
  Vector norm_weight;  // g, hidden
  Matrix w2;           // N2 x hidden
  double eps = 1e-6;
};

struct GemmRmsNormGemmForward {
  Matrix residual_out;  // H, the new residual stream (saved for backward)
  Vector rstd;          // saved for backward
  Matrix output;        // Z, M x N2 (before GEMM 2's own epilogue)
};

/// Plain: RMSNorm(H), then the GEMM.
GemmRmsNormGemmForward gemm_rmsnorm_gemm_forward(const GemmRmsNormGemm& layer);
/// Fused: GEMM + residual + RMSNorm partials (H, S partials over column tiles of width bn,
/// U = H ⊙ g), rstd from the partials, GEMM + row scale (Z = rstd ⊙ (U W2^T)).
GemmRmsNormGemmForward gemm_rmsnorm_gemm_forward_fused(const GemmRmsNormGemm& layer, int64_t bn);

struct GemmRmsNormGemmGradients {
  Matrix x;            // dX, M x K
  Matrix w1;           // dW1, hidden x K
  Matrix residual;     // dR = dH, M x hidden
  Vector norm_weight;  // dg, hidden
  Matrix w2;           // dW2, N2 x hidden
};

/// `saved` is the forward's output; grad_output is dZ, grad_residual_out is dH_out.
/// Plain: dN = dZ W2, then the standard RMSNorm backward recomputed from H (saved.rstd unused).
GemmRmsNormGemmGradients gemm_rmsnorm_gemm_backward(const GemmRmsNormGemm& layer, const GemmRmsNormGemmForward& saved,
                                                    const Matrix& grad_output, const Matrix& grad_residual_out);
/// Fused, from the saved H, rstd and Z, as the kernels compute it: row partials of <dZ, Z> over
/// column tiles of width bn (what the epilogue producing dZ emits, storing dZs = rstd ⊙ dZ), the
/// correction c' from them, the residual + RMSNorm backward on D' = dZs W2, and the GEMM
/// G = dZs^T H with dW2 = G ⊙ g and column partials of dg = sum_i G ⊙ W2 over row tiles of height bm.
GemmRmsNormGemmGradients gemm_rmsnorm_gemm_backward_fused(const GemmRmsNormGemm& layer,
                                                          const GemmRmsNormGemmForward& saved,
                                                          const Matrix& grad_output, const Matrix& grad_residual_out,
                                                          int64_t bn, int64_t bm);

// ---- GEMM 2's epilogues: y = U W2^T (the GEMM output), rstd from GEMM 1's partials ------------
/// Kernel 6: swiglu(rstd ⊙ y), y interleaved (M x 2F).
Matrix row_scale_swiglu(const Matrix& y, const Vector& rstd);
/// Kernel 7: rope(rstd ⊙ y).
Matrix row_scale_rope(const Matrix& y, const Vector& rstd, const std::vector<int32_t>& positions,
                      const RopeCache& cache, int64_t head_dim, int64_t rot_heads);
/// Kernel 8: cross-entropy partials of the logits rstd ⊙ y.
CrossEntropyPartials row_scale_cross_entropy_partials(const Matrix& y, const Vector& rstd,
                                                      const std::vector<int32_t>& targets, int64_t bn,
                                                      const CrossEntropyOptions& options);

}  // namespace coda::reference

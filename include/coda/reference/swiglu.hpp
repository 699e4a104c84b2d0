// coda/reference/swiglu.hpp: the fp64 reference of GEMM + SwiGLU, its backward, and the host helpers that interleave
// gate/up weights so each pair is adjacent.
//
//   Matrix w = coda::reference::interleave_gate_up(w_gate, w_up);          // 2F x K: gate0, up0, gate1, ...
//   Matrix y = coda::reference::gemm(x, Major::k, w, Major::k);            // M x 2F, interleaved
//   Matrix o = coda::reference::swiglu(y);                                  // M x F
//   SwigluBackward b = coda::reference::swiglu_backward(d_a, y, /*bn=*/128);
//   // b.grad_y (M x 2F), b.row_partials (M x ceil(F/128)), b.output (O, for dW_down)
#pragma once

#include <cstdint>

#include "coda/reference/matrix.hpp"

namespace coda::reference {

/// O[m, j] = silu(Y[m, 2j]) * Y[m, 2j+1]: Y is M x 2F with (gate, up) pairs interleaved; O is M x F.
Matrix swiglu(const Matrix& y);

/// Interleave the rows of separate gate and up weights (each F x K, nn.Linear layout) into one
/// 2F x K weight: rows gate0, up0, gate1, up1, ... A bias interleaves the same way (F x 1).
Matrix interleave_gate_up(const Matrix& w_gate, const Matrix& w_up);

/// The inverse of interleave_gate_up: even rows are the gate weight, odd rows the up weight.
struct GateUp {
  Matrix gate;
  Matrix up;
};
GateUp deinterleave_gate_up(const Matrix& w);

/// Kernel 10's outputs.
struct SwigluBackward {
  Matrix grad_y;        // M x 2F, interleaved: (dG, dU) for each pair
  Matrix row_partials;  // M x ceil(F/bn): sum over the tile of (g*dG + u*dU) = <Y, dY> over the tile
  Matrix output;        // O = silu(g) * u recomputed (M x F), for dW_down = dO^T O; the GPU stores it
                        // only when asked, the reference always returns it
};

/// Kernel 10: dA = dO * W_down (M x F) is the GEMM output; y the saved interleaved Y (M x 2F).
/// With g, u a pair and s = sigmoid(g):
///   dG = dA * u * s * (1 + g (1 - s)),   dU = dA * g * s.
/// bn is the tile width of that GEMM, in columns of dA (pairs): tile b covers dA columns
/// [b*bn, (b+1)*bn) and so columns [2*b*bn, 2*(b+1)*bn) of Y and dY. The row partials are the
/// statistic <dZ, Z> that the RMSNorm before this layer needs (Z = Y there).
SwigluBackward swiglu_backward(const Matrix& grad_a, const Matrix& y, int64_t bn);

}  // namespace coda::reference

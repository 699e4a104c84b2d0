// coda/reference/layer.hpp: the fp64 reference of the non-attention part of a LLaMA-style
// Transformer layer, forward and backward (../shared/design/torch_baselines/torch_layer.py):
//
//   h1  = r + attn_out Wo^T
//   a   = silu(gate) * up,  [gate, up] = RMSNorm(h1; g1) Wgu^T    (Wgu's rows interleaved: gate, up, ...)
//   h2  = h1 + a Wd^T
//   qkv = RoPE(RMSNorm(h2; g2) Wqkv^T)                           (the first rotated_heads heads rotated)
//
// Attention is outside: its output is an input and the gradient of its input qkv is given. Each
// direction is computed two ways: plainly (norms, then GEMMs; the chain rule step by step) and as
// coda's kernels compute it (coda::blocks; docs/kernels.md), with parts of bn columns and bm rows.
//
//   Layer layer = ...;                                       // weights, norm weights, RoPE
//   LayerInputs in{attn_out, residual, positions};
//   LayerForward f = coda::reference::layer_forward(layer, in);
//   LayerGradients g = coda::reference::layer_backward(layer, in, f, grad_h2, grad_qkv);
//   LayerGradients same = coda::reference::layer_backward_fused(layer, in, f, grad_h2, grad_qkv, 128, 128);
#pragma once

#include <cstdint>
#include <vector>

#include "coda/reference/matrix.hpp"
#include "coda/reference/rope.hpp"

namespace coda::reference {

/// The layer's parameters. Hidden H, FFN width F, Nqkv = heads * head_dim.
struct Layer {
  Matrix wo;         // H x H (attention's output projection)
  Vector norm1;      // g1, H
  Matrix w_gate_up;  // 2F x H, rows interleaved (interleave_gate_up)
  Matrix w_down;     // H x F
  Vector norm2;      // g2, H
  Matrix w_qkv;      // Nqkv x H, rotated heads in the interleaved pair order (permute_rotate_half_to_interleaved)
  int64_t head_dim = 128;
  int64_t rotated_heads = 0;  // Q and K heads; the V heads after them pass through
  RopeCache cache;            // max_pos x head_dim / 2
  double eps = 1e-6;
};

struct LayerInputs {
  Matrix attn_out;                 // T x H
  Matrix residual;                 // r, T x H
  std::vector<int32_t> positions;  // T, each in [0, max_pos)
};

/// The outputs (h2, qkv) and what the backward reads.
struct LayerForward {
  Matrix h1;              // T x H, the residual stream after attention
  Vector rstd1;           // T
  Matrix pre_activation;  // [gate, up] interleaved, T x 2F: RMSNorm(h1) Wgu^T
  Matrix activation;      // a, T x F
  Matrix h2;              // T x H, output
  Vector rstd2;           // T
  Matrix qkv;             // T x Nqkv, output
};

/// The gradients of every input and parameter.
struct LayerGradients {
  Matrix attn_out;
  Matrix residual;
  Matrix wo;
  Vector norm1;
  Matrix w_gate_up;
  Matrix w_down;
  Vector norm2;
  Matrix w_qkv;
};

/// Plain: RMSNorm, then each GEMM.
LayerForward layer_forward(const Layer& layer, const LayerInputs& in);
/// As the kernels compute it: residual + RMSNorm partials (U = H g) -> rstd -> row scale + SwiGLU;
/// residual + RMSNorm partials -> rstd -> row scale + RoPE. Parts of bn columns.
LayerForward layer_forward_fused(const Layer& layer, const LayerInputs& in, int64_t bn);

/// Plain: the chain rule step by step, the RMSNorm backward from h (forward's rstd unused).
LayerGradients layer_backward(const Layer& layer, const LayerInputs& in, const LayerForward& forward,
                              const Matrix& grad_h2, const Matrix& grad_qkv);
/// As the kernels compute it (docs/kernels.md, "Backward"): RoPE backward with the row partials of
/// <dqkv, qkv>, the residual + RMSNorm backward and its weight gradients from rstd-scaled gradients,
/// the SwiGLU backward with its row partials, the plain GEMMs. Parts of bn columns and bm rows.
LayerGradients layer_backward_fused(const Layer& layer, const LayerInputs& in, const LayerForward& forward,
                                    const Matrix& grad_h2, const Matrix& grad_qkv, int64_t bn, int64_t bm);

}  // namespace coda::reference

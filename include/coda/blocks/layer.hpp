// coda/blocks/layer.hpp: the non-attention part of a LLaMA-style Transformer layer, forward and
// backward, as coda's fused ops (docs/kernels.md; reference/layer.hpp is its fp64 twin):
//
//   h1  = r + attn_out Wo^T
//   a   = silu(gate) * up,  [gate, up] = RMSNorm(h1; g1) Wgu^T
//   h2  = h1 + a Wd^T
//   qkv = RoPE(RMSNorm(h2; g2) Wqkv^T)          (V heads not rotated)
//
// Attention is outside: its output is an input, and the gradient of its input qkv is given to the
// backward. Four GEMMs forward (each with its epilogue), eight backward; no allocation, no host
// synchronization, one stream (capturable in a CUDA graph). The workspace sizes are known up front:
//
//   coda::blocks::LayerWeights w{wo, g1, w_gate_up, w_down, g2, w_qkv, cos, sin, /*head_dim=*/128,
//                                /*rotated_heads=*/q_heads + kv_heads};
//   coda::blocks::LayerSaved saved{h1, rstd1, pre_activation, activation, rstd2};  // T x H, T, T x 2F, T x F, T
//   std::size_t bytes = coda::blocks::layer_workspace_bytes(w, tokens);
//   coda::blocks::layer_forward(w, attn_out, residual, positions, h2, qkv, saved, ws, bytes, stream);
//   ... attention forward and backward ...
//   coda::blocks::layer_backward(w, attn_out, positions, h2, qkv, saved, grad_h2, grad_qkv, grads, ws, bytes,
//                                stream);
//
// Weights use the nn.Linear layout; w_gate_up has its gate and up rows interleaved
// (ops::interleave_gate_up) and w_qkv its rotated heads in the interleaved pair order
// (ops::permute_rotate_half_to_interleaved). Activations, weights and their gradients are bf16 or
// f16 (one type); norm weights f32, bf16 or f16; rstd f32; weight gradients in the activations' type
// or f32, norm weight gradients f32, bf16 or f16. H, F and the QKV width must be multiples of 8, any
// T >= 1.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "coda/core/api.hpp"
#include "coda/core/status.hpp"
#include "coda/core/tensor.hpp"

namespace coda::blocks {

struct LayerWeights {
  TensorView wo;         // H x H
  TensorView norm1;      // g1, H
  TensorView w_gate_up;  // 2F x H, rows interleaved
  TensorView w_down;     // H x F
  TensorView norm2;      // g2, H
  TensorView w_qkv;      // Nqkv x H, Nqkv = heads * head_dim
  TensorView cos;        // f32, max_pos x head_dim / 2
  TensorView sin;
  int head_dim = 128;
  int rotated_heads = 0;  // Q and K heads; the V heads after them pass through
  float eps = 1e-6f;
};

/// What the forward keeps for the backward (besides its outputs h2 and qkv and its input attn_out).
/// The activation a is the down projection's input, kept as autograd keeps it: recomputed instead
/// inside the SwiGLU backward, it made that GEMM's epilogue too long for the instruction cache
/// (docs/performance.md), and a backward workspace of its size would hold it anyway.
struct LayerSaved {
  TensorView h1;              // T x H
  TensorView rstd1;           // f32, T
  TensorView pre_activation;  // T x 2F, [gate, up] interleaved
  TensorView activation;      // a = silu(gate) * up, T x F
  TensorView rstd2;           // f32, T
};

/// Where the backward writes each gradient.
struct LayerGradients {
  TensorView attn_out;   // T x H
  TensorView residual;   // T x H
  TensorView wo;         // H x H
  TensorView norm1;      // H
  TensorView w_gate_up;  // 2F x H, interleaved like w_gate_up
  TensorView w_down;     // H x F
  TensorView norm2;      // H
  TensorView w_qkv;      // Nqkv x H
};

/// Bytes of the workspace layer_forward and layer_backward need for `tokens` tokens (one workspace
/// serves both, ordered on a stream; any contents). Checks the weights' shapes.
CODA_API std::size_t layer_workspace_bytes(const LayerWeights& weights, int64_t tokens);

/// h2 and qkv (T x H, T x Nqkv) from attn_out and residual (T x H) and positions (int32, T); fills
/// `saved`.
CODA_API void layer_forward(const LayerWeights& weights, const TensorView& attn_out, const TensorView& residual,
                            const TensorView& positions, const TensorView& h2, const TensorView& qkv,
                            const LayerSaved& saved, void* workspace, std::size_t workspace_bytes,
                            cudaStream_t stream = nullptr);
CODA_API Status try_layer_forward(const LayerWeights& weights, const TensorView& attn_out, const TensorView& residual,
                                  const TensorView& positions, const TensorView& h2, const TensorView& qkv,
                                  const LayerSaved& saved, void* workspace, std::size_t workspace_bytes,
                                  cudaStream_t stream = nullptr);

/// Every gradient from grad_h2 (T x H) and grad_qkv (T x Nqkv), given the forward's inputs, outputs and
/// `saved`.
CODA_API void layer_backward(const LayerWeights& weights, const TensorView& attn_out, const TensorView& positions,
                             const TensorView& h2, const TensorView& qkv, const LayerSaved& saved,
                             const TensorView& grad_h2, const TensorView& grad_qkv, const LayerGradients& grads,
                             void* workspace, std::size_t workspace_bytes, cudaStream_t stream = nullptr);
CODA_API Status try_layer_backward(const LayerWeights& weights, const TensorView& attn_out, const TensorView& positions,
                                   const TensorView& h2, const TensorView& qkv, const LayerSaved& saved,
                                   const TensorView& grad_h2, const TensorView& grad_qkv, const LayerGradients& grads,
                                   void* workspace, std::size_t workspace_bytes, cudaStream_t stream = nullptr);

}  // namespace coda::blocks

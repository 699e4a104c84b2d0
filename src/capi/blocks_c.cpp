// The C ABI of coda::blocks: check what only C can get wrong (null structs, malformed tensors),
// then hand over to the block, whose validation covers everything else.
#include "capi/c_bridge.hpp"
#include "coda/blocks/layer.hpp"
#include "coda/coda.h"

namespace {

using coda::capi::Views;

coda::blocks::LayerWeights weights_of(Views& v, const coda_layer_weights* w) {
  v.check.not_null("weights", w);
  if (w == nullptr) return {};
  coda::blocks::LayerWeights out;
  out.wo = v.tile("weights.wo", &w->wo);
  out.norm1 = v.vector("weights.norm1", &w->norm1);
  out.w_gate_up = v.tile("weights.w_gate_up", &w->w_gate_up);
  out.w_down = v.tile("weights.w_down", &w->w_down);
  out.norm2 = v.vector("weights.norm2", &w->norm2);
  out.w_qkv = v.tile("weights.w_qkv", &w->w_qkv);
  out.cos = v.tile("weights.cos", &w->cos);
  out.sin = v.tile("weights.sin", &w->sin);
  out.head_dim = w->head_dim;
  out.rotated_heads = w->rotated_heads;
  out.eps = w->eps;
  return out;
}

coda::blocks::LayerSaved saved_of(Views& v, const coda_layer_saved* s) {
  v.check.not_null("saved", s);
  if (s == nullptr) return {};
  return {v.tile("saved.h1", &s->h1), v.vector("saved.rstd1", &s->rstd1),
          v.tile("saved.pre_activation", &s->pre_activation), v.tile("saved.activation", &s->activation),
          v.vector("saved.rstd2", &s->rstd2)};
}

coda::blocks::LayerGradients gradients_of(Views& v, const coda_layer_gradients* g) {
  v.check.not_null("grads", g);
  if (g == nullptr) return {};
  return {v.tile("grads.attn_out", &g->attn_out),
          v.tile("grads.residual", &g->residual),
          v.tile("grads.wo", &g->wo),
          v.vector("grads.norm1", &g->norm1),
          v.tile("grads.w_gate_up", &g->w_gate_up),
          v.tile("grads.w_down", &g->w_down),
          v.vector("grads.norm2", &g->norm2),
          v.tile("grads.w_qkv", &g->w_qkv)};
}

}  // namespace

extern "C" {

using coda::capi::c_call;
using coda::capi::stream_of;

coda_status coda_layer_workspace_bytes(const coda_layer_weights* weights, int64_t tokens, size_t* bytes) {
  constexpr const char* kFunction = "coda_layer_workspace_bytes";
  if (bytes != nullptr) *bytes = 0;
  return c_call(kFunction, [&] {
    Views v(kFunction);
    v.check.not_null("bytes", bytes);
    const coda::blocks::LayerWeights w = weights_of(v, weights);
    v.check.throw_if_error();
    *bytes = coda::blocks::layer_workspace_bytes(w, tokens);
  });
}

coda_status coda_layer_forward(const coda_layer_weights* weights, const coda_tensor* attn_out,
                               const coda_tensor* residual, const coda_tensor* positions, const coda_tensor* h2,
                               const coda_tensor* qkv, const coda_layer_saved* saved, void* workspace,
                               size_t workspace_bytes, void* stream) {
  constexpr const char* kFunction = "coda_layer_forward";
  return c_call(kFunction, [&] {
    Views v(kFunction);
    const coda::blocks::LayerWeights w = weights_of(v, weights);
    const coda::TensorView av = v.tile("attn_out", attn_out), rv = v.tile("residual", residual),
                           pv = v.vector("positions", positions), hv = v.tile("h2", h2), qv = v.tile("qkv", qkv);
    const coda::blocks::LayerSaved sv = saved_of(v, saved);
    v.check.throw_if_error();
    coda::blocks::layer_forward(w, av, rv, pv, hv, qv, sv, workspace, workspace_bytes, stream_of(stream));
  });
}

coda_status coda_layer_backward(const coda_layer_weights* weights, const coda_tensor* attn_out,
                                const coda_tensor* positions, const coda_tensor* h2, const coda_tensor* qkv,
                                const coda_layer_saved* saved, const coda_tensor* grad_h2, const coda_tensor* grad_qkv,
                                const coda_layer_gradients* grads, void* workspace, size_t workspace_bytes,
                                void* stream) {
  constexpr const char* kFunction = "coda_layer_backward";
  return c_call(kFunction, [&] {
    Views v(kFunction);
    const coda::blocks::LayerWeights w = weights_of(v, weights);
    const coda::TensorView av = v.tile("attn_out", attn_out), pv = v.vector("positions", positions),
                           hv = v.tile("h2", h2), qv = v.tile("qkv", qkv);
    const coda::blocks::LayerSaved sv = saved_of(v, saved);
    const coda::TensorView gh = v.tile("grad_h2", grad_h2), gq = v.tile("grad_qkv", grad_qkv);
    const coda::blocks::LayerGradients gv = gradients_of(v, grads);
    v.check.throw_if_error();
    coda::blocks::layer_backward(w, av, pv, hv, qv, sv, gh, gq, gv, workspace, workspace_bytes, stream_of(stream));
  });
}

}  // extern "C"

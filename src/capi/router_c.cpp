// The C ABI of the MoE router: the C options (a null struct, an unknown mode code) as C++ options,
// then coda::ops::gemm_router, whose validation covers everything else.
#include "capi/c_bridge.hpp"
#include "coda/coda.h"
#include "coda/ops/router.hpp"

namespace coda::capi {
namespace {

ops::RouterOptions router_options_of(const coda_router_options* o, Views& v) {
  ops::RouterOptions out;
  v.check.not_null("options", o);
  if (!o) return out;
  v.check.require(o->mode == CODA_ROUTING_SOFTMAX_TOPK || o->mode == CODA_ROUTING_TOPK_SOFTMAX ||
                      o->mode == CODA_ROUTING_SIGMOID_BIAS,
                  "options.mode", "code ", int(o->mode),
                  " is not a coda_routing_mode (CODA_ROUTING_SOFTMAX_TOPK, _TOPK_SOFTMAX or _SIGMOID_BIAS)");
  out.mode = static_cast<ops::RoutingMode>(o->mode);
  out.k = o->k;
  out.renormalize = o->renormalize != 0;
  out.expert_bias = v.optional_vector("options.expert_bias", o->expert_bias);
  out.n_group = o->n_group;
  out.topk_group = o->topk_group;
  out.routed_scaling_factor = o->routed_scaling_factor;
  out.fused_selection = o->fused_selection != 0;
  return out;
}

}  // namespace
}  // namespace coda::capi

extern "C" {

coda_status coda_router_workspace_bytes(const coda_tensor* x, const coda_tensor* w, const coda_router_options* options,
                                        const coda_tensor* scores, size_t* bytes) {
  constexpr const char* kFunction = "coda_router_workspace_bytes";
  if (bytes != nullptr) *bytes = 0;
  return coda::capi::c_call(kFunction, [&] {
    coda::capi::Views v(kFunction);
    v.check.not_null("bytes", bytes);
    const coda::TensorView xv = v.tile("x", x), wv = v.tile("w", w);
    coda::ops::RouterOptions o = coda::capi::router_options_of(options, v);
    o.scores = v.optional_tile("scores", scores);
    v.check.throw_if_error();
    *bytes = coda::ops::router_workspace_bytes(xv, wv, o);
  });
}

coda_status coda_gemm_router(const coda_tensor* x, const coda_tensor* w, const coda_tensor* weights,
                             const coda_tensor* ids, const coda_router_options* options,
                             const coda_tensor* token_expert_indices, const coda_tensor* expert_counts,
                             const coda_tensor* scores, void* workspace, size_t workspace_bytes, void* stream) {
  constexpr const char* kFunction = "coda_gemm_router";
  return coda::capi::c_call(kFunction, [&] {
    coda::capi::Views v(kFunction);
    const coda::TensorView xv = v.tile("x", x), wv = v.tile("w", w), weights_view = v.tile("weights", weights),
                           ids_view = v.tile("ids", ids);
    coda::ops::RouterOptions o = coda::capi::router_options_of(options, v);
    o.token_expert_indices = v.optional_tile("token_expert_indices", token_expert_indices);
    o.expert_counts = v.optional_vector("expert_counts", expert_counts);
    o.scores = v.optional_tile("scores", scores);
    v.check.throw_if_error();
    coda::ops::gemm_router(xv, wv, weights_view, ids_view, workspace, workspace_bytes,
                           coda::capi::stream_of(stream), o);
  });
}

}  // extern "C"

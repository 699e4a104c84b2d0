// The C ABI of the fused ops: check what only C can get wrong (null or malformed tensor structs,
// unknown enum codes), then hand over to coda::ops, whose validation covers everything else.
#include <cuda_runtime_api.h>

#include "capi/c_bridge.hpp"
#include "coda/coda.h"
#include "coda/ops/cross_entropy.hpp"
#include "coda/ops/rmsnorm.hpp"
#include "coda/ops/rope.hpp"
#include "coda/ops/swiglu.hpp"
#include "ops/op_checks.hpp"

namespace coda::capi {
namespace {

// The C options as C++ options (defaults for a null pointer); an unknown reduction code is refused.
ops::CrossEntropyOptions options_of(const coda_cross_entropy_options* o, ArgumentCheck& check) {
  ops::CrossEntropyOptions out;
  if (!o) return out;
  check.require(
      o->reduction == CODA_REDUCTION_NONE || o->reduction == CODA_REDUCTION_SUM || o->reduction == CODA_REDUCTION_MEAN,
      "options.reduction", "code ", int(o->reduction),
      " is not a coda_loss_reduction (CODA_REDUCTION_NONE, _SUM or _MEAN)");
  out.ignore_index = o->ignore_index;
  out.label_smoothing = o->label_smoothing;
  out.z_loss = o->z_loss;
  out.softcap = o->softcap;
  out.reduction = o->reduction == CODA_REDUCTION_NONE  ? ops::LossReduction::none
                  : o->reduction == CODA_REDUCTION_SUM ? ops::LossReduction::sum
                                                       : ops::LossReduction::mean;
  return out;
}

// Both C entries of the cross-entropy backward (recomputing, or from stored logits): the rules of the
// arguments C passes on their own (C++ nests them in `backward`) by their C names.
coda_status cross_entropy_backward(const char* function, const coda_tensor* x, const coda_tensor* w,
                                   const coda_tensor* targets, const coda_tensor* lse, const coda_tensor* grad_loss,
                                   bool from_logits, const coda_tensor* logits, const coda_tensor* grad_logits,
                                   const coda_tensor* grad_x, const coda_tensor* grad_w,
                                   const coda_cross_entropy_options* options, const coda_tensor* row_scale,
                                   const coda_tensor* row_dots, int64_t chunk_columns, float skip_below,
                                   void* workspace, size_t workspace_bytes, void* stream) {
  return c_call(function, [&] {
    Views v(function);
    const TensorView xv = v.tile("x", x), wv = v.tile("w", w), tv = v.vector("targets", targets),
                     lv = v.vector("lse", lse), gv = v.vector("grad_loss", grad_loss), dxv = v.tile("grad_x", grad_x),
                     dwv = v.tile("grad_w", grad_w);
    ops::CrossEntropyOptions o = options_of(options, v.check);
    o.row_scale = v.optional_vector("row_scale", row_scale);
    ops::CrossEntropyBackwardOptions backward{
        .row_dots = v.optional_tile("row_dots", row_dots), .chunk_columns = chunk_columns, .skip_below = skip_below};
    ops::check_chunk_columns(v.check, "chunk_columns", chunk_columns);
    ops::check_skip_below(v.check, "skip_below", skip_below);
    if (from_logits) {
      backward.logits = v.tile("logits", logits);
      backward.grad_logits = v.tile("grad_logits", grad_logits);
      if (!v.check.failed())
        ops::check_stored_logits(v.check, o.softcap, backward, xv.rows(), wv.rows(), xv.dtype,
                                 {"logits", "grad_logits", "row_dots", "chunk_columns"});
    }
    if (backward.row_dots.data && !v.check.failed())
      ops::check_partials(v.check, "row_dots", backward.row_dots, xv.rows(), ops::parts_along(wv.rows()),
                          "one row per row of x", "one per 128 columns of the vocabulary: ceil(V / 128)");
    v.check.throw_if_error();
    ops::gemm_cross_entropy_backward(xv, wv, tv, lv, gv, dxv, dwv, workspace, workspace_bytes, stream_of(stream), o,
                                     backward);
  });
}

// Both workspace queries of the recomputing backward (plain: skip_below 0), by their C names.
coda_status cross_entropy_backward_workspace_bytes(const char* function, int64_t m, int64_t vocab, int64_t k,
                                                   int64_t chunk_columns, float skip_below, size_t* bytes) {
  if (bytes != nullptr) *bytes = 0;
  return c_call(function, [&] {
    ArgumentCheck check(function);
    check.not_null("bytes", bytes);
    ops::check_chunk_columns(check, "chunk_columns", chunk_columns);
    ops::check_skip_below(check, "skip_below", skip_below);
    check.throw_if_error();
    *bytes = ops::cross_entropy_backward_workspace_bytes(
        m, vocab, k, {.row_dots = {}, .chunk_columns = chunk_columns, .skip_below = skip_below});
  });
}

}  // namespace
}  // namespace coda::capi

extern "C" {

using coda::capi::c_call;
using coda::capi::stream_of;
using coda::capi::Views;

coda_status coda_gemm_swiglu(const coda_tensor* x, const coda_tensor* w, const coda_tensor* out,
                             const coda_tensor* pre_activation, const coda_tensor* row_scale, void* stream) {
  constexpr const char* kFunction = "coda_gemm_swiglu";
  return c_call(kFunction, [&] {
    Views v(kFunction);
    const coda::TensorView xv = v.tile("x", x), wv = v.tile("w", w), ov = v.tile("out", out);
    coda::ops::SwigluOptions options;
    options.pre_activation = v.optional_tile("pre_activation", pre_activation);
    options.row_scale = v.optional_vector("row_scale", row_scale);
    v.check.throw_if_error();
    coda::ops::gemm_swiglu(xv, wv, ov, stream_of(stream), options);
  });
}

coda_status coda_gemm_rope(const coda_tensor* x, const coda_tensor* w, const coda_tensor* positions,
                           const coda_tensor* cos, const coda_tensor* sin, int32_t head_dim, int32_t rotated_heads,
                           const coda_tensor* out, const coda_tensor* row_scale, void* stream) {
  constexpr const char* kFunction = "coda_gemm_rope";
  return c_call(kFunction, [&] {
    Views v(kFunction);
    const coda::TensorView xv = v.tile("x", x), wv = v.tile("w", w), pv = v.vector("positions", positions),
                           cv = v.tile("cos", cos), sv = v.tile("sin", sin), ov = v.tile("out", out);
    coda::ops::RopeOptions options;
    options.row_scale = v.optional_vector("row_scale", row_scale);
    v.check.throw_if_error();
    coda::ops::gemm_rope(xv, wv, pv, cv, sv, head_dim, rotated_heads, ov, stream_of(stream), options);
  });
}

coda_status coda_residual_rmsnorm_workspace_bytes(int64_t m, int64_t n, size_t* bytes) {
  constexpr const char* kFunction = "coda_residual_rmsnorm_workspace_bytes";
  if (bytes != nullptr) *bytes = 0;
  return c_call(kFunction, [&] {
    coda::ArgumentCheck(kFunction).not_null("bytes", bytes).throw_if_error();
    *bytes = coda::ops::residual_rmsnorm_workspace_bytes(m, n);
  });
}

coda_status coda_gemm_residual_rmsnorm(const coda_tensor* x, const coda_tensor* w, const coda_tensor* residual,
                                       const coda_tensor* weight, float eps, const coda_tensor* h,
                                       const coda_tensor* u, const coda_tensor* rstd, void* workspace,
                                       size_t workspace_bytes, void* stream) {
  constexpr const char* kFunction = "coda_gemm_residual_rmsnorm";
  return c_call(kFunction, [&] {
    Views v(kFunction);
    const coda::TensorView xv = v.tile("x", x), wv = v.tile("w", w), rv = v.tile("residual", residual),
                           gv = v.optional_vector("weight", weight), hv = v.tile("h", h), uv = v.optional_tile("u", u),
                           sv = v.vector("rstd", rstd);
    v.check.throw_if_error();
    coda::ops::gemm_residual_rmsnorm(xv, wv, rv, gv, eps, hv, uv, sv, workspace, workspace_bytes, stream_of(stream));
  });
}

coda_status coda_gemm_row_scale(const coda_tensor* x, const coda_tensor* w, const coda_tensor* rstd,
                                const coda_tensor* out, void* stream) {
  constexpr const char* kFunction = "coda_gemm_row_scale";
  return c_call(kFunction, [&] {
    Views v(kFunction);
    const coda::TensorView xv = v.tile("x", x), wv = v.tile("w", w), sv = v.vector("rstd", rstd),
                           ov = v.tile("out", out);
    v.check.throw_if_error();
    coda::ops::gemm_row_scale(xv, wv, sv, ov, stream_of(stream));
  });
}

coda_status coda_cross_entropy_workspace_bytes(int64_t m, int64_t vocab, const coda_cross_entropy_options* options,
                                               size_t* bytes) {
  constexpr const char* kFunction = "coda_cross_entropy_workspace_bytes";
  if (bytes != nullptr) *bytes = 0;
  return c_call(kFunction, [&] {
    coda::ArgumentCheck check(kFunction);
    check.not_null("bytes", bytes);
    const coda::ops::CrossEntropyOptions o = coda::capi::options_of(options, check);
    check.throw_if_error();
    *bytes = coda::ops::cross_entropy_workspace_bytes(m, vocab, o);
  });
}

coda_status coda_gemm_cross_entropy(const coda_tensor* x, const coda_tensor* w, const coda_tensor* targets,
                                    const coda_tensor* loss, const coda_tensor* lse,
                                    const coda_cross_entropy_options* options, const coda_tensor* row_scale,
                                    const coda_tensor* logits, void* workspace, size_t workspace_bytes,
                                    void* stream) {
  constexpr const char* kFunction = "coda_gemm_cross_entropy";
  return c_call(kFunction, [&] {
    Views v(kFunction);
    const coda::TensorView xv = v.tile("x", x), wv = v.tile("w", w), tv = v.vector("targets", targets),
                           lv = v.vector("loss", loss), ev = v.vector("lse", lse);
    coda::ops::CrossEntropyOptions o = coda::capi::options_of(options, v.check);
    o.row_scale = v.optional_vector("row_scale", row_scale);
    o.logits = v.optional_tile("logits", logits);
    v.check.throw_if_error();
    coda::ops::gemm_cross_entropy(xv, wv, tv, lv, ev, workspace, workspace_bytes, stream_of(stream), o);
  });
}

coda_status coda_cross_entropy_backward_workspace_bytes(int64_t m, int64_t vocab, int64_t k, int64_t chunk_columns,
                                                        size_t* bytes) {
  return coda::capi::cross_entropy_backward_workspace_bytes("coda_cross_entropy_backward_workspace_bytes", m, vocab, k,
                                                            chunk_columns, 0.0f, bytes);
}

coda_status coda_gemm_cross_entropy_backward(const coda_tensor* x, const coda_tensor* w, const coda_tensor* targets,
                                             const coda_tensor* lse, const coda_tensor* grad_loss,
                                             const coda_tensor* grad_x, const coda_tensor* grad_w,
                                             const coda_cross_entropy_options* options, const coda_tensor* row_scale,
                                             const coda_tensor* row_dots, int64_t chunk_columns, void* workspace,
                                             size_t workspace_bytes, void* stream) {
  return coda::capi::cross_entropy_backward("coda_gemm_cross_entropy_backward", x, w, targets, lse, grad_loss, false,
                                            nullptr, nullptr, grad_x, grad_w, options, row_scale, row_dots,
                                            chunk_columns, 0.0f, workspace, workspace_bytes, stream);
}

coda_status coda_cross_entropy_backward_skipping_workspace_bytes(int64_t m, int64_t vocab, int64_t k,
                                                                 int64_t chunk_columns, float skip_below,
                                                                 size_t* bytes) {
  return coda::capi::cross_entropy_backward_workspace_bytes("coda_cross_entropy_backward_skipping_workspace_bytes", m,
                                                            vocab, k, chunk_columns, skip_below, bytes);
}

coda_status coda_gemm_cross_entropy_backward_skipping(
    const coda_tensor* x, const coda_tensor* w, const coda_tensor* targets, const coda_tensor* lse,
    const coda_tensor* grad_loss, const coda_tensor* grad_x, const coda_tensor* grad_w,
    const coda_cross_entropy_options* options, const coda_tensor* row_scale, const coda_tensor* row_dots,
    int64_t chunk_columns, float skip_below, void* workspace, size_t workspace_bytes, void* stream) {
  return coda::capi::cross_entropy_backward("coda_gemm_cross_entropy_backward_skipping", x, w, targets, lse, grad_loss,
                                            false, nullptr, nullptr, grad_x, grad_w, options, row_scale, row_dots,
                                            chunk_columns, skip_below, workspace, workspace_bytes, stream);
}

coda_status coda_cross_entropy_backward_from_logits_workspace_bytes(int64_t m, int64_t vocab, int64_t k,
                                                                    size_t* bytes) {
  constexpr const char* kFunction = "coda_cross_entropy_backward_from_logits_workspace_bytes";
  if (bytes != nullptr) *bytes = 0;
  return c_call(kFunction, [&] {
    coda::ArgumentCheck check(kFunction);
    check.not_null("bytes", bytes);
    check.throw_if_error();
    coda::ops::CrossEntropyBackwardOptions backward;
    static char stored;  // the query reads only whether logits are given
    backward.logits.data = &stored;
    *bytes = coda::ops::cross_entropy_backward_workspace_bytes(m, vocab, k, backward);
  });
}

coda_status coda_gemm_cross_entropy_backward_from_logits(
    const coda_tensor* x, const coda_tensor* w, const coda_tensor* targets, const coda_tensor* lse,
    const coda_tensor* grad_loss, const coda_tensor* logits, const coda_tensor* grad_logits, const coda_tensor* grad_x,
    const coda_tensor* grad_w, const coda_cross_entropy_options* options, const coda_tensor* row_scale,
    const coda_tensor* row_dots, void* workspace, size_t workspace_bytes, void* stream) {
  return coda::capi::cross_entropy_backward("coda_gemm_cross_entropy_backward_from_logits", x, w, targets, lse,
                                            grad_loss, true, logits, grad_logits, grad_x, grad_w, options, row_scale,
                                            row_dots, 0, 0.0f, workspace, workspace_bytes, stream);
}

}  // extern "C"

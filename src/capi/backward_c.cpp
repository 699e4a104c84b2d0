// The C ABI of the backward ops: check what only C can get wrong (null or malformed tensor
// structs), then hand over to coda::ops, whose validation covers everything else.
#include "capi/c_bridge.hpp"
#include "coda/coda.h"
#include "coda/ops/rmsnorm.hpp"
#include "coda/ops/rope.hpp"
#include "coda/ops/swiglu.hpp"

extern "C" {

using coda::capi::c_call;
using coda::capi::stream_of;
using coda::capi::Views;

coda_status coda_row_partial_count(int64_t n, int64_t* count) {
  constexpr const char* kFunction = "coda_row_partial_count";
  if (count != nullptr) *count = 0;
  return c_call(kFunction, [&] {
    coda::ArgumentCheck(kFunction).not_null("count", count).throw_if_error();
    *count = coda::ops::row_partial_count(n);
  });
}

coda_status coda_row_scale_backward(const coda_tensor* grad_output, const coda_tensor* output,
                                    const coda_tensor* scale, const coda_tensor* grad_input,
                                    const coda_tensor* row_dots, void* stream) {
  constexpr const char* kFunction = "coda_row_scale_backward";
  return c_call(kFunction, [&] {
    Views v(kFunction);
    const coda::TensorView gv = v.tile("grad_output", grad_output), ov = v.optional_tile("output", output),
                           sv = v.vector("scale", scale), dv = v.tile("grad_input", grad_input),
                           pv = v.optional_tile("row_dots", row_dots);
    v.check.throw_if_error();
    coda::ops::row_scale_backward(gv, ov, sv, dv, pv, stream_of(stream));
  });
}

coda_status coda_gemm_swiglu_backward(const coda_tensor* grad_output, const coda_tensor* w_down,
                                      const coda_tensor* pre_activation, const coda_tensor* grad_pre_activation,
                                      const coda_tensor* row_dots, const coda_tensor* row_scale,
                                      const coda_tensor* output, void* stream) {
  constexpr const char* kFunction = "coda_gemm_swiglu_backward";
  return c_call(kFunction, [&] {
    Views v(kFunction);
    const coda::TensorView gv = v.tile("grad_output", grad_output), wv = v.tile("w_down", w_down),
                           yv = v.tile("pre_activation", pre_activation),
                           dv = v.tile("grad_pre_activation", grad_pre_activation);
    coda::ops::SwigluBackwardOptions options;
    options.row_dots = v.optional_tile("row_dots", row_dots);
    options.row_scale = v.optional_vector("row_scale", row_scale);
    options.output = v.optional_tile("output", output);
    v.check.throw_if_error();
    coda::ops::gemm_swiglu_backward(gv, wv, yv, dv, stream_of(stream), options);
  });
}

coda_status coda_residual_rmsnorm_backward_workspace_bytes(int64_t m, size_t* bytes) {
  constexpr const char* kFunction = "coda_residual_rmsnorm_backward_workspace_bytes";
  if (bytes != nullptr) *bytes = 0;
  return c_call(kFunction, [&] {
    coda::ArgumentCheck(kFunction).not_null("bytes", bytes).throw_if_error();
    *bytes = coda::ops::residual_rmsnorm_backward_workspace_bytes(m);
  });
}

coda_status coda_gemm_residual_rmsnorm_backward(const coda_tensor* grad_output, const coda_tensor* w,
                                                const coda_tensor* h, const coda_tensor* weight,
                                                const coda_tensor* rstd, const coda_tensor* row_dots,
                                                const coda_tensor* grad_h, const coda_tensor* grad_residual,
                                                int32_t grad_output_scaled, void* workspace, size_t workspace_bytes,
                                                void* stream) {
  constexpr const char* kFunction = "coda_gemm_residual_rmsnorm_backward";
  return c_call(kFunction, [&] {
    Views v(kFunction);
    const coda::TensorView gv = v.tile("grad_output", grad_output), wv = v.tile("w", w), hv = v.tile("h", h),
                           nv = v.vector("weight", weight), sv = v.vector("rstd", rstd),
                           pv = v.tile("row_dots", row_dots), dv = v.tile("grad_h", grad_h);
    coda::ops::ResidualRmsNormBackwardOptions options;
    options.grad_residual = v.optional_tile("grad_residual", grad_residual);
    options.grad_output_scaled = grad_output_scaled != 0;
    v.check.throw_if_error();
    coda::ops::gemm_residual_rmsnorm_backward(gv, wv, hv, nv, sv, pv, dv, workspace, workspace_bytes, stream_of(stream),
                                              options);
  });
}

coda_status coda_rmsnorm_weight_gradients_workspace_bytes(int64_t n2, int64_t hidden, size_t* bytes) {
  constexpr const char* kFunction = "coda_rmsnorm_weight_gradients_workspace_bytes";
  if (bytes != nullptr) *bytes = 0;
  return c_call(kFunction, [&] {
    coda::ArgumentCheck(kFunction).not_null("bytes", bytes).throw_if_error();
    *bytes = coda::ops::rmsnorm_weight_gradients_workspace_bytes(n2, hidden);
  });
}

coda_status coda_gemm_rmsnorm_weight_gradients(const coda_tensor* grad_output, const coda_tensor* h,
                                               const coda_tensor* w, const coda_tensor* weight,
                                               const coda_tensor* grad_w, const coda_tensor* grad_weight,
                                               void* workspace, size_t workspace_bytes, void* stream) {
  constexpr const char* kFunction = "coda_gemm_rmsnorm_weight_gradients";
  return c_call(kFunction, [&] {
    Views v(kFunction);
    const coda::TensorView gv = v.tile("grad_output", grad_output), hv = v.tile("h", h), wv = v.tile("w", w),
                           nv = v.vector("weight", weight), dwv = v.tile("grad_w", grad_w),
                           dnv = v.vector("grad_weight", grad_weight);
    v.check.throw_if_error();
    coda::ops::gemm_rmsnorm_weight_gradients(gv, hv, wv, nv, dwv, dnv, workspace, workspace_bytes, stream_of(stream));
  });
}

coda_status coda_rope_backward(const coda_tensor* grad_output, const coda_tensor* positions, const coda_tensor* cos,
                               const coda_tensor* sin, int32_t head_dim, int32_t rotated_heads,
                               const coda_tensor* grad_input, const coda_tensor* output, const coda_tensor* row_dots,
                               const coda_tensor* row_scale, void* stream) {
  constexpr const char* kFunction = "coda_rope_backward";
  return c_call(kFunction, [&] {
    Views v(kFunction);
    const coda::TensorView gv = v.tile("grad_output", grad_output), pv = v.vector("positions", positions),
                           cv = v.tile("cos", cos), sv = v.tile("sin", sin), dv = v.tile("grad_input", grad_input);
    coda::ops::RopeBackwardOptions options;
    options.output = v.optional_tile("output", output);
    options.row_dots = v.optional_tile("row_dots", row_dots);
    options.row_scale = v.optional_vector("row_scale", row_scale);
    v.check.throw_if_error();
    coda::ops::rope_backward(gv, pv, cv, sv, head_dim, rotated_heads, dv, stream_of(stream), options);
  });
}

}  // extern "C"

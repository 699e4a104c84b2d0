// The C ABI of the fused ops: check what only C can get wrong (null or malformed tensor structs,
// unknown enum codes), then hand over to coda::ops, whose validation covers everything else.
#include <cuda_runtime_api.h>

#include "capi/c_bridge.hpp"
#include "coda/coda.h"
#include "coda/ops/cross_entropy.hpp"
#include "coda/ops/rmsnorm.hpp"
#include "coda/ops/rope.hpp"
#include "coda/ops/swiglu.hpp"

namespace coda::capi {
namespace {

// Required tensors: rank 2 for tiles, 1 for vectors. Optional ones may be null.
struct Views {
  explicit Views(const char* function) : check(function) {}
  TensorView tile(const char* name, const coda_tensor* t) { return take(name, t, 2); }
  TensorView vector(const char* name, const coda_tensor* t) { return take(name, t, 1); }
  TensorView optional_tile(const char* name, const coda_tensor* t) { return t ? take(name, t, 2) : TensorView{}; }
  TensorView optional_vector(const char* name, const coda_tensor* t) { return t ? take(name, t, 1) : TensorView{}; }
  ArgumentCheck check;

 private:
  TensorView take(const char* name, const coda_tensor* t, int rank) {
    check_tensor(check, name, t, rank, rank);
    return check.failed() ? TensorView{} : view_of(*t);
  }
};

ops::CrossEntropyOptions options_of(const coda_cross_entropy_options* o) {
  ops::CrossEntropyOptions out;
  if (!o) return out;
  out.ignore_index = o->ignore_index;
  out.label_smoothing = o->label_smoothing;
  out.z_loss = o->z_loss;
  out.softcap = o->softcap;
  out.reduction = o->reduction == CODA_REDUCTION_NONE  ? ops::LossReduction::none
                  : o->reduction == CODA_REDUCTION_SUM ? ops::LossReduction::sum
                                                       : ops::LossReduction::mean;
  return out;
}

cudaStream_t stream_of(void* stream) { return static_cast<cudaStream_t>(stream); }

}  // namespace
}  // namespace coda::capi

extern "C" {

using coda::capi::finish;
using coda::capi::Views;

coda_status coda_gemm_swiglu(const coda_tensor* x, const coda_tensor* w, const coda_tensor* out,
                             const coda_tensor* pre_activation, const coda_tensor* row_scale, void* stream) {
  Views v("coda_gemm_swiglu");
  const coda::TensorView xv = v.tile("x", x), wv = v.tile("w", w), ov = v.tile("out", out);
  coda::ops::SwigluOptions options;
  options.pre_activation = v.optional_tile("pre_activation", pre_activation);
  options.row_scale = v.optional_vector("row_scale", row_scale);
  if (v.check.failed()) return finish(v.check.status());
  return finish(coda::ops::try_gemm_swiglu(xv, wv, ov, coda::capi::stream_of(stream), options));
}

coda_status coda_gemm_rope(const coda_tensor* x, const coda_tensor* w, const coda_tensor* positions,
                           const coda_tensor* cos, const coda_tensor* sin, int32_t head_dim, int32_t rotated_heads,
                           const coda_tensor* out, const coda_tensor* row_scale, void* stream) {
  Views v("coda_gemm_rope");
  const coda::TensorView xv = v.tile("x", x), wv = v.tile("w", w), pv = v.vector("positions", positions),
                         cv = v.tile("cos", cos), sv = v.tile("sin", sin), ov = v.tile("out", out);
  coda::ops::RopeOptions options;
  options.row_scale = v.optional_vector("row_scale", row_scale);
  if (v.check.failed()) return finish(v.check.status());
  return finish(coda::ops::try_gemm_rope(xv, wv, pv, cv, sv, head_dim, rotated_heads, ov,
                                         coda::capi::stream_of(stream), options));
}

size_t coda_residual_rmsnorm_workspace_bytes(int64_t m, int64_t n) {
  return coda::ops::residual_rmsnorm_workspace_bytes(m, n);
}

coda_status coda_gemm_residual_rmsnorm(const coda_tensor* x, const coda_tensor* w, const coda_tensor* residual,
                                       const coda_tensor* weight, float eps, const coda_tensor* h,
                                       const coda_tensor* u, const coda_tensor* rstd, void* workspace,
                                       size_t workspace_bytes, void* stream) {
  Views v("coda_gemm_residual_rmsnorm");
  const coda::TensorView xv = v.tile("x", x), wv = v.tile("w", w), rv = v.tile("residual", residual),
                         gv = v.optional_vector("weight", weight), hv = v.tile("h", h), uv = v.optional_tile("u", u),
                         sv = v.vector("rstd", rstd);
  if (v.check.failed()) return finish(v.check.status());
  return finish(coda::ops::try_gemm_residual_rmsnorm(xv, wv, rv, gv, eps, hv, uv, sv, workspace, workspace_bytes,
                                                     coda::capi::stream_of(stream)));
}

coda_status coda_gemm_row_scale(const coda_tensor* x, const coda_tensor* w, const coda_tensor* rstd,
                                const coda_tensor* out, void* stream) {
  Views v("coda_gemm_row_scale");
  const coda::TensorView xv = v.tile("x", x), wv = v.tile("w", w), sv = v.vector("rstd", rstd), ov = v.tile("out", out);
  if (v.check.failed()) return finish(v.check.status());
  return finish(coda::ops::try_gemm_row_scale(xv, wv, sv, ov, coda::capi::stream_of(stream)));
}

size_t coda_cross_entropy_workspace_bytes(int64_t m, int64_t vocab, const coda_cross_entropy_options* options) {
  return coda::ops::cross_entropy_workspace_bytes(m, vocab, coda::capi::options_of(options));
}

coda_status coda_gemm_cross_entropy(const coda_tensor* x, const coda_tensor* w, const coda_tensor* targets,
                                    const coda_tensor* loss, const coda_tensor* lse,
                                    const coda_cross_entropy_options* options, const coda_tensor* row_scale,
                                    const coda_tensor* logits, void* workspace, size_t workspace_bytes,
                                    void* stream) {
  Views v("coda_gemm_cross_entropy");
  const coda::TensorView xv = v.tile("x", x), wv = v.tile("w", w), tv = v.vector("targets", targets),
                         lv = v.vector("loss", loss), ev = v.vector("lse", lse);
  coda::ops::CrossEntropyOptions o = coda::capi::options_of(options);
  o.row_scale = v.optional_vector("row_scale", row_scale);
  o.logits = v.optional_tile("logits", logits);
  if (options && options->reduction != CODA_REDUCTION_NONE && options->reduction != CODA_REDUCTION_SUM &&
      options->reduction != CODA_REDUCTION_MEAN)
    v.check.require(false, "options.reduction", "must be CODA_REDUCTION_NONE, _SUM or _MEAN");
  if (v.check.failed()) return finish(v.check.status());
  return finish(coda::ops::try_gemm_cross_entropy(xv, wv, tv, lv, ev, workspace, workspace_bytes,
                                                  coda::capi::stream_of(stream), o));
}

}  // extern "C"

// The C ABI of the GEMM: check what only C can get wrong (null or malformed tensor structs,
// unknown enum codes), then hand over to coda::gemm, whose validation covers everything else.
#include <cuda_runtime_api.h>

#include "capi/c_bridge.hpp"
#include "coda/coda.h"
#include "coda/gemm/gemm.hpp"

namespace coda::capi {
namespace {

struct GemmArguments {
  GemmOperand a, b;
  TensorView c;
};

Status convert_gemm_arguments(const char* function, const coda_tensor* a, coda_major a_major, const coda_tensor* b,
                              coda_major b_major, const coda_tensor* c, GemmArguments& out) {
  ArgumentCheck check(function);
  check_tensor(check, "a", a, 2, 3);
  check_major(check, "a_major", a_major);
  check_tensor(check, "b", b, 2, 3);
  check_major(check, "b_major", b_major);
  check_tensor(check, "c", c, 2, 3);
  if (check.failed()) return check.status();
  out = {{view_of(*a), major_of(a_major)}, {view_of(*b), major_of(b_major)}, view_of(*c)};
  return Status::success();
}

}  // namespace
}  // namespace coda::capi

extern "C" {

coda_status coda_gemm(const coda_tensor* a, coda_major a_major, const coda_tensor* b, coda_major b_major,
                      const coda_tensor* c, void* workspace, size_t workspace_bytes, void* stream) {
  using namespace coda;
  capi::GemmArguments args;
  Status s = capi::convert_gemm_arguments("coda_gemm", a, a_major, b, b_major, c, args);
  if (s.ok()) {
    GemmOptions options;
    options.workspace = workspace;
    options.workspace_bytes = workspace_bytes;
    s = try_gemm(args.a, args.b, args.c, static_cast<cudaStream_t>(stream), options);
  }
  return capi::finish(s);
}

coda_status coda_gemm_workspace_bytes(const coda_tensor* a, coda_major a_major, const coda_tensor* b,
                                      coda_major b_major, const coda_tensor* c, size_t* bytes) {
  using namespace coda;
  if (bytes != nullptr) *bytes = 0;
  capi::GemmArguments args;
  Status s = capi::convert_gemm_arguments("coda_gemm_workspace_bytes", a, a_major, b, b_major, c, args);
  if (s.ok()) s = ArgumentCheck("coda_gemm_workspace_bytes").not_null("bytes", bytes).status();
  if (s.ok()) s = status_of([&] { *bytes = gemm_workspace_bytes(args.a, args.b, args.c); });
  return capi::finish(s);
}

}  // extern "C"

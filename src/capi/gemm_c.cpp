// The C ABI of the GEMM: check what only C can get wrong (null or malformed tensor structs,
// unknown enum codes), then hand over to coda::gemm, whose validation covers everything else.
#include <cuda_runtime_api.h>

#include <memory>

#include "capi/c_bridge.hpp"
#include "coda/coda.h"
#include "coda/gemm.hpp"
#include "coda/prepared_gemm.hpp"

namespace coda::capi {
namespace {

struct GemmArguments {
  GemmOperand a, b;
  TensorView c;
};

GemmArguments gemm_arguments(const char* function, const coda_tensor* a, coda_major a_major, const coda_tensor* b,
                             coda_major b_major, const coda_tensor* c) {
  ArgumentCheck check(function);
  check_tensor(check, "a", a, 2, 3);
  check_major(check, "a_major", a_major);
  check_tensor(check, "b", b, 2, 3);
  check_major(check, "b_major", b_major);
  check_tensor(check, "c", c, 2, 3);
  check.throw_if_error();
  return {{view_of(*a), major_of(a_major)}, {view_of(*b), major_of(b_major)}, view_of(*c)};
}

void write_plan(const GemmPlan& p, coda_gemm_plan_info* plan) {
  plan->tile = name(p.tile).data();
  plan->split_k = p.split_k;
  plan->stream_k_tiles = p.stream_k_tiles;
  plan->ctas = p.ctas;
  plan->output_tiles = p.output_tiles;
  plan->workspace_bytes = p.workspace_bytes;
}

// Planned as if a workspace of `workspace_bytes` were given: its address plays no part.
GemmOptions sized_workspace(size_t workspace_bytes) {
  GemmOptions options;
  options.workspace = workspace_bytes > 0 ? reinterpret_cast<void*>(uintptr_t(256)) : nullptr;
  options.workspace_bytes = workspace_bytes;
  return options;
}

}  // namespace
}  // namespace coda::capi

struct coda_gemm_prepared {
  coda::PreparedGemm gemm;
};

extern "C" {

coda_status coda_gemm(const coda_tensor* a, coda_major a_major, const coda_tensor* b, coda_major b_major,
                      const coda_tensor* c, void* workspace, size_t workspace_bytes, void* stream) {
  constexpr const char* kFunction = "coda_gemm";
  return coda::capi::c_call(kFunction, [&] {
    const auto args = coda::capi::gemm_arguments(kFunction, a, a_major, b, b_major, c);
    coda::gemm(args.a, args.b, args.c, coda::capi::stream_of(stream),
               {.workspace = workspace, .workspace_bytes = workspace_bytes});
  });
}

coda_status coda_gemm_workspace_bytes(const coda_tensor* a, coda_major a_major, const coda_tensor* b,
                                      coda_major b_major, const coda_tensor* c, size_t* bytes) {
  constexpr const char* kFunction = "coda_gemm_workspace_bytes";
  if (bytes != nullptr) *bytes = 0;
  return coda::capi::c_call(kFunction, [&] {
    const auto args = coda::capi::gemm_arguments(kFunction, a, a_major, b, b_major, c);
    coda::ArgumentCheck(kFunction).not_null("bytes", bytes).throw_if_error();
    *bytes = coda::gemm_workspace_bytes(args.a, args.b, args.c);
  });
}

coda_status coda_gemm_plan(const coda_tensor* a, coda_major a_major, const coda_tensor* b, coda_major b_major,
                           const coda_tensor* c, size_t workspace_bytes, coda_gemm_plan_info* plan) {
  constexpr const char* kFunction = "coda_gemm_plan";
  if (plan != nullptr) *plan = coda_gemm_plan_info{};
  return coda::capi::c_call(kFunction, [&] {
    const auto args = coda::capi::gemm_arguments(kFunction, a, a_major, b, b_major, c);
    coda::ArgumentCheck(kFunction).not_null("plan", plan).throw_if_error();
    coda::capi::write_plan(coda::plan_gemm(args.a, args.b, args.c, coda::capi::sized_workspace(workspace_bytes)), plan);
  });
}

coda_status coda_gemm_prepare(const coda_tensor* a, coda_major a_major, const coda_tensor* b, coda_major b_major,
                              const coda_tensor* c, size_t workspace_bytes, coda_gemm_prepared** prepared,
                              coda_gemm_plan_info* plan) {
  constexpr const char* kFunction = "coda_gemm_prepare";
  if (prepared != nullptr) *prepared = nullptr;
  if (plan != nullptr) *plan = coda_gemm_plan_info{};
  return coda::capi::c_call(kFunction, [&] {
    const auto args = coda::capi::gemm_arguments(kFunction, a, a_major, b, b_major, c);
    coda::ArgumentCheck(kFunction).not_null("prepared", prepared).throw_if_error();
    auto made = std::make_unique<coda_gemm_prepared>(
        coda::PreparedGemm(args.a, args.b, args.c, coda::capi::sized_workspace(workspace_bytes)));
    if (plan != nullptr) coda::capi::write_plan(made->gemm.plan(), plan);
    *prepared = made.release();
  });
}

coda_status coda_gemm_prepared_run(const coda_gemm_prepared* prepared, const void* a, const void* b, void* c,
                                   void* workspace, void* stream) {
  constexpr const char* kFunction = "coda_gemm_prepared_run";
  return coda::capi::c_call(kFunction, [&] {
    coda::ArgumentCheck(kFunction).not_null("prepared", prepared).throw_if_error();
    prepared->gemm.run(a, b, c, coda::capi::stream_of(stream), workspace);
  });
}

void coda_gemm_prepared_destroy(coda_gemm_prepared* prepared) { delete prepared; }

}  // extern "C"

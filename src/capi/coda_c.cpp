// The C ABI's common functions: version, messages, status names, devices.
#include <string>

#include "capi/c_bridge.hpp"
#include "coda/coda.h"
#include "coda/core/device.hpp"
#include "coda/core/status.hpp"

namespace coda::capi {
namespace {

thread_local std::string last_error_message;

}  // namespace

coda_status finish(const Status& s) noexcept {
  if (s.ok()) {
    last_error_message.clear();
    return CODA_OK;
  }
  try {
    last_error_message = s.message();
  } catch (...) {
    last_error_message.clear();  // out of memory: the code alone
  }
  return static_cast<coda_status>(s.code());
}

coda_status failed_without_message() noexcept {
  last_error_message.clear();
  return CODA_INTERNAL;
}

ArgumentCheck& check_tensor(ArgumentCheck& check, std::string_view argument, const coda_tensor* t, int min_rank,
                            int max_rank) {
  check.not_null(argument, t);
  if (check.failed()) return check;
  return check.rank_in(argument, view_of(*t), min_rank, max_rank)
      .require(t->dtype >= CODA_F32 && t->dtype <= CODA_I32, argument, "dtype code ", int(t->dtype),
               " is not a coda_dtype (", int(CODA_F32), " to ", int(CODA_I32), ")");
}

ArgumentCheck& check_major(ArgumentCheck& check, std::string_view argument, coda_major major) {
  return check.require(major == CODA_K_MAJOR || major == CODA_MN_MAJOR, argument, "code ", int(major),
                       " is not a coda_major (CODA_K_MAJOR ", int(CODA_K_MAJOR), " or CODA_MN_MAJOR ",
                       int(CODA_MN_MAJOR), ")");
}

}  // namespace coda::capi

extern "C" {

const char* coda_version(void) { return CODA_VERSION; }

const char* coda_last_error(void) { return coda::capi::last_error_message.c_str(); }

const char* coda_status_name(coda_status status) {
  switch (status) {
    case CODA_OK: return "ok";
    case CODA_INVALID_ARGUMENT: return "invalid argument";
    case CODA_UNSUPPORTED: return "unsupported";
    case CODA_CUDA_ERROR: return "CUDA error";
    case CODA_INTERNAL: return "internal error";
  }
  return "unknown status";
}

int32_t coda_device_count(void) {
  try {
    return int32_t(coda::list_devices().size());
  } catch (...) {
    return 0;
  }
}

}  // extern "C"

// coda/core/status.hpp: how coda reports failure.
//
// Every public entry point validates its arguments first. The C++ API throws a typed error; the
// `try_` forms and the C ABI return a Status instead. A message names the entry point the caller
// called, then the argument and the rule it broke:
//
//   try {
//     coda::gemm(a, b, c, stream);
//   } catch (const coda::InvalidArgument& e) {
//     // e.what(): "coda::gemm: argument 'a': row stride of 7 elements (14 bytes) is not a multiple
//     //            of 16 bytes (TMA needs 16-byte-aligned strides; pad to a multiple of 8 elements)"
//   }
//
//   coda::Status s = coda::try_gemm(a, b, c, stream);
//   if (!s.ok()) std::puts(s.message().c_str());
//
// A failure raised deep inside a call (a tensor map the driver refuses, a CUDA error) is reported
// under the name of the entry point (reported_by), so one call's messages carry one prefix.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "coda/core/api.hpp"

namespace coda {

enum class StatusCode : int {
  ok = 0,
  invalid_argument = 1,  // an argument breaks a documented rule (shape, dtype, stride, null, ...)
  unsupported = 2,       // valid in general, but not served here (device, dtype combination, size)
  cuda_error = 3,        // the CUDA runtime or driver failed
  internal = 4,          // a bug in coda
};

CODA_API std::string_view name(StatusCode code);

class [[nodiscard]] CODA_API Status {
 public:
  Status() = default;
  /// A failure of `function` (the entry point that reports it): message "function: detail".
  Status(StatusCode code, std::string_view function, std::string_view detail);
  static Status success() { return {}; }

  bool ok() const { return code_ == StatusCode::ok; }
  StatusCode code() const { return code_; }
  /// "function: detail"; empty when ok.
  const std::string& message() const { return message_; }
  /// The message after the function's name.
  std::string_view detail() const { return std::string_view(message_).substr(detail_begin_); }
  /// The same failure under the name of `function` (the entry point the caller called).
  Status reported_by(std::string_view function) const;

  /// Throw the typed error that matches this status (no-op when ok).
  void throw_if_error() const;

 private:
  StatusCode code_ = StatusCode::ok;
  std::string message_;
  std::size_t detail_begin_ = 0;
};

class CODA_API Error : public std::runtime_error {
 public:
  Error(StatusCode code, std::string_view function, std::string_view detail);
  ~Error() override;
  StatusCode code() const { return code_; }
  /// The message (what()) after the function's name.
  std::string_view detail() const { return std::string_view(what()).substr(detail_begin_); }

 private:
  StatusCode code_;
  std::size_t detail_begin_;
};

struct CODA_API InvalidArgument : Error {
  InvalidArgument(std::string_view function, std::string_view detail);
};
struct CODA_API Unsupported : Error {
  Unsupported(std::string_view function, std::string_view detail);
};
struct CODA_API CudaError : Error {
  CudaError(std::string_view function, std::string_view detail);
};
struct CODA_API InternalError : Error {
  InternalError(std::string_view function, std::string_view detail);
};

/// The Status of a failure that `function` reports: a coda::Error under that name, any other
/// exception as an internal error (out of host memory as such).
CODA_API Status status_of_exception(std::string_view function);

/// Run `f` for the entry point `function` and turn the outcome into a Status.
template <class F>
Status status_of(std::string_view function, F&& f) {
  try {
    std::forward<F>(f)();
    return Status::success();
  } catch (...) {
    return status_of_exception(function);
  }
}

/// Run `f` for the entry point `function`: a failure is thrown again under that name (its type
/// kept), so the caller sees one prefix whatever layer raised it.
template <class F>
decltype(auto) reported_by(std::string_view function, F&& f) {
  try {
    return std::forward<F>(f)();
  } catch (...) {
    status_of_exception(function).throw_if_error();
    throw;  // not reached: a failure's status is never ok
  }
}

}  // namespace coda

/// Return early from a function returning Status when `expr` (a Status) is not ok.
#define CODA_RETURN_IF_ERROR(expr)        \
  do {                                    \
    ::coda::Status coda_status_ = (expr); \
    if (!coda_status_.ok()) return coda_status_; \
  } while (0)

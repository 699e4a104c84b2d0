// coda/core/status.hpp: how coda reports failure.
//
// Every public entry point validates its arguments first. The C++ API throws a typed error; the
// `try_` forms and the C ABI return a Status instead. Messages name the function, the argument
// and the rule it broke:
//
//   try {
//     coda::gemm(a, b, c, stream);
//   } catch (const coda::InvalidArgument& e) {
//     // e.what(): "coda::gemm: argument 'a': row stride of 14 bytes is not a multiple of 16
//     //            (TMA needs 16-byte-aligned strides); pad the leading dimension to 8 elements"
//   }
//
//   coda::Status s = coda::try_gemm(a, b, c, stream);
//   if (!s.ok()) std::puts(s.message().c_str());
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

namespace coda {

enum class StatusCode : int {
  ok = 0,
  invalid_argument = 1,  // an argument breaks a documented rule (shape, dtype, stride, null, ...)
  unsupported = 2,       // valid in general, but not served here (device, dtype combination, size)
  cuda_error = 3,        // the CUDA runtime or driver failed
  internal = 4,          // a bug in coda
};

std::string_view name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status success() { return {}; }

  bool ok() const { return code_ == StatusCode::ok; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  /// Throw the typed error that matches this status (no-op when ok).
  void throw_if_error() const;

 private:
  StatusCode code_ = StatusCode::ok;
  std::string message_;
};

class Error : public std::runtime_error {
 public:
  Error(StatusCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  StatusCode code() const { return code_; }

 private:
  StatusCode code_;
};

struct InvalidArgument : Error {
  explicit InvalidArgument(const std::string& m) : Error(StatusCode::invalid_argument, m) {}
};
struct Unsupported : Error {
  explicit Unsupported(const std::string& m) : Error(StatusCode::unsupported, m) {}
};
struct CudaError : Error {
  explicit CudaError(const std::string& m) : Error(StatusCode::cuda_error, m) {}
};
struct InternalError : Error {
  explicit InternalError(const std::string& m) : Error(StatusCode::internal, m) {}
};

/// Run a callable that may throw coda::Error and turn the outcome into a Status.
template <class F>
Status status_of(F&& f) {
  try {
    std::forward<F>(f)();
    return Status::success();
  } catch (const Error& e) {
    return Status(e.code(), e.what());
  } catch (const std::exception& e) {
    return Status(StatusCode::internal, e.what());
  }
}

}  // namespace coda

/// Return early from a function returning Status when `expr` (a Status) is not ok.
#define CODA_RETURN_IF_ERROR(expr)        \
  do {                                    \
    ::coda::Status coda_status_ = (expr); \
    if (!coda_status_.ok()) return coda_status_; \
  } while (0)

#include "coda/core/status.hpp"

#include <new>

namespace coda {
namespace {

std::string compose(std::string_view function, std::string_view detail) {
  std::string message;
  message.reserve(function.size() + 2 + detail.size());
  message.append(function).append(": ").append(detail);
  return message;
}

}  // namespace

std::string_view name(StatusCode code) {
  switch (code) {
    case StatusCode::ok: return "ok";
    case StatusCode::invalid_argument: return "invalid argument";
    case StatusCode::unsupported: return "unsupported";
    case StatusCode::cuda_error: return "CUDA error";
    case StatusCode::internal: return "internal error";
  }
  return "unknown";
}

Status::Status(StatusCode code, std::string_view function, std::string_view detail)
    : code_(code), message_(compose(function, detail)), detail_begin_(function.size() + 2) {}

Status Status::reported_by(std::string_view function) const {
  return ok() ? Status() : Status(code_, function, detail());
}

void Status::throw_if_error() const {
  const std::string_view function = std::string_view(message_).substr(0, ok() ? 0 : detail_begin_ - 2);
  switch (code_) {
    case StatusCode::ok: return;
    case StatusCode::invalid_argument:
      throw InvalidArgument(function, detail());
    case StatusCode::unsupported:
      throw Unsupported(function, detail());
    case StatusCode::cuda_error:
      throw CudaError(function, detail());
    case StatusCode::internal:
      throw InternalError(function, detail());
  }
}

Error::Error(StatusCode code, std::string_view function, std::string_view detail)
    : std::runtime_error(compose(function, detail)), code_(code), detail_begin_(function.size() + 2) {}
Error::~Error() = default;

InvalidArgument::InvalidArgument(std::string_view function, std::string_view detail)
    : Error(StatusCode::invalid_argument, function, detail) {}
Unsupported::Unsupported(std::string_view function, std::string_view detail)
    : Error(StatusCode::unsupported, function, detail) {}
CudaError::CudaError(std::string_view function, std::string_view detail)
    : Error(StatusCode::cuda_error, function, detail) {}
InternalError::InternalError(std::string_view function, std::string_view detail)
    : Error(StatusCode::internal, function, detail) {}

Status status_of_exception(std::string_view function) {
  try {
    throw;
  } catch (const Error& e) {
    return Status(e.code(), function, e.detail());
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::internal, function, "out of host memory");
  } catch (const std::exception& e) {
    return Status(StatusCode::internal, function, e.what());
  } catch (...) {
    return Status(StatusCode::internal, function, "unknown exception");
  }
}

}  // namespace coda

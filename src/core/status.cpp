#include "coda/core/status.hpp"

namespace coda {

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

void Status::throw_if_error() const {
  switch (code_) {
    case StatusCode::ok: return;
    case StatusCode::invalid_argument: throw InvalidArgument(message_);
    case StatusCode::unsupported: throw Unsupported(message_);
    case StatusCode::cuda_error: throw CudaError(message_);
    case StatusCode::internal: throw InternalError(message_);
  }
}

}  // namespace coda

#include "coda/core/validate.hpp"

#include <algorithm>
#include <cstdint>

namespace coda {

using detail::concat;

ArgumentCheck& ArgumentCheck::fail(std::string_view argument, const std::string& rule, StatusCode code) {
  if (!failed()) status_ = Status(code, concat(function_, ": argument '", argument, "': ", rule));
  return *this;
}

ArgumentCheck& ArgumentCheck::require(bool condition, std::string_view argument, std::string_view rule,
                                      StatusCode code) {
  if (!failed() && !condition) fail(argument, std::string(rule), code);
  return *this;
}

ArgumentCheck& ArgumentCheck::not_null(std::string_view argument, const void* pointer) {
  if (!failed() && pointer == nullptr) fail(argument, "is a null pointer");
  return *this;
}

ArgumentCheck& ArgumentCheck::dtype_in(std::string_view argument, DType got, std::initializer_list<DType> allowed) {
  if (failed() || std::find(allowed.begin(), allowed.end(), got) != allowed.end()) return *this;
  std::string list;
  for (DType t : allowed) list += (list.empty() ? "" : ", ") + std::string(name(t));
  return fail(argument, concat("dtype ", name(got), " is not supported here (expected one of: ", list, ")"),
              StatusCode::unsupported);
}

ArgumentCheck& ArgumentCheck::rank_in(std::string_view argument, const TensorView& t, int min_rank, int max_rank) {
  if (failed() || (t.rank >= min_rank && t.rank <= max_rank)) return *this;
  if (min_rank == max_rank) return fail(argument, concat("must have rank ", min_rank, ", got rank ", t.rank));
  return fail(argument, concat("must have rank ", min_rank, " to ", max_rank, ", got rank ", t.rank));
}

ArgumentCheck& ArgumentCheck::dim_equals(std::string_view argument, const TensorView& t, int dim, int64_t expected,
                                         std::string_view dim_name, std::string_view why) {
  if (failed()) return *this;
  const int index = dim < 0 ? t.rank + dim : dim;
  if (index < 0 || index >= t.rank) return fail(argument, concat("has no dimension ", dim, " (rank ", t.rank, ")"));
  if (t.shape[index] != expected)
    return fail(argument, concat("shape ", t.describe(), ": ", dim_name, " is ", t.shape[index], " but must be ",
                                 expected, " (", why, ")"));
  return *this;
}

ArgumentCheck& ArgumentCheck::positive(std::string_view argument, int64_t value, std::string_view what) {
  if (!failed() && value < 1) fail(argument, concat(what, " is ", value, " but must be at least 1"));
  return *this;
}

ArgumentCheck& ArgumentCheck::inner_contiguous(std::string_view argument, const TensorView& t) {
  if (failed() || t.rank == 0) return *this;
  if (t.stride[t.rank - 1] != 1)
    return fail(argument, concat("shape ", t.describe(), ": the last dimension must be contiguous (stride 1)"));
  if (t.rank >= 2 && t.ld() < t.cols())
    return fail(argument, concat("shape ", t.describe(), ": row stride ", t.ld(), " is smaller than the row length ",
                                 t.cols(), " (rows would overlap)"));
  return *this;
}

ArgumentCheck& ArgumentCheck::tma_aligned(std::string_view argument, const TensorView& t) {
  if (failed()) return *this;
  const auto address = reinterpret_cast<std::uintptr_t>(t.data);
  if (address % 16 != 0)
    return fail(argument, concat("base address 0x", std::hex, address, std::dec,
                                 " is not 16-byte aligned (TMA needs 16-byte-aligned tensors)"));
  for (int d = 0; d + 1 < t.rank; ++d) {
    const int64_t bytes = t.stride[d] * int64_t(t.element_bytes());
    if (bytes % 16 != 0) {
      const char* what = d == t.rank - 2 ? "row" : d == t.rank - 3 ? "batch" : "outer";
      return fail(argument, concat(what, " stride of ", t.stride[d], " elements (", bytes,
                                   " bytes) is not a multiple of 16 bytes (TMA needs 16-byte-aligned strides; pad to a"
                                   " multiple of ", 16 / int64_t(t.element_bytes()), " elements)"));
    }
  }
  return *this;
}

}  // namespace coda

#include "coda/core/validate.hpp"

#include <algorithm>
#include <cstdint>

namespace coda {

void ArgumentCheck::fail(StatusCode code, std::string_view argument, std::string_view rule) {
  status_ = Status(code, function_, text("argument '", argument, "': ", rule));
}

ArgumentCheck& ArgumentCheck::not_null(std::string_view argument, const void* pointer) {
  return require(pointer != nullptr, argument, "is a null pointer");
}

ArgumentCheck& ArgumentCheck::dtype_in(std::string_view argument, DType got, std::initializer_list<DType> allowed) {
  if (failed() || std::find(allowed.begin(), allowed.end(), got) != allowed.end()) return *this;
  std::string list;
  for (DType t : allowed) list += (list.empty() ? "" : ", ") + std::string(name(t));
  return require_supported(false, argument, "dtype ", name(got), " is not supported here (expected one of: ", list,
                           ")");
}

ArgumentCheck& ArgumentCheck::rank_in(std::string_view argument, const TensorView& t, int min_rank, int max_rank) {
  if (failed() || (t.rank >= min_rank && t.rank <= max_rank)) return *this;
  if (min_rank == max_rank) return require(false, argument, "must have rank ", min_rank, ", got rank ", t.rank);
  return require(false, argument, "must have rank ", min_rank, " to ", max_rank, ", got rank ", t.rank);
}

ArgumentCheck& ArgumentCheck::dim_equals(std::string_view argument, const TensorView& t, int dim, int64_t expected,
                                         std::string_view dim_name, std::string_view why) {
  if (failed()) return *this;
  const int index = dim < 0 ? t.rank + dim : dim;
  if (index < 0 || index >= t.rank) return require(false, argument, "has no dimension ", dim, " (rank ", t.rank, ")");
  return require(t.shape[index] == expected, argument, "shape ", t, ": ", dim_name, " is ", t.shape[index],
                 " but must be ", expected, " (", why, ")");
}

ArgumentCheck& ArgumentCheck::positive(std::string_view argument, int64_t value, std::string_view what) {
  return require(value >= 1, argument, what, " is ", value, " but must be at least 1");
}

ArgumentCheck& ArgumentCheck::inner_contiguous(std::string_view argument, const TensorView& t) {
  if (failed() || t.rank == 0) return *this;
  require(t.stride[t.rank - 1] == 1, argument, "shape ", t, ": the last dimension must be contiguous (stride 1)");
  if (t.rank >= 2)
    require(t.ld() >= t.cols(), argument, "shape ", t, ": row stride ", t.ld(), " is smaller than the row length ",
            t.cols(), " (rows would overlap)");
  return *this;
}

ArgumentCheck& ArgumentCheck::tma_aligned(std::string_view argument, const TensorView& t) {
  if (failed()) return *this;
  const auto address = reinterpret_cast<std::uintptr_t>(t.data);
  if (address % 16 != 0)
    return require(false, argument, "base address 0x", std::hex, address, std::dec,
                   " is not 16-byte aligned (TMA needs 16-byte-aligned tensors)");
  for (int d = 0; d + 1 < t.rank; ++d) {
    const int64_t bytes = t.stride[d] * int64_t(t.element_bytes());
    const char* what = d == t.rank - 2 ? "row" : d == t.rank - 3 ? "batch" : "outer";
    require(bytes % 16 == 0, argument, what, " stride of ", t.stride[d], " elements (", bytes,
            " bytes) is not a multiple of 16 bytes (TMA needs 16-byte-aligned strides; pad to a multiple of ",
            16 / int64_t(t.element_bytes()), " elements)");
  }
  return *this;
}

}  // namespace coda

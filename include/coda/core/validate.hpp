// coda/core/validate.hpp: argument checks whose failures name the function, the argument and
// the rule. A check records the first failure and skips the rest, so a chain reads as a list
// of rules:
//
//   coda::ArgumentCheck check("coda::gemm");
//   check.not_null("a", a.data)
//        .dtype_in("a", a.dtype, {coda::DType::bf16, coda::DType::f16})
//        .rank_in("a", a, 2, 3)
//        .inner_contiguous("a", a)
//        .tma_aligned("a", a);
//   check.throw_if_error();   // or: return check.status();
//
// Messages look like:
//   coda::gemm: argument 'a': row stride of 14 bytes is not a multiple of 16 (TMA needs
//   16-byte-aligned strides)
#pragma once

#include <cstdint>
#include <initializer_list>
#include <sstream>
#include <string>
#include <string_view>

#include "coda/core/status.hpp"
#include "coda/core/tensor.hpp"

namespace coda {

class ArgumentCheck {
 public:
  explicit ArgumentCheck(std::string_view function) : function_(function) {}

  bool failed() const { return !status_.ok(); }
  const Status& status() const { return status_; }
  void throw_if_error() const { status_.throw_if_error(); }

  /// The general rule: fail with `rule` when `condition` is false.
  ArgumentCheck& require(bool condition, std::string_view argument, std::string_view rule,
                         StatusCode code = StatusCode::invalid_argument);

  ArgumentCheck& not_null(std::string_view argument, const void* pointer);
  ArgumentCheck& dtype_in(std::string_view argument, DType got, std::initializer_list<DType> allowed);
  ArgumentCheck& rank_in(std::string_view argument, const TensorView& t, int min_rank, int max_rank);
  /// Dimension `dim` (counted from the end: -1 the last) must equal `expected`; `dim_name` and
  /// `why` explain it, e.g. ("K", "a and b must agree on K").
  ArgumentCheck& dim_equals(std::string_view argument, const TensorView& t, int dim, int64_t expected,
                            std::string_view dim_name, std::string_view why);
  ArgumentCheck& positive(std::string_view argument, int64_t value, std::string_view what);
  /// The last dimension is contiguous (stride 1) and rows do not overlap (ld >= cols).
  ArgumentCheck& inner_contiguous(std::string_view argument, const TensorView& t);
  /// What the TMA unit can address: base address and every outer stride a multiple of 16 bytes.
  ArgumentCheck& tma_aligned(std::string_view argument, const TensorView& t);

 private:
  ArgumentCheck& fail(std::string_view argument, const std::string& rule,
                      StatusCode code = StatusCode::invalid_argument);

  std::string function_;
  Status status_;
};

namespace detail {
template <class... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream s;
  (s << ... << parts);
  return s.str();
}
}  // namespace detail

}  // namespace coda

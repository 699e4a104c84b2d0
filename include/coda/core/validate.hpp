// coda/core/validate.hpp: argument checks whose failures name the function, the argument and
// the rule. A check records the first failure and skips the rest, so a chain reads as a list
// of rules:
//
//   coda::ArgumentCheck check("coda::gemm");
//   check.not_null("a", a.data)
//        .dtype_in("a", a.dtype, {coda::DType::bf16, coda::DType::f16})
//        .rank_in("a", a, 2, 3)
//        .require(k % 8 == 0, "a", "K is ", k, " but must be a multiple of 8")
//        .tma_aligned("a", a);
//   check.throw_if_error();   // or: return check.status();
//
// A rule's text is given as parts (strings, numbers, DType names, tensor views), formatted only
// when the rule fails: a call whose arguments are valid builds no string. Messages look like:
//   coda::gemm: argument 'a': row stride of 7 elements (14 bytes) is not a multiple of 16 bytes
//   (TMA needs 16-byte-aligned strides; pad to a multiple of 8 elements)
#pragma once

#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>

#include "coda/core/api.hpp"
#include "coda/core/status.hpp"
#include "coda/core/tensor.hpp"

namespace coda {

/// The parts, formatted as an std::ostream writes them (for messages, on the failure path).
template <class... Parts>
std::string text(const Parts&... parts) {
  std::ostringstream s;
  (s << ... << parts);
  return s.str();
}

/// Parts kept by reference and formatted as one, when a message needs them: an argument named by a
/// number (`phrase("tile input ", i)`). It refers to its parts: use it while they live.
template <class... Parts>
struct Phrase {
  std::tuple<const Parts&...> parts;
};
template <class... Parts>
Phrase<Parts...> phrase(const Parts&... parts) {
  return {{parts...}};
}
template <class... Parts>
std::ostream& operator<<(std::ostream& out, const Phrase<Parts...>& p) {
  std::apply([&](const auto&... part) { (out << ... << part); }, p.parts);
  return out;
}

class CODA_API ArgumentCheck {
 public:
  /// `function` names the entry point in every message; it must outlive the check (a literal).
  explicit ArgumentCheck(std::string_view function) : function_(function) {}

  bool failed() const { return !status_.ok(); }
  const Status& status() const { return status_; }
  void throw_if_error() const { status_.throw_if_error(); }

  /// The general rule: fail when `condition` is false. `argument` and the rule's parts are
  /// formatted only then.
  template <class Argument, class... Rule>
  ArgumentCheck& require(bool condition, const Argument& argument, const Rule&... rule) {
    if (!condition && !failed()) fail(StatusCode::invalid_argument, text(argument), text(rule...));
    return *this;
  }
  /// The same, for what is valid in general but not served here (StatusCode::unsupported).
  template <class Argument, class... Rule>
  ArgumentCheck& require_supported(bool condition, const Argument& argument, const Rule&... rule) {
    if (!condition && !failed()) fail(StatusCode::unsupported, text(argument), text(rule...));
    return *this;
  }

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
  void fail(StatusCode code, std::string_view argument, std::string_view rule);

  std::string_view function_;
  Status status_;
};

}  // namespace coda

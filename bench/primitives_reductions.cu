// `coda bench primitives`: the row and column reductions (and an online log-sum-exp).
#include "primitives_rows.cuh"

namespace coda::bench::primitives {
namespace {

using namespace coda::epilogue;

struct RowSumSquares {
  Partials partials;
  template <class T>
  CODA_HD void operator()(T& t) const {
    t.row_reduce(partials, Sum{}, [](const Element& x) { return x.value * x.value; });
  }
};
struct RowLogSumExp {
  Partials partials;
  template <class T>
  CODA_HD void operator()(T& t) const {
    t.row_reduce(partials, LogSumExp{}, [](const Element& x) { return x.value; });
  }
};
struct ColumnSum {
  Partials partials;
  template <class T>
  CODA_HD void operator()(T& t) const {
    t.column_reduce(partials, Sum{}, [](const Element& x) { return x.value; });
  }
};

}  // namespace

std::vector<Row> reduction_rows(const Buffers& b) {
  return {row_of("row_reduce Sum", b, RowSumSquares{row_partials(b.row_parts, "parts")}),
          row_of("row_reduce LogSumExp", b, RowLogSumExp{row_partials(b.row_parts, "parts")}),
          row_of("column_reduce Sum", b, ColumnSum{column_partials(b.column_parts, "parts")})};
}

}  // namespace coda::bench::primitives

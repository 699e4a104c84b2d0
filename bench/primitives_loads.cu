// `coda bench primitives`: the tile and vector loads.
#include "bench_programs.hpp"
#include "primitives_rows.cuh"

namespace coda::bench::primitives {
namespace {

using namespace coda::epilogue;

struct RowVectorLoad {
  RowVector v;
  TileOut out;
  template <class T>
  CODA_HD void operator()(T& t) const {
    t.store(out, [&](const Element& x) { return x.value * t.load(v, x); });
  }
};
struct ColumnVectorLoad {
  ColumnVector v;
  TileOut out;
  template <class T>
  CODA_HD void operator()(T& t) const {
    t.store(out, [&](const Element& x) { return x.value * t.load(v, x); });
  }
};

}  // namespace

std::vector<Row> load_rows(const Buffers& b) {
  return {row_of("tile load + store", b, TileLoad{tile_in(b.in, "in"), tile_out(b.out, "out")}),
          row_of("row-vector load + store", b, RowVectorLoad{row_vector(b.row_vector, "v"), tile_out(b.out, "out")}),
          row_of("column-vector load + store", b,
                 ColumnVectorLoad{column_vector(b.column_vector, "v"), tile_out(b.out, "out")})};
}

}  // namespace coda::bench::primitives

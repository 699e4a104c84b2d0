// `coda bench primitives`: the tile stores (full, two, pair-wise half width, e4m3 scaled).
#include "bench_programs.hpp"
#include "primitives_rows.cuh"

namespace coda::bench::primitives {
namespace {

using namespace coda::epilogue;

struct TwoStores {
  TileOut out, second;
  template <class T>
  CODA_HD void operator()(T& t) const {
    t.store(out);
    t.store(second);
  }
};
struct HalfWidthStore {  // SwiGLU's shape of output
  TileOut half;
  template <class T>
  CODA_HD void operator()(T& t) const {
    t.store_pairs(half, [](const Pair& p) { return p.first * p.second; });
  }
};

}  // namespace

std::vector<Row> store_rows(const Buffers& b) {
  return {
      row_of("store", b, StoreOnly{tile_out(b.out, "out")}),
      row_of("store + store", b, TwoStores{tile_out(b.out, "out"), tile_out(b.second, "second")}),
      row_of("store_pairs (half width)", b, HalfWidthStore{tile_out(b.half, "half")}),
      row_of("store (e4m3 out, scaled)", b, StoreOnly{tile_out(b.fp8_out, "out", 4.0f)}, OutputTypes<DType::e4m3>{})};
}

}  // namespace coda::bench::primitives

// Small epilogue programs two benchmarks time (coda bench primitives, coda bench timeline): the
// plain store, against which every program is measured, and a tile load + store.
#pragma once

#include "coda/epilogue/program.hpp"

namespace coda::bench {

struct StoreOnly {
  epilogue::TileOut out;
  template <class T> CODA_HD void operator()(T& t) const { t.store(out); }
};

struct TileLoad {
  epilogue::TileIn in;
  epilogue::TileOut out;
  static constexpr auto staged_input = &TileLoad::in;
  template <class I> CODA_HD void tile_inputs(I& i) const { i(in); }
  template <class T> CODA_HD void operator()(T& t) const {
    t.map([&](epilogue::Element& x) { x.value += t.load(in, x); });
    t.store(out);
  }
};

}  // namespace coda::bench

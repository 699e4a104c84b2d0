// Running top-k (TopK, monoids.hpp) on the GPU executor: each row's top 4 per part and each part's
// top 2 over the GPU's own fp32 results (stored beside them; the GEMM gives the same bits in both
// launches), exactly as sorting those results gives, with exact ties everywhere (B's rows come in
// equal pairs, so each row of the product holds every value twice), at residue shapes, and the
// same bits on a second run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "coda/epilogue/host_arguments.hpp"
#include "coda/epilogue/launch.cuh"
#include "coda/epilogue/parts.hpp"
#include "coda/reference/gemm.hpp"
#include "epilogue/top_k_expectations.hpp"
#include "support/device_tensor.hpp"

namespace coda::test {
namespace {

using epilogue::Element;
using epilogue::kPartCols;
using epilogue::kPartRows;
using Row = epilogue::TopK<4>;
using Whole = epilogue::TopK<2>;

// Two programs: one running top-k each (two in one kernel kept their insertion chains' states
// side by side and spilled 1.7 KB; each alone spills nothing).
struct TopColumns {
  epilogue::TileOutOf<DType::f32> values{};  // the results the reduction saw
  epilogue::Partials rows{};                 // Row, per row and part: index = column

  template <class Tile>
  CODA_HD void operator()(Tile& t) const {
    t.store(values);
    t.row_reduce(rows, Row{}, [](const Element& x) { return Row::one(x.value, x.col); });
  }
};
struct TopOfParts {
  epilogue::TileOutOf<DType::f32> values{};
  epilogue::Partials parts{};  // Whole, per part: index = row * n + column
  int32_t n = 0;

  template <class Tile>
  CODA_HD void operator()(Tile& t) const {
    t.store(values);
    t.reduce(parts, Whole{}, [&](const Element& x) { return Whole::one(x.value, x.row * n + x.col); });
  }
};

TEST(TopKGpu, RowsAndPartsKeepTheTopOfTheGpusOwnResults) {
  CODA_REQUIRE_HOPPER();
  struct Shape {
    int64_t m, n, k;
  };
  for (const Shape s : {Shape{1, 264, 64}, Shape{200, 600, 136}, Shape{129, 1030, 264}}) {
    SCOPED_TRACE(::testing::Message() << "M=" << s.m << " N=" << s.n << " K=" << s.k << ", " << seed_note());
    const int64_t row_parts = (s.n + kPartCols - 1) / kPartCols, part_rows = (s.m + kPartRows - 1) / kPartRows;
    DeviceTensor x(DType::bf16, s.m, s.k), w(DType::bf16, s.n, s.k);
    x.random();
    w.random();
    // Rows 2j + 1 of B repeat rows 2j: columns 2j and 2j + 1 of the product are equal, bit for bit.
    const std::size_t row_bytes = std::size_t(w.host.view.ld()) * 2;
    for (int64_t r = 1; r < s.n; r += 2)
      std::memcpy(&w.host.bytes[std::size_t(r) * row_bytes], &w.host.bytes[std::size_t(r - 1) * row_bytes], row_bytes);
    w.upload();
    DeviceTensor values(DType::f32, s.m, s.n), rows(DType::f32, s.m, row_parts * Row::kWords),
        parts(DType::f32, part_rows, row_parts * Whole::kWords);
    TopColumns top_columns;
    top_columns.values = {epilogue::tile_out(values.view(), "values")};
    top_columns.rows = epilogue::row_partials(rows.view(), "rows", Row::kWords);
    TopOfParts top_of_parts;
    top_of_parts.values = top_columns.values;
    top_of_parts.parts = epilogue::row_partials(parts.view(), "parts", Whole::kWords);
    top_of_parts.n = int32_t(s.n);

    std::vector<unsigned char> first_values, first_rows, first_parts;
    for (int run = 0; run < 2; ++run) {
      rows.poison();
      parts.poison();
      values.poison();
      epilogue::gemm_program({x.view(), Major::k}, {w.view(), Major::k}, top_of_parts);
      CODA_CUDA_CHECK(cudaDeviceSynchronize());
      const std::vector<unsigned char> seen_by_parts = values.download().host.bytes;
      values.poison();
      epilogue::gemm_program({x.view(), Major::k}, {w.view(), Major::k}, top_columns);
      CODA_CUDA_CHECK(cudaDeviceSynchronize());
      values.download();
      ASSERT_TRUE(values.host.bytes == seen_by_parts) << "the two launches' GEMMs gave other bits";
      rows.download();
      parts.download();
      if (run == 1) {
        EXPECT_TRUE(values.host.bytes == first_values) << "the GEMM gave other bits on a second run";
        EXPECT_TRUE(rows.host.bytes == first_rows && parts.host.bytes == first_parts) << "other bits on a second run";
        break;
      }
      first_values = values.host.bytes;
      first_rows = rows.host.bytes;
      first_parts = parts.host.bytes;
      const reference::Matrix y = values.host.matrix();
      EXPECT_LT(reference::relative_error(y, reference::gemm(x.host.matrix(), Major::k, w.host.matrix(), Major::k)),
                1e-5);
      const float* row_slots = reinterpret_cast<const float*>(rows.host.bytes.data());
      const float* part_slots = reinterpret_cast<const float*>(parts.host.bytes.data());
      for (int64_t pn = 0; pn < row_parts; ++pn) {
        const int64_t c0 = pn * kPartCols, c1 = std::min(s.n, c0 + kPartCols);
        for (int64_t r = 0; r < s.m; ++r) {
          std::vector<TopKEntry> candidates;
          for (int64_t c = c0; c < c1; ++c) candidates.push_back({float(y(r, c)), int32_t(c)});
          ASSERT_TRUE(slot_is(row_slots + r * rows.host.view.ld() + pn * Row::kWords, expected_top(candidates, 4)))
              << "row " << r << ", part " << pn;
        }
        for (int64_t pm = 0; pm < part_rows; ++pm) {
          std::vector<TopKEntry> candidates;
          for (int64_t r = pm * kPartRows; r < std::min(s.m, (pm + 1) * kPartRows); ++r)
            for (int64_t c = c0; c < c1; ++c) candidates.push_back({float(y(r, c)), int32_t(r * s.n + c)});
          ASSERT_TRUE(slot_is(part_slots + pm * parts.host.view.ld() + pn * Whole::kWords, expected_top(candidates, 2)))
              << "part " << pm << ", " << pn;
        }
      }
    }
  }
}

}  // namespace
}  // namespace coda::test

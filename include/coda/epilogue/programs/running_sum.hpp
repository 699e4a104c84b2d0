// coda/epilogue/programs/running_sum.hpp: a product summed over chunks of K, one GEMM per chunk,
// in an fp32 running sum: C = sum_c A_c B_c^T where the chunks' operands are made one at a time
// (the cross-entropy backward's dX over vocabulary chunks, ops/cross_entropy.hpp).
//
//   RunningSum first{.sum_out = sum};                        // chunk 0: sum = A_0 B_0^T
//   RunningSum middle{.sum_in = table(sum), .sum_out = sum}; // sum += A_c B_c^T (in place)
//   RunningSum last{.sum_in = table(sum), .out = dx};        // dx = sum + A_n B_n^T, in dx's type
//
// In place is safe: each element is read and written by the same thread, the read first. The
// chunks run in a fixed order, so the result is the same bits run after run.
//
// On the cooperative m128n256 tile its launches honour a K-block mask (mainloop/params.hpp,
// KBlockMask): the cross-entropy backward leaves out the blocks of dZ below its skip threshold.
#pragma once

#include "coda/epilogue/program.hpp"

namespace coda::epilogue {

struct RunningSum {
  Table sum_in{};                   // f32 M x N: the earlier chunks' sum (data null: the first chunk)
  TileOutOf<DType::f32> sum_out{};  // f32 M x N: the sum so far (data null: the last chunk, see out)
  TileOut out{};                    // the finished sum, in the launch's type (the last chunk)
  static constexpr bool kSkipsKBlocks = true;

  template <class Tile>
  CODA_HD void operator()(Tile& t) const {
    if (sum_in.data) t.map([&](Element& x) { x.value += t.load(sum_in, x.row, x.col); });
    if (sum_out.data) t.store(sum_out);
    else t.store(out);
  }

  void check_arguments(ArgumentCheck& check) const {
    check.require((sum_out.data == nullptr) != (out.data == nullptr), "sum_out",
                  "and out: exactly one is written (sum_out for every chunk but the last, out for the last)");
  }
};

}  // namespace coda::epilogue

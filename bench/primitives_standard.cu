// `coda bench primitives`: the standard set's bias + GELU (the epilogue of CUTLASS's numbers in
// docs/performance.md): LinearCombination with every term compiled and the activation's kind read at
// run time, and LinearCombinationOf the bias and GELU alone (and with the pre-activation stored).
#include "coda/epilogue/programs/standard.hpp"
#include "primitives_rows.cuh"

namespace coda::bench::primitives {

using namespace coda::epilogue;

std::vector<Row> standard_rows(const Buffers& b) {
  auto bias_gelu = [&](auto program) {
    program.column_bias = row_vector(b.row_vector, "bias");
    program.activation.kind = Activation::gelu_tanh;
    program.out = tile_out(b.out, "out");
    return program;
  };
  auto with_pre_activation =
      bias_gelu(LinearCombinationOf<LinearCombinationTerms{
                    .column_bias = true, .pre_activation = true, .activation = Activation::gelu_tanh}>{});
  with_pre_activation.pre_activation = tile_out(b.second, "pre_activation");
  return {
      row_of("LinearCombination bias+GELU", b, bias_gelu(LinearCombination{})),
      row_of(
          "  ...Of<bias, GELU>", b,
          bias_gelu(
              LinearCombinationOf<LinearCombinationTerms{.column_bias = true, .activation = Activation::gelu_tanh}>{})),
      row_of("  ...Of<bias, GELU, pre-act>", b, with_pre_activation)};
}

}  // namespace coda::bench::primitives

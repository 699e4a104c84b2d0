// `coda bench primitives`: the training backward of bias + GELU, dX = dY gelu'(pre) and the bias
// gradient (column sums), with the activation's kind read at run time and fixed (ActivationBackwardOf).
#include "coda/epilogue/programs/standard.hpp"
#include "primitives_rows.cuh"

namespace coda::bench::primitives {

using namespace coda::epilogue;

std::vector<Row> backward_rows(const Buffers& b) {
  ActivationBackward backward;
  backward.pre_activation = tile_in(b.in, "pre_activation");
  backward.activation.kind = Activation::gelu_tanh;
  backward.out = tile_out(b.out, "dx");
  backward.bias_gradient = column_partials(b.column_parts, "bias_gradient");
  ActivationBackwardOf<Activation::gelu_tanh> backward_of_gelu;
  backward_of_gelu.pre_activation = backward.pre_activation;
  backward_of_gelu.out = backward.out;
  backward_of_gelu.bias_gradient = backward.bias_gradient;
  return {row_of("ActivationBackward dGELU+db", b, backward), row_of("  ...Of<gelu_tanh>", b, backward_of_gelu)};
}

}  // namespace coda::bench::primitives

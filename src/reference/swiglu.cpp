#include "coda/reference/swiglu.hpp"

#include "coda/reference/epilogues.hpp"
#include "coda/reference/reductions.hpp"
#include "reference/checks.hpp"

namespace coda::reference {
namespace {

void check_interleaved(ArgumentCheck& check, const Matrix& y) {
  check.require(y.cols >= 2 && y.cols % 2 == 0, "y", "has ", y.cols,
                " columns but must have an even number >= 2 (interleaved gate/up pairs)");
}

}  // namespace

Matrix swiglu(const Matrix& y) {
  ArgumentCheck check("coda::reference::swiglu");
  check_interleaved(check, y);
  check.throw_if_error();
  const Activation silu = Activation::silu();
  Matrix out(y.rows, y.cols / 2);
  for (int64_t m = 0; m < y.rows; ++m)
    for (int64_t j = 0; j < out.cols; ++j) out(m, j) = silu(y(m, 2 * j)) * y(m, 2 * j + 1);
  return out;
}

Matrix interleave_gate_up(const Matrix& w_gate, const Matrix& w_up) {
  ArgumentCheck check("coda::reference::interleave_gate_up");
  checks::require_shape(check, "w_up", w_up, w_gate.rows, w_gate.cols, "the shape of w_gate");
  check.throw_if_error();
  Matrix out(2 * w_gate.rows, w_gate.cols);
  for (int64_t f = 0; f < w_gate.rows; ++f) {
    for (int64_t k = 0; k < w_gate.cols; ++k) {
      out(2 * f, k) = w_gate(f, k);
      out(2 * f + 1, k) = w_up(f, k);
    }
  }
  return out;
}

GateUp deinterleave_gate_up(const Matrix& w) {
  ArgumentCheck check("coda::reference::deinterleave_gate_up");
  check.require(w.rows % 2 == 0, "w", "has ", w.rows, " rows but must have an even number (gate/up pairs)");
  check.throw_if_error();
  GateUp out{Matrix(w.rows / 2, w.cols), Matrix(w.rows / 2, w.cols)};
  for (int64_t f = 0; f < w.rows / 2; ++f) {
    for (int64_t k = 0; k < w.cols; ++k) {
      out.gate(f, k) = w(2 * f, k);
      out.up(f, k) = w(2 * f + 1, k);
    }
  }
  return out;
}

SwigluBackward swiglu_backward(const Matrix& grad_a, const Matrix& y, int64_t bn) {
  ArgumentCheck check("coda::reference::swiglu_backward");
  check_interleaved(check, y);
  checks::require_shape(check, "grad_a", grad_a, y.rows, y.cols / 2, "one gradient per (gate, up) pair of y");
  checks::require_tile_size(check, "bn", bn);
  check.throw_if_error();

  const Activation sigmoid = Activation::sigmoid();
  SwigluBackward out{Matrix(y.rows, y.cols), Matrix(), swiglu(y)};
  for (int64_t m = 0; m < y.rows; ++m) {
    for (int64_t j = 0; j < grad_a.cols; ++j) {
      const double g = y(m, 2 * j), u = y(m, 2 * j + 1), da = grad_a(m, j);
      const double s = sigmoid(g);
      out.grad_y(m, 2 * j) = da * u * s * (1.0 + g * (1.0 - s));
      out.grad_y(m, 2 * j + 1) = da * g * s;
    }
  }
  // A tile of bn pairs spans 2*bn columns of Y and dY, so pairs never straddle tiles.
  out.row_partials = row_partial_dots(y, out.grad_y, 2 * bn);
  return out;
}

}  // namespace coda::reference

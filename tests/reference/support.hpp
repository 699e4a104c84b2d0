// Helpers shared by the reference tests: central-difference gradients (the independent check of
// every backward formula) and the message of an expected InvalidArgument.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

#include "coda/core/status.hpp"
#include "coda/reference/matrix.hpp"

namespace coda::test {

inline std::vector<double>& elements(reference::Matrix& x) { return x.data; }
inline std::vector<double>& elements(reference::Vector& x) { return x; }

/// d loss / d x by central differences, (loss(x + h e_i) - loss(x - h e_i)) / 2h for every element
/// of x (a Matrix or a Vector). The error is O(h^2) truncation plus O(eps |loss| / h) rounding:
/// about 1e-10 relative for h = 1e-6 and smooth O(1) functions.
template <class Parameter, class Loss>
Parameter numerical_gradient(Loss&& loss, Parameter x, double step = 1e-6) {
  Parameter gradient = x;
  for (std::size_t i = 0; i < elements(x).size(); ++i) {
    const double saved = elements(x)[i];
    elements(x)[i] = saved + step;
    const double up = loss(x);
    elements(x)[i] = saved - step;
    const double down = loss(x);
    elements(x)[i] = saved;
    elements(gradient)[i] = (up - down) / (2 * step);
  }
  return gradient;
}

/// <a, b> over all elements: the scalar loss sum(G ⊙ f(x)) turns a matrix-valued f into something
/// to differentiate; its gradient is f's backward applied to G.
inline double frobenius_dot(const reference::Matrix& a, const reference::Matrix& b) {
  double sum = 0;
  for (std::size_t i = 0; i < a.data.size(); ++i) sum += a.data[i] * b.data[i];
  return sum;
}

/// What `f` threw as coda::InvalidArgument; a test failure when it threw nothing.
template <class F>
std::string invalid_argument_message(F&& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected coda::InvalidArgument, nothing was thrown";
  return {};
}

}  // namespace coda::test

// Test inputs: fresh random data every run (never zeros), reproducible on demand.
//
// The seed comes from CODA_TEST_SEED when set, else from std::random_device; it is printed with
// every failure through SCOPED_TRACE-style messages (see seed_note()), so a failing run can be
// replayed with CODA_TEST_SEED=<seed>.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "coda/core/tensor.hpp"
#include "coda/reference/matrix.hpp"

namespace coda::test {

uint64_t seed();
std::mt19937_64& rng();
/// "seed 1234 (replay with CODA_TEST_SEED=1234)"
std::string seed_note();

double uniform(double lo, double hi);
int64_t uniform_int(int64_t lo, int64_t hi);  // inclusive
reference::Matrix random_matrix(int64_t rows, int64_t cols, double lo = -1.0, double hi = 1.0);
reference::Vector random_vector(int64_t n, double lo = -1.0, double hi = 1.0);

/// A host tensor that owns its bytes: rows x cols (ld >= cols) of `dtype`, optionally batched.
struct HostTensor {
  std::vector<unsigned char> bytes;
  TensorView view;

  HostTensor() = default;
  HostTensor(DType dtype, int64_t rows, int64_t cols, int64_t ld = -1, int64_t batch = 1);
  /// Fill every element (padding too) with uniform random values in [lo, hi), rounded to dtype.
  void fill_random(double lo = -1.0, double hi = 1.0);
  /// Matrix `b` of the batch as fp64.
  reference::Matrix matrix(int64_t b = 0) const;
  /// View of matrix `b` of the batch (rank 2).
  TensorView matrix_view(int64_t b = 0) const;
};

}  // namespace coda::test

#include "support/random.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace coda::test {

uint64_t seed() {
  static const uint64_t value = [] {
    if (const char* s = std::getenv("CODA_TEST_SEED")) return uint64_t(std::strtoull(s, nullptr, 10));
    std::random_device device;
    return (uint64_t(device()) << 32) ^ device();
  }();
  return value;
}

std::string seed_note() {
  return "seed " + std::to_string(seed()) + " (replay with CODA_TEST_SEED=" + std::to_string(seed()) + ")";
}

std::mt19937_64& rng() {
  static std::mt19937_64 generator(seed());
  return generator;
}

double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng()); }

int64_t uniform_int(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng()); }

reference::Matrix random_matrix(int64_t rows, int64_t cols, double lo, double hi) {
  reference::Matrix m(rows, cols);
  for (double& x : m.data) x = uniform(lo, hi);
  return m;
}

reference::Vector random_vector(int64_t n, double lo, double hi) {
  reference::Vector v(static_cast<std::size_t>(n));
  for (double& x : v) x = uniform(lo, hi);
  return v;
}

HostTensor::HostTensor(DType dtype, int64_t rows, int64_t cols, int64_t ld, int64_t batch) {
  view = batch > 1 ? TensorView::batched(nullptr, dtype, batch, rows, cols, ld)
                   : TensorView::matrix(nullptr, dtype, rows, cols, ld);
  bytes.assign(std::size_t(batch * rows * view.ld()) * size_of(dtype), 0);
  view.data = bytes.data();
}

void HostTensor::fill_random(double lo, double hi) {
  const std::size_t n = bytes.size() / view.element_bytes();
  std::uniform_real_distribution<float> dist{float(lo), float(hi)};
  auto& g = rng();
  for (std::size_t i = 0; i < n; ++i)
    store_element(view.dtype, bytes.data() + i * view.element_bytes(), dist(g));
}

TensorView HostTensor::matrix_view(int64_t b) const {
  TensorView v = TensorView::matrix(bytes.data() + b * view.batch_stride() * int64_t(view.element_bytes()),
                                    view.dtype, view.rows(), view.cols(), view.ld());
  return v;
}

reference::Matrix HostTensor::matrix(int64_t b) const { return reference::to_matrix(matrix_view(b)); }

}  // namespace coda::test

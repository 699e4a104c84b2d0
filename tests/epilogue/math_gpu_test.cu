// The epilogue math (math.hpp) as the GPU computes it: e^x and 1/x by the special-function unit
// there, expf and a division on the host. Every activation's value and derivative, on the GPU,
// against the host's fp32 of the same code and against fp64, over the inputs of
// activation_cases.hpp (0 and subnormals through each activation's kinks to overflow, infinities
// and NaN).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <vector>

#include "epilogue/activation_cases.hpp"
#include "support/gpu.hpp"

namespace coda::test {
namespace {

using namespace activation_cases;
using epilogue::Activation;
using epilogue::ActivationFunction;

// out[2 (kind x n + i)] = value, out[2 (kind x n + i) + 1] = derivative of kind at in[i].
__global__ void every_activation(const ActivationFunction* functions, const float* in, int n, float* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  for (int kind = 0; kind < kKinds; ++kind)
    functions[kind].visit([&](auto k) {
      constexpr Activation K = decltype(k)::value;
      out[2 * (kind * n + i)] = functions[kind].value_of<K>(in[i]);
      out[2 * (kind * n + i) + 1] = functions[kind].derivative_of<K>(in[i]);
    });
}

TEST(EpilogueMathGpu, EveryActivationMatchesTheHostAndTheReference) {
  CODA_REQUIRE_HOPPER();
  const std::vector<ActivationFunction> functions = every_function();
  const std::vector<float> x = inputs();
  const int n = int(x.size());
  DeviceBuffer device_functions(functions.size() * sizeof(ActivationFunction)), device_in(x.size() * sizeof(float)),
      device_out(std::size_t(2) * kKinds * x.size() * sizeof(float));
  device_functions.upload(functions.data(), device_functions.bytes());
  device_in.upload(x.data(), device_in.bytes());
  device_out.poison();
  every_activation<<<(n + 127) / 128, 128>>>(static_cast<const ActivationFunction*>(device_functions.get()),
                                              static_cast<const float*>(device_in.get()), n,
                                              static_cast<float*>(device_out.get()));
  CODA_CUDA_CHECK(cudaGetLastError());
  std::vector<float> out(std::size_t(2) * kKinds * x.size());
  device_out.download(out.data(), out.size() * sizeof(float));

  for_each_kind(functions, [&]<Activation K>(const ActivationFunction& f, int kind) {
    SCOPED_TRACE(epilogue::name(K));
    const reference::Activation reference = reference_of(f);
    for (int i = 0; i < n; ++i) {
      const float v = x[std::size_t(i)];
      SCOPED_TRACE(::testing::Message() << "x = " << v);
      const float value = out[std::size_t(2 * (kind * n + i))], derivative = out[std::size_t(2 * (kind * n + i) + 1)];
      // The host's fp32 of the same code: the executors agree up to a few ulp of e^x and 1/x.
      expect_near(value, f.value_of<K>(v), 2e-6, "value against the host");
      expect_near(derivative, f.derivative_of<K>(v), 2e-6, "derivative against the host");
      if (!comparable_with_fp64(v)) continue;
      expect_near(value, reference(v), kAgainstFp64, "value against fp64");
      expect_near(derivative, reference.derivative(v), kAgainstFp64, "derivative against fp64");
    }
  });
}

}  // namespace
}  // namespace coda::test

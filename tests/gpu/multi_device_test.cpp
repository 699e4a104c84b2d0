// One process, several GPUs: what coda learns about a device (a kernel's shared-memory attribute,
// resident CTAs, the properties) is kept per device (coda::PerDevice), so the same GEMM and fused op
// run on GPU 0, then GPU 1, then GPU 0 again, each checked against the fp64 reference. A cache
// shared across devices would launch a kernel whose attribute was set on another device only: an
// error, or a plan sized for another device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <vector>

#include "coda/core/device.hpp"
#include "coda/gemm.hpp"
#include "coda/ops/swiglu.hpp"
#include "coda/reference/gemm.hpp"
#include "coda/reference/swiglu.hpp"
#include "support/device_tensor.hpp"
#include "support/gpu.hpp"

namespace coda {
namespace {

using test::DeviceTensor;

std::vector<int> hopper_devices() {
  std::vector<int> out;
  for (const DeviceInfo& d : list_devices())
    if (d.is_hopper()) out.push_back(d.index);
  return out;
}

// The GEMM (ping-pong and the default tile) and SwiGLU on the current device, against the reference.
void check_on_current_device(int device) {
  SCOPED_TRACE(::testing::Message() << "device " << device);
  EXPECT_EQ(current_device_index(), device);
  EXPECT_EQ(current_device().index, device);
  const int64_t m = 300, n = 520, k = 264;
  DeviceTensor x(DType::bf16, m, k), w(DType::bf16, n, k), y(DType::bf16, m, n), out(DType::bf16, m, n / 2);
  x.random();
  w.random();
  const reference::Matrix product = reference::gemm(x.host.matrix(), Major::k, w.host.matrix(), Major::k);
  for (const GemmTile tile : {GemmTile::automatic, GemmTile::pingpong_m128n128}) {
    y.poison();
    gemm({x.view(), Major::k}, {w.view(), Major::k}, y.view(), nullptr, {.tile = tile});
    CODA_CUDA_CHECK(cudaDeviceSynchronize());
    y.download();
    EXPECT_LT(reference::relative_error(y.host.matrix(), product), 6e-3) << name(tile);
  }
  out.poison();
  ops::gemm_swiglu(x.view(), w.view(), out.view());
  CODA_CUDA_CHECK(cudaDeviceSynchronize());
  out.download();
  EXPECT_LT(reference::relative_error(out.host.matrix(), reference::swiglu(product)), 6e-3);
}

TEST(MultiDevice, GemmAndFusedOpOnEachDeviceOfOneProcess) {
  CODA_REQUIRE_HOPPER();
  const std::vector<int> devices = hopper_devices();
  if (devices.size() < 2)
    GTEST_SKIP() << "one process on two GPUs needs two Hopper GPUs; this machine has " << devices.size();
  int original = 0;
  CODA_CUDA_CHECK(cudaGetDevice(&original));
  for (int device : {devices[0], devices[1], devices[0]}) {
    CODA_CUDA_CHECK(cudaSetDevice(device));
    check_on_current_device(device);
  }
  CODA_CUDA_CHECK(cudaSetDevice(original));
}

}  // namespace
}  // namespace coda

// PreparedGemm on the GPU: runs on tensors other than the ones it was prepared with give coda::gemm's
// bits (swapped and unswapped tiles, both majors, split-K over a garbage workspace, batches), and a
// run's own rules (addresses, workspace) are refused with errors naming the argument.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "coda/prepared_gemm.hpp"
#include "support/device_tensor.hpp"
#include "support/gpu.hpp"
#include "support/refusal.hpp"

namespace coda::test {
namespace {

using ::testing::HasSubstr;

struct Operands {
  DeviceTensor a, b, c;
  Operands(int64_t m, int64_t n, int64_t k, Major a_major, Major b_major)
      : a(DType::bf16, a_major == Major::k ? m : k, a_major == Major::k ? k : m),
        b(DType::bf16, b_major == Major::k ? n : k, b_major == Major::k ? k : n),
        c(DType::bf16, m, n) {
    a.random();
    b.random();
    c.poison();
  }
};

std::vector<unsigned char> bits_of(DeviceTensor& t) { return t.download().host.bytes; }

// Prepared on one set of tensors, run on a second (new addresses, new values, twice): the bits of
// coda::gemm on the second.
void expect_gemm_bits(int64_t m, int64_t n, int64_t k, Major a_major, Major b_major, bool with_workspace) {
  SCOPED_TRACE(testing::Message() << m << " x " << n << " x " << k << " a " << name(a_major) << " b " << name(b_major)
                                  << (with_workspace ? " with a workspace" : ""));
  Operands prepared_on(m, n, k, a_major, b_major), x(m, n, k, a_major, b_major);
  const GemmOperand pa{prepared_on.a.view(), a_major}, pb{prepared_on.b.view(), b_major};
  GemmOptions sizing{.split_k_in_cluster = !with_workspace};  // with one: K split through it
  const std::size_t bytes = with_workspace ? gemm_workspace_bytes(pa, pb, prepared_on.c.view(), sizing) : 0;
  DeviceBuffer workspace(bytes);
  if (with_workspace) {
    sizing.workspace = workspace.get();
    sizing.workspace_bytes = bytes;
  }
  const PreparedGemm gemm(pa, pb, prepared_on.c.view(), sizing);
  if (with_workspace) {
    EXPECT_GT(gemm.plan().split_k, 1) << "the case should split K";
  }

  coda::gemm({x.a.view(), a_major}, {x.b.view(), b_major}, x.c.view(), nullptr, sizing);
  CODA_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<unsigned char> expected = bits_of(x.c);
  for (int run = 0; run < 2; ++run) {
    x.c.poison();
    workspace.garbage(uint64_t(run) + 7);
    gemm.run(x.a.device.get(), x.b.device.get(), x.c.device.get(), nullptr, with_workspace ? workspace.get() : nullptr);
    CODA_CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_EQ(bits_of(x.c), expected) << "run " << run;
  }
  std::vector<unsigned char> untouched = bits_of(prepared_on.c);
  for (unsigned char byte : untouched) ASSERT_EQ(byte, 0xFF) << "the tensors it was prepared with were written";
}

TEST(PreparedGemm, RunsOnNewTensorsWithCodaGemmsBits) {
  CODA_REQUIRE_HOPPER();
  expect_gemm_bits(7, 264, 520, Major::k, Major::k, false);     // swapped tile
  expect_gemm_bits(100, 136, 200, Major::mn, Major::k, false);  // swapped, M-major A
  expect_gemm_bits(333, 520, 264, Major::k, Major::mn, false);  // unswapped, N-major B
  expect_gemm_bits(16, 1024, 8192, Major::k, Major::k, true);   // split K over a garbage workspace
  expect_gemm_bits(3, 1024, 8192, Major::k, Major::k, false);   // split K across a cluster's CTAs
  expect_gemm_bits(300, 256, 8192, Major::k, Major::k, true);   // few tiles: split K, unswapped
}

TEST(PreparedGemm, RefusesBadAddressesAndAMissingWorkspace) {
  CODA_REQUIRE_HOPPER();
  Operands x(16, 1024, 8192, Major::k, Major::k);
  const GemmOperand a{x.a.view(), Major::k}, b{x.b.view(), Major::k};
  const PreparedGemm plain(a, b, x.c.view());
  const auto* base = static_cast<unsigned char*>(x.a.device.get());
  const auto message = [](auto&& call, const char* what) { return refusal_of<InvalidArgument>(call, what); };
  EXPECT_EQ(message([&] { plain.run(nullptr, x.b.device.get(), x.c.device.get()); }, "a null a"),
            "coda::PreparedGemm::run: argument 'a': is a null pointer");
  EXPECT_EQ(message([&] { plain.run(base + 8, x.b.device.get(), x.c.device.get()); }, "a misaligned a"),
            "coda::PreparedGemm::run: argument 'a': base address must be 16-byte aligned for TMA");
  EXPECT_THAT(message([&] { plain.run(base, x.b.device.get(), static_cast<unsigned char*>(x.c.device.get()) + 2); },
                      "a misaligned c"),
              HasSubstr("argument 'c': base address must be 16-byte aligned"));

  const std::size_t bytes = gemm_workspace_bytes(a, b, x.c.view(), {.split_k_in_cluster = false});
  DeviceBuffer workspace(bytes);
  const PreparedGemm split(a, b, x.c.view(),
                           {.split_k_in_cluster = false, .workspace = workspace.get(), .workspace_bytes = bytes});
  ASSERT_GT(split.plan().workspace_bytes, 0u);
  EXPECT_THAT(message([&] { split.run(base, x.b.device.get(), x.c.device.get()); }, "a missing workspace"),
              HasSubstr("argument 'workspace': is null but the plan splits K and needs "));
}

}  // namespace
}  // namespace coda::test

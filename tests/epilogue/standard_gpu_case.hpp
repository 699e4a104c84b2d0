// The harness of the standard set's GPU tests (standard_gpu_*_test.cu): a GEMM case with its
// fp64 product, poisoned device outputs and host copies the CPU executor fills, and the
// descriptors of a tensor for each executor. Split over several files so that their kernels
// (each program is a kernel per output type) compile in parallel.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "coda/epilogue/launch.cuh"
#include "coda/epilogue/parts.hpp"
#include "coda/epilogue/programs/rmsnorm.hpp"
#include "coda/epilogue/programs/standard.hpp"
#include "coda/epilogue/programs/swiglu.hpp"
#include "coda/reference/gemm.hpp"
#include "coda/reference/matrix.hpp"
#include "support/device_tensor.hpp"
#include "gpu_test_programs.hpp"

namespace coda::test {

// standard_programs_on_cpu.cpp
void run_on_cpu(const epilogue::LinearCombination& program, const reference::Matrix& accumulators);
void run_on_cpu(const epilogue::ActivationBackward& program, const reference::Matrix& accumulators);
void run_on_cpu(const epilogue::Reductions& program, const reference::Matrix& accumulators);
void run_on_cpu(const WideInput& program, const reference::Matrix& accumulators);
void run_on_cpu(const ScaledOutputs& program, const reference::Matrix& accumulators);
void run_on_cpu(const TypedAuxOutputs& program, const reference::Matrix& accumulators);
void run_on_cpu(const epilogue::Swiglu& program, const reference::Matrix& accumulators);
void run_on_cpu(const epilogue::ResidualRmsNorm& program, const reference::Matrix& accumulators);

namespace standard_gpu {

using epilogue::kPartCols;
using epilogue::kPartRows;

// GPU and CPU executors see accumulators that differ by fp32 summation order only: 16-bit and fp8
// outputs then differ by one ulp of their type here and there, fp32 ones (tile outputs and
// partials) by a few fp32 roundings.
inline double tolerance(DType output) {
  if (output == DType::f32) return 1e-5;
  return is_fp8(output) ? 1e-2 : 2e-3;
}

struct Shape {
  int64_t m, n, k;
};
// The last one has enough tile rows for a companion launch on the ping-pong tile (mainloop/launch.cuh).
// M = 1 and 37 also run on the swapped tile (plan.hpp: kSwappedProgramMaxM).
constexpr Shape kShapes[] = {{1, 264, 64}, {37, 392, 136}, {200, 600, 136}, {129, 1030, 264}, {4173, 1100, 72}};

inline int64_t parts(int64_t extent, int64_t part) { return (extent + part - 1) / part; }

// The tensors of one case: the operands, their fp64 product (the CPU executor's accumulators),
// and every output twice, a device copy (poisoned) and a host copy the CPU executor fills.
struct Case {
  // x is M x K stored K-major (or K x M: MN-major), w N x K (or K x N).
  explicit Case(const Shape& s, Major a_major = Major::k, Major b_major = Major::k)
      : shape(s),
        a_major(a_major),
        b_major(b_major),
        x(DType::bf16, a_major == Major::k ? s.m : s.k, a_major == Major::k ? s.k : s.m),
        w(DType::bf16, b_major == Major::k ? s.n : s.k, b_major == Major::k ? s.k : s.n) {
    outputs.reserve(kMaxOutputs);
    expected.reserve(kMaxOutputs);
    x.random();
    w.random();
    product = reference::gemm(x.host.matrix(), a_major, w.host.matrix(), b_major);
  }
  DeviceTensor& output(DType dtype, int64_t rows, int64_t cols) {
    EXPECT_LT(outputs.size(), kMaxOutputs) << "descriptors point into `outputs`: it must not reallocate";
    outputs.emplace_back(dtype, rows, cols).poison();
    expected.emplace_back(dtype, rows, cols, outputs.back().host.view.ld());
    return outputs.back();
  }
  HostTensor& expected_of(const DeviceTensor& out) { return expected[std::size_t(&out - outputs.data())]; }

  // Run `gpu` (device descriptors) through the GEMM and `cpu` (host descriptors) on the product,
  // then compare every output; on each tile a program runs on (launch.cuh): ping-pong, unless it
  // stages a tile input the cooperative m128n256, and at M <= 64 the swapped tile (the outputs
  // poisoned again in between).
  template <class GpuProgram, class CpuProgram, DType... Also, Major A = Major::k, Major B = Major::k>
  void run_and_compare(const GpuProgram& gpu, const CpuProgram& cpu, epilogue::OutputTypes<Also...> output_types = {},
                       epilogue::OperandMajors<A, B> majors = {}) {
    run_on_cpu(cpu, product);
    std::vector<GemmTile> tiles{GemmTile::pingpong_m128n128};
    if constexpr (!epilogue::StagesAnInput<GpuProgram>) tiles.push_back(GemmTile::m128n256);
    if (shape.m <= epilogue::kSwappedProgramMaxM) tiles.push_back(GemmTile::swap_m64n128);
    for (const GemmTile tile : tiles) {
      SCOPED_TRACE(::testing::Message() << "tile " << name(tile));
      for (DeviceTensor& out : outputs) out.poison();
      const epilogue::ProgramPlan plan =
          epilogue::plan_program<GpuProgram>({x.view(), a_major}, {w.view(), b_major}, {.tile = tile}, "test");
      epilogue::launch_program(plan, gpu, nullptr, output_types, majors);
      CODA_CUDA_CHECK(cudaDeviceSynchronize());
      for (std::size_t i = 0; i < outputs.size(); ++i) {
        outputs[i].download();
        const reference::Matrix got = outputs[i].host.matrix(), want = expected[i].matrix();
        int64_t unwritten = 0;
        for (double v : got.data) unwritten += std::isnan(v) ? 1 : 0;
        EXPECT_EQ(unwritten, 0) << "output " << i;
        EXPECT_TRUE(outputs[i].written_only_inside()) << "output " << i << " was written past its edges";
        EXPECT_LT(reference::relative_error(got, want), tolerance(outputs[i].host.view.dtype)) << "output " << i;
      }
      if (plan.companion_ctas() > 0) expect_same_bits_without_companion(tile, gpu, output_types, majors);
    }
  }

  // The tile rows a companion launch took, computed again by the ping-pong launch alone: the
  // same bits (the same tile code runs on either, reductions written per tile).
  template <class GpuProgram, DType... Also, Major A, Major B>
  void expect_same_bits_without_companion(GemmTile tile, const GpuProgram& gpu,
                                          epilogue::OutputTypes<Also...> output_types,
                                          epilogue::OperandMajors<A, B> majors) {
    SCOPED_TRACE("without the companion launch");
    std::vector<std::vector<uint8_t>> with_companion;
    for (DeviceTensor& out : outputs) {
      with_companion.push_back(out.host.bytes);
      out.poison();
    }
    const epilogue::ProgramPlan alone = epilogue::plan_program<GpuProgram>({x.view(), a_major}, {w.view(), b_major},
                                                                           {.tile = tile, .companion = false}, "test");
    ASSERT_EQ(alone.companion_ctas(), 0);
    epilogue::launch_program(alone, gpu, nullptr, output_types, majors);
    CODA_CUDA_CHECK(cudaDeviceSynchronize());
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      outputs[i].download();
      EXPECT_TRUE(outputs[i].host.bytes == with_companion[i]) << "output " << i;
    }
  }

  static constexpr std::size_t kMaxOutputs = 8;
  Shape shape;
  Major a_major, b_major;
  DeviceTensor x, w;
  reference::Matrix product;
  std::vector<DeviceTensor> outputs;  // kMaxOutputs reserved up front: descriptors point into them
  std::vector<HostTensor> expected;
};

// Descriptors of a tensor for each executor.
inline epilogue::TileOut device_out(const DeviceTensor& t, float scale = 1.0f) { return epilogue::tile_out(t.view(), "out", scale); }
inline epilogue::TileOut host_out(HostTensor& t, float scale = 1.0f) { return {t.bytes.data(), t.view.dtype, t.view.ld(), 0, scale}; }
inline epilogue::TileIn device_in(const DeviceTensor& t) { return epilogue::tile_in(t.view(), "in"); }
inline epilogue::TileIn host_in(const DeviceTensor& t) { return {t.host.bytes.data(), t.host.view.dtype, t.host.view.ld(), 0}; }
inline epilogue::RowVector device_row_vector(const DeviceTensor& t) { return epilogue::row_vector(t.vector_view(), "vector"); }
inline epilogue::RowVector host_row_vector(const DeviceTensor& t) { return {t.host.bytes.data(), t.host.view.dtype}; }
inline epilogue::Partials device_partials(const DeviceTensor& t) {
  return {static_cast<float*>(t.view().data), t.host.view.ld(), 1, 0};
}
inline epilogue::Partials host_partials(HostTensor& t) { return {reinterpret_cast<float*>(t.bytes.data()), t.view.ld(), 1, 0}; }

// Bias + GELU's arguments in a LinearCombination(Of) `p`: column bias, GELU-tanh, D (scaled by
// `out_scale` if fp8) and the pre-activation (a TileOut or a TileOutOf), for the GPU (device
// descriptors) or the CPU executor (host ones, writing c's expected outputs).
template <class Program>
Program with_bias_gelu(Program p, bool gpu, Case& c, const DeviceTensor& column_bias, DeviceTensor& out,
                       DeviceTensor& pre, float out_scale = 1.0f) {
  p.column_bias = gpu ? device_row_vector(column_bias) : host_row_vector(column_bias);
  p.activation.kind = epilogue::Activation::gelu_tanh;
  p.out = gpu ? device_out(out, out_scale) : host_out(c.expected_of(out), out_scale);
  p.pre_activation = {gpu ? device_out(pre) : host_out(c.expected_of(pre))};
  return p;
}

}  // namespace standard_gpu
}  // namespace coda::test

// coda demo's layer sections: the non-attention part of a LLaMA-style layer, forward and backward.
// CPU path: the layer block's sequence with every epilogue program on the CPU executor (the GEMMs
// the fp64 reference's, the tiny reductions the reference's) against the fp64 layer; the reference
// computed as the kernels compute it against the plain chain rule; the backward against a central
// difference. GPU: coda::blocks::layer_forward and layer_backward against the fp64 layer.
#include <algorithm>
#include <cmath>
#include <vector>

#include "coda/blocks/layer.hpp"
#include "coda/epilogue/programs/rmsnorm.hpp"
#include "coda/epilogue/programs/rope.hpp"
#include "coda/epilogue/programs/swiglu.hpp"
#include "coda/reference/gemm.hpp"
#include "coda/reference/layer.hpp"
#include "coda/reference/reductions.hpp"
#include "coda/reference/rmsnorm.hpp"
#include "demo_cpu.hpp"
#include "demo_gpu.hpp"
#include "demo_host_array.hpp"

namespace coda::cli {
namespace {

struct LayerCase {
  reference::Layer layer;
  reference::LayerInputs in;
  reference::Matrix grad_h2, grad_qkv;
};

// A layer of H = hidden, F = ffn, `heads` heads of 64 (two thirds rotated) for `tokens` tokens.
LayerCase random_layer_case(int64_t tokens, int64_t hidden, int64_t ffn, int64_t heads) {
  LayerCase c;
  const double h = 1.0 / std::sqrt(double(hidden)), f = 1.0 / std::sqrt(double(ffn));
  c.layer.wo = cpu::random_matrix(hidden, hidden, -h, h);
  c.layer.norm1 = cpu::random_vector(hidden, 0.5, 1.5);
  c.layer.w_gate_up = cpu::random_matrix(2 * ffn, hidden, -h, h);
  c.layer.w_down = cpu::random_matrix(hidden, ffn, -f, f);
  c.layer.norm2 = cpu::random_vector(hidden, 0.5, 1.5);
  c.layer.w_qkv = cpu::random_matrix(heads * 64, hidden, -h, h);
  c.layer.head_dim = 64;
  c.layer.rotated_heads = 2 * heads / 3;
  c.layer.cache = reference::rope_cache(512, 64);
  c.in.attn_out = cpu::random_matrix(tokens, hidden);
  c.in.residual = cpu::random_matrix(tokens, hidden, -2, 2);
  for (int32_t p : cpu::random_indices(tokens, 512)) c.in.positions.push_back(p);
  c.grad_h2 = cpu::random_matrix(tokens, hidden);
  c.grad_qkv = cpu::random_matrix(tokens, heads * 64);
  return c;
}

}  // namespace

namespace cpu {
namespace {

constexpr DType kBf16 = DType::bf16, kF32 = DType::f32;

// The block's sequence (src/blocks/layer.cpp) with each op's program on the CPU executor, from the
// layer's values rounded to bf16 (weights, activations) and f32 (norm weights, tables).
struct ExecutorLayer {
  explicit ExecutorLayer(const LayerCase& c)
      : t(c.in.attn_out.rows),
        hidden(c.layer.wo.rows),
        ffn(c.layer.w_down.cols),
        qkv_width(c.layer.w_qkv.rows),
        wo(HostArray::of(c.layer.wo, kBf16)),
        wgu(HostArray::of(c.layer.w_gate_up, kBf16)),
        wd(HostArray::of(c.layer.w_down, kBf16)),
        wqkv(HostArray::of(c.layer.w_qkv, kBf16)),
        g1(HostArray::of(c.layer.norm1, kF32)),
        g2(HostArray::of(c.layer.norm2, kF32)),
        cos(HostArray::of(c.layer.cache.cos, kF32)),
        sin(HostArray::of(c.layer.cache.sin, kF32)),
        positions(HostArray::of(reference::Vector(c.in.positions.begin(), c.in.positions.end()), DType::i32)),
        x(HostArray::of(c.in.attn_out, kBf16)),
        r(HostArray::of(c.in.residual, kBf16)),
        dh2_in(HostArray::of(c.grad_h2, kBf16)),
        dqkv(HostArray::of(c.grad_qkv, kBf16)),
        head_dim(int32_t(c.layer.head_dim)),
        rotated(int32_t(c.layer.rotated_heads)),
        eps(c.layer.eps) {}

  void forward() {
    const reference::Matrix y1 = reference::gemm(x.matrix(), Major::k, wo.matrix(), Major::k);
    HostArray ss1(kF32, t, part_count(hidden, kPartCols)), u1(kBf16, t, hidden);
    reference::run_epilogue(epilogue::ResidualRmsNorm{.residual = r.tile_in(),
                                                      .residual_out = h1.tile_out(),
                                                      .sum_squares = ss1.partials(),
                                                      .weight = g1.row_vector(),
                                                      .out = u1.tile_out()},
                            y1, 0, kPart);
    rstd1 = HostArray::of(reference::rstd_from_partials(ss1.matrix(), hidden, eps), kF32);
    reference::run_epilogue(
        epilogue::Swiglu{.out = a.tile_out(), .pre_activation = p.tile_out(), .row_scale = rstd1.column_vector()},
        reference::gemm(u1.matrix(), Major::k, wgu.matrix(), Major::k), 0, kPart);
    HostArray ss2(kF32, t, part_count(hidden, kPartCols)), u2(kBf16, t, hidden);
    reference::run_epilogue(epilogue::ResidualRmsNorm{.residual = h1.tile_in(),
                                                      .residual_out = h2.tile_out(),
                                                      .sum_squares = ss2.partials(),
                                                      .weight = g2.row_vector(),
                                                      .out = u2.tile_out()},
                            reference::gemm(a.matrix(), Major::k, wd.matrix(), Major::k), 0, kPart);
    rstd2 = HostArray::of(reference::rstd_from_partials(ss2.matrix(), hidden, eps), kF32);
    reference::run_epilogue(rope<epilogue::Rope>({.row_scale = rstd2.column_vector(), .out = qkv.tile_out()}),
                            reference::gemm(u2.matrix(), Major::k, wqkv.matrix(), Major::k), 0, kPart);
  }

  void backward() {
    // RoPE backward over dqkv: rstd2 R^T dqkv and the partials of <dqkv, qkv>.
    HostArray dz2(kBf16, t, qkv_width), dots2(kF32, t, part_count(qkv_width, kPartCols));
    epilogue::RopeBackward rope_backward = rope<epilogue::RopeBackward>({});
    rope_backward.output = qkv.tile_in();
    rope_backward.row_dots = dots2.partials();
    rope_backward.row_scale = rstd2.column_vector();
    rope_backward.out = dz2.tile_out();
    reference::run_epilogue(rope_backward, dqkv.matrix(), 0, kPart);
    norm_backward(dz2, wqkv, h2, g2, rstd2, dots2, dh2_in, dh2, dwqkv, dg2);
    // SwiGLU backward: rstd1 dP and the partials of <dP, P>; dWd = dh2^T a.
    HostArray dots1(kF32, t, part_count(ffn, kPartCols));
    reference::run_epilogue(epilogue::SwigluBackward{.pre_activation = p.tile_in(),
                                                     .grad_pre_activation = dp.tile_out(),
                                                     .row_dots = dots1.partials(),
                                                     .row_scale = rstd1.column_vector()},
                            reference::gemm(dh2.matrix(), Major::k, wd.matrix(), Major::mn), 0, kPart);
    dwd = reference::gemm(dh2.matrix(), Major::mn, a.matrix(), Major::mn);
    norm_backward(dp, wgu, h1, g1, rstd1, dots1, dh2, dr, dwgu, dg1);
    dx = reference::gemm(dr.matrix(), Major::k, wo.matrix(), Major::mn);
    dwo = reference::gemm(dr.matrix(), Major::mn, x.matrix(), Major::mn);
  }

  // An RMSNorm's backward from the rstd-scaled gradient dzs of the GEMM after it (weight w2): dh =
  // grad_in + the norm's backward, and that GEMM's weight gradient and the norm weight's.
  void norm_backward(const HostArray& dzs, const HostArray& w2, const HostArray& h, const HostArray& g,
                     const HostArray& rstd, const HostArray& dots, const HostArray& grad_in, HostArray& dh,
                     reference::Matrix& dw2, reference::Vector& dg) const {
    const HostArray correction =
        HostArray::of(reference::rmsnorm_backward_correction(dots.matrix(), rstd.values(), hidden), kF32);
    reference::run_epilogue(epilogue::ResidualRmsNormBackward{.residual = h.tile_in(),
                                                              .grad_residual = grad_in.tile_in(),
                                                              .weight = g.row_vector(),
                                                              .correction = correction.column_vector(),
                                                              .grad_residual_out = dh.tile_out()},
                            reference::gemm(dzs.matrix(), Major::k, w2.matrix(), Major::mn), 0, kPart);
    HostArray dw(kF32, w2.matrix().rows, hidden), partials(kF32, part_count(w2.matrix().rows, kPartRows), hidden);
    reference::run_epilogue(epilogue::RmsNormWeightGradients{.projection_weight = w2.tile_in(),
                                                             .norm_weight = g.row_vector(),
                                                             .grad_projection_weight = dw.tile_out(),
                                                             .norm_weight_partials = partials.partials()},
                            reference::gemm(dzs.matrix(), Major::mn, h.matrix(), Major::mn), 0, kPart);
    dw2 = dw.matrix();
    dg = reference::combine_column_partials(partials.matrix(), reference::Combine::sum);
  }

  // A Rope or RopeBackward program with the layer's positions, tables and heads.
  template <class Program>
  Program rope(Program program) const {
    program.positions = positions.column_vector();
    program.cos = cos.table();
    program.sin = sin.table();
    program.head_dim = Divisor(head_dim);
    program.rotated_heads = rotated;
    return program;
  }

  int64_t t, hidden, ffn, qkv_width;
  HostArray wo, wgu, wd, wqkv, g1, g2, cos, sin, positions, x, r, dh2_in, dqkv;
  int32_t head_dim, rotated;
  double eps;
  HostArray h1{kBf16, t, hidden}, p{kBf16, t, 2 * ffn}, a{kBf16, t, ffn}, h2{kBf16, t, hidden},
      qkv{kBf16, t, qkv_width}, dh2{kBf16, t, hidden}, dp{kBf16, t, 2 * ffn}, dr{kBf16, t, hidden};
  HostArray rstd1{kF32, 1, t}, rstd2{kF32, 1, t};
  reference::Matrix dwqkv, dwd, dwgu, dx, dwo;
  reference::Vector dg1, dg2;
};

// The reference layer from the values the executor read (bf16 and f32 roundings of the case's).
LayerCase as_read(const LayerCase& c, const ExecutorLayer& e) {
  LayerCase r = c;
  r.layer.wo = e.wo.matrix(), r.layer.w_gate_up = e.wgu.matrix(), r.layer.w_down = e.wd.matrix();
  r.layer.w_qkv = e.wqkv.matrix(), r.layer.norm1 = e.g1.values(), r.layer.norm2 = e.g2.values();
  r.layer.cache = {e.cos.matrix(), e.sin.matrix()};
  r.in.attn_out = e.x.matrix(), r.in.residual = e.r.matrix();
  r.grad_h2 = e.dh2_in.matrix(), r.grad_qkv = e.dqkv.matrix();
  return r;
}

// Every output and gradient of the block's sequence on the CPU executor against the fp64 layer:
// 100 tokens, H = 200, F = 136, three heads of 64 (two rotated): cut parts in every direction.
void executor_layer(SectionChecks& t) {
  const LayerCase c = random_layer_case(100, 200, 136, 3);
  ExecutorLayer e(c);
  e.forward();
  e.backward();
  const LayerCase read = as_read(c, e);
  const reference::LayerForward want = reference::layer_forward(read.layer, read.in);
  const reference::LayerGradients g = reference::layer_backward(read.layer, read.in, want, read.grad_h2, read.grad_qkv);
  using reference::relative_error;
  // bf16 roundings of every stored tensor on the way: ~3e-3 here, as the GPU block has.
  t.add("programs on the CPU executor: h2, qkv == fp64 layer",
        std::max(relative_error(e.h2.matrix(), want.h2), relative_error(e.qkv.matrix(), want.qkv)), 1e-2);
  t.add("their backward: d attn_out, dr == fp64",
        std::max(relative_error(e.dx, g.attn_out), relative_error(e.dr.matrix(), g.residual)), 1e-2);
  t.add("dWo, dWgu, dWd, dWqkv, dg1, dg2 == fp64",
        std::max({relative_error(e.dwo, g.wo), relative_error(e.dwgu, g.w_gate_up), relative_error(e.dwd, g.w_down),
                  relative_error(e.dwqkv, g.w_qkv), relative_error(e.dg1, g.norm1), relative_error(e.dg2, g.norm2)}),
        1e-2);
}

double largest_difference(const reference::LayerGradients& a, const reference::LayerGradients& b) {
  using reference::max_abs_difference;
  return std::max({max_abs_difference(a.attn_out, b.attn_out), max_abs_difference(a.residual, b.residual),
                   max_abs_difference(a.wo, b.wo), cpu::max_abs_difference(a.norm1, b.norm1),
                   max_abs_difference(a.w_gate_up, b.w_gate_up), max_abs_difference(a.w_down, b.w_down),
                   cpu::max_abs_difference(a.norm2, b.norm2), max_abs_difference(a.w_qkv, b.w_qkv)});
}

}  // namespace

void layer_section(SectionChecks& t) {
  executor_layer(t);
  const int64_t bn = 5, bm = 4;  // part sizes that divide neither the rows nor the columns
  const LayerCase c = random_layer_case(7, 24, 20, 3);
  const reference::LayerForward plain = reference::layer_forward(c.layer, c.in);
  const reference::LayerForward fused = reference::layer_forward_fused(c.layer, c.in, bn);
  t.add(
      "fused forward (partials -> rstd -> row scale) == plain",
      std::max(reference::max_abs_difference(fused.h2, plain.h2), reference::max_abs_difference(fused.qkv, plain.qkv)),
      kExact);
  const reference::LayerGradients want = reference::layer_backward(c.layer, c.in, plain, c.grad_h2, c.grad_qkv);
  const reference::LayerGradients got =
      reference::layer_backward_fused(c.layer, c.in, plain, c.grad_h2, c.grad_qkv, bn, bm);
  t.add("fused backward (row partials of <dZ, Z>, rstd dZ) == plain, every gradient", largest_difference(got, want),
        kExact);
  // L = <dh2, h2> + <dqkv, qkv>, differentiated along a random change of attn_out, then of Wd.
  const auto loss = [&](const reference::Layer& layer, const reference::LayerInputs& in) {
    const reference::LayerForward f = reference::layer_forward(layer, in);
    return dot(c.grad_h2, f.h2) + dot(c.grad_qkv, f.qkv);
  };
  const auto loss_of_attn_out = [&](const reference::Matrix& x) {
    reference::LayerInputs in = c.in;
    in.attn_out = x;
    return loss(c.layer, in);
  };
  const auto loss_of_w_down = [&](const reference::Matrix& w) {
    reference::Layer layer = c.layer;
    layer.w_down = w;
    return loss(layer, c.in);
  };
  t.add("backward: d attn_out == finite difference", backward_error(loss_of_attn_out, c.in.attn_out, want.attn_out),
        kFiniteDifference);
  t.add("backward: dWd == finite difference", backward_error(loss_of_w_down, c.layer.w_down, want.w_down),
        kFiniteDifference);
}

}  // namespace cpu

namespace gpu {

// 257 tokens, H = 256, F = 688, six heads of 64: the block's outputs and every gradient, poisoned
// first, against the fp64 reference from the same bf16 values. Limit 1e-2: bf16 roundings of each
// saved tensor and gradient on the way come to ~3e-3 (tests/python/layer_check.py prints them).
void layer_section(SectionChecks& checks) {
  constexpr DType kBf16 = DType::bf16, kF32 = DType::f32;
  const int64_t t = 257, h = 256, f = 688, heads = 6, n = heads * 64;
  LayerCase c = random_layer_case(t, h, f, heads);
  GpuContext gpu;
  cudaStream_t stream = gpu.stream();
  const auto up = [&](const reference::Matrix& m, DType d) { return DeviceMatrix::of(m, d, stream); };
  const auto row = [](const reference::Vector& v) {
    reference::Matrix m(1, int64_t(v.size()));
    m.data = v;
    return m;
  };
  const DeviceMatrix wo = up(c.layer.wo, kBf16), g1 = up(row(c.layer.norm1), kF32), wgu = up(c.layer.w_gate_up, kBf16),
                     wd = up(c.layer.w_down, kBf16), g2 = up(row(c.layer.norm2), kF32), wqkv = up(c.layer.w_qkv, kBf16),
                     cos = up(c.layer.cache.cos, kF32), sin = up(c.layer.cache.sin, kF32);
  const DeviceMatrix x = up(c.in.attn_out, kBf16), r = up(c.in.residual, kBf16),
                     positions = up(row(std::vector<double>(c.in.positions.begin(), c.in.positions.end())), DType::i32),
                     dh2 = up(c.grad_h2, kBf16), dqkv = up(c.grad_qkv, kBf16);
  // The reference sees the bf16 values the GPU sees.
  c.layer.wo = wo.download(), c.layer.w_gate_up = wgu.download(), c.layer.w_down = wd.download();
  c.layer.w_qkv = wqkv.download(), c.in.attn_out = x.download(), c.in.residual = r.download();
  c.grad_h2 = dh2.download(), c.grad_qkv = dqkv.download();

  const auto poisoned = [&](int64_t rows, int64_t cols, DType d) {
    return DeviceMatrix::poisoned(d, rows, cols, stream);
  };
  const DeviceMatrix h2 = poisoned(t, h, kBf16), qkv = poisoned(t, n, kBf16), h1 = poisoned(t, h, kBf16),
                     rstd1 = poisoned(1, t, kF32), pre = poisoned(t, 2 * f, kBf16), act = poisoned(t, f, kBf16),
                     rstd2 = poisoned(1, t, kF32), dx = poisoned(t, h, kBf16), dr = poisoned(t, h, kBf16),
                     dwo = poisoned(h, h, kF32), dg1 = poisoned(1, h, kF32), dwgu = poisoned(2 * f, h, kF32),
                     dwd = poisoned(h, f, kF32), dg2 = poisoned(1, h, kF32), dwqkv = poisoned(n, h, kF32);
  const blocks::LayerWeights w{wo.view(),   g1.vector_view(), wgu.view(), wd.view(), g2.vector_view(),
                               wqkv.view(), cos.view(),       sin.view(), 64,        int(c.layer.rotated_heads)};
  const blocks::LayerSaved saved{h1.view(), rstd1.vector_view(), pre.view(), act.view(), rstd2.vector_view()};
  const blocks::LayerGradients grads{dx.view(),   dr.view(),  dwo.view(),        dg1.vector_view(),
                                     dwgu.view(), dwd.view(), dg2.vector_view(), dwqkv.view()};
  const std::size_t bytes = blocks::layer_workspace_bytes(w, t);
  const DeviceMemory workspace = allocate(bytes);
  blocks::layer_forward(w, x.view(), r.view(), positions.vector_view(), h2.view(), qkv.view(), saved, workspace.get(),
                        bytes, stream);
  blocks::layer_backward(w, x.view(), positions.vector_view(), h2.view(), qkv.view(), saved, dh2.view(), dqkv.view(),
                         grads, workspace.get(), bytes, stream);
  gpu.synchronize();

  const reference::LayerForward want = reference::layer_forward(c.layer, c.in);
  const reference::LayerGradients g = reference::layer_backward(c.layer, c.in, want, c.grad_h2, c.grad_qkv);
  const auto error = [](const DeviceMatrix& got, const reference::Matrix& ref) {
    return reference::relative_error(got.download(), ref);
  };
  checks.add("257 tokens, H 256, F 688: h2, qkv (forward)", std::max(error(h2, want.h2), error(qkv, want.qkv)), 1e-2);
  checks.add("d attn_out, dr", std::max(error(dx, g.attn_out), error(dr, g.residual)), 1e-2);
  checks.add("dWo, dWgu, dWd, dWqkv (f32)",
             std::max({error(dwo, g.wo), error(dwgu, g.w_gate_up), error(dwd, g.w_down), error(dwqkv, g.w_qkv)}), 1e-2);
  checks.add("dg1, dg2 (f32)", std::max(error(dg1, row(g.norm1)), error(dg2, row(g.norm2))), 1e-2,
             "speed: coda bench layer");
}

}  // namespace gpu
}  // namespace coda::cli

// LM head + cross-entropy backward on the GPU against the fp64 reference: the forward op's lse
// feeds the backward, whose dX and dW are compared with dZ = reference::cross_entropy_backward
// carried through fp64 GEMMs. Residue shapes (T = 1, 7, 129; V = 1000 ... 128256), every option,
// one chunk and many, all targets ignored, a target outside the vocabulary, logits near +-1e4,
// bitwise repeatability, a running sum of dX past 2^31 elements, the backward from stored logits,
// and the skipping backward against its bound.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "coda/ops/cross_entropy.hpp"
#include "coda/reference/cross_entropy.hpp"
#include "coda/reference/gemm.hpp"
#include "coda/reference/reductions.hpp"
#include "coda/reference/rmsnorm.hpp"
#include "support/device_tensor.hpp"

namespace coda::test {
namespace {

// dZ is stored in bf16 (as PyTorch's gradient of bf16 logits), then two GEMMs with fp32
// accumulation and a bf16 store: a few bf16 roundings, norm-wise.
constexpr double kGradientTolerance = 8e-3;

struct Case {
  int64_t t, v, k;
  ops::CrossEntropyOptions options{};
  bool row_scale = false, row_dots = false, f32_grads = false;
  int64_t chunk = 0;
  std::vector<int32_t> targets{};  // empty: random, every tenth ignored
  double x_scale = 2.0;            // x uniform in [-x_scale, x_scale)
  bool constant_x = false;         // every element of x 0.0115 (bytes 0x3C): quick to make at 2^31 elements
  bool stored_logits = false;      // the backward reads the forward's logits (backward.logits)
  bool in_place = true;            // with stored logits: dZ over them, or into a buffer of its own
  float skip_below = 0.0f;         // backward.skip_below
};

reference::LossReduction reduction_of(ops::LossReduction r) {
  return r == ops::LossReduction::none  ? reference::LossReduction::none
         : r == ops::LossReduction::sum ? reference::LossReduction::sum
                                        : reference::LossReduction::mean;
}

struct Result {
  DeviceTensor grad_x, grad_w, row_dots, lse;
  std::vector<int32_t> targets;
  DeviceTensor x, w, rstd, grad_loss, target_tensor;
  DeviceTensor logits, grad_logits;  // with stored logits: M x V (else 1 x 8)
};

// The backward of case c on r's inputs; outputs poisoned first, the workspace garbage from `seed`.
void backward(Result& r, const Case& c, uint64_t seed = 7) {
  ops::CrossEntropyOptions options = c.options;
  if (c.row_scale) options.row_scale = r.rstd.vector_view();
  ops::CrossEntropyBackwardOptions backward{.row_dots = {}, .chunk_columns = c.chunk, .skip_below = c.skip_below};
  if (c.row_dots) backward.row_dots = r.row_dots.view();
  if (c.stored_logits) {
    r.logits.upload();  // the forward's logits (an earlier in-place run consumed the device copy)
    backward.logits = r.logits.view();
    backward.grad_logits = c.in_place ? r.logits.view() : r.grad_logits.poison().view();
  }
  r.grad_x.poison();
  r.grad_w.poison();
  r.row_dots.poison();
  DeviceBuffer ws(ops::cross_entropy_backward_workspace_bytes(c.t, c.v, c.k, backward));
  ws.garbage(seed);
  ops::gemm_cross_entropy_backward(r.x.view(), r.w.view(), r.target_tensor.vector_view(), r.lse.vector_view(),
                                   r.grad_loss.vector_view(), r.grad_x.view(), r.grad_w.view(), ws.get(), ws.bytes(),
                                   nullptr, options, backward);
  CODA_CUDA_CHECK(cudaDeviceSynchronize());
  r.grad_x.download();
  r.grad_w.download();
  r.row_dots.download();
}

// Fresh inputs for case c, the forward op (for lse), then the backward.
Result run(const Case& c) {
  const DType grad_type = c.f32_grads ? DType::f32 : DType::bf16;
  std::vector<int32_t> targets = c.targets;
  if (targets.empty())
    for (int64_t m = 0; m < c.t; ++m)
      targets.push_back(m % 10 == 9 ? c.options.ignore_index : int32_t(uniform_int(0, c.v - 1)));
  Result r{DeviceTensor(grad_type, c.t, c.k),
           DeviceTensor(grad_type, c.v, c.k),
           DeviceTensor(DType::f32, c.t, (c.v + 127) / 128),
           DeviceTensor(DType::f32, 1, c.t),
           targets,
           DeviceTensor(DType::bf16, c.t, c.k),
           DeviceTensor(DType::bf16, c.v, c.k),
           DeviceTensor(DType::f32, 1, c.t),
           DeviceTensor(DType::f32, 1, c.options.reduction == ops::LossReduction::none ? c.t : 1),
           int_vector(targets),
           DeviceTensor(DType::bf16, c.stored_logits ? c.t : 1, c.stored_logits ? c.v : 8),
           DeviceTensor(DType::bf16, c.stored_logits ? c.t : 1, c.stored_logits ? c.v : 8)};
  if (c.constant_x) {
    std::memset(r.x.host.bytes.data(), 0x3C, r.x.host.bytes.size());
    r.x.upload();
  } else {
    r.x.random(-c.x_scale, c.x_scale);
  }
  r.w.random();
  r.rstd.random(0.5, 2.0);
  r.grad_loss.random(0.5, 2.0);
  ops::CrossEntropyOptions options = c.options;
  if (c.row_scale) options.row_scale = r.rstd.vector_view();
  DeviceTensor loss(DType::f32, 1, options.reduction == ops::LossReduction::none ? c.t : 1);
  DeviceBuffer forward_ws(ops::cross_entropy_workspace_bytes(c.t, c.v, options));
  forward_ws.garbage(3);
  r.lse.poison();
  if (c.stored_logits) options.logits = r.logits.poison().view();
  ops::gemm_cross_entropy(r.x.view(), r.w.view(), r.target_tensor.vector_view(), loss.vector_view(),
                          r.lse.vector_view(), forward_ws.get(), forward_ws.bytes(), nullptr, options);
  CODA_CUDA_CHECK(cudaDeviceSynchronize());
  r.lse.download();
  if (c.stored_logits) r.logits.download();
  backward(r, c);
  return r;
}

// Element (row, col) of a bf16 host tensor, without converting the whole of it.
double bf16_at(const HostTensor& t, int64_t row, int64_t col) {
  uint16_t bits;
  std::memcpy(&bits, t.bytes.data() + (row * t.view.ld() + col) * 2, 2);
  const uint32_t word = uint32_t(bits) << 16;
  float value;
  std::memcpy(&value, &word, 4);
  return value;
}

ops::CrossEntropyOptions options_of(int32_t ignore_index, float smoothing, float z_loss, float softcap,
                                    ops::LossReduction reduction) {
  ops::CrossEntropyOptions o;
  o.ignore_index = ignore_index;
  o.label_smoothing = smoothing;
  o.z_loss = z_loss;
  o.softcap = softcap;
  o.reduction = reduction;
  return o;
}

reference::CrossEntropyOptions reference_options(const ops::CrossEntropyOptions& o) {
  return {.ignore_index = o.ignore_index,
          .label_smoothing = o.label_smoothing,
          .z_loss = o.z_loss,
          .softcap = o.softcap,
          .reduction = reduction_of(o.reduction)};
}

void expect_matches_reference(const Case& c) {
  SCOPED_TRACE(::testing::Message() << "T=" << c.t << " V=" << c.v << " K=" << c.k << " chunk " << c.chunk << " eps "
                                    << c.options.label_smoothing << " z " << c.options.z_loss << " cap "
                                    << c.options.softcap << " reduction " << int(c.options.reduction) << ", "
                                    << seed_note());
  Result r = run(c);
  reference::Matrix z = reference::gemm(r.x.host.matrix(), Major::k, r.w.host.matrix(), Major::k);
  const reference::Vector rstd = r.rstd.host.matrix().data;
  if (c.row_scale) z = reference::row_scale(z, rstd);
  const reference::CrossEntropyOptions ro = reference_options(c.options);
  const reference::CrossEntropyLoss loss = reference::cross_entropy(z, r.targets, ro);
  EXPECT_LT(reference::relative_error(r.lse.host.matrix().data, loss.lse), 1e-5);
  reference::Vector lse = loss.lse;
  if (c.stored_logits) {
    // The backward reads the 16-bit logits the forward stored (after the cap): the reference takes the
    // same values, uncapped in fp64, and the forward's lse.
    z = r.logits.host.matrix();
    if (c.options.softcap > 0)
      for (double& v : z.data) v = c.options.softcap * std::atanh(v / c.options.softcap);
    lse = r.lse.host.matrix().data;
  }
  const reference::CrossEntropyBackward want =
      reference::cross_entropy_backward(z, r.targets, lse, r.grad_loss.host.matrix().data, 128, ro);
  const reference::Matrix dzs = c.row_scale ? reference::row_scale(want.grad_logits, rstd) : want.grad_logits;
  const reference::Matrix want_dx = reference::gemm(dzs, Major::k, r.w.host.matrix(), Major::mn);
  const reference::Matrix want_dw = reference::gemm(dzs, Major::mn, r.x.host.matrix(), Major::mn);
  EXPECT_LT(reference::relative_error(r.grad_x.host.matrix(), want_dx), kGradientTolerance);
  EXPECT_LT(reference::relative_error(r.grad_w.host.matrix(), want_dw), kGradientTolerance);
  EXPECT_TRUE(r.grad_x.written_only_inside());
  EXPECT_TRUE(r.grad_w.written_only_inside());
  if (c.row_dots) {
    // Summed in order, as the RMSNorm backward takes them; fp32 products of the fp32 logits.
    const reference::Vector got = reference::combine_row_partials(r.row_dots.host.matrix(), reference::Combine::sum);
    const reference::Vector dots = reference::combine_row_partials(want.row_partials, reference::Combine::sum);
    EXPECT_LT(reference::relative_error(got, dots), 1e-3);
  }
}

TEST(CrossEntropyBackwardGpu, MatchesReferenceForEveryOption) {
  CODA_REQUIRE_HOPPER();
  const ops::CrossEntropyOptions smoothing_z = options_of(-100, 0.1f, 1e-3f, 0.0f, ops::LossReduction::none);
  const ops::CrossEntropyOptions capped_sum = options_of(-100, 0.0f, 0.0f, 15.0f, ops::LossReduction::sum);
  const ops::CrossEntropyOptions every = options_of(5, 0.05f, 1e-4f, 20.0f, ops::LossReduction::mean);
  // Each (T, V) with one of the four option sets in turn (the fp64 reference GEMMs take seconds).
  int turn = 0;
  for (const int64_t t : {1, 7, 129})
    for (const int64_t v : {1000, 32000, 50257}) {
      switch (turn++ % 4) {
        case 0:
          expect_matches_reference({.t = t, .v = v, .k = 64});
          break;
        case 1:
          expect_matches_reference({.t = t, .v = v, .k = 72, .options = smoothing_z});
          break;
        case 2:
          expect_matches_reference(
              {.t = t, .v = v, .k = 64, .options = capped_sum, .row_scale = true, .row_dots = true});
          break;
        default:
          expect_matches_reference({.t = t,
                                    .v = v,
                                    .k = 136,
                                    .options = every,
                                    .row_scale = true,
                                    .row_dots = true,
                                    .f32_grads = true,
                                    .chunk = 1024});
      }
    }
  expect_matches_reference({.t = 129, .v = 128256, .k = 64, .row_scale = true, .row_dots = true});
  expect_matches_reference({.t = 129, .v = 128256, .k = 64, .options = every, .chunk = 8192});
  // K = 66 (x's rows padded to 72; the f32 sum of dX to 68), several chunks.
  expect_matches_reference({.t = 129, .v = 5000, .k = 66, .chunk = 1024});
  // K = 4096 (the logits on the cooperative tile), five chunks.
  expect_matches_reference({.t = 1100, .v = 5000, .k = 4096, .chunk = 1024});
}

// The backward from stored logits (three GEMMs): every option, in place and into a buffer of its own,
// residue shapes, vocabularies that are not a multiple of 4 (a lane's last columns read one by one).
TEST(CrossEntropyBackwardGpu, FromStoredLogitsMatchesReference) {
  CODA_REQUIRE_HOPPER();
  const ops::CrossEntropyOptions smoothing_z = options_of(-100, 0.1f, 1e-3f, 0.0f, ops::LossReduction::none);
  const ops::CrossEntropyOptions capped_sum = options_of(-100, 0.0f, 0.0f, 15.0f, ops::LossReduction::sum);
  const ops::CrossEntropyOptions every = options_of(5, 0.05f, 1e-4f, 20.0f, ops::LossReduction::mean);
  expect_matches_reference({.t = 1, .v = 1000, .k = 64, .stored_logits = true});
  expect_matches_reference(
      {.t = 7, .v = 32000, .k = 72, .options = smoothing_z, .stored_logits = true, .in_place = false});
  expect_matches_reference(
      {.t = 129, .v = 1001, .k = 64, .options = capped_sum, .row_scale = true, .stored_logits = true});
  expect_matches_reference({.t = 129,
                            .v = 50257,
                            .k = 136,
                            .options = every,
                            .row_scale = true,
                            .f32_grads = true,
                            .stored_logits = true,
                            .in_place = false});
  expect_matches_reference({.t = 129,
                            .v = 5003,
                            .k = 64,
                            .options = smoothing_z,
                            .row_scale = true,
                            .row_dots = true,
                            .stored_logits = true});
  expect_matches_reference(
      {.t = 1100, .v = 5000, .k = 4096, .row_scale = true, .row_dots = true, .stored_logits = true});
}

// The skipping backward: every element of dX and dW within the bound of what it may leave out (the
// entries of the fp64 dZ at most skip_below |g| rstd: the sum of their |dZ| |w| or |dZ| |x|) beyond a
// rounding allowance of 1% of the sum of every term's magnitude. Returns how many rows of dW are
// exactly zero (whole blocks left out).
int64_t expect_within_skip_bound(const Case& c) {
  SCOPED_TRACE(::testing::Message() << "skip " << c.skip_below << " T=" << c.t << " V=" << c.v << " K=" << c.k
                                    << " chunk " << c.chunk << " cap " << c.options.softcap << " reduction "
                                    << int(c.options.reduction) << ", " << seed_note());
  Result r = run(c);
  reference::Matrix z = reference::gemm(r.x.host.matrix(), Major::k, r.w.host.matrix(), Major::k);
  const reference::Vector rstd = r.rstd.host.matrix().data;
  if (c.row_scale) z = reference::row_scale(z, rstd);
  const reference::CrossEntropyOptions ro = reference_options(c.options);
  const reference::Vector grad_loss = r.grad_loss.host.matrix().data;
  const reference::CrossEntropyBackward want = reference::cross_entropy_backward(
      z, r.targets, reference::cross_entropy(z, r.targets, ro).lse, grad_loss, 128, ro);
  const reference::Matrix dzs = c.row_scale ? reference::row_scale(want.grad_logits, rstd) : want.grad_logits;
  // g per row, as the op's row factors take it.
  int64_t valid = 0;
  for (int32_t t : r.targets) valid += t == c.options.ignore_index ? 0 : 1;
  const auto threshold = [&](int64_t m) {
    const double go = c.options.reduction == ops::LossReduction::none ? grad_loss[std::size_t(m)] : grad_loss[0];
    const double g = r.targets[std::size_t(m)] == c.options.ignore_index ? 0.0
                     : c.options.reduction == ops::LossReduction::mean   ? go / double(valid)
                                                                         : go;
    return double(c.skip_below) * std::abs(g) * (c.row_scale ? rstd[std::size_t(m)] : 1.0) * 1.01;
  };
  const reference::Matrix x = r.x.host.matrix(), w = r.w.host.matrix();
  const reference::Matrix got_dx = r.grad_x.host.matrix(), got_dw = r.grad_w.host.matrix();
  reference::Matrix skippable_dx(c.t, c.k), all_dx(c.t, c.k), skippable_dw(c.v, c.k), all_dw(c.v, c.k);
  for (int64_t m = 0; m < c.t; ++m) {
    const double bound = threshold(m);
    for (int64_t n = 0; n < c.v; ++n) {
      const double d = std::abs(dzs(m, n));
      const bool skippable = d <= bound;
      for (int64_t j = 0; j < c.k; ++j) {
        const double tx = d * std::abs(w(n, j)), tw = d * std::abs(x(m, j));
        all_dx(m, j) += tx;
        all_dw(n, j) += tw;
        if (skippable) {
          skippable_dx(m, j) += tx;
          skippable_dw(n, j) += tw;
        }
      }
    }
  }
  const reference::Matrix want_dx = reference::gemm(dzs, Major::k, w, Major::mn);
  const reference::Matrix want_dw = reference::gemm(dzs, Major::mn, x, Major::mn);
  const auto expect_within = [](const char* name, const reference::Matrix& got, const reference::Matrix& exact,
                                const reference::Matrix& skippable, const reference::Matrix& all) {
    int64_t outside = 0;
    for (std::size_t i = 0; i < got.data.size(); ++i)
      outside += std::abs(got.data[i] - exact.data[i]) <= skippable.data[i] + 1e-2 * all.data[i] ? 0 : 1;
    EXPECT_EQ(outside, 0) << name << ": elements outside the skip bound";
  };
  expect_within("dX", got_dx, want_dx, skippable_dx, all_dx);
  expect_within("dW", got_dw, want_dw, skippable_dw, all_dw);
  EXPECT_TRUE(r.grad_x.written_only_inside());
  EXPECT_TRUE(r.grad_w.written_only_inside());
  int64_t zero_rows = 0;
  for (int64_t n = 0; n < c.v; ++n) {
    bool zero = true;
    for (int64_t j = 0; j < c.k; ++j) zero = zero && got_dw(n, j) == 0.0;
    zero_rows += zero ? 1 : 0;
  }
  return zero_rows;
}

TEST(CrossEntropyBackwardGpu, SkippingStaysWithinItsBound) {
  CODA_REQUIRE_HOPPER();
  const ops::CrossEntropyOptions smoothing_z = options_of(-100, 0.1f, 1e-3f, 0.0f, ops::LossReduction::none);
  const ops::CrossEntropyOptions capped_sum = options_of(-100, 0.0f, 0.0f, 15.0f, ops::LossReduction::sum);
  const ops::CrossEntropyOptions every = options_of(5, 0.05f, 1e-4f, 20.0f, ops::LossReduction::mean);
  constexpr float kBf16 = 0x1p-12f;
  // V = 1000: softmax near 1e-3, above 2^-12: little to leave out, a large threshold leaves more.
  expect_within_skip_bound({.t = 1, .v = 1000, .k = 64, .skip_below = kBf16});
  expect_within_skip_bound({.t = 129, .v = 1000, .k = 64, .row_scale = true, .skip_below = 0.05f});
  // Larger vocabularies and small logits (x in [-0.1, 0.1)): a near-uniform softmax far below 2^-12,
  // so only the targets' blocks stay, and dW rows of blocks holding no target are exactly zero.
  EXPECT_GT(expect_within_skip_bound(
                {.t = 129, .v = 32000, .k = 72, .options = smoothing_z, .x_scale = 0.1, .skip_below = kBf16}),
            1000);
  EXPECT_GT(expect_within_skip_bound({.t = 300,
                                      .v = 50257,
                                      .k = 64,
                                      .options = capped_sum,
                                      .row_scale = true,
                                      .row_dots = true,
                                      .chunk = 8192,
                                      .x_scale = 0.1,
                                      .skip_below = kBf16}),
            1000);
  // Logits of a wide spread (the default x): a peaked softmax, part of every row kept.
  expect_within_skip_bound({.t = 129, .v = 32000, .k = 64, .skip_below = kBf16});
  expect_within_skip_bound({.t = 129,
                            .v = 5003,
                            .k = 136,
                            .options = every,
                            .row_scale = true,
                            .f32_grads = true,
                            .chunk = 1024,
                            .skip_below = kBf16});
  // 600 tokens (three mask rows), K = 512, five chunks, a threshold that leaves out more.
  expect_within_skip_bound({.t = 600, .v = 5000, .k = 512, .chunk = 1024, .skip_below = 0.01f});
}

TEST(CrossEntropyBackwardGpu, EveryTargetIgnoredGivesZeroGradients) {
  CODA_REQUIRE_HOPPER();
  for (const int64_t chunk : {0, 256}) {
    const Result r = run({.t = 7, .v = 1000, .k = 64, .chunk = chunk, .targets = std::vector<int32_t>(7, -100)});
    for (double v : r.grad_x.host.matrix().data) EXPECT_EQ(v, 0.0);
    for (double v : r.grad_w.host.matrix().data) EXPECT_EQ(v, 0.0);
  }
  // Skipping leaves every block out: the products add nothing, and the result is still zero.
  const Result r = run({.t = 7, .v = 1000, .k = 64, .targets = std::vector<int32_t>(7, -100), .skip_below = 0x1p-12f});
  for (double v : r.grad_x.host.matrix().data) EXPECT_EQ(v, 0.0);
  for (double v : r.grad_w.host.matrix().data) EXPECT_EQ(v, 0.0);
}

TEST(CrossEntropyBackwardGpu, TargetOutsideTheVocabularyMakesItsRowNaN) {
  CODA_REQUIRE_HOPPER();
  for (const float skip : {0.0f, 0x1p-12f}) {  // a NaN row is never left out
    const Result r = run({.t = 7, .v = 1000, .k = 64, .targets = {1, 2, 1000, 3, -100, 4, 5}, .skip_below = skip});
    const reference::Matrix dx = r.grad_x.host.matrix();
    for (int64_t m = 0; m < 7; ++m)
      for (int64_t k = 0; k < 64; ++k) EXPECT_EQ(std::isnan(dx(m, k)), m == 2) << m << ", " << k << " skip " << skip;
  }
}

TEST(CrossEntropyBackwardGpu, ExtremeLogitsGiveFiniteGradients) {
  CODA_REQUIRE_HOPPER();
  // |logits| up to ~1e4 (x in [-3000, 3000), K = 64), soft-capping off.
  const Case c{.t = 129, .v = 1000, .k = 64, .chunk = 256, .x_scale = 3000.0};
  const Result r = run(c);
  for (double v : r.grad_x.host.matrix().data) ASSERT_TRUE(std::isfinite(v));
  for (double v : r.grad_w.host.matrix().data) ASSERT_TRUE(std::isfinite(v));
  expect_matches_reference(c);
}

TEST(CrossEntropyBackwardGpu, BitwiseRepeatable) {
  CODA_REQUIRE_HOPPER();
  const Case c{.t = 300, .v = 5000, .k = 128, .row_scale = true, .row_dots = true, .chunk = 1024};
  Result r = run(c);
  const auto dx = r.grad_x.host.bytes, dw = r.grad_w.host.bytes, dots = r.row_dots.host.bytes;
  backward(r, c, /*seed=*/8);  // other garbage in the workspace: nothing may depend on it
  EXPECT_EQ(r.grad_x.host.bytes, dx);
  EXPECT_EQ(r.grad_w.host.bytes, dw);
  EXPECT_EQ(r.row_dots.host.bytes, dots);
  Case skipping = c;
  skipping.skip_below = 0x1p-12f;
  Result k = run(skipping);
  const auto kx = k.grad_x.host.bytes, kw = k.grad_w.host.bytes;
  backward(k, skipping, /*seed=*/8);
  EXPECT_EQ(k.grad_x.host.bytes, kx);
  EXPECT_EQ(k.grad_w.host.bytes, kw);
  for (const bool in_place : {true, false}) {
    Case stored = c;
    stored.chunk = 0;
    stored.stored_logits = true;
    stored.in_place = in_place;
    Result s = run(stored);
    const auto sx = s.grad_x.host.bytes, sw = s.grad_w.host.bytes, sd = s.row_dots.host.bytes;
    backward(s, stored, /*seed=*/8);
    EXPECT_EQ(s.grad_x.host.bytes, sx);
    EXPECT_EQ(s.grad_w.host.bytes, sw);
    EXPECT_EQ(s.row_dots.host.bytes, sd);
  }
}

// T x K = 2^31 + 129 x 2048 elements: the running sum of dX is launched in row blocks; rows on
// both sides of the block boundary checked against the reference (dX's rows depend on their own
// logits only).
TEST(CrossEntropyBackwardGpu, RunningSumPastTwoToThe31Elements) {
  CODA_REQUIRE_HOPPER();
  const int64_t t = (int64_t(1) << 20) + 129, v = 1000, k = 2048;
  const Case c{.t = t,
               .v = v,
               .k = k,
               .options = options_of(-100, 0, 0, 0, ops::LossReduction::sum),
               .chunk = 512,
               .constant_x = true};
  Result r = run(c);
  const int64_t block = int64_t(INT32_MAX) / k / 128 * 128;
  const reference::Matrix w = r.w.host.matrix();
  for (const int64_t m : {int64_t(0), block - 1, block, t - 1}) {
    SCOPED_TRACE(::testing::Message() << "row " << m);
    reference::Matrix x_row(1, k);
    for (int64_t j = 0; j < k; ++j) x_row(0, j) = bf16_at(r.x.host, m, j);
    const reference::Matrix z = reference::gemm(x_row, Major::k, w, Major::k);
    const reference::CrossEntropyOptions ro = reference_options(c.options);
    const std::vector<int32_t> target{r.targets[std::size_t(m)]};
    const reference::CrossEntropyLoss loss = reference::cross_entropy(z, target, ro);
    const reference::CrossEntropyBackward g =
        reference::cross_entropy_backward(z, target, loss.lse, r.grad_loss.host.matrix().data, 128, ro);
    const reference::Matrix want = reference::gemm(g.grad_logits, Major::k, w, Major::mn);
    reference::Matrix got(1, k);
    for (int64_t j = 0; j < k; ++j) got(0, j) = bf16_at(r.grad_x.host, m, j);
    EXPECT_LT(reference::relative_error(got, want), kGradientTolerance);
  }
}

}  // namespace
}  // namespace coda::test

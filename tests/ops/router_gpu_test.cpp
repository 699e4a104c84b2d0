// The MoE router on the GPU against the fp64 reference (coda/reference/moe.hpp). Inputs are
// multiples of 1/64 with few distinct values: every score is exact in fp32 and fp64 and ties are
// everywhere, so in the softmax modes the GPU's ids must equal the reference's exactly (the lower id
// first on every tie) and its weights to fp32 rounding. sigmoid_bias ranks sigmoid(s) + bias, which
// fp32 rounds: two experts within a few ulps may swap, so there the ids must form a valid selection
// of the fp64 scores up to 1e-6 (order, nothing better left out, only kept groups) and the weights
// must be the fp64 formula's at the GPU's ids (router_gpu_ties_test.cpp checks sigmoid_bias's ties,
// of experts and of groups, and non-finite biases exactly, on scores fp32 cannot reorder). Every
// path (the decode kernel at M <= 16; the GEMM's scores; with fused_selection, the selection in the
// GEMM's epilogue where k <= 8, no groups and E <= 256),
// every mode, E from 1 to 512, k from 1 to 32 and E, NaN rows (a padded batch), the dispatch
// outputs, and bitwise repeatability with a garbage workspace. The epilogue's selection is also
// checked against the scores path on fine random scores (FusedSelectionMatchesTheScoresPath).
#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <cstring>
#include <sstream>
#include <set>
#include <vector>

#include "coda/ops/router.hpp"
#include "coda/reference/gemm.hpp"
#include "coda/reference/moe.hpp"
#include "support/device_tensor.hpp"

namespace coda::test {
namespace {

using ops::RoutingMode;

struct Case {
  int64_t m, experts, k_dim;
  ops::RoutingMode mode = ops::RoutingMode::topk_softmax;
  int32_t k = 8;
  bool renormalize = false, bias = false;
  int32_t n_group = 1, topk_group = 1;
  float scale = 1.0f;
  std::vector<int64_t> nan_rows{};
  std::vector<int64_t> zero_rows{};         // tokens of zeros (a padded batch): every score a signed zero
  std::vector<int64_t> nan_experts{};       // weight rows of NaN: experts that never score
  std::vector<int64_t> negative_experts{};  // weight rows below 0: a token of zeros scores -0 there
  bool fused = false;  // options.fused_selection (runs where k <= 8, E <= 512, M > 16; groups: 8 at E = 128, 256)
  DType input = DType::bf16;
  int split_k = 0;  // options.gemm.split_k: nonzero sends a decode batch through coda::gemm (M <= 16)
  GemmTile tile = GemmTile::automatic;  // options.gemm.tile
};

std::string describe(const Case& c) {
  std::ostringstream s;
  s << "M " << c.m << ", E " << c.experts << ", K " << c.k_dim << ", mode " << int(c.mode) << ", k " << c.k
    << ", renormalize " << c.renormalize << ", bias " << c.bias << ", groups " << c.n_group << "/" << c.topk_group
    << (c.fused ? ", fused" : "") << ", " << c.input << (c.split_k ? ", split_k " + std::to_string(c.split_k) : "");
  return s.str();
}

// Multiples of 1/64 in [-1, 1], a third of them 0: products are multiples of 2^-12 and sums of up to
// 2^12 of them stay exact in fp32 (and every value is exact in bf16 and f16).
void fill_coarse(DeviceTensor& t) {
  const bool half = t.host.view.dtype == DType::f16;
  for (int64_t r = 0; r < t.host.view.rows(); ++r)
    for (int64_t c = 0; c < t.host.view.cols(); ++c) {
      const int64_t v = uniform_int(-3, 3);
      const float value = v == 0 || std::abs(v) == 3 ? 0.0f : float(v * uniform_int(1, 64)) / 64.0f;
      const uint16_t bits = half ? float_to_fp16_bits(value) : float_to_bf16_bits(value);
      std::memcpy(&t.host.bytes[std::size_t((r * t.host.view.ld() + c) * 2)], &bits, 2);
    }
}

struct Outputs {
  std::vector<float> weights;
  std::vector<int32_t> ids, token_expert_indices, counts;
};

struct RouterRun {
  DeviceTensor x, w, bias, weights, ids, tei, counts;
  RouterRun(const Case& c)
      : x(c.input, c.m, c.k_dim),
        w(c.input, c.experts, c.k_dim),
        bias(DType::f32, 1, c.experts),
        weights(DType::f32, c.m, c.k, c.k),
        ids(DType::i32, c.m, c.k, c.k),
        tei(DType::i32, c.m, c.k, c.k),
        counts(DType::i32, 1, c.experts) {
    fill_coarse(x);
    fill_coarse(w);
    // Experts 1 and 2 (where there are three) score alike for every token: a planted exact tie.
    if (c.experts >= 3)
      std::memcpy(&w.host.bytes[std::size_t(2 * w.host.view.ld() * 2)], &w.host.bytes[std::size_t(w.host.view.ld() * 2)],
                  std::size_t(c.k_dim * 2));
    const auto set_row = [&](DeviceTensor& t, int64_t r, auto value_of) {
      for (int64_t j = 0; j < c.k_dim; ++j) {
        const float v = value_of(j);
        const uint16_t bits = c.input == DType::f16 ? float_to_fp16_bits(v) : float_to_bf16_bits(v);
        std::memcpy(&t.host.bytes[std::size_t((r * t.host.view.ld() + j) * 2)], &bits, 2);
      }
    };
    for (int64_t r : c.nan_rows) set_row(x, r, [](int64_t) { return std::nanf(""); });
    for (int64_t r : c.zero_rows) set_row(x, r, [](int64_t) { return 0.0f; });
    for (int64_t e : c.nan_experts) set_row(w, e, [](int64_t) { return std::nanf(""); });
    for (int64_t e : c.negative_experts) set_row(w, e, [](int64_t j) { return -float(1 + j % 64) / 64.0f; });
    x.upload();
    w.upload();
    for (int64_t e = 0; e < c.experts; ++e) {
      const float b = float(uniform_int(-64, 64)) / 1024.0f;
      std::memcpy(&bias.host.bytes[std::size_t(e * 4)], &b, 4);
    }
    bias.upload();
  }

  ops::RouterOptions options(const Case& c) const {
    return {.mode = c.mode,
            .k = c.k,
            .renormalize = c.renormalize,
            .expert_bias = c.bias ? bias.vector_view() : TensorView{},
            .n_group = c.n_group,
            .topk_group = c.topk_group,
            .routed_scaling_factor = c.scale,
            .token_expert_indices = tei.view(),
            .expert_counts = counts.vector_view(),
            .scores = {},
            .fused_selection = c.fused,
            .gemm = {.tile = c.tile, .split_k = c.split_k}};
  }

  Outputs route(const Case& c, uint64_t seed) {
    const ops::RouterOptions o = options(c);
    weights.poison();
    ids.poison();
    tei.poison();
    counts.poison();
    DeviceBuffer ws(ops::router_workspace_bytes(x.view(), w.view(), o));
    ws.garbage(seed);
    ops::gemm_router(x.view(), w.view(), weights.view(), ids.view(), ws.get(), ws.bytes(), nullptr, o);
    CODA_CUDA_CHECK(cudaDeviceSynchronize());
    Outputs out;
    out.weights.resize(std::size_t(c.m * c.k));
    out.ids.resize(out.weights.size());
    out.token_expert_indices.resize(out.weights.size());
    out.counts.resize(std::size_t(c.experts));
    weights.device.download(out.weights.data(), out.weights.size() * 4);
    ids.device.download(out.ids.data(), out.ids.size() * 4);
    tei.device.download(out.token_expert_indices.data(), out.ids.size() * 4);
    counts.device.download(out.counts.data(), out.counts.size() * 4);
    return out;
  }
};

reference::RoutingOptions reference_options(const Case& c, const RouterRun& run) {
  reference::RoutingOptions o{.mode = reference::RoutingMode(int(c.mode)),
                              .k = c.k,
                              .renormalize = c.renormalize,
                              .n_group = c.n_group,
                              .topk_group = c.topk_group,
                              .routed_scaling_factor = c.scale};
  if (c.bias) {
    const reference::Matrix b = run.bias.host.matrix();
    o.expert_bias.assign(b.data.begin(), b.data.end());
  }
  return o;
}

// sigmoid_bias: the GPU's selection is the fp64 reference's up to `tolerance` in the selection
// scores (p + bias, and group scores), and its weights are the fp64 weights of the experts it chose.
void expect_valid_sigmoid_selection(const Case& c, const reference::Matrix& scores,
                                    const reference::RoutingOptions& o, const Outputs& got) {
  const double tolerance = 1e-6;
  const int64_t group_size = c.experts / c.n_group;
  int failures = 0;
  for (int64_t m = 0; m < c.m && failures < 5; ++m) {
    if (std::find(c.nan_rows.begin(), c.nan_rows.end(), m) != c.nan_rows.end()) {  // nothing selectable
      for (int64_t j = 0; j < c.k; ++j) {
        EXPECT_EQ(got.ids[std::size_t(m * c.k + j)], int32_t(j)) << "token " << m;
        EXPECT_EQ(got.weights[std::size_t(m * c.k + j)], 0.0f) << "token " << m;
      }
      continue;
    }
    std::vector<double> p(std::size_t(c.experts)), select(p.size());
    for (int64_t e = 0; e < c.experts; ++e) {
      p[std::size_t(e)] = 1.0 / (1.0 + std::exp(-scores(m, e)));
      select[std::size_t(e)] = p[std::size_t(e)] + (o.expert_bias.empty() ? 0.0 : o.expert_bias[std::size_t(e)]);
    }
    // Group scores; the least a kept group may score.
    std::vector<double> group(std::size_t(c.n_group));
    for (int64_t g = 0; g < c.n_group; ++g) {
      std::vector<double> v(select.begin() + g * group_size, select.begin() + (g + 1) * group_size);
      std::sort(v.rbegin(), v.rend());
      group[std::size_t(g)] = c.n_group > 1 ? v[0] + v[1] : 0.0;
    }
    std::vector<double> ranked_groups = group;
    std::sort(ranked_groups.rbegin(), ranked_groups.rend());
    const double kept_floor = ranked_groups[std::size_t(c.topk_group - 1)] - tolerance;
    const int32_t* ids = &got.ids[std::size_t(m * c.k)];
    const float* weights = &got.weights[std::size_t(m * c.k)];
    std::vector<bool> chosen(std::size_t(c.experts), false);
    double total = 0, lowest = INFINITY;
    std::set<int64_t> kept_groups;
    for (int64_t j = 0; j < c.k; ++j) {
      ASSERT_TRUE(ids[j] >= 0 && ids[j] < c.experts) << "token " << m << " slot " << j << ": id " << ids[j];
      ASSERT_FALSE(chosen[std::size_t(ids[j])]) << "token " << m << ": expert " << ids[j] << " twice";
      chosen[std::size_t(ids[j])] = true;
      const double v = select[std::size_t(ids[j])];
      if (j > 0 && v > select[std::size_t(ids[j - 1])] + tolerance) {
        ++failures;
        ADD_FAILURE() << "token " << m << " slot " << j << ": expert " << ids[j] << " ranks above slot " << j - 1;
      }
      if (group[std::size_t(ids[j] / group_size)] < kept_floor) {
        ++failures;
        ADD_FAILURE() << "token " << m << ": expert " << ids[j] << "'s group is not among the best";
      }
      kept_groups.insert(ids[j] / group_size);
      lowest = std::min(lowest, v);
      total += p[std::size_t(ids[j])];
    }
    for (int64_t e = 0; e < c.experts; ++e) {
      const bool eligible = c.n_group == 1 || group[std::size_t(e / group_size)] > kept_floor + 2 * tolerance ||
                            kept_groups.count(e / group_size);
      if (!chosen[std::size_t(e)] && eligible && select[std::size_t(e)] > lowest + tolerance) {
        ++failures;
        ADD_FAILURE() << "token " << m << ": expert " << e << " (" << select[std::size_t(e)]
                      << ") left out for one scoring " << lowest;
      }
    }
    EXPECT_LE(int64_t(kept_groups.size()), c.topk_group) << "token " << m;
    for (int64_t j = 0; j < c.k; ++j) {
      const double want = p[std::size_t(ids[j])] / (c.renormalize ? total : 1.0) * c.scale;
      if (std::abs(weights[j] - want) > 2e-6 * std::max(1.0, want)) {
        ++failures;
        ADD_FAILURE() << "token " << m << " slot " << j << ": weight " << weights[j] << ", want " << want;
      }
    }
  }
}

void expect_routes_like_the_reference(Case c) {
  const bool epilogue_groups = c.n_group == 1 || (c.n_group == 8 && (c.experts == 128 || c.experts == 256));
  if (c.fused == false && c.m > 16 && c.k <= 8 && epilogue_groups && c.experts <= 512) {  // both paths
    c.fused = true;
    expect_routes_like_the_reference(c);
    c.fused = false;
  }
  SCOPED_TRACE(describe(c));
  SCOPED_TRACE(seed_note());
  RouterRun run(c);
  const Outputs got = run.route(c, 11);
  const reference::Matrix x = run.x.host.matrix(), w = run.w.host.matrix();
  reference::Matrix scores = reference::gemm(x, Major::k, w, Major::k);
  for (int64_t r : c.nan_rows)
    for (int64_t e = 0; e < c.experts; ++e) scores(r, e) = std::nan("");
  const reference::Routing want = reference::route(scores, reference_options(c, run));
  const std::vector<int64_t> want_counts = want.expert_counts(c.experts);
  if (c.mode == RoutingMode::sigmoid_bias) {
    expect_valid_sigmoid_selection(c, scores, reference_options(c, run), got);
    std::vector<int64_t> counts(std::size_t(c.experts), 0);
    for (int32_t id : got.ids) ++counts[std::size_t(id)];
    for (int64_t e = 0; e < c.experts; ++e) EXPECT_EQ(got.counts[std::size_t(e)], counts[std::size_t(e)]) << e;
    return;
  }
  int mismatches = 0;
  for (int64_t m = 0; m < c.m && mismatches < 5; ++m) {
    // A weight exp(s - lse) computed in fp32 is off by about ulp(|s| + |lse|) relative: scale by the
    // row's largest score.
    double largest = 0;
    for (int64_t e = 0; e < c.experts; ++e)
      if (!std::isnan(scores(m, e))) largest = std::max(largest, std::abs(scores(m, e)));
    for (int64_t j = 0; j < c.k; ++j) {
      const std::size_t i = std::size_t(m * c.k + j);
      const bool same_id = got.ids[i] == want.ids[i];
      const double tolerance = (2e-6 + 2.5e-7 * largest) * std::max(1.0, std::abs(want.weights.data[i]));
      const bool same_weight = std::abs(got.weights[i] - want.weights.data[i]) <= tolerance;
      if (!same_id || !same_weight) {
        ++mismatches;
        ADD_FAILURE() << "token " << m << " slot " << j << ": expert " << got.ids[i] << " weight " << got.weights[i]
                      << ", want expert " << want.ids[i] << " weight " << want.weights.data[i];
      }
      EXPECT_EQ(got.token_expert_indices[i], int32_t(j * c.m + m));
    }
  }
  for (int64_t e = 0; e < c.experts; ++e) EXPECT_EQ(got.counts[std::size_t(e)], want_counts[std::size_t(e)]) << e;
}

TEST(RouterGpu, EveryModeOnBothPaths) {
  CODA_REQUIRE_HOPPER();
  for (int64_t m : {1, 16, 64, 65, 300}) {
    expect_routes_like_the_reference({m, 64, 512, RoutingMode::softmax_topk, 2});
    expect_routes_like_the_reference({m, 128, 512, RoutingMode::topk_softmax, 8});
    expect_routes_like_the_reference({m, 128, 512, RoutingMode::topk_softmax, 8, true});
    expect_routes_like_the_reference({m, 256, 1024, RoutingMode::sigmoid_bias, 8, true, true});
    expect_routes_like_the_reference({m, 256, 1024, RoutingMode::sigmoid_bias, 8, true, true, 8, 4, 2.5f});
  }
}

TEST(RouterGpu, AnyExpertCountAndK) {
  CODA_REQUIRE_HOPPER();
  for (int64_t experts : {1, 8, 24, 32, 33, 60, 144, 160, 384, 512})
    for (int64_t m : {33, 129}) {
      for (int32_t k : {1, 2, 8, 10, 16, 17, 32}) {
        if (k > experts) continue;
        expect_routes_like_the_reference({m, experts, 256, RoutingMode::topk_softmax, k, true});
      }
      expect_routes_like_the_reference({m, experts, 256, RoutingMode::softmax_topk, int32_t(std::min<int64_t>(experts, 32))});
    }
}

TEST(RouterGpu, GroupedSelectionShapes) {
  CODA_REQUIRE_HOPPER();
  // DeepSeek-V3 (256 / 8 groups, keep 4), one expert pair per group, Kimi-K2-like ungrouped 384.
  expect_routes_like_the_reference({200, 256, 7168, RoutingMode::sigmoid_bias, 8, true, true, 8, 4, 2.5f});
  expect_routes_like_the_reference({70, 64, 256, RoutingMode::sigmoid_bias, 4, true, true, 32, 3});
  expect_routes_like_the_reference({70, 160, 256, RoutingMode::sigmoid_bias, 6, false, true, 10, 10});
  expect_routes_like_the_reference({150, 384, 7168, RoutingMode::sigmoid_bias, 8, true, true, 1, 1, 2.827f});
  expect_routes_like_the_reference({130, 128, 512, RoutingMode::sigmoid_bias, 8, true, true, 8, 4});  // epilogue too
  // Groups of whole 32-expert columns take the register path past decode (router_groups.cuh,
  // keep_best_groups_in_registers) and the CTA's column top twos at decode (M = 9), the others
  // (above: groups of 2 and 16) shared memory: groups of one, two and four columns, one group kept
  // or every group, NaN rows.
  for (int64_t m : {9, 130}) {
    expect_routes_like_the_reference({m, 512, 256, RoutingMode::sigmoid_bias, 8, true, true, 16, 1});
    expect_routes_like_the_reference({m, 384, 256, RoutingMode::sigmoid_bias, 8, true, true, 12, 12});
    expect_routes_like_the_reference({m, 512, 256, RoutingMode::sigmoid_bias, 10, false, true, 4, 2, 1.5f});
    Case nan{m, 256, 512, RoutingMode::sigmoid_bias, 8, true, true, 8, 4, 2.5f};
    nan.nan_rows = {0, 5};
    expect_routes_like_the_reference(nan);
  }
}

TEST(RouterGpu, NaNRowsSelectNoNaN) {
  CODA_REQUIRE_HOPPER();
  for (int64_t m : {9, 130})
    for (RoutingMode mode : {RoutingMode::softmax_topk, RoutingMode::topk_softmax, RoutingMode::sigmoid_bias}) {
      Case c{m, 160, 256, mode, 8, true};
      c.nan_rows = {0, 3, m - 1};
      expect_routes_like_the_reference(c);
    }
}

// Rows of E <= 16 (ranked by counting in the epilogue) with experts that never score (weight rows
// of NaN: at k = 8 and E = 8 two slots nothing selectable fills, which take the lowest unchosen ids
// at weight 0) and signed zeros (a token of zeros scores -0 for an expert of negative weights and +0
// elsewhere: all tied, the lower id first), in the softmax modes, on both paths.
TEST(RouterGpu, RankedRowsWithNaNExpertsAndSignedZeros) {
  CODA_REQUIRE_HOPPER();
  for (int64_t experts : {8, 13, 16})
    for (int variant = 0; variant < 3; ++variant) {
      const int32_t k = variant == 0 ? 3 : 8;
      Case c{300, experts, 256, variant == 2 ? RoutingMode::softmax_topk : RoutingMode::topk_softmax, k, variant == 0};
      c.zero_rows = {0, 7, 299};
      c.nan_experts = {1, experts - 2};
      c.negative_experts = {0, 4};
      expect_routes_like_the_reference(c);
    }
}

// Decode batches run the cooperative kernel (router_decode.hpp): every M from 1 to 16, every expert
// count the issue names, K past the last whole 32-wide chunk, k = 1 and k = min(E, 32), f16, grouped
// selection; and the same batches through coda::gemm when the GEMM's options ask for it.
TEST(RouterGpu, DecodeBatchesEveryTokenAndExpertCount) {
  CODA_REQUIRE_HOPPER();
  for (int64_t m = 1; m <= 16; ++m)
    expect_routes_like_the_reference({m, 256, 7168, RoutingMode::topk_softmax, 8, true});
  for (int64_t experts : {1, 8, 60, 64, 128, 144, 160, 256, 384, 512})
    for (int64_t m : {1, 7, 16})
      for (int32_t k : {1, int32_t(std::min<int64_t>(experts, 32))}) {
        expect_routes_like_the_reference({m, experts, 264, RoutingMode::topk_softmax, k});
        expect_routes_like_the_reference({m, experts, 8, RoutingMode::softmax_topk, k});
      }
  for (int64_t experts : {60, 512})
    for (int64_t m : {1, 16}) expect_routes_like_the_reference({m, experts, 4104, RoutingMode::topk_softmax, 8, true});
  expect_routes_like_the_reference({3, 256, 7168, RoutingMode::sigmoid_bias, 8, true, true, 8, 4, 2.5f});
  expect_routes_like_the_reference({16, 384, 7168, RoutingMode::sigmoid_bias, 8, true, true});
  // Groups of whole 32-expert columns are prepared by the CTA (GroupStage::columns): DeepSeek-V3's
  // 256 / 8 above, 128 / 4 (four a lane, two token tiles), 512 / 2 (eight columns a group, k = 32
  // from the one kept), 384 / 4 and 96 / 3 (three and one columns a group), 64 / 2 in f16 without a
  // bias and with NaN rows (and GroupedSelectionShapes at M = 9). Other groups that are runs of whole lanes keep in the selecting warp (groups_in_lanes):
  // of two experts (one lane each, 32 groups, NaN rows), of sixteen (two lanes), of eight at one a
  // lane; the others in the CTA's group stage: 144 / 8 groups of 18 at 8 a lane, 96 / 4 groups of 24
  // (six lanes of 4).
  expect_routes_like_the_reference({5, 384, 1032, RoutingMode::sigmoid_bias, 8, true, true, 4, 2, 2.5f});
  expect_routes_like_the_reference({13, 96, 264, RoutingMode::sigmoid_bias, 6, false, true, 3, 2});
  Case columns_f16{16, 64, 264, RoutingMode::sigmoid_bias, 8, false, false, 2, 1};
  columns_f16.input = DType::f16;
  columns_f16.nan_rows = {0, 9};
  expect_routes_like_the_reference(columns_f16);
  expect_routes_like_the_reference({4, 32, 264, RoutingMode::sigmoid_bias, 5, true, true, 4, 2, 2.0f});
  expect_routes_like_the_reference({11, 128, 1032, RoutingMode::sigmoid_bias, 8, false, true, 4, 2});
  expect_routes_like_the_reference({7, 144, 4104, RoutingMode::sigmoid_bias, 6, true, true, 8, 3, 1.5f});
  expect_routes_like_the_reference({16, 96, 264, RoutingMode::sigmoid_bias, 4, false, true, 4, 2});
  expect_routes_like_the_reference({1, 96, 264, RoutingMode::sigmoid_bias, 24, true, true, 4, 1});
  Case pairs{5, 64, 256, RoutingMode::sigmoid_bias, 4, true, true, 32, 3};
  pairs.nan_rows = {1};
  expect_routes_like_the_reference(pairs);
  expect_routes_like_the_reference({12, 160, 256, RoutingMode::sigmoid_bias, 6, false, true, 10, 10});
  expect_routes_like_the_reference({2, 512, 256, RoutingMode::sigmoid_bias, 32, false, true, 2, 1});
  Case f16{5, 160, 264, RoutingMode::topk_softmax, 8, true};
  f16.input = DType::f16;
  f16.nan_rows = {2};
  expect_routes_like_the_reference(f16);
  for (int64_t m : {1, 16}) {
    Case through_gemm{m, 256, 1024, RoutingMode::topk_softmax, 8, true};
    through_gemm.split_k = 1;
    expect_routes_like_the_reference(through_gemm);
  }
}

// The decode kernel is a cooperative launch: it must capture into a CUDA graph (a decode step's
// usual home) and replay to the eager call's bits.
TEST(RouterGpu, DecodeBatchReplaysFromACudaGraph) {
  CODA_REQUIRE_HOPPER();
  const Case c{4, 256, 7168, RoutingMode::topk_softmax, 8, true};
  RouterRun run(c);
  run.x.random(-2, 2).upload();
  const Outputs eager = run.route(c, 3);
  const ops::RouterOptions o = run.options(c);
  DeviceBuffer ws(ops::router_workspace_bytes(run.x.view(), run.w.view(), o));
  cudaStream_t stream;
  CODA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph;
  CODA_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  ops::gemm_router(run.x.view(), run.w.view(), run.weights.view(), run.ids.view(), ws.get(), ws.bytes(), stream, o);
  CODA_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  CODA_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  run.weights.poison();
  run.ids.poison();
  for (int replay = 0; replay < 3; ++replay) CODA_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  CODA_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<float> weights(eager.weights.size());
  std::vector<int32_t> ids(eager.ids.size());
  run.weights.device.download(weights.data(), weights.size() * 4);
  run.ids.device.download(ids.data(), ids.size() * 4);
  EXPECT_EQ(std::memcmp(weights.data(), eager.weights.data(), weights.size() * 4), 0);
  EXPECT_EQ(ids, eager.ids);
  CODA_CUDA_CHECK(cudaGraphExecDestroy(exec));
  CODA_CUDA_CHECK(cudaGraphDestroy(graph));
  CODA_CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST(RouterGpu, BitwiseRepeatable) {
  CODA_REQUIRE_HOPPER();
  for (int64_t m : {16, 1000, 8192}) {  // decode, the scores path, the epilogue's selection
    Case c{m, 256, 2048, RoutingMode::topk_softmax, 8, true};
    RouterRun run(c);
    run.x.random(-2, 2).upload();  // fine values: no exact sums, the bits still repeat
    const Outputs a = run.route(c, 1), b = run.route(c, 2);
    EXPECT_EQ(std::memcmp(a.weights.data(), b.weights.data(), a.weights.size() * 4), 0) << m;
    EXPECT_EQ(a.ids, b.ids) << m;
    for (int64_t r = 0; r < m; ++r) {
      std::set<int32_t> distinct(a.ids.begin() + r * 8, a.ids.begin() + (r + 1) * 8);
      EXPECT_EQ(distinct.size(), 8u);
    }
  }
}

TEST(RouterGpu, ScoresOutputHoldsTheGemm) {
  CODA_REQUIRE_HOPPER();
  // The decode kernel's scores (and its grouped kernel of whole-column groups), and the GEMM's.
  for (const Case& c :
       {Case{5, 60, 512, RoutingMode::topk_softmax, 4}, Case{100, 60, 512, RoutingMode::topk_softmax, 4},
        Case{5, 64, 512, RoutingMode::sigmoid_bias, 4, true, true, 2, 1}}) {
    RouterRun run(c);
    DeviceTensor scores(DType::f32, c.m, c.experts);
    scores.poison();
    ops::RouterOptions o = run.options(c);
    o.scores = scores.view();
    DeviceBuffer ws(ops::router_workspace_bytes(run.x.view(), run.w.view(), o));
    ops::gemm_router(run.x.view(), run.w.view(), run.weights.view(), run.ids.view(), ws.get(), ws.bytes(), nullptr, o);
    scores.download();
    const reference::Matrix want = reference::gemm(run.x.host.matrix(), Major::k, run.w.host.matrix(), Major::k);
    const reference::Matrix got = scores.host.matrix();
    for (int64_t m = 0; m < c.m; ++m)
      for (int64_t e = 0; e < c.experts; ++e) ASSERT_EQ(got(m, e), want(m, e)) << m << ", " << e;
  }
}

// The tile the epilogue's selection runs on (router_fused.cu, fused_tile).
GemmTile fused_tile_of(int64_t experts) { return experts <= 128 ? GemmTile::m128n128 : GemmTile::m128n256; }

// The epilogue's selection (fused_selection: E <= 512, k <= 8, no groups or 8 at E = 128 and 256,
// DeepSeek-V3's; its own kernel for narrow rows, E <= 32, and for rows wider than the tile) against
// the scores path's on the same accumulators (its GEMM forced onto the epilogue's tile, with the
// same K split): fine random inputs, where the fast path (chunk threshold,
// truncated keys) settles most rows, beside rows of zeros (every score tied: the exact rounds) and
// NaN rows, at M from one tile row to a K split's few tiles and many; the ids must be the same, the
// weights equal to fp32 rounding (their sums run in another order).
TEST(RouterGpu, FusedSelectionMatchesTheScoresPath) {
  CODA_REQUIRE_HOPPER();
  std::set<int> shared_segments, last_segment_splits;  // the K splits the shapes below reach
  struct Shape {
    int64_t m, experts, k_dim;
    RoutingMode mode;
    int32_t k;
    bool renormalize, bias;
    bool near_tie = false;  // experts 5 and 9 score the most, within a few ulps or equal
    DType input = DType::bf16;
    int32_t n_group = 1, topk_group = 1;
    int split_k = 0;  // options.gemm.split_k, on both paths
  };
  for (const Shape& shape :
       std::vector<Shape>{{100, 256, 1024, RoutingMode::topk_softmax, 8, true, false},
                          {1000, 256, 2048, RoutingMode::topk_softmax, 8, false, false},
                          {4100, 128, 512, RoutingMode::softmax_topk, 6, false, false},
                          {300, 64, 512, RoutingMode::topk_softmax, 8, true, false},
                          {257, 160, 512, RoutingMode::sigmoid_bias, 8, true, true},
                          {600, 256, 7168, RoutingMode::sigmoid_bias, 8, true, true},
                          {129, 8, 256, RoutingMode::softmax_topk, 2, false, false},
                          // rows of E <= 16, ranked by counting (router_epilogue_ranked.cuh): both
                          // kernels (8 and 16 wide), odd widths, k = E, a near tie
                          {4100, 8, 512, RoutingMode::topk_softmax, 8, false, false},
                          {300, 8, 512, RoutingMode::sigmoid_bias, 2, false, true, false, DType::f16},
                          {300, 6, 512, RoutingMode::sigmoid_bias, 3, true, true},
                          {300, 1, 256, RoutingMode::topk_softmax, 1, true, false},
                          {300, 3, 256, RoutingMode::topk_softmax, 3, false, false},
                          {300, 12, 512, RoutingMode::softmax_topk, 5, false, false},
                          {300, 16, 512, RoutingMode::topk_softmax, 2, true, false, true},
                          {300, 9, 512, RoutingMode::sigmoid_bias, 8, true, true, false, DType::f16},
                          {300, 16, 512, RoutingMode::sigmoid_bias, 8, true, true},
                          // narrow rows (E = 17 to 32: every live chunk copied, no threshold) and
                          // the first E past them
                          {4100, 32, 512, RoutingMode::topk_softmax, 8, false, false},
                          {300, 24, 512, RoutingMode::sigmoid_bias, 3, false, true, false, DType::f16},
                          {300, 32, 512, RoutingMode::topk_softmax, 2, true, false, true},
                          {300, 33, 512, RoutingMode::topk_softmax, 8, true, false},
                          {70, 60, 256, RoutingMode::topk_softmax, 1, false, false},
                          {200, 200, 256, RoutingMode::topk_softmax, 7, true, false},
                          {300, 64, 512, RoutingMode::topk_softmax, 1, false, false, true},
                          {300, 256, 512, RoutingMode::softmax_topk, 2, false, false, true},
                          {500, 256, 1024, RoutingMode::topk_softmax, 8, true, false, false, DType::f16},
                          {500, 100, 1024, RoutingMode::sigmoid_bias, 4, true, true, false, DType::f16},
                          {700, 192, 512, RoutingMode::sigmoid_bias, 8, false, true},
                          {600, 256, 7168, RoutingMode::sigmoid_bias, 8, true, true, false, DType::bf16, 8, 4},
                          {4100, 128, 512, RoutingMode::sigmoid_bias, 6, false, true, false, DType::bf16, 8, 3},
                          {300, 256, 1024, RoutingMode::sigmoid_bias, 8, true, false, false, DType::f16, 8, 1},
                          // 2 groups kept, k = 8, no bias: rows of zeros reach exactly 8 chunks (every
                          // score tied) and take the fast path with the other groups masked
                          {300, 256, 1024, RoutingMode::sigmoid_bias, 8, true, false, false, DType::bf16, 8, 2},
                          {300, 128, 512, RoutingMode::sigmoid_bias, 8, false, false, false, DType::bf16, 8, 2},
                          // K split, every segment selecting some of the tile's rows
                          // (mainloop/segments.cuh, share_tile_rows): 4 segments (automatic, a
                          // residue tile row), 3 (segment 0 finishing both consumers' halves), 2
                          // (three rows past a tile), groups, narrow rows, m128n256 at 4, 3 and 2;
                          // and where the last segment selects the whole tile: 8 (past
                          // kMaxSharedSegments) and 5 with more units than CTAs
                          {1000, 128, 2048, RoutingMode::topk_softmax, 8, true, false},
                          {700, 64, 1536, RoutingMode::softmax_topk, 6, false, false, false, DType::f16},
                          {131, 100, 1024, RoutingMode::sigmoid_bias, 8, true, true},
                          {1000, 32, 2048, RoutingMode::topk_softmax, 8, false, false},
                          {700, 24, 1536, RoutingMode::sigmoid_bias, 3, true, true},
                          {1000, 256, 2048, RoutingMode::topk_softmax, 8, true, false, false, DType::f16},
                          {1000, 256, 2048, RoutingMode::sigmoid_bias, 8, true, true, false, DType::bf16, 8, 4},
                          {1000, 128, 4096, RoutingMode::topk_softmax, 8, false, false, true, DType::bf16, 1, 1, 8},
                          {1000, 128, 2048, RoutingMode::sigmoid_bias, 8, true, true, false, DType::bf16, 8, 4},
                          {300, 48, 2048, RoutingMode::topk_softmax, 4, true, false, false, DType::bf16, 1, 1, 3},
                          {4100, 128, 2048, RoutingMode::topk_softmax, 8, true, false, false, DType::bf16, 1, 1, 5},
                          {600, 200, 1024, RoutingMode::topk_softmax, 8, true, false, false, DType::bf16, 1, 1, 3},
                          {300, 256, 1024, RoutingMode::sigmoid_bias, 8, true, true, false, DType::bf16, 8, 4, 2},
                          // rows wider than the tile (two of m128n256), whose tiles' candidates
                          // merge: every mode, a residue E, a near tie across tiles, k = 1, K split
                          // 2 and 4 ways
                          {300, 384, 1024, RoutingMode::topk_softmax, 8, true, false},
                          {4100, 384, 512, RoutingMode::topk_softmax, 8, false, false},
                          {300, 512, 1024, RoutingMode::softmax_topk, 8, false, false, true},
                          {500, 300, 512, RoutingMode::sigmoid_bias, 8, true, true},
                          {300, 257, 512, RoutingMode::sigmoid_bias, 6, false, true, false, DType::f16},
                          {300, 512, 512, RoutingMode::topk_softmax, 1, false, false},
                          {700, 500, 2048, RoutingMode::topk_softmax, 4, true, false, false, DType::bf16, 1, 1, 2},
                          {1000, 384, 4096, RoutingMode::sigmoid_bias, 8, true, true, false, DType::bf16, 1, 1, 4}}) {
    Case c{shape.m, shape.experts, shape.k_dim, shape.mode, shape.k, shape.renormalize, shape.bias};
    c.n_group = shape.n_group;
    c.topk_group = shape.topk_group;
    c.nan_rows = {1, shape.m - 2};
    c.input = shape.input;
    c.split_k = shape.split_k;
    SCOPED_TRACE(describe(c));
    RouterRun run(c);
    {  // the fused GEMM's plan: its tile, with a workspace (the router's)
      GemmOptions o{.tile = fused_tile_of(c.experts), .split_k = c.split_k};
      const int64_t ld = (c.experts + 7) / 8 * 8;  // 16-byte rows
      DeviceBuffer logits(std::size_t(c.m * ld) * 2);
      o.workspace = logits.get();
      o.workspace_bytes = std::size_t(1) << 40;
      const GemmPlan plan = plan_gemm({run.x.view(), Major::k}, {run.w.view(), Major::k},
                                      TensorView::matrix(logits.get(), DType::bf16, c.m, c.experts, ld), o);
      // Rows shared out at 2 to 4 segments where every unit has its own CTA (kernel.cuh):
      // m128n256's clusters of 2 hold two tiles a unit.
      if (plan.split_k > 1) {
        const int64_t cluster = fused_tile_of(c.experts) == GemmTile::m128n128 ? 1 : 2;
        const bool one_wave = (plan.output_tiles + cluster - 1) / cluster * plan.split_k <= plan.ctas / cluster;
        (one_wave && plan.split_k <= 4 ? shared_segments : last_segment_splits).insert(plan.split_k);
      }
    }
    run.x.random(shape.near_tie ? 0.0 : -1.0, 1);
    run.w.random(-1, 1);
    if (shape.near_tie) {  // rows of ones, one of them a bf16 ulp higher in its first column
      for (int64_t e : {5, 9})
        for (int64_t j = 0; j < c.k_dim; ++j) {
          const uint16_t bits = float_to_bf16_bits(e == 9 && j == 0 ? 1.0078125f : 1.0f);
          std::memcpy(&run.w.host.bytes[std::size_t((e * run.w.host.view.ld() + j) * 2)], &bits, 2);
        }
    }
    for (int64_t r : {int64_t(0), shape.m / 2, shape.m - 1})  // a padded token: every score 0
      std::memset(&run.x.host.bytes[std::size_t(r * run.x.host.view.ld() * 2)], 0, std::size_t(c.k_dim * 2));
    for (int64_t r : c.nan_rows)
      for (int64_t j = 0; j < c.k_dim; ++j) {
        const uint16_t nan = c.input == DType::f16 ? 0x7E00 : 0x7FC0;
        std::memcpy(&run.x.host.bytes[std::size_t((r * run.x.host.view.ld() + j) * 2)], &nan, 2);
      }
    run.x.upload();
    run.w.upload();
    run.bias.random(-0.5, 0.5).upload();  // fine values: p + bias - bias is not p
    c.fused = true;
    const Outputs fused = run.route(c, 3);
    c.fused = false;
    c.tile = fused_tile_of(c.experts);
    const Outputs scores = run.route(c, 4);
    // topk_softmax's exp(s - lse) moves by about ulp(|lse|) relative between the two sums' orders.
    // Unrenormalized sigmoid_bias weights are p itself on both paths: the same bits.
    const bool lse = shape.mode == RoutingMode::topk_softmax && !shape.renormalize;
    const bool exact = shape.mode == RoutingMode::sigmoid_bias && !shape.renormalize;
    const float tolerance = exact ? 0.0f : 1e-6f + (lse ? 1e-6f * std::sqrt(float(shape.k_dim)) : 0.0f);
    int mismatches = 0;
    for (std::size_t i = 0; i < fused.ids.size() && mismatches < 5; ++i) {
      const bool same_weight =
          std::abs(fused.weights[i] - scores.weights[i]) <= tolerance * std::max(1.0f, scores.weights[i]);
      if (fused.ids[i] != scores.ids[i] || !same_weight) {
        ++mismatches;
        ADD_FAILURE() << "token " << i / std::size_t(c.k) << " slot " << i % std::size_t(c.k) << ": expert "
                      << fused.ids[i] << " weight " << fused.weights[i] << ", the scores path's " << scores.ids[i]
                      << " weight " << scores.weights[i];
      }
    }
    EXPECT_EQ(fused.token_expert_indices, scores.token_expert_indices);
    EXPECT_EQ(fused.counts, scores.counts);
  }
  EXPECT_EQ(shared_segments, (std::set<int>{2, 3, 4}));
  EXPECT_EQ(last_segment_splits, (std::set<int>{5, 8}));
}

}  // namespace
}  // namespace coda::test

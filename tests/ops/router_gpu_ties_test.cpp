// The router's exact tie rules and non-finite biases on the GPU (sigmoid_bias), against the fp64
// reference (coda/reference/moe.hpp). The router weight is the identity on its first E columns,
// so score (m, e) is x's element (m, e): one of kScoreValues, or NaN where the expert's weight row
// is NaN. Their sigmoids lie >= 0.075 apart and sums of two >= 0.007 apart unless they are the same
// two (expect_values_well_apart), and the bias is absent, one value for every expert, or non-finite, so
// fp32 orders selection scores and group scores exactly as fp64 does, ties included: the GPU's ids
// must equal the reference's exactly (biases near float max, where fp32 rounds p away, have their
// expectation written out: BiasesNearFloatMax). Groups tied on their two best keep the lower group, tied
// experts go lower id first, a group with fewer than two selectable experts (group size 1 is
// rejected: router_validation_test.cpp) scores -inf, a NaN bias is never selected, +inf ranks
// before and -inf after every finite score, a group whose two best are +inf and -inf scores -inf.
// Every group stage: the decode kernel's at M <= 16 (columns at E = 256 / 8, 64 / 2 and 384 / 4; lanes at
// 160 / 10, 64 / 32 and 16 / 8; the CTA's at 144 / 8 and 96 / 4) and the scores path's at M > 16
// (registers where groups are whole 32-expert columns, else shared memory); ungrouped, the decode
// kernel, the scores path and the epilogue's selection (fused_selection), which also takes 8
// groups at E = 128 and 256 (run at k = 8 beside each such case past decode).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "coda/ops/router.hpp"
#include "coda/reference/gemm.hpp"
#include "coda/reference/moe.hpp"
#include "support/device_tensor.hpp"

namespace coda::test {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Raw scores, exact in bf16, chosen so that their sigmoids and the sums of two stay far apart.
constexpr float kScoreValues[] = {-3.875f, -2.25f, -0.5f, 0.25f, 0.625f, 1.125f, 2.0f, 3.75f};
constexpr int kValues = int(std::size(kScoreValues));
constexpr float kTopValue = kScoreValues[kValues - 1];

// The premise of every exact comparison below, in fp64: fp32 rounding (a few ulp) cannot reorder
// values this far apart.
void expect_values_well_apart() {
  std::vector<double> p, sums;
  for (float s : kScoreValues) p.push_back(1.0 / (1.0 + std::exp(-double(s))));
  for (std::size_t i = 0; i < p.size(); ++i)
    for (std::size_t j = i; j < p.size(); ++j) sums.push_back(p[i] + p[j]);
  for (std::vector<double>* v : {&p, &sums}) {
    std::sort(v->begin(), v->end());
    for (std::size_t i = 1; i < v->size(); ++i) ASSERT_GT((*v)[i] - (*v)[i - 1], 1e-3);
  }
}

struct Case {
  int64_t m, experts;
  int32_t k, n_group = 1, topk_group = 1;
  bool renormalize = true;
  float scale = 1.0f;
  bool fused = false;  // options.fused_selection: the epilogue's selection (M > 16, E <= 256, k <= 8; groups: 8 at
                       // E = 128, 256), also run unasked for grouped cases it takes
};

// Scores (M x E, row-major; values of kScoreValues), the experts whose weight row is NaN (a NaN
// score for every token) and the bias (empty: none).
struct Inputs {
  std::vector<float> scores;
  std::vector<int64_t> nan_experts;
  std::vector<float> bias;
};

std::vector<float> random_scores(int64_t m, int64_t experts) {
  std::vector<float> scores(std::size_t(m * experts));
  for (float& s : scores) s = kScoreValues[uniform_int(0, kValues - 1)];
  return scores;
}

void put_bf16(DeviceTensor& t, int64_t r, int64_t c, float v) {
  const uint16_t bits = float_to_bf16_bits(v);
  std::memcpy(&t.host.bytes[std::size_t((r * t.host.view.ld() + c) * 2)], &bits, 2);
}

// What the router returned: weights and ids (M x k) and the expert counts.
struct Routed {
  std::vector<float> weights;
  std::vector<int32_t> ids, counts;
};

// Routes `in` on the GPU (outputs poisoned, a garbage workspace); `x` and `w` keep the GEMM's
// operands (the scores) for the reference.
Routed route_on_gpu(const Case& c, const Inputs& in, DeviceTensor& x, DeviceTensor& w) {
  const int64_t experts = c.experts;
  DeviceTensor bias(DType::f32, 1, experts);
  DeviceTensor weights(DType::f32, c.m, c.k, c.k), ids(DType::i32, c.m, c.k, c.k), counts(DType::i32, 1, experts);
  for (int64_t m = 0; m < c.m; ++m)
    for (int64_t e = 0; e < experts; ++e) put_bf16(x, m, e, in.scores[std::size_t(m * experts + e)]);
  for (int64_t e = 0; e < experts; ++e)
    put_bf16(w, e, e, std::count(in.nan_experts.begin(), in.nan_experts.end(), e) ? kNaN : 1.0f);
  x.upload();
  w.upload();
  if (!in.bias.empty()) {
    std::memcpy(bias.host.bytes.data(), in.bias.data(), std::size_t(experts) * 4);
    bias.upload();
  }
  const ops::RouterOptions o{.mode = ops::RoutingMode::sigmoid_bias,
                             .k = c.k,
                             .renormalize = c.renormalize,
                             .expert_bias = in.bias.empty() ? TensorView{} : bias.vector_view(),
                             .n_group = c.n_group,
                             .topk_group = c.topk_group,
                             .routed_scaling_factor = c.scale,
                             .token_expert_indices = {},
                             .expert_counts = counts.vector_view(),
                             .scores = {},
                             .fused_selection = c.fused,
                             .gemm = {}};
  weights.poison();
  ids.poison();
  counts.poison();
  DeviceBuffer ws(ops::router_workspace_bytes(x.view(), w.view(), o));
  ws.garbage(uint64_t(c.m * 1000 + experts));
  ops::gemm_router(x.view(), w.view(), weights.view(), ids.view(), ws.get(), ws.bytes(), nullptr, o);
  CODA_CUDA_CHECK(cudaDeviceSynchronize());
  Routed r{std::vector<float>(std::size_t(c.m * c.k)), std::vector<int32_t>(std::size_t(c.m * c.k)),
           std::vector<int32_t>(std::size_t(experts))};
  weights.device.download(r.weights.data(), r.weights.size() * 4);
  ids.device.download(r.ids.data(), r.ids.size() * 4);
  counts.device.download(r.counts.data(), r.counts.size() * 4);
  return r;
}

std::string describe(const char* what, const Case& c, const Inputs& in) {
  std::ostringstream note;
  note << what << ": M " << c.m << ", E " << c.experts << ", k " << c.k << ", groups " << c.n_group << "/"
       << c.topk_group << ", bias " << (in.bias.empty() ? "none" : "given") << (c.fused ? ", fused" : "");
  return note.str();
}

// Routes `in` on the GPU and requires the reference's ids exactly, its weights to fp32 rounding and
// its expert counts.
void expect_exact_routing(const char* what, const Case& c, const Inputs& in) {
  if (!c.fused && c.n_group == 8 && (c.experts == 128 || c.experts == 256) && c.m > 16) {
    Case epilogue = c;  // the epilogue's k <= 8: the same inputs at k = 8 where the case has more
    epilogue.fused = true;
    epilogue.k = std::min(c.k, 8);
    expect_exact_routing(what, epilogue, in);
  }
  SCOPED_TRACE(describe(what, c, in));
  SCOPED_TRACE(seed_note());
  const int64_t experts = c.experts, k_dim = std::max<int64_t>(experts, 256);
  DeviceTensor x(DType::bf16, c.m, k_dim), w(DType::bf16, experts, k_dim);
  const Routed got = route_on_gpu(c, in, x, w);

  reference::RoutingOptions ro{.mode = reference::RoutingMode::sigmoid_bias,
                               .k = c.k,
                               .renormalize = c.renormalize,
                               .n_group = c.n_group,
                               .topk_group = c.topk_group,
                               .routed_scaling_factor = c.scale};
  ro.expert_bias.assign(in.bias.begin(), in.bias.end());
  const reference::Routing want =
      reference::route(reference::gemm(x.host.matrix(), Major::k, w.host.matrix(), Major::k), ro);
  int mismatches = 0;
  for (std::size_t i = 0; i < got.ids.size() && mismatches < 5; ++i) {
    const double tolerance = 2e-6 * std::max(1.0, std::abs(want.weights.data[i]));
    if (got.ids[i] != want.ids[i] || !(std::abs(got.weights[i] - want.weights.data[i]) <= tolerance)) {
      ++mismatches;
      ADD_FAILURE() << "token " << i / std::size_t(c.k) << " slot " << i % std::size_t(c.k) << ": expert " << got.ids[i]
                    << " weight " << got.weights[i] << ", want expert " << want.ids[i] << " weight "
                    << want.weights.data[i];
    }
  }
  const std::vector<int64_t> want_counts = want.expert_counts(experts);
  for (int64_t e = 0; e < experts; ++e) EXPECT_EQ(got.counts[std::size_t(e)], want_counts[std::size_t(e)]) << e;
}

struct GroupShape {
  int64_t experts;
  int32_t n_group;
};
// One of each group stage (the file's comment), and M on both token tiles of the decode kernel and
// on the scores path.
const GroupShape kGroupShapes[] = {{256, 8}, {64, 2}, {160, 10}, {64, 32}, {16, 8},
                                   {144, 8}, {96, 4}, {128, 8},  {384, 4}};
const int64_t kTokenCounts[] = {5, 16, 17, 130};

// topk_group values in [1, n_group], each once.
std::set<int32_t> kept_counts(std::initializer_list<int32_t> wanted, int32_t n_group) {
  std::set<int32_t> out;
  for (int32_t t : wanted) out.insert(std::clamp(t, 1, n_group));
  return out;
}

// Token t's scores: its groups copy one of 1 + t % 3 templates (t % 3 == 0: every group tied), each
// template's values drawn from kScoreValues below a cap of its own, so that templates' two best
// differ, the group at the topk_group boundary often ties with the next, and values repeat.
std::vector<float> copied_groups(int64_t m, int64_t experts, int32_t n_group) {
  const int64_t group_size = experts / n_group;
  std::vector<float> scores(std::size_t(m * experts));
  for (int64_t t = 0; t < m; ++t) {
    std::vector<std::vector<float>> templates(std::size_t(1 + t % 3), std::vector<float>(std::size_t(group_size)));
    for (std::vector<float>& values : templates) {
      const int64_t cap = uniform_int(0, kValues - 1);
      for (float& v : values) v = kScoreValues[uniform_int(0, cap)];
    }
    for (int64_t g = 0; g < n_group; ++g) {
      const std::vector<float>& from = templates[std::size_t(uniform_int(0, int64_t(templates.size()) - 1))];
      std::copy(from.begin(), from.end(), scores.begin() + t * experts + g * group_size);
    }
  }
  return scores;
}

TEST(RouterGpuTies, TiedGroupsKeepTheLowerGroup) {
  CODA_REQUIRE_HOPPER();
  ASSERT_NO_FATAL_FAILURE(expect_values_well_apart());
  for (const GroupShape& s : kGroupShapes)
    for (int64_t m : kTokenCounts)
      for (int32_t topk : kept_counts({1, 2, s.n_group / 2, s.n_group - 1}, s.n_group)) {
        const int32_t k = int32_t(std::min<int64_t>(10, topk * (s.experts / s.n_group)));
        Inputs in{copied_groups(m, s.experts, s.n_group), {}, {}};
        expect_exact_routing("copied groups", {m, s.experts, k, s.n_group, topk}, in);
        in.bias.assign(std::size_t(s.experts), 0.25f);  // one bias for every expert keeps the ties
        expect_exact_routing("copied groups", {m, s.experts, k, s.n_group, topk, false, 2.5f}, in);
      }
}

// Groups g % 4 == 1 hold one selectable expert (the others' weight rows are NaN), scoring the top
// value for every token; groups g % 4 == 3 none. Such groups score -inf: kept only where fewer than
// topk_group groups have two selectable experts, the lower group first, and then the lone expert
// is selected like any other; slots past the selectable experts take the lowest unchosen ids.
TEST(RouterGpuTies, GroupsWithOneSelectableExpert) {
  CODA_REQUIRE_HOPPER();
  for (const GroupShape& s : kGroupShapes)
    for (int64_t m : kTokenCounts) {
      const int64_t group_size = s.experts / s.n_group;
      Inputs in{random_scores(m, s.experts), {}, {}};
      int32_t full = 0;
      for (int64_t g = 0; g < s.n_group; ++g) {
        if (g % 4 == 0 || g % 4 == 2) ++full;
        if (g % 4 == 1)
          for (int64_t t = 0; t < m; ++t) in.scores[std::size_t(t * s.experts + (g + 1) * group_size - 1)] = kTopValue;
        for (int64_t j = 0; j < group_size; ++j)
          if (g % 4 == 3 || (g % 4 == 1 && j + 1 < group_size)) in.nan_experts.push_back(g * group_size + j);
      }
      for (int32_t topk : kept_counts({1, full, full + 1, s.n_group}, s.n_group)) {
        const int32_t k = int32_t(std::min<int64_t>({32, s.experts, topk * group_size}));
        expect_exact_routing("one selectable expert", {m, s.experts, k, s.n_group, topk}, in);
      }
    }
}

// Group g's bias by g % 8 (j: the expert's place in the group): the two best +inf and -inf (a NaN
// sum: -inf); two +inf; one +inf (tied with the previous at +inf); all NaN; one selectable; a -inf
// expert beside finite ones; finite.
float grouped_bias(int64_t g, int64_t j, int64_t group_size) {
  switch (g % 8) {
    case 0:
      return j == 1 ? kInf : -kInf;
    case 1:
      return j == 0 || j == group_size - 1 ? kInf : 0.0f;
    case 2:
      return j == 0 ? kInf : 0.0f;
    case 3:
      return kNaN;
    case 4:
      return j == group_size - 1 ? 0.0f : kNaN;
    case 5:
      return j == 0 && group_size > 2 ? -kInf : 0.0f;
    default:
      return 0.0f;
  }
}

TEST(RouterGpuTies, NonFiniteBiasesGrouped) {
  CODA_REQUIRE_HOPPER();
  for (const GroupShape& s : kGroupShapes)
    for (int64_t m : kTokenCounts) {
      const int64_t group_size = s.experts / s.n_group;
      Inputs in{random_scores(m, s.experts), {}, {}};
      for (int64_t e = 0; e < s.experts; ++e)
        in.bias.push_back(grouped_bias(e / group_size, e % group_size, group_size));
      for (int32_t topk : kept_counts({1, 2, 3, s.n_group / 2, s.n_group}, s.n_group)) {
        const int32_t k = int32_t(std::min<int64_t>(12, topk * group_size));
        expect_exact_routing("non-finite biases", {m, s.experts, k, s.n_group, topk, topk % 2 == 1}, in);
      }
    }
}

// Without groups, on every path. Sparse: every bias NaN but +inf at E / 2 and E - 1, -inf at 1 and
// E - 2 and 0 at 0, 2 and E / 2 + 1 (seven selectable: k = 8 leaves a slot to the lowest unchosen
// id). Dense: 0 but NaN at e % 16 == 3 and -inf at e % 16 == 7 (those experts scoring the top value),
// +inf at min(10, E - 2) and E - 1.
TEST(RouterGpuTies, NonFiniteBiasesUngrouped) {
  CODA_REQUIRE_HOPPER();
  for (int64_t experts : {8, 16, 64, 256, 512})
    for (int64_t m : {1, 16, 17, 300})
      for (bool sparse : {true, false}) {
        Inputs in{random_scores(m, experts), {}, {}};
        if (sparse) {
          in.bias.assign(std::size_t(experts), kNaN);
          for (int64_t e : {experts / 2, experts - 1}) in.bias[std::size_t(e)] = kInf;
          for (int64_t e : {int64_t(1), experts - 2}) in.bias[std::size_t(e)] = -kInf;
          for (int64_t e : {int64_t(0), int64_t(2), experts / 2 + 1}) in.bias[std::size_t(e)] = 0.0f;
        } else {
          in.bias.assign(std::size_t(experts), 0.0f);
          for (int64_t e = 0; e < experts; ++e) {
            if (e % 16 != 3 && e % 16 != 7) continue;
            in.bias[std::size_t(e)] = e % 16 == 3 ? kNaN : -kInf;
            for (int64_t t = 0; t < m; ++t) in.scores[std::size_t(t * experts + e)] = kTopValue;
          }
          for (int64_t e : {std::min<int64_t>(10, experts - 2), experts - 1}) in.bias[std::size_t(e)] = kInf;
        }
        for (int32_t k : {3, 8})
          for (bool fused : {false, true}) {
            if (fused && (m <= 16 || experts > 256)) continue;  // where the epilogue selects
            expect_exact_routing(sparse ? "sparse non-finite biases" : "dense non-finite biases",
                                 {m, experts, k, 1, 1, k == 8, 1.0f, fused}, in);
          }
      }
}

// Biases near float max: p + bias and a group's sum are fp32 on every path (coda/ops/router.hpp),
// so where the bias dwarfs p (ulp(3e38) = 2^104) the experts it lifts tie at the bias and go lower
// id first, and two of them in one group sum past float max to +inf, tying those groups (the lower
// kept); fp64 would order them by p, so the expectation is written here. Weights stay p. Lifted
// experts: e % 3 == 1 without groups; with DeepSeek-V3's 8 groups of 32 (4 kept), places 5 and 9 of
// groups 1, 3, 4, 6 and 7, of which group 7 is the fifth at +inf and left out. Place 0 (e % 3 == 2
// without groups) sinks to -3e38, still selectable after the rest. Every path: decode (M = 5,
// 16), the scores path and the epilogue's selection (M = 17, 300).
TEST(RouterGpuTies, BiasesNearFloatMax) {
  CODA_REQUIRE_HOPPER();
  constexpr float kHuge = 3.0e38f;
  struct Shape {
    int64_t experts;
    int32_t n_group, topk_group;
  };
  for (const Shape& s : {Shape{8, 1, 1}, Shape{64, 1, 1}, Shape{256, 1, 1}, Shape{256, 8, 4}})
    for (int64_t m : {5, 16, 17, 300})
      for (bool fused : {false, true}) {
        if (fused && m <= 16) continue;  // the decode kernel's M
        Inputs in{random_scores(m, s.experts), {}, std::vector<float>(std::size_t(s.experts), 0.0f)};
        std::vector<int32_t> want_ids;  // the lifted experts selectable, in id order
        const int64_t group_size = s.experts / s.n_group;
        for (int64_t e = 0; e < s.experts; ++e) {
          const int64_t g = e / group_size, j = e % group_size;
          const bool grouped = s.n_group > 1;
          const bool lift =
              grouped ? (g == 1 || g == 3 || g == 4 || g == 6 || g == 7) && (j == 5 || j == 9) : e % 3 == 1;
          const bool sink = grouped ? j == 0 : e % 3 == 2;
          in.bias[std::size_t(e)] = lift ? kHuge : sink ? -kHuge : 0.0f;
          if (lift && !(grouped && g == 7)) want_ids.push_back(int32_t(e));
        }
        const int32_t k = int32_t(std::min<std::size_t>(8, want_ids.size()));
        want_ids.resize(std::size_t(k));
        const Case c{m, s.experts, k, s.n_group, s.topk_group, true, 1.0f, fused};
        SCOPED_TRACE(describe("biases near float max", c, in));
        SCOPED_TRACE(seed_note());
        const int64_t k_dim = std::max<int64_t>(s.experts, 256);
        DeviceTensor x(DType::bf16, m, k_dim), w(DType::bf16, s.experts, k_dim);
        const Routed got = route_on_gpu(c, in, x, w);
        const auto p = [&](int64_t t, int32_t id) {  // sigmoid of token t's score for expert id
          return 1.0 / (1.0 + std::exp(-double(in.scores[std::size_t(t * s.experts + id)])));
        };
        int mismatches = 0;
        for (int64_t t = 0; t < m && mismatches < 5; ++t) {
          double sum = 0;
          for (int32_t id : want_ids) sum += p(t, id);
          for (int32_t j = 0; j < k; ++j) {
            const std::size_t i = std::size_t(t * k + j);
            const int32_t id = want_ids[std::size_t(j)];
            const double want = p(t, id) / sum;
            if (got.ids[i] != id || !(std::abs(got.weights[i] - want) <= 2e-6)) {
              ++mismatches;
              ADD_FAILURE() << "token " << t << " slot " << j << ": expert " << got.ids[i] << " weight "
                            << got.weights[i] << ", want expert " << id << " weight " << want;
            }
          }
        }
        for (int64_t e = 0; e < s.experts; ++e)
          EXPECT_EQ(got.counts[std::size_t(e)],
                    std::count(want_ids.begin(), want_ids.end(), int32_t(e)) ? int32_t(m) : 0)
              << e;
      }
}

}  // namespace
}  // namespace coda::test

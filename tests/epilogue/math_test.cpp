// The epilogue math (math.hpp) on the host, against fp64: every activation's value and derivative
// over values from 0 and subnormals through each activation's kinks to overflow, infinities and
// NaN (activation_cases.hpp). The GPU computes e^x and 1/x its own way: math_gpu_test.cu.
#include <gtest/gtest.h>

#include "epilogue/activation_cases.hpp"

namespace coda::test {
namespace {

using namespace activation_cases;

TEST(EpilogueMath, EveryActivationMatchesTheReferenceOnTheHost) {
  const std::vector<float> x = inputs();
  for_each_kind(every_function(), [&]<epilogue::Activation K>(const epilogue::ActivationFunction& f, int) {
    SCOPED_TRACE(epilogue::name(K));
    const reference::Activation reference = reference_of(f);
    for (const float v : x) {
      if (!comparable_with_fp64(v)) continue;
      SCOPED_TRACE(::testing::Message() << "x = " << v);
      expect_near(f.value_of<K>(v), reference(v), kAgainstFp64, "value");
      expect_near(f.derivative_of<K>(v), reference.derivative(v), kAgainstFp64, "derivative");
    }
  });
}

TEST(EpilogueMath, ActivationNamesAreTheKindsNames) {
  EXPECT_STREQ(epilogue::name(epilogue::Activation::gelu_tanh), "gelu_tanh");
  EXPECT_STREQ(epilogue::name(epilogue::Activation::clamp), "clamp");
  EXPECT_STREQ(epilogue::name(epilogue::Activation(200)), "an unknown activation");
}

}  // namespace
}  // namespace coda::test

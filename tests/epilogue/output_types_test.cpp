// Which type a launch writes a program's tile outputs in (coda/epilogue/output_types.hpp): the
// stores the recorder finds, in program order, for programs whose stores depend on their
// arguments, and launch_program's rules (one type per launch; the operands' type or one the
// launch names), each refusal naming the store.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "coda/core/status.hpp"
#include "coda/epilogue/output_types.hpp"
#include "coda/epilogue/programs/rmsnorm.hpp"
#include "coda/epilogue/programs/standard.hpp"
#include "coda/epilogue/programs/swiglu.hpp"

namespace coda::test {
namespace {

// Descriptors only: the recorder never dereferences them.
char storage[16];

epilogue::TileOut output(DType dtype) {
  epilogue::TileOut out;
  out.data = storage;
  out.dtype = dtype;
  return out;
}

// Stores, the first one's type, and the first store of another type (0: none).
struct Recorded {
  int stores;
  DType first;
  int first_other;
  bool operator==(const Recorded&) const = default;
};
Recorded recorded(const auto& program) {
  epilogue::StoreRecorder recorder;
  program(recorder);
  return {recorder.stores(), recorder.stores() ? recorder.first_type() : DType::i32, recorder.first_other_store()};
}

TEST(StoreRecorder, FindsEveryStoreInProgramOrder) {
  epilogue::LinearCombination linear;
  linear.out = output(DType::e4m3);
  EXPECT_EQ(recorded(linear), (Recorded{1, DType::e4m3, 0}));
  linear.pre_activation = output(DType::f16);  // stored before the activation, so first
  EXPECT_EQ(recorded(linear), (Recorded{2, DType::f16, 2}));
  epilogue::StoreRecorder recorder;
  linear(recorder);
  EXPECT_EQ(recorder.other_type(), DType::e4m3);

  epilogue::ResidualRmsNorm rmsnorm;
  rmsnorm.residual_out = output(DType::bf16);
  rmsnorm.out = output(DType::bf16);
  EXPECT_EQ(recorded(rmsnorm), (Recorded{2, DType::bf16, 0}));

  epilogue::Reductions reductions;  // partials only
  EXPECT_EQ(recorded(reductions).stores, 0);
  reductions.out = output(DType::f32);
  EXPECT_EQ(recorded(reductions), (Recorded{1, DType::f32, 0}));
}

TEST(OutputType, IsTheOperandsTypeOrOneTheLaunchNames) {
  epilogue::Swiglu swiglu;
  swiglu.out = output(DType::bf16);
  EXPECT_EQ(epilogue::output_type(swiglu, DType::bf16, {}, "f"), DType::bf16);

  epilogue::LinearCombination linear;
  linear.out = output(DType::e4m3);
  linear.pre_activation = output(DType::e4m3);
  EXPECT_EQ(epilogue::output_type(linear, DType::bf16, {DType::f32, DType::e4m3}, "f"), DType::e4m3);

  epilogue::Reductions reductions;  // no tile output: the operands' type (nothing is written in it)
  EXPECT_EQ(epilogue::output_type(reductions, DType::f16, {}, "f"), DType::f16);
}

TEST(OutputType, EachRefusalNamesTheStoreAndTheRule) {
  auto refused = [](const auto& program, std::initializer_list<DType> also, std::vector<std::string> parts) {
    try {
      (void)epilogue::output_type(program, DType::bf16, also, "coda::epilogue::launch_program");
      ADD_FAILURE() << "accepted; expected: " << parts.back();
    } catch (const coda::Unsupported& e) {
      EXPECT_NE(std::string(e.what()).find("coda::epilogue::launch_program"), std::string::npos) << e.what();
      for (const std::string& part : parts) EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  epilogue::LinearCombination linear;
  linear.out = output(DType::e4m3);
  refused(linear, {}, {"tile output of store 1", "is e4m3 but this launch writes only bf16", "OutputTypes"});
  refused(linear, {DType::f32, DType::e5m2}, {"store 1", "writes only bf16, f32, e5m2"});

  linear.pre_activation = output(DType::bf16);  // bf16, then e4m3: two types in one launch
  refused(linear, {DType::e4m3}, {"tile output of store 2", "is e4m3 but store 1 writes bf16", "one type"});
}

// A TileOutOf<T> is written in T whatever the launch writes its TileOuts in: an fp8 result and a
// bf16 auxiliary output in one launch. Stores are numbered over both kinds.
struct ResultAndTypedAux {
  epilogue::TileOutOf<DType::bf16> aux;
  epilogue::TileOut out;
  epilogue::TileOut second;

  template <class Tile>
  CODA_HD void operator()(Tile& t) const {
    if (aux.data) t.store(aux);
    if (out.data) t.store_pairs(out, [](const epilogue::Pair& p) { return p.first; });
    if (second.data) t.store(second);
  }
};

TEST(OutputType, ATypedOutputIsWrittenInItsOwnType) {
  ResultAndTypedAux program;
  program.aux = epilogue::TileOutOf<DType::bf16>{output(DType::bf16)};
  EXPECT_EQ(epilogue::output_type(program, DType::bf16, {}, "f"), DType::bf16);  // no TileOut: the operands'
  program.out = output(DType::e5m2);
  EXPECT_EQ(epilogue::output_type(program, DType::f16, {DType::e5m2}, "f"), DType::e5m2);
  epilogue::StoreRecorder recorder;
  program(recorder);
  EXPECT_EQ(recorder.stores(), 2);
  EXPECT_EQ(recorder.first_launch_typed_store(), 2);

  // Store 3, a TileOut of another type than store 2's, is refused by its number.
  program.second = output(DType::f32);
  try {
    (void)epilogue::output_type(program, DType::bf16, {DType::e5m2, DType::f32}, "coda::epilogue::launch_program");
    ADD_FAILURE() << "accepted two TileOut types";
  } catch (const coda::Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("tile output of store 3 (program order)': is f32 but store 2 writes e5m2"),
              std::string::npos)
        << e.what();
  }
}

TEST(OutputType, ATypedOutputOfAnotherTypeIsRefused) {
  ResultAndTypedAux program;
  program.aux = epilogue::TileOutOf<DType::bf16>{output(DType::f16)};
  program.out = output(DType::bf16);
  try {
    (void)epilogue::output_type(program, DType::bf16, {}, "coda::epilogue::launch_program");
    ADD_FAILURE() << "accepted an f16 tensor as a TileOutOf<bf16>";
  } catch (const coda::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "coda::epilogue::launch_program: argument 'tile output of store 1 (program order)': is "
                  "a TileOutOf<bf16> but its tensor is f16"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace coda::test

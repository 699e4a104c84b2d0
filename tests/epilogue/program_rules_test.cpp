// The rules a program and its arguments are checked by before anything runs: the tile inputs a
// program lists (the CPU executor refuses others), int32 index vectors, 32-bit table indices, the
// operand majors a launch's kernels are built for, and a staged tile input's rules on the GPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "coda/core/status.hpp"
#include "coda/epilogue/host_arguments.hpp"
#include "coda/epilogue/programs/standard.hpp"
#include "epilogue/support.hpp"

namespace coda::test {
namespace {

using epilogue::Element;
constexpr ProblemShape kShape = kExecutorShape;

class EpilogueProgramRules : public PartShapeTest {};

INSTANTIATE_TEST_SUITE_P(Parts, EpilogueProgramRules, ::testing::ValuesIn(kPartShapes), part_shape_name);

// A program must list the tile inputs it reads (launch_program validates only
// those): the CPU executor refuses one that reads another, naming the rule.
struct ReadsAnUnlistedInput {
  epilogue::TileIn listed{}, unlisted{};
  epilogue::TileOut out{};

  template <class Inputs>
  void tile_inputs(Inputs& list) const {
    list(listed);
  }

  template <class Tile>
  void operator()(Tile& t) const {
    t.store(out, [&](const Element& x) { return t.load(listed, x) + t.load(unlisted, x); });
  }
};

TEST_P(EpilogueProgramRules, RefusesATileInputTheProgramDoesNotList) {
  const auto acc = random_accumulators(kShape);
  const HostTensor a = random_input(DType::bf16, kShape.rows, kShape.cols, kShape.batch),
                   b = random_input(DType::bf16, kShape.rows, kShape.cols, kShape.batch);
  HostTensor out = poisoned_output(DType::f32, kShape.rows, kShape.cols, kShape.batch);
  const ReadsAnUnlistedInput reads_both{.listed = tile_in(a), .unlisted = tile_in(b), .out = tile_out(out)};
  try {
    run_batches(reads_both, acc, part());
    FAIL() << "no error";
  } catch (const coda::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("tile_inputs()"), std::string::npos) << e.what();
  }
  // The same program reading the listed input twice is valid.
  const ReadsAnUnlistedInput reads_listed{.listed = tile_in(a), .unlisted = tile_in(a), .out = tile_out(out)};
  EXPECT_NO_THROW(run_batches(reads_listed, acc, part()));
}

// t.load_index reads int32 words on the GPU: the CPU executor refuses any other vector, naming it.
struct ReadsAnIndex {
  epilogue::ColumnVector indices;
  epilogue::TileOut out;

  template <class Tile>
  void operator()(Tile& t) const {
    t.store(out, [&](const Element& x) { return float(t.load_index(indices, x)); });
  }
};

TEST_P(EpilogueProgramRules, LoadIndexRefusesAVectorThatIsNotInt32) {
  const auto acc = random_accumulators(kShape);
  const HostTensor floats = random_column_vector(DType::f32, kShape.rows, kShape.batch);
  HostTensor out = poisoned_output(DType::f32, kShape.rows, kShape.cols, kShape.batch);
  try {
    run_batches(ReadsAnIndex{.indices = column_vector(floats), .out = tile_out(out)}, acc, part());
    FAIL() << "no error";
  } catch (const coda::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("load_index reads an int32 ColumnVector, this one holds f32"),
              std::string::npos)
        << e.what();
  }
}

// Tables are indexed with 32 bits: table() refuses one of 2^31 elements or more, and a batched one.
TEST(TableArgument, RefusesWhatThirtyTwoBitIndicesCannotAddress) {
  alignas(16) static float storage[16];
  const TensorView fits = TensorView::matrix(storage, DType::f32, 2, 8);
  const epilogue::Table table = epilogue::table(fits, "cos");
  EXPECT_EQ(table.ld, 8);
  EXPECT_EQ(table.rows, 2);
  // Views only: nothing is read at these sizes.
  const TensorView huge = TensorView::matrix(storage, DType::f32, int64_t(1) << 21, 1024);
  try {
    (void)epilogue::table(huge, "cos");
    ADD_FAILURE() << "accepted a table of 2^31 elements";
  } catch (const coda::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("cos"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("< 2^31 elements"), std::string::npos) << e.what();
  }
}

// A program launch's kernels are built for one pair of operand majors (coda::OperandMajors,
// K-major by default): gemm_program and launch_program refuse operands of others, naming them.
TEST(ProgramLaunch, RefusesOperandsOfMajorsItsKernelsAreNotBuiltFor) {
  EXPECT_NO_THROW(
      epilogue::check_operand_majors(Major::k, Major::k, Major::k, Major::k, "coda::epilogue::gemm_program"));
  EXPECT_NO_THROW(
      epilogue::check_operand_majors(Major::mn, Major::mn, Major::mn, Major::mn, "coda::epilogue::gemm_program"));
  struct Refusal {
    Major a, b, built_a, built_b;
    const char* message;
  };
  const Refusal refusals[] = {{Major::k, Major::mn, Major::k, Major::k,
                               "coda::epilogue::gemm_program: argument 'b': this launch's kernels take a K-major B"},
                              {Major::mn, Major::k, Major::k, Major::k,
                               "coda::epilogue::gemm_program: argument 'a': this launch's kernels take a K-major A"},
                              {Major::k, Major::k, Major::k, Major::mn,
                               "coda::epilogue::gemm_program: argument 'b': this launch's kernels take an MN-major B"}};
  for (const Refusal& r : refusals) {
    try {
      epilogue::check_operand_majors(r.a, r.b, r.built_a, r.built_b, "coda::epilogue::gemm_program");
      ADD_FAILURE() << "accepted; expected: " << r.message;
    } catch (const coda::Unsupported& e) {
      EXPECT_NE(std::string(e.what()).find(r.message), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("coda::epilogue::OperandMajors<A, B>"), std::string::npos) << e.what();
    }
  }
}

// launch_program's rule for the tile inputs a program lists (the GPU executor reads them as
// the operands' 16-bit type, column pairs as aligned 32-bit words), each rule named.
TEST(TileInputsOnTheGpu, EachRuleIsCheckedAndNamed) {
  alignas(16) static uint16_t storage[64];
  auto refused = [](const ReadsAnUnlistedInput& program, const char* rule) {
    try {
      epilogue::check_tile_inputs(program, DType::bf16, "coda::epilogue::launch_program");
      ADD_FAILURE() << "accepted; expected: " << rule;
    } catch (const coda::InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("tile input 0"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(rule), std::string::npos) << e.what();
    }
  };
  const epilogue::TileIn good{.data = storage, .dtype = DType::bf16, .ld = 8, .batch_stride = 32};
  EXPECT_NO_THROW(epilogue::check_tile_inputs(ReadsAnUnlistedInput{.listed = good}, DType::bf16, "f"));
  EXPECT_NO_THROW(epilogue::check_tile_inputs(ReadsAnUnlistedInput{}, DType::bf16, "f"));  // absent: not read
  epilogue::TileIn wrong = good;
  wrong.dtype = DType::f32;
  refused(ReadsAnUnlistedInput{.listed = wrong}, "operands' type bf16");
  wrong = good;
  wrong.data = reinterpret_cast<const uint8_t*>(storage) + 2;
  refused(ReadsAnUnlistedInput{.listed = wrong}, "4-byte aligned");
  wrong = good;
  wrong.ld = 7;
  refused(ReadsAnUnlistedInput{.listed = wrong}, "even row stride");
  wrong = good;
  wrong.batch_stride = 33;
  refused(ReadsAnUnlistedInput{.listed = wrong}, "even row stride and batch stride");
}

// A program's staged input (program.hpp) is fetched by TMA into the shared memory the program's
// stores then write through: launch_program also requires it given, 16-byte alignment, the map
// tile_in() makes, and no read after a store or a reduction through shared memory, each named.
struct StagesItsInput {
  epilogue::TileIn in{};
  epilogue::TileOut out{};
  static constexpr auto staged_input = &StagesItsInput::in;

  template <class Inputs>
  void tile_inputs(Inputs& list) const {
    list(in);
  }

  template <class Tile>
  void operator()(Tile& t) const {
    t.map([&](Element& x) { x.value = t.load(in, x); });
    t.store(out);
  }
};
static_assert(epilogue::StagesAnInput<StagesItsInput> && !epilogue::StagesAnInput<ReadsAnUnlistedInput>);
// And a staged row vector is a RowVector member named staged_row_vector; nothing else is one.
struct StagesItsRowVector {
  epilogue::RowVector weight{};
  static constexpr auto staged_row_vector = &StagesItsRowVector::weight;
};
struct NamesAColumnVector {
  epilogue::ColumnVector scale{};
  static constexpr auto staged_row_vector = &NamesAColumnVector::scale;
};
static_assert(epilogue::StagesARowVector<StagesItsRowVector> && !epilogue::StagesARowVector<NamesAColumnVector> &&
              !epilogue::StagesARowVector<StagesItsInput>);
// A null member pointer names none: LinearCombinationOf stages its column bias only with that term.
struct NamesNoRowVector {
  epilogue::RowVector weight{};
  static constexpr epilogue::RowVector NamesNoRowVector::*staged_row_vector = nullptr;
};
static_assert(!epilogue::StagesARowVector<NamesNoRowVector>);
static_assert(
    epilogue::StagesARowVector<epilogue::LinearCombinationOf<epilogue::LinearCombinationTerms{.column_bias = true}>> &&
    !epilogue::StagesARowVector<epilogue::LinearCombinationOf<epilogue::LinearCombinationTerms{.row_bias = true}>>);

TEST(TileInputsOnTheGpu, AStagedInputNeedsTmaAlignmentAndAMap) {
  alignas(16) static uint16_t storage[64];
  auto refused = [](const epilogue::TileIn& in, const char* rule) {
    try {
      epilogue::check_tile_inputs(StagesItsInput{.in = in}, DType::bf16, "coda::epilogue::launch_program");
      ADD_FAILURE() << "accepted; expected: " << rule;
    } catch (const coda::InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("staged input (staged_input)"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(rule), std::string::npos) << e.what();
    }
  };
  epilogue::TileIn good{.data = storage, .dtype = DType::bf16, .ld = 8, .batch_stride = 32};
  good.map.opaque[0] = 1;  // stands for the map tile_in() makes (encoding one needs a driver)
  EXPECT_NO_THROW(epilogue::check_tile_inputs(StagesItsInput{.in = good}, DType::bf16, "f"));
  refused({}, "must be given");
  epilogue::TileIn wrong = good;
  wrong.data = storage + 2;  // 4-byte aligned: enough for global loads, not for TMA
  refused(wrong, "16-byte aligned");
  wrong = good;
  wrong.ld = 6;
  refused(wrong, "multiples of 16 bytes");
  wrong = good;
  wrong.batch_stride = 20;
  refused(wrong, "multiples of 16 bytes");
  wrong = good;
  wrong.map = {};
  refused(wrong, "make it with coda::epilogue::tile_in()");
}

// Reads its staged input after a primitive that may write through shared memory (`writer`: 0
// none, 1 a store, 2 a column_reduce, 3 a reduce) or, writer 4, inside a store's function.
struct ReadsItsStagedInputAfter {
  epilogue::TileIn in{};
  epilogue::TileOut out{};
  epilogue::Partials sums{};
  int writer = 0;
  static constexpr auto staged_input = &ReadsItsStagedInputAfter::in;

  template <class Tile>
  void operator()(Tile& t) const {
    auto value = [](const Element& x) { return x.value; };
    t.row_reduce(sums, epilogue::Sum{}, value);  // 1: row reductions write no shared memory
    if (writer == 1) t.store(out);
    if (writer == 2) t.column_reduce(sums, epilogue::Sum{}, value);
    if (writer == 3) t.reduce(sums, epilogue::Sum{}, value);
    if (writer == 4) t.store(out, [&](const Element& x) { return t.load(in, x); });  // 2
    else t.map([&](Element& x) { x.value += t.load(in, x); });                       // 2 or 3
    t.store(out);
  }
};

TEST(TileInputsOnTheGpu, AStagedInputIsReadBeforeAnythingWritesThroughSharedMemory) {
  alignas(16) static uint16_t storage[64];
  epilogue::TileIn in{.data = storage, .dtype = DType::bf16, .ld = 8, .batch_stride = 32};
  in.map.opaque[0] = 1;
  EXPECT_NO_THROW(epilogue::check_tile_inputs(ReadsItsStagedInputAfter{.in = in}, DType::bf16, "f"));
  for (int writer : {1, 2, 3, 4}) {
    SCOPED_TRACE(::testing::Message() << "writer " << writer);
    try {
      epilogue::check_tile_inputs(ReadsItsStagedInputAfter{.in = in, .writer = writer}, DType::bf16,
                                  "coda::epilogue::launch_program");
      ADD_FAILURE() << "accepted a late read";
    } catch (const coda::InvalidArgument& e) {
      const std::string what = e.what(), primitive = writer == 4 ? "2" : "3";
      EXPECT_NE(what.find("staged input (staged_input)"), std::string::npos) << what;
      EXPECT_NE(what.find("is read by primitive " + primitive + " (program order), after a store"), std::string::npos)
          << what;
    }
  }
}

}  // namespace
}  // namespace coda::test

#include "coda/epilogue/host_arguments.hpp"

#include "coda/core/validate.hpp"
#include "coda/epilogue/parts.hpp"
#include "coda/sm90/tensor_map.hpp"

namespace coda::epilogue {
namespace {

constexpr const char* kFunction = "coda epilogue argument";

void check_tile(const TensorView& v, const char* argument, std::initializer_list<DType> types) {
  ArgumentCheck check(kFunction);
  check.not_null(argument, v.data).rank_in(argument, v, 2, 3).dtype_in(argument, v.dtype, types).inner_contiguous(argument, v);
  check.throw_if_error();
}

void check_vector(const TensorView& v, const char* argument, int max_rank, std::initializer_list<DType> types) {
  ArgumentCheck check(kFunction);
  check.not_null(argument, v.data).rank_in(argument, v, 1, max_rank).dtype_in(argument, v.dtype, types).inner_contiguous(argument, v);
  check.throw_if_error();
}

// Slots of `words` fp32 words each, side by side along a row of the view.
void check_partials(const TensorView& v, const char* argument, int words) {
  check_tile(v, argument, {DType::f32});
  ArgumentCheck check(kFunction);
  check.require(words >= 1, argument, "has ", words, " words per slot: at least 1")
      .require(words < 1 || v.cols() % words == 0, argument, "has ", v.cols(),
               " columns: not a whole number of slots of ", words, " words");
  check.throw_if_error();
}

}  // namespace

void check_operand_majors(Major a, Major b, Major built_a, Major built_b, const char* function) {
  constexpr const char* kHow =
      " (a launch names other majors with coda::epilogue::OperandMajors<A, B>; K-major by default)";
  const auto article = [](Major built) { return built == Major::k ? " K" : "n MN"; };
  ArgumentCheck check(function);
  check.require_supported(a == built_a, "a", "this launch's kernels take a", article(built_a), "-major A", kHow)
      .require_supported(b == built_b, "b", "this launch's kernels take a", article(built_b), "-major B", kHow);
  check.throw_if_error();
}

TileIn tile_in(const TensorView& v, const char* argument) {
  check_tile(v, argument, {DType::bf16, DType::f16, DType::f32});
  TileIn in{v.data, v.dtype, v.ld(), v.batch() > 1 ? v.batch_stride() : 0};
  // A program's staged input is fetched a whole part at a time, 128 bytes wide (the 128B swizzle);
  // the map is made wherever TMA can address the view, and launch_program requires it only there.
  const int64_t element = int64_t(size_of(v.dtype));
  if (element == 2 && reinterpret_cast<uintptr_t>(v.data) % 16 == 0 && (in.ld * element) % 16 == 0 &&
      (in.batch_stride * element) % 16 == 0)
    in.map = sm90::make_tensor_map_3d(v.data, v.dtype, {v.cols(), v.rows(), v.batch()}, {v.ld(), v.batch_stride()},
                                      {uint32_t(128 / element), uint32_t(kPartRows)}, argument);
  return in;
}

TileOut tile_out(const TensorView& v, const char* argument, float scale) {
  check_tile(v, argument, {DType::bf16, DType::f16, DType::f32, DType::e4m3, DType::e5m2});
  ArgumentCheck check(kFunction);
  check.tma_aligned(argument, v).require(scale > 0.0f, argument, "fp8 scale must be positive");
  check.throw_if_error();
  TileOut out;
  out.data = v.data;
  out.dtype = v.dtype;
  out.ld = v.ld();
  out.batch_stride = v.batch() > 1 ? v.batch_stride() : 0;
  out.scale = scale;
  // The executor stores 64-row subtiles 128 bytes wide; an fp8 store_pairs, 64 bytes wide, unswizzled.
  out.map = sm90::make_tensor_map_3d(v.data, v.dtype, {v.cols(), v.rows(), v.batch()}, {v.ld(), v.batch_stride()},
                                     {uint32_t(128 / size_of(v.dtype)), 64}, argument);
  if (size_of(v.dtype) == 1)
    out.half_width_map = sm90::make_tensor_map_3d(v.data, v.dtype, {v.cols(), v.rows(), v.batch()},
                                                  {v.ld(), v.batch_stride()}, {64, 64}, argument,
                                                  sm90::TensorMapSwizzle::none);
  return out;
}

RowVector row_vector(const TensorView& v, const char* argument) {
  check_vector(v, argument, 1, {DType::f32, DType::bf16, DType::f16});
  return {v.data, v.dtype};
}

ColumnVector column_vector(const TensorView& v, const char* argument) {
  check_vector(v, argument, 2, {DType::f32, DType::bf16, DType::f16, DType::i32});
  return {v.data, v.dtype, v.rank == 2 ? v.stride[0] : 0};
}

Partials row_partials(const TensorView& v, const char* argument, int words) {
  check_partials(v, argument, words);
  return {static_cast<float*>(v.data), v.ld(), words, v.batch() > 1 ? v.batch_stride() : 0};
}

Partials column_partials(const TensorView& v, const char* argument, int words) {
  check_partials(v, argument, words);
  return {static_cast<float*>(v.data), v.ld(), words, v.batch() > 1 ? v.batch_stride() : 0};
}

Partials per_row(const TensorView& v, const char* argument) {
  check_vector(v, argument, 2, {DType::f32});
  return {static_cast<float*>(v.data), 1, 0, v.rank == 2 ? v.stride[0] : 0};
}

Table table(const TensorView& v, const char* argument) {
  check_tile(v, argument, {DType::f32});
  ArgumentCheck check(kFunction);
  check.require(v.rank == 2, argument, "must be a 2-D table (rows x columns)")
      .require(v.rows() * v.ld() < (int64_t(1) << 31), argument, "spans ", v.rows(), " rows x ", v.ld(),
               " elements: tables are indexed with 32 bits (< 2^31 elements)");
  check.throw_if_error();
  return {static_cast<const float*>(v.data), int32_t(v.ld()), int32_t(v.rows())};
}

}  // namespace coda::epilogue

#include "coda/reference/epilogue_executor.hpp"

#include <algorithm>
#include <string>

#include "coda/core/status.hpp"
#include "coda/core/validate.hpp"

namespace coda::reference {
namespace {

constexpr const char* kProgram = "epilogue program";

}  // namespace

void store_output(const epilogue::TileOut& out, int32_t batch, int64_t row, int64_t col, float value) {
  const int64_t index = batch * out.batch_stride + row * out.ld + col;
  auto* dst = static_cast<unsigned char*>(out.data) + index * int64_t(size_of(out.dtype));
  // fp8: scale in fp32 (as the GPU does), then one saturating rounding.
  store_element(out.dtype, dst, is_fp8(out.dtype) ? double(value * out.scale) : double(value));
}

CpuTile::CpuTile(const Matrix& accumulators, int32_t batch, int64_t tile_m, int64_t tile_n, PartShape part)
    : batch_(batch), tile_m_(tile_m), tile_n_(tile_n), row0_(tile_m * part.rows), col0_(tile_n * part.cols) {
  rows_ = std::min(part.rows, accumulators.rows - row0_);
  cols_ = std::min(part.cols, accumulators.cols - col0_);
  values_.resize(std::size_t(rows_ * cols_));
  for (int64_t r = 0; r < rows_; ++r)
    for (int64_t c = 0; c < cols_; ++c) values_[std::size_t(r * cols_ + c)] = float(accumulators(row0_ + r, col0_ + c));
}

void CpuTile::check_listed(const epilogue::TileIn& in) const {
  for (const void* listed : listed_inputs_)
    if (listed == in.data) return;
  throw InvalidArgument(kProgram,
                        "t.load reads a TileIn that the program's tile_inputs() does not list (program.hpp); "
                        "launch_program validates only listed inputs, which the GPU executor reads as the operands' "
                        "type");
}

void CpuTile::check_index_vector(const epilogue::ColumnVector& v, const char* reader) {
  if (v.dtype != DType::i32)
    throw InvalidArgument(kProgram, text(reader, " reads an int32 ColumnVector, this one holds ", name(v.dtype),
                                         " (the GPU executor reads its words as int32)"));
}

void CpuTile::check_fixed_type(const epilogue::TileOut& out, DType declared) {
  if (out.dtype != declared)
    throw InvalidArgument(kProgram, text("a TileOutOf<", name(declared), "> is written in ", name(declared),
                                         ", but its tensor is ", name(out.dtype)));
}

}  // namespace coda::reference

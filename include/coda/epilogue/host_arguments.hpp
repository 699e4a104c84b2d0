// coda/epilogue/host_arguments.hpp: a program's argument descriptors from tensor views, on the
// host. Tile outputs get the TMA map the GPU executor stores through; every builder checks the
// view and names `argument` in its errors.
//
//   coda::epilogue::Swiglu program;
//   program.out = coda::epilogue::tile_out(out_view, "out");        // M x N/2, bf16
//   program.row_scale = coda::epilogue::column_vector(rstd_view, "rstd");
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "coda/core/api.hpp"
#include "coda/core/layout.hpp"
#include "coda/core/tensor.hpp"
#include "coda/core/validate.hpp"
#include "coda/epilogue/arguments.hpp"
#include "coda/epilogue/output_types.hpp"
#include "coda/epilogue/program.hpp"

namespace coda::epilogue {

/// An M x N (x batch) input, any 16/32-bit float type; rows contiguous.
CODA_API TileIn tile_in(const TensorView& view, const char* argument);
/// An output of bf16, f16, f32, e4m3 or e5m2 (fp8: multiplied by `scale` first). Its rows and
/// base must be 16-byte aligned (TMA).
CODA_API TileOut tile_out(const TensorView& view, const char* argument, float scale = 1.0f);
/// A length-N vector (f32, bf16 or f16).
CODA_API RowVector row_vector(const TensorView& view, const char* argument);
/// A length-M vector, or batch x M (f32, bf16, f16 or i32).
CODA_API ColumnVector column_vector(const TensorView& view, const char* argument);
/// fp32 partials, rows x parts (x batch), row-major: value(row, part) at [row * ld + part]. A
/// monoid of several words per result (TopK: kWords) takes `words` per slot: rows x (parts * words),
/// value(row, part) at [row * ld + part * words] onwards.
CODA_API Partials row_partials(const TensorView& view, const char* argument, int words = 1);
/// fp32 partials, parts x columns (x batch): value(part, col) at [part * ld + col] (with `words`
/// per slot: parts x (columns * words), at [part * ld + col * words] onwards).
CODA_API Partials column_partials(const TensorView& view, const char* argument, int words = 1);
/// One fp32 value per row (a row reduction only one part writes): [row].
CODA_API Partials per_row(const TensorView& view, const char* argument);
/// An fp32 table, rows x columns.
CODA_API Table table(const TensorView& view, const char* argument);

/// A program launch's kernels are built for one pair of operand majors (`built_a`, `built_b`:
/// coda::epilogue::OperandMajors, launch.cuh): operands of other majors are refused, naming the operand.
CODA_API void check_operand_majors(Major a, Major b, Major built_a, Major built_b, const char* function);

/// The GPU executor reads tile inputs as the operands' 16-bit type, a pair of adjacent columns
/// per aligned 32-bit word (gpu_executor.cuh): check every input the program lists, and the
/// rules of a staged input (program.hpp).
template <class Program>
void check_tile_inputs(const Program& program, DType operands, const char* function) {
  ArgumentCheck check(function);
  int index = 0;
  auto visit = [&](const epilogue::TileIn& in) {
    const int number = index++;
    const auto argument = phrase("tile input ", number, " (tile_inputs())");  // formatted on failure only
    if (in.data == nullptr) return;
    check
        .require(in.dtype == operands, argument, "must have the operands' type ", name(operands), " on the GPU, not ",
                 name(in.dtype))
        .require(reinterpret_cast<uintptr_t>(in.data) % 4 == 0, argument, "must be 4-byte aligned")
        .require(in.ld % 2 == 0 && in.batch_stride % 2 == 0, argument,
                 "must have an even row stride and batch stride (pairs of columns are read as 32-bit words)");
  };
  if constexpr (requires { program.tile_inputs(visit); }) program.tile_inputs(visit);
  if constexpr (StagesAnInput<Program>) {
    // Fetched by TMA into the shared memory the program's stores and reductions then write
    // through (program.hpp, gpu_executor.cuh): tile_in() made its map if TMA can address it.
    const char* argument = "staged input (staged_input)";
    const TileIn& staged = program.*Program::staged_input;
    const CUtensorMap no_map{};
    StoreRecorder recorder(&staged);
    program(recorder);
    check
        .require(staged.data != nullptr, argument, "must be given: the program's GPU kernel stages it in shared memory")
        .require(recorder.late_staged_read() == 0, argument, "is read by primitive ", recorder.late_staged_read(),
                 " (program order), after a store, column_reduce or reduce: those write through "
                 "the shared memory it is staged in, so read it before them");
    if (staged.data != nullptr)
      check.require(reinterpret_cast<uintptr_t>(staged.data) % 16 == 0 && (staged.ld * 2) % 16 == 0 &&
                        (staged.batch_stride * 2) % 16 == 0,
                    argument,
                    "is fetched by TMA: its base must be 16-byte aligned and its row and batch strides multiples of "
                    "16 bytes")
          .require(std::memcmp(&staged.map, &no_map, sizeof(CUtensorMap)) != 0, argument,
                   "has no TMA map: make it with coda::epilogue::tile_in()");
  }
  check.throw_if_error();
}

}  // namespace coda::epilogue

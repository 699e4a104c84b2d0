// Internal to `coda bench primitives`: a row from a program (primitives_rows.hpp).
#pragma once

#include "coda/epilogue/host_arguments.hpp"
#include "coda/epilogue/launch.cuh"
#include "primitives_rows.hpp"

namespace coda::bench::primitives {

/// `program` launched on the buffers' plan (the ping-pong tile, bf16 operands: only that kernel is
/// built), writing its tile outputs in one of `Also` if not bf16.
template <class Program, DType... Also>
Row row_of(const char* name, const Buffers& b, const Program& program, epilogue::OutputTypes<Also...> types = {}) {
  return {name, [plan = b.plan, program, types](cudaStream_t stream) {
            epilogue::launch_program_on<GemmTile::pingpong_m128n128, DType::bf16>(plan, program, stream, types);
          }};
}

}  // namespace coda::bench::primitives

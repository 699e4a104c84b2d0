// `coda bench timeline`: the projections' cases, RoPE on QKV, SwiGLU and the LM head's
// cross-entropy (timeline.hpp).
#include "coda/epilogue/programs/cross_entropy.hpp"
#include "coda/epilogue/programs/rope.hpp"
#include "coda/epilogue/programs/swiglu.hpp"
#include "timeline.cuh"

namespace coda::bench::timeline {

void projection_cases(Arena& arena, cudaStream_t stream) {
  const DType bf = DType::bf16;
  auto allocate = [&](DType t, int64_t rows, int64_t cols, bool fill) {
    return arena.matrix(t, rows, cols, stream, fill);
  };
  {
    const int64_t m = 16384, n = 6144, k = 2048, head_dim = 128, max_position = 4096;
    const TensorView out = allocate(bf, m, n, false);
    const TensorView cos = allocate(DType::f32, max_position, head_dim / 2, true);
    const TensorView sin = allocate(DType::f32, max_position, head_dim / 2, true);
    const TensorView positions = arena.int32_vector(m, [&](int64_t i) { return int32_t(i % max_position); });
    const char* shape = "M=16384 N=6144 K=2048";
    const ProgramPlan plan = start_case(arena, stream, m, n, k, out, shape);
    Rope rope;
    rope.positions = column_vector(positions, "positions");
    rope.cos = table(cos, "cos");
    rope.sin = table(sin, "sin");
    rope.head_dim = Divisor(int32_t(head_dim));
    rope.rotated_heads = int32_t(2 * n / 3 / head_dim);  // Q and K rotate, V passes through
    rope.out = tile_out(out, "out");
    print("RoPE (QKV)", shape, time_program(plan, rope, stream));
  }
  {
    const int64_t m = 16384, n = 16384, k = 2048;
    const TensorView out = allocate(bf, m, n, false), half = allocate(bf, m, n / 2, false);
    const char* shape = "M=16384 N=16384 K=2048";
    const ProgramPlan plan = start_case(arena, stream, m, n, k, out, shape);
    Swiglu swiglu;
    swiglu.out = tile_out(half, "out");
    print("SwiGLU", shape, time_program(plan, swiglu, stream));
  }
  {
    const int64_t m = 8192, n = 128256, k = 2048;
    const TensorView logits = allocate(bf, m, n, false), lse = allocate(DType::f32, m, parts_along(n), false);
    const TensorView picked = TensorView::vector(allocate(DType::f32, 1, m, false).data, DType::f32, m);
    const TensorView targets = arena.int32_vector(m, [&](int64_t i) { return int32_t((i * 7919) % n); });
    const char* shape = "M=8192 N=128256 K=2048";
    const ProgramPlan plan = start_case(arena, stream, m, n, k, logits, shape);
    CrossEntropyPartials ce;
    ce.targets = column_vector(targets, "targets");
    ce.lse = row_partials(lse, "lse");
    ce.target_logit = per_row(picked, "target_logit");
    print("cross-entropy", shape, time_program(plan, ce, stream));
    ce.softcap = 30.0f;
    print("cross-entropy softcap", shape, time_program(plan, ce, stream));
  }
}

}  // namespace coda::bench::timeline

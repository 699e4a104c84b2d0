#include "coda/ops/cross_entropy.hpp"

#include <cmath>

#include "coda/epilogue/host_arguments.hpp"
#include "coda/epilogue/launch.cuh"
#include "coda/epilogue/programs/cross_entropy.hpp"
#include "op_checks.hpp"

namespace coda::ops {
namespace {

constexpr const char* kFunction = "coda::ops::gemm_cross_entropy";

// The workspace, in floats: lse parts, row-sum parts (label smoothing only), target logits, and
// the per-row losses the sum/mean kernel adds up.
struct Layout {
  int64_t parts, lse, row_sums, target, row_loss, floats;
  Layout(int64_t m, int64_t vocab, bool smoothing) : parts(parts_along(vocab)) {
    lse = 0;
    row_sums = lse + m * parts;
    target = row_sums + (smoothing ? m * parts : 0);
    row_loss = target + m;
    floats = row_loss + m;
  }
};

struct FinishOptions {
  int32_t ignore_index;
  float label_smoothing;
  float z_loss;
  int64_t vocab;
};

// One warp per row: lane l combines parts l, l + 32, ... in order, then the lanes' states meet in
// a fixed butterfly, so the result is the same bits run after run. (One thread per row walked a
// row's parts alone, its neighbours' reads 4 KB apart: ~1000 parts per row at V = 128256.)
__global__ void finish_rows(const float* lse_parts, const float* row_sum_parts, const float* target_logit,
                            const int32_t* targets, int64_t rows, int64_t parts, FinishOptions o, float* lse,
                            float* row_loss) {
  const int64_t m = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32;
  const int lane = int(threadIdx.x % 32u);
  if (m >= rows) return;  // the whole warp
  epilogue::LogSumExp::State s = epilogue::LogSumExp::identity();
  float row_sum = 0.0f;
  for (int64_t b = lane; b < parts; b += 32) {
    s = epilogue::LogSumExp::combine(s, {lse_parts[m * parts + b], 1.0f});
    if (row_sum_parts) row_sum += row_sum_parts[m * parts + b];
  }
  for (int mask = 16; mask >= 1; mask /= 2) {
    const epilogue::LogSumExp::State other{__shfl_xor_sync(0xffffffffu, s.max, mask),
                                           __shfl_xor_sync(0xffffffffu, s.sum, mask)};
    s = epilogue::LogSumExp::combine(s, other);
    row_sum += __shfl_xor_sync(0xffffffffu, row_sum, mask);
  }
  if (lane != 0) return;
  const float l = epilogue::LogSumExp::finish(s);
  lse[m] = l;
  const int32_t t = targets[m];
  float loss = 0.0f;
  if (t != o.ignore_index) {
    loss = (t < 0 || t >= o.vocab) ? NAN
                                   : l - (1.0f - o.label_smoothing) * target_logit[m] -
                                         (o.label_smoothing / float(o.vocab)) * row_sum + o.z_loss * l * l;
  }
  row_loss[m] = loss;
}

// One block: the sum (or mean over non-ignored rows) of the row losses, in a fixed order.
__global__ void reduce_rows(const float* row_loss, const int32_t* targets, int64_t rows, int32_t ignore_index,
                            bool mean, float* out) {
  __shared__ float sums[1024];
  __shared__ float counts[1024];
  float sum = 0.0f, count = 0.0f;
  for (int64_t m = threadIdx.x; m < rows; m += blockDim.x) {
    sum += row_loss[m];
    count += targets[m] != ignore_index ? 1.0f : 0.0f;
  }
  sums[threadIdx.x] = sum;
  counts[threadIdx.x] = count;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (int(threadIdx.x) < stride) {
      sums[threadIdx.x] += sums[threadIdx.x + stride];
      counts[threadIdx.x] += counts[threadIdx.x + stride];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) *out = mean ? sums[0] / counts[0] : sums[0];
}

}  // namespace

std::size_t cross_entropy_workspace_bytes(int64_t m, int64_t vocab, const CrossEntropyOptions& options) {
  ArgumentCheck check("coda::ops::cross_entropy_workspace_bytes");
  check.positive("m", m, "M")
      .positive("vocab", vocab, "the vocabulary")
      .require(options.label_smoothing >= 0.0f && options.label_smoothing < 1.0f, "options.label_smoothing", "is ",
               options.label_smoothing, " but must be in [0, 1)");
  check.throw_if_error();
  return std::size_t(Layout(m, vocab, options.label_smoothing > 0.0f).floats) * sizeof(float);
}

void gemm_cross_entropy(const TensorView& x, const TensorView& w, const TensorView& targets, const TensorView& loss,
                        const TensorView& lse, void* workspace, std::size_t workspace_bytes, cudaStream_t stream,
                        const CrossEntropyOptions& options) {
  reported_by(kFunction, [&] {
    ArgumentCheck check(kFunction);
    const GemmShape g = check_projection(check, x, w);
    check_vector(check, "targets", targets, g.m, {DType::i32});
    check_vector(check, "loss", loss, options.reduction == LossReduction::none ? g.m : 1, {DType::f32});
    check_vector(check, "lse", lse, g.m, {DType::f32});
    check_cross_entropy_options(check, options, g.m);
    if (options.logits.data) check_output(check, "options.logits", options.logits, g.m, g.n, x.dtype);
    const Layout layout(g.m, g.n, options.label_smoothing > 0.0f);
    check_workspace(check, workspace, workspace_bytes, std::size_t(layout.floats) * sizeof(float),
                    "coda::ops::cross_entropy_workspace_bytes");
    check.throw_if_error();
    const epilogue::ProgramPlan plan =
        epilogue::plan_program<epilogue::CrossEntropyPartials>({x, Major::k}, {w, Major::k}, options.gemm, kFunction);

    float* ws = static_cast<float*>(workspace);
    epilogue::CrossEntropyPartials program;
    program.targets = epilogue::column_vector(targets, "targets");
    program.lse =
        epilogue::row_partials(TensorView::matrix(ws + layout.lse, DType::f32, g.m, layout.parts), "workspace");
    program.target_logit = epilogue::per_row(TensorView::vector(ws + layout.target, DType::f32, g.m), "workspace");
    if (options.label_smoothing > 0.0f)
      program.row_sums =
          epilogue::row_partials(TensorView::matrix(ws + layout.row_sums, DType::f32, g.m, layout.parts), "workspace");
    if (options.logits.data) program.logits = epilogue::tile_out(options.logits, "options.logits");
    if (options.row_scale.data) program.row_scale = epilogue::column_vector(options.row_scale, "options.row_scale");
    program.softcap = options.softcap;
    epilogue::launch_program(plan, program, stream);

    const FinishOptions finish{options.ignore_index, options.label_smoothing, options.z_loss, g.n};
    const bool per_row = options.reduction == LossReduction::none;
    float* row_loss = per_row ? static_cast<float*>(loss.data) : ws + layout.row_loss;
    const int threads = 256, rows_per_block = threads / 32;
    finish_rows<<<unsigned((g.m + rows_per_block - 1) / rows_per_block), threads, 0, stream>>>(
        ws + layout.lse, options.label_smoothing > 0.0f ? ws + layout.row_sums : nullptr, ws + layout.target,
        static_cast<const int32_t*>(targets.data), g.m, layout.parts, finish, static_cast<float*>(lse.data), row_loss);
    if (!per_row)
      reduce_rows<<<1, 1024, 0, stream>>>(row_loss, static_cast<const int32_t*>(targets.data), g.m,
                                          options.ignore_index, options.reduction == LossReduction::mean,
                                          static_cast<float*>(loss.data));
    CODA_CUDA_CHECK(cudaGetLastError());
  });
}

Status try_gemm_cross_entropy(const TensorView& x, const TensorView& w, const TensorView& targets,
                              const TensorView& loss, const TensorView& lse, void* workspace,
                              std::size_t workspace_bytes, cudaStream_t stream, const CrossEntropyOptions& options) {
  return status_of(kFunction,
                   [&] { gemm_cross_entropy(x, w, targets, loss, lse, workspace, workspace_bytes, stream, options); });
}

}  // namespace coda::ops

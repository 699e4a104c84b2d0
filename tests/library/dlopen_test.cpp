// libcoda loaded with dlopen into a process that already runs C++ of its own (this one: strings,
// streams, exceptions before and after), then every function of the C ABI called with valid and
// invalid arguments. A libcoda that carried or exported its own copy of the C++ runtime crashed
// here when it formatted a message. Valid calls run for real on a Hopper GPU (their results
// checked for the GEMM) and report CODA_UNSUPPORTED, by the function's name, anywhere else.
//
//   dlopen_test <path to libcoda.so>      (exit code 0: every check passed)
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "coda/coda.h"

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  if (!ok) {
    ++failures;
    std::fprintf(stderr, "FAILED: %s\n", what.c_str());
  }
}

// The process's own C++: a stream, a string and an exception, as a host application would have.
std::string own_cxx_work(int round) {
  std::ostringstream s;
  s << "round " << round << ": " << 1234567890123LL << ' ' << 3.25;
  try {
    throw std::runtime_error(s.str());
  } catch (const std::exception& e) {
    return e.what();
  }
}

template <class F>
F symbol(void* library, const char* name) {
  void* p = dlsym(library, name);
  check(p != nullptr, std::string("dlsym ") + name);
  return reinterpret_cast<F>(p);
}

struct Abi {
  decltype(&coda_version) version;
  decltype(&coda_last_error) last_error;
  decltype(&coda_status_name) status_name;
  decltype(&coda_device_count) device_count;
  decltype(&coda_gemm) gemm;
  decltype(&coda_gemm_workspace_bytes) gemm_workspace_bytes;
  decltype(&coda_gemm_plan) gemm_plan;
  decltype(&coda_gemm_swiglu) gemm_swiglu;
  decltype(&coda_gemm_rope) gemm_rope;
  decltype(&coda_residual_rmsnorm_workspace_bytes) residual_rmsnorm_workspace_bytes;
  decltype(&coda_gemm_residual_rmsnorm) gemm_residual_rmsnorm;
  decltype(&coda_gemm_row_scale) gemm_row_scale;
  decltype(&coda_cross_entropy_workspace_bytes) cross_entropy_workspace_bytes;
  decltype(&coda_gemm_cross_entropy) gemm_cross_entropy;
  decltype(&coda_row_partial_count) row_partial_count;
  decltype(&coda_row_scale_backward) row_scale_backward;
  decltype(&coda_gemm_swiglu_backward) gemm_swiglu_backward;
  decltype(&coda_residual_rmsnorm_backward_workspace_bytes) residual_rmsnorm_backward_workspace_bytes;
  decltype(&coda_gemm_residual_rmsnorm_backward) gemm_residual_rmsnorm_backward;
  decltype(&coda_rmsnorm_weight_gradients_workspace_bytes) rmsnorm_weight_gradients_workspace_bytes;
  decltype(&coda_gemm_rmsnorm_weight_gradients) gemm_rmsnorm_weight_gradients;
  decltype(&coda_rope_backward) rope_backward;
  decltype(&coda_layer_workspace_bytes) layer_workspace_bytes;
  decltype(&coda_layer_forward) layer_forward;
  decltype(&coda_layer_backward) layer_backward;
};

#define CODA_SYMBOL(name) abi.name = symbol<decltype(abi.name)>(library, "coda_" #name)

// Device memory (or, without a GPU, host memory no call ever reads: validation and the device
// check come first).
struct Memory {
  explicit Memory(bool gpu) : gpu(gpu) {}
  ~Memory() {
    for (void* p : blocks) gpu ? (void)cudaFree(p) : std::free(p);
  }
  void* get(std::size_t bytes) {
    void* p = nullptr;
    if (gpu) check(cudaMalloc(&p, bytes) == cudaSuccess, "cudaMalloc");
    else p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
    blocks.push_back(p);
    return p;
  }
  coda_tensor tensor(coda_dtype dtype, int64_t rows, int64_t cols) {
    const std::size_t element = dtype == CODA_F32 || dtype == CODA_I32 ? 4 : 2;
    return {get(std::size_t(rows * cols) * element), dtype, 2, {rows, cols, 0}, {cols, 1, 0}};
  }
  coda_tensor vector(coda_dtype dtype, int64_t n) {
    coda_tensor t = tensor(dtype, 1, n);
    t.rank = 1;
    t.shape[0] = n;
    t.stride[0] = 1;
    return t;
  }
  bool gpu;
  std::vector<void*> blocks;
};

// One call's outcome: OK on a GPU, CODA_UNSUPPORTED elsewhere; failures name the function first.
void expect_runs(const Abi& abi, bool gpu, coda_status s, const char* function) {
  const std::string message = abi.last_error();
  if (gpu) {
    check(s == CODA_OK, std::string(function) + " with valid arguments: " + message);
  } else {
    check(s == CODA_UNSUPPORTED, std::string(function) + " without a GPU: status " + abi.status_name(s));
    check(message.rfind(std::string(function) + ": ", 0) == 0, std::string(function) + "'s message: " + message);
  }
}

void expect_refused(const Abi& abi, coda_status s, const char* function, const char* argument) {
  const std::string message = abi.last_error();
  check(s == CODA_INVALID_ARGUMENT,
        std::string(function) + " with a bad '" + argument + "': status " + abi.status_name(s));
  const std::string prefix = std::string(function) + ": argument '" + argument + "'";
  check(message.rfind(prefix, 0) == 0, std::string(function) + ": message '" + message + "' should start '" + prefix);
}

// C = A B^T for small bf16 operands on the GPU, against the host's product of the same values.
void check_gemm_result(const Abi& abi) {
  const int64_t m = 64, n = 48, k = 32;
  std::vector<uint16_t> a(std::size_t(m * k)), b(std::size_t(n * k));
  std::vector<float> af(a.size()), bf(b.size());
  auto bf16 = [](float x) {  // exact: the values are small multiples of 1/8
    uint32_t bits;
    std::memcpy(&bits, &x, 4);
    return uint16_t(bits >> 16);
  };
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = bf16(af[i] = float(int(i * 7 % 17) - 8) / 8.0f);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = bf16(bf[i] = float(int(i * 5 % 13) - 6) / 8.0f);
  Memory memory(true);
  coda_tensor ta = memory.tensor(CODA_BF16, m, k), tb = memory.tensor(CODA_BF16, n, k),
              tc = memory.tensor(CODA_F32, m, n);
  cudaMemcpy(ta.data, a.data(), a.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(tb.data, b.data(), b.size() * 2, cudaMemcpyHostToDevice);
  check(abi.gemm(&ta, CODA_K_MAJOR, &tb, CODA_K_MAJOR, &tc, nullptr, 0, nullptr) == CODA_OK, abi.last_error());
  std::vector<float> c(std::size_t(m * n));
  check(cudaMemcpy(c.data(), tc.data, c.size() * 4, cudaMemcpyDeviceToHost) == cudaSuccess, "cudaMemcpy");
  double worst = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double want = 0;
      for (int64_t p = 0; p < k; ++p) want += double(af[std::size_t(i * k + p)]) * bf[std::size_t(j * k + p)];
      worst = std::max(worst, std::fabs(want - c[std::size_t(i * n + j)]));
    }
  check(worst == 0.0, "coda_gemm's product differs from the host's by " + std::to_string(worst));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <path to libcoda.so>\n", argv[0]);
    return 2;
  }
  std::printf("%s\n", own_cxx_work(0).c_str());
  void* library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    std::fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
    return 1;
  }
  Abi abi{};
  CODA_SYMBOL(version);
  CODA_SYMBOL(last_error);
  CODA_SYMBOL(status_name);
  CODA_SYMBOL(device_count);
  CODA_SYMBOL(gemm);
  CODA_SYMBOL(gemm_workspace_bytes);
  CODA_SYMBOL(gemm_plan);
  CODA_SYMBOL(gemm_swiglu);
  CODA_SYMBOL(gemm_rope);
  CODA_SYMBOL(residual_rmsnorm_workspace_bytes);
  CODA_SYMBOL(gemm_residual_rmsnorm);
  CODA_SYMBOL(gemm_row_scale);
  CODA_SYMBOL(cross_entropy_workspace_bytes);
  CODA_SYMBOL(gemm_cross_entropy);
  CODA_SYMBOL(row_partial_count);
  CODA_SYMBOL(row_scale_backward);
  CODA_SYMBOL(gemm_swiglu_backward);
  CODA_SYMBOL(residual_rmsnorm_backward_workspace_bytes);
  CODA_SYMBOL(gemm_residual_rmsnorm_backward);
  CODA_SYMBOL(rmsnorm_weight_gradients_workspace_bytes);
  CODA_SYMBOL(gemm_rmsnorm_weight_gradients);
  CODA_SYMBOL(rope_backward);
  CODA_SYMBOL(layer_workspace_bytes);
  CODA_SYMBOL(layer_forward);
  CODA_SYMBOL(layer_backward);
  if (failures > 0) return 1;

  check(std::strlen(abi.version()) > 0, "coda_version");
  check(std::string(abi.status_name(CODA_UNSUPPORTED)) == "unsupported", "coda_status_name");
  int device = 0;
  cudaDeviceProp properties{};
  const bool gpu = abi.device_count() > 0 && cudaGetDevice(&device) == cudaSuccess &&
                   cudaGetDeviceProperties(&properties, device) == cudaSuccess && properties.major == 9;
  cudaGetLastError();
  std::printf("coda %s loaded; %s\n", abi.version(), gpu ? "a Hopper GPU: valid calls run" : "no Hopper GPU");
  Memory memory(gpu);
  const int64_t m = 64, k = 64, f = 32, heads = 2, head_dim = 32;

  // The GEMM and its queries.
  coda_tensor a = memory.tensor(CODA_BF16, m, k), b = memory.tensor(CODA_BF16, 48, k),
              c = memory.tensor(CODA_BF16, m, 48);
  expect_refused(abi, abi.gemm(nullptr, CODA_K_MAJOR, &b, CODA_K_MAJOR, &c, nullptr, 0, nullptr), "coda_gemm", "a");
  expect_runs(abi, gpu, abi.gemm(&a, CODA_K_MAJOR, &b, CODA_K_MAJOR, &c, nullptr, 0, nullptr), "coda_gemm");
  std::size_t bytes = 1;
  expect_refused(abi, abi.gemm_workspace_bytes(&a, CODA_K_MAJOR, &b, CODA_K_MAJOR, &c, nullptr),
                 "coda_gemm_workspace_bytes", "bytes");
  expect_runs(abi, gpu, abi.gemm_workspace_bytes(&a, CODA_K_MAJOR, &b, CODA_K_MAJOR, &c, &bytes),
              "coda_gemm_workspace_bytes");
  coda_gemm_plan_info plan{};
  expect_refused(abi, abi.gemm_plan(&a, CODA_K_MAJOR, &b, static_cast<coda_major>(7), &c, 0, &plan), "coda_gemm_plan",
                 "b_major");
  expect_runs(abi, gpu, abi.gemm_plan(&a, CODA_K_MAJOR, &b, CODA_K_MAJOR, &c, 0, &plan), "coda_gemm_plan");
  if (gpu) check(plan.tile != nullptr && plan.ctas > 0 && plan.split_k == 1, "coda_gemm_plan's plan");
  std::printf("%s\n", own_cxx_work(1).c_str());

  // The fused ops.
  coda_tensor w_gu = memory.tensor(CODA_BF16, 2 * f, k), out_f = memory.tensor(CODA_BF16, m, f);
  expect_refused(abi, abi.gemm_swiglu(&a, &w_gu, nullptr, nullptr, nullptr, nullptr), "coda_gemm_swiglu", "out");
  expect_runs(abi, gpu, abi.gemm_swiglu(&a, &w_gu, &out_f, nullptr, nullptr, nullptr), "coda_gemm_swiglu");

  coda_tensor w_qkv = memory.tensor(CODA_BF16, heads * head_dim, k),
              out_qkv = memory.tensor(CODA_BF16, m, heads * head_dim);
  coda_tensor positions = memory.vector(CODA_I32, m), cos = memory.tensor(CODA_F32, 128, head_dim / 2),
              sin = memory.tensor(CODA_F32, 128, head_dim / 2);
  if (gpu) cudaMemset(positions.data, 0, std::size_t(m) * 4);
  expect_refused(abi, abi.gemm_rope(&a, &w_qkv, nullptr, &cos, &sin, head_dim, heads, &out_qkv, nullptr, nullptr),
                 "coda_gemm_rope", "positions");
  expect_runs(abi, gpu, abi.gemm_rope(&a, &w_qkv, &positions, &cos, &sin, head_dim, heads, &out_qkv, nullptr, nullptr),
              "coda_gemm_rope");

  coda_tensor w_h = memory.tensor(CODA_BF16, k, k), residual = memory.tensor(CODA_BF16, m, k),
              h = memory.tensor(CODA_BF16, m, k), u = memory.tensor(CODA_BF16, m, k), g = memory.vector(CODA_F32, k),
              rstd = memory.vector(CODA_F32, m);
  bytes = 0;
  expect_refused(abi, abi.residual_rmsnorm_workspace_bytes(-5, k, &bytes), "coda_residual_rmsnorm_workspace_bytes",
                 "m");
  check(abi.residual_rmsnorm_workspace_bytes(m, k, &bytes) == CODA_OK && bytes > 0,
        "coda_residual_rmsnorm_workspace_bytes");
  void* workspace = memory.get(bytes);
  expect_refused(abi,
                 abi.gemm_residual_rmsnorm(&a, &w_h, &residual, &g, -1.0f, &h, &u, &rstd, workspace, bytes, nullptr),
                 "coda_gemm_residual_rmsnorm", "eps");
  expect_runs(abi, gpu,
              abi.gemm_residual_rmsnorm(&a, &w_h, &residual, &g, 1e-6f, &h, &u, &rstd, workspace, bytes, nullptr),
              "coda_gemm_residual_rmsnorm");
  expect_refused(abi, abi.gemm_row_scale(&a, &w_h, &h, &h, nullptr), "coda_gemm_row_scale", "rstd");  // rank 2
  expect_runs(abi, gpu, abi.gemm_row_scale(&a, &w_h, &rstd, &h, nullptr), "coda_gemm_row_scale");

  const int64_t vocab = 1000;
  coda_tensor w_vocab = memory.tensor(CODA_BF16, vocab, k), targets = memory.vector(CODA_I32, m),
              loss = memory.vector(CODA_F32, 1), lse = memory.vector(CODA_F32, m);
  if (gpu) cudaMemset(targets.data, 0, std::size_t(m) * 4);
  coda_cross_entropy_options options{-100, 0.1f, 1e-4f, 0.0f, CODA_REDUCTION_MEAN};
  expect_refused(abi, abi.cross_entropy_workspace_bytes(m, -100, &options, &bytes),
                 "coda_cross_entropy_workspace_bytes", "vocab");
  check(abi.cross_entropy_workspace_bytes(m, vocab, &options, &bytes) == CODA_OK && bytes > 0,
        "coda_cross_entropy_workspace_bytes");
  workspace = memory.get(bytes);
  options.reduction = static_cast<coda_loss_reduction>(9);
  expect_refused(abi,
                 abi.gemm_cross_entropy(&a, &w_vocab, &targets, &loss, &lse, &options, nullptr, nullptr, workspace,
                                        bytes, nullptr),
                 "coda_gemm_cross_entropy", "options.reduction");
  options.reduction = CODA_REDUCTION_MEAN;
  expect_runs(abi, gpu,
              abi.gemm_cross_entropy(&a, &w_vocab, &targets, &loss, &lse, &options, nullptr, nullptr, workspace, bytes,
                                     nullptr),
              "coda_gemm_cross_entropy");

  // The backward ops: dP (m x k), W_down (k x f), Y and dY (m x 2f); dZs (m x 2f), W2 (2f x k).
  int64_t parts = 0;
  expect_refused(abi, abi.row_partial_count(-1, &parts), "coda_row_partial_count", "n");
  check(abi.row_partial_count(f, &parts) == CODA_OK && parts == 1, "coda_row_partial_count");
  coda_tensor w_down = memory.tensor(CODA_BF16, k, f), y = memory.tensor(CODA_BF16, m, 2 * f),
              dy = memory.tensor(CODA_BF16, m, 2 * f), dots = memory.tensor(CODA_F32, m, parts),
              w2 = memory.tensor(CODA_BF16, 2 * f, k);
  expect_refused(abi, abi.gemm_swiglu_backward(&a, &w_down, &y, &dy, &rstd, nullptr, nullptr, nullptr),
                 "coda_gemm_swiglu_backward", "row_dots");  // rank 1
  expect_runs(abi, gpu, abi.gemm_swiglu_backward(&a, &w_down, &y, &dy, &dots, &rstd, nullptr, nullptr),
              "coda_gemm_swiglu_backward");
  expect_refused(abi, abi.row_scale_backward(&dy, &dy, nullptr, &dy, nullptr, nullptr), "coda_row_scale_backward",
                 "scale");
  expect_runs(abi, gpu, abi.row_scale_backward(&dy, &y, &rstd, &dy, &dots, nullptr), "coda_row_scale_backward");
  check(abi.residual_rmsnorm_backward_workspace_bytes(m, &bytes) == CODA_OK && bytes > 0,
        "coda_residual_rmsnorm_backward_workspace_bytes");
  workspace = memory.get(bytes);
  expect_refused(
      abi, abi.gemm_residual_rmsnorm_backward(&dy, &w2, &h, &g, &rstd, &dots, &h, nullptr, 1, nullptr, bytes, nullptr),
      "coda_gemm_residual_rmsnorm_backward", "workspace");
  expect_runs(
      abi, gpu,
      abi.gemm_residual_rmsnorm_backward(&dy, &w2, &h, &g, &rstd, &dots, &h, nullptr, 1, workspace, bytes, nullptr),
      "coda_gemm_residual_rmsnorm_backward");
  check(abi.rmsnorm_weight_gradients_workspace_bytes(2 * f, k, &bytes) == CODA_OK && bytes > 0,
        "coda_rmsnorm_weight_gradients_workspace_bytes");
  workspace = memory.get(bytes);
  coda_tensor dw2 = memory.tensor(CODA_F32, 2 * f, k), dg = memory.vector(CODA_F32, k);
  expect_refused(abi, abi.gemm_rmsnorm_weight_gradients(&dy, &h, &w2, &g, &dw2, &dots, workspace, bytes, nullptr),
                 "coda_gemm_rmsnorm_weight_gradients", "grad_weight");  // rank 2
  expect_runs(abi, gpu, abi.gemm_rmsnorm_weight_gradients(&dy, &h, &w2, &g, &dw2, &dg, workspace, bytes, nullptr),
              "coda_gemm_rmsnorm_weight_gradients");
  expect_refused(abi,
                 abi.rope_backward(&out_qkv, &positions, &cos, &sin, head_dim, heads + 1, &out_qkv, nullptr, nullptr,
                                   nullptr, nullptr),
                 "coda_rope_backward", "rotated_heads");
  expect_runs(abi, gpu,
              abi.rope_backward(&out_qkv, &positions, &cos, &sin, head_dim, heads, &out_qkv, nullptr, nullptr, nullptr,
                                nullptr),
              "coda_rope_backward");
  // The layer (tests/python/layer_check.py runs it whole): its planner, and a refusal of each call.
  coda_layer_weights layer{w_h, g, w_gu, memory.tensor(CODA_BF16, k, f), g, w_qkv, cos, sin, head_dim, heads, 1e-6f};
  check(abi.layer_workspace_bytes(&layer, m, &bytes) == CODA_OK && bytes > 0, "coda_layer_workspace_bytes");
  expect_refused(abi, abi.layer_forward(&layer, &a, &residual, &positions, &h, &out_qkv, nullptr, nullptr, 0, nullptr),
                 "coda_layer_forward", "saved");
  expect_refused(
      abi,
      abi.layer_backward(nullptr, &a, &positions, &h, &out_qkv, nullptr, &h, &out_qkv, nullptr, nullptr, 0, nullptr),
      "coda_layer_backward", "weights");
  check(std::string(abi.last_error()).empty() == gpu, "coda_last_error after the last call");

  if (gpu) {
    check(cudaDeviceSynchronize() == cudaSuccess, "the kernels ran");
    check_gemm_result(abi);
  }
  std::printf("%s\n", own_cxx_work(2).c_str());
  dlclose(library);
  std::printf("%s: %d failures\n", failures == 0 ? "passed" : "FAILED", failures);
  return failures == 0 ? 0 : 1;
}

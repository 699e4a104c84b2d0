/* coda.h: the C ABI of libcoda, for C and for other languages (ctypes, cffi, Rust, Julia).
 *
 *   #include <coda/coda.h>
 *   // Y = X W^T: X (M x K) and W (N x K) bf16 device tensors, Y (M x N)
 *   coda_tensor x = {x_ptr, CODA_BF16, 2, {m, k}, {k, 1}};
 *   coda_tensor w = {w_ptr, CODA_BF16, 2, {n, k}, {k, 1}};
 *   coda_tensor y = {y_ptr, CODA_BF16, 2, {m, n}, {n, 1}};
 *   coda_status s = coda_gemm(&x, CODA_K_MAJOR, &w, CODA_K_MAJOR, &y, NULL, 0, stream);
 *   if (s != CODA_OK) fprintf(stderr, "%s\n", coda_last_error());
 *
 * Every function returns a coda_status (or, for the few that cannot fail, a value); on failure
 * coda_last_error() holds a message (per thread) that starts with the function's name, then
 * names the argument and the rule it broke. No function here allocates device memory,
 * synchronizes the stream or lets a C++ exception out. Workspaces may hold anything: a function
 * writes every workspace byte it reads first (or clears it on its stream).
 *
 * libcoda exports the symbols of this header and of coda's C++ API (include/coda) only, and links
 * the C++ runtime as a shared library: it loads beside any other C++ code (a Python process with
 * torch imported included).
 */
#ifndef CODA_CODA_H
#define CODA_CODA_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__) || defined(__clang__)
#define CODA_C_API __attribute__((visibility("default")))
#else
#define CODA_C_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum coda_status {
  CODA_OK = 0,
  CODA_INVALID_ARGUMENT = 1,
  CODA_UNSUPPORTED = 2,
  CODA_CUDA_ERROR = 3,
  CODA_INTERNAL = 4
} coda_status;

typedef enum coda_dtype {
  CODA_F32 = 0,
  CODA_F16 = 1,
  CODA_BF16 = 2,
  CODA_E4M3 = 3,
  CODA_E5M2 = 4,
  CODA_I32 = 5
} coda_dtype;

/* Which dimension of a GEMM operand is contiguous: K, or M (for A) / N (for B). */
typedef enum coda_major { CODA_K_MAJOR = 0, CODA_MN_MAJOR = 1 } coda_major;

/* A rank-2 tensor, shape {rows, cols}, or a rank-3 one, shape {batch, rows, cols}; strides in
 * elements, the last one 1 (row-major). Entries past `rank` are ignored. */
typedef struct coda_tensor {
  void* data;
  coda_dtype dtype;
  int32_t rank;
  int64_t shape[3];
  int64_t stride[3];
} coda_tensor;

/* libcoda's version, "major.minor.patch". */
CODA_C_API const char* coda_version(void);
/* The message of the last failed call on this thread ("" after a success). */
CODA_C_API const char* coda_last_error(void);
/* Short name of a status code ("invalid argument", ...). */
CODA_C_API const char* coda_status_name(coda_status status);
/* Number of CUDA devices visible (0 with no device or driver); never fails. */
CODA_C_API int32_t coda_device_count(void);

/* C = A * B^T on `stream` (a cudaStream_t; NULL: the default stream), the C form of coda::gemm
 * (coda/gemm.hpp, which has the full rules). A is (M x K) when K-major, (K x M) when MN-major; B is
 * (N x K) when K-major, (K x N) when MN-major; C is (M x N). Rank-3 tensors add a leading batch
 * dimension. A and B bf16 or f16 (the same), C bf16, f16 or f32; M, N, K and the batch each below
 * 2^31; every row and batch stride and every base address 16-byte aligned. `workspace` (device
 * memory of `workspace_bytes`, any contents: see coda_gemm_workspace_bytes) lets problems with few
 * output tiles split K; NULL and 0 are always valid. A workspace smaller than the plan needs is no
 * error: the call computes whole tiles instead (the same values; coda_gemm_plan tells). Needs a
 * Hopper GPU (sm_90): elsewhere it returns CODA_UNSUPPORTED. */
CODA_C_API coda_status coda_gemm(const coda_tensor* a, coda_major a_major, const coda_tensor* b, coda_major b_major,
                                 const coda_tensor* c, void* workspace, size_t workspace_bytes, void* stream);

/* The workspace coda_gemm would use for this problem, in *bytes (0 when it would not split K). */
CODA_C_API coda_status coda_gemm_workspace_bytes(const coda_tensor* a, coda_major a_major, const coda_tensor* b,
                                                 coda_major b_major, const coda_tensor* c, size_t* bytes);

/* What coda_gemm runs for this problem given a workspace of `workspace_bytes`. */
typedef struct coda_gemm_plan_info {
  const char* tile;        /* the tile configuration ("m128n256", ...); static storage */
  int32_t split_k;         /* K segments per output tile (1: none; with workspace_bytes 0, the CTAs of a
                              cluster, which add their partials in shared memory: small M) */
  int32_t stream_k_tiles;  /* tiles shared out by K iterations at the end (0: none) */
  int32_t ctas;            /* persistent CTAs launched */
  int64_t output_tiles;    /* tiles of C (all batches) */
  size_t workspace_bytes;  /* workspace the plan uses (0: none) */
} coda_gemm_plan_info;
CODA_C_API coda_status coda_gemm_plan(const coda_tensor* a, coda_major a_major, const coda_tensor* b,
                                      coda_major b_major, const coda_tensor* c, size_t workspace_bytes,
                                      coda_gemm_plan_info* plan);

/* coda_gemm validated and planned once for these shapes, strides, majors and dtypes, then run on new
 * addresses at the host cost of a launch (coda/prepared_gemm.hpp: what an eager framework call
 * repeats). coda_gemm_prepare checks a, b and c as coda_gemm does (their data pointers too, but
 * keeps none), plans for a workspace of `workspace_bytes` (its address plays no part) and writes
 * the plan to *plan when plan is not NULL. A run's tensors must have the prepared shapes, strides
 * and dtypes; their addresses non-null and 16-byte aligned; `workspace` (plan->workspace_bytes, any
 * contents) when the plan splits K; the device current at preparation. Same bits as coda_gemm.
 *
 *   coda_gemm_prepared* g = NULL;
 *   coda_gemm_prepare(&x, CODA_K_MAJOR, &w, CODA_K_MAJOR, &y, 0, &g, NULL);
 *   coda_gemm_prepared_run(g, x_ptr, w_ptr, y_ptr, NULL, stream);   (as often as needed)
 *   coda_gemm_prepared_destroy(g);
 */
typedef struct coda_gemm_prepared coda_gemm_prepared;
CODA_C_API coda_status coda_gemm_prepare(const coda_tensor* a, coda_major a_major, const coda_tensor* b,
                                         coda_major b_major, const coda_tensor* c, size_t workspace_bytes,
                                         coda_gemm_prepared** prepared, coda_gemm_plan_info* plan);
CODA_C_API coda_status coda_gemm_prepared_run(const coda_gemm_prepared* prepared, const void* a, const void* b, void* c,
                                              void* workspace, void* stream);
/* Frees what coda_gemm_prepare made (NULL: nothing). */
CODA_C_API void coda_gemm_prepared_destroy(coda_gemm_prepared* prepared);

/* ---- fused ops (the coda/ops headers): a GEMM X W^T with its epilogue. Tensors are device memory;
 * vectors are rank 1. Optional tensors may be NULL. x, w and the tile outputs share one dtype
 * (CODA_BF16 or CODA_F16); all operands are K-major. */

/* out = silu(G) * U, [G, U] interleaved in the columns of X W^T (SwiGLU). pre_activation (M x 2F)
 * stores X W^T too; row_scale (f32, M) scales X W^T's rows first (after an RMSNorm). */
CODA_C_API coda_status coda_gemm_swiglu(const coda_tensor* x, const coda_tensor* w, const coda_tensor* out,
                                        const coda_tensor* pre_activation, const coda_tensor* row_scale, void* stream);

/* out = RoPE(X W^T) by positions (int32) and the cos/sin cache (f32, max_pos x head_dim/2); heads
 * from rotated_heads on pass through; row_scale as for SwiGLU. */
CODA_C_API coda_status coda_gemm_rope(const coda_tensor* x, const coda_tensor* w, const coda_tensor* positions,
                                      const coda_tensor* cos, const coda_tensor* sin, int32_t head_dim,
                                      int32_t rotated_heads, const coda_tensor* out, const coda_tensor* row_scale,
                                      void* stream);

/* h = X W^T + residual, u = h * weight, rstd = rsqrt(mean(h^2) + eps) (residual + RMSNorm).
 * u may be NULL (not stored; weight, then unread, may be NULL too): for a W2 with the weight folded
 * in. The workspace: *bytes from coda_residual_rmsnorm_workspace_bytes (M x N outputs, M, N >= 1). */
CODA_C_API coda_status coda_residual_rmsnorm_workspace_bytes(int64_t m, int64_t n, size_t* bytes);
CODA_C_API coda_status coda_gemm_residual_rmsnorm(const coda_tensor* x, const coda_tensor* w,
                                                  const coda_tensor* residual, const coda_tensor* weight, float eps,
                                                  const coda_tensor* h, const coda_tensor* u, const coda_tensor* rstd,
                                                  void* workspace, size_t workspace_bytes, void* stream);

/* out = rstd[m] * (X W^T): the GEMM after an RMSNorm. */
CODA_C_API coda_status coda_gemm_row_scale(const coda_tensor* x, const coda_tensor* w, const coda_tensor* rstd,
                                           const coda_tensor* out, void* stream);

typedef enum coda_loss_reduction {
  CODA_REDUCTION_NONE = 0,
  CODA_REDUCTION_SUM = 1,
  CODA_REDUCTION_MEAN = 2
} coda_loss_reduction;

typedef struct coda_cross_entropy_options {
  int32_t ignore_index;  /* -100 in PyTorch */
  float label_smoothing; /* [0, 1) */
  float z_loss;          /* >= 0 */
  float softcap;         /* 0: off */
  coda_loss_reduction reduction;
} coda_cross_entropy_options;

/* LM head + cross-entropy without materializing the logits (row_scale: the final RMSNorm's rstd).
 * loss: f32, M values (CODA_REDUCTION_NONE) or 1; lse: f32, M. logits and row_scale may be NULL;
 * options NULL: PyTorch's defaults (ignore_index -100, mean). The workspace: *bytes from
 * coda_cross_entropy_workspace_bytes (M tokens, a vocabulary of `vocab`, both >= 1). */
CODA_C_API coda_status coda_cross_entropy_workspace_bytes(int64_t m, int64_t vocab,
                                                          const coda_cross_entropy_options* options, size_t* bytes);
CODA_C_API coda_status coda_gemm_cross_entropy(const coda_tensor* x, const coda_tensor* w, const coda_tensor* targets,
                                               const coda_tensor* loss, const coda_tensor* lse,
                                               const coda_cross_entropy_options* options,
                                               const coda_tensor* row_scale, const coda_tensor* logits,
                                               void* workspace, size_t workspace_bytes, void* stream);

/* Its backward: grad_x (M x K; x's type or f32) and grad_w (V x K; w's type or f32) from the
 * forward's lse (f32, M) and grad_loss (f32 on the device: M values for CODA_REDUCTION_NONE, else
 * one), with the forward's options and row_scale. row_dots (f32, M x ceil(V/128); may be NULL): the
 * partials of <dZ, Z> for the final RMSNorm's backward. chunk_columns: vocabulary columns per chunk
 * (a multiple of 128; 0: chosen), the same in the workspace query. */
CODA_C_API coda_status coda_cross_entropy_backward_workspace_bytes(int64_t m, int64_t vocab, int64_t k,
                                                                   int64_t chunk_columns, size_t* bytes);
CODA_C_API coda_status coda_gemm_cross_entropy_backward(
    const coda_tensor* x, const coda_tensor* w, const coda_tensor* targets, const coda_tensor* lse,
    const coda_tensor* grad_loss, const coda_tensor* grad_x, const coda_tensor* grad_w,
    const coda_cross_entropy_options* options, const coda_tensor* row_scale, const coda_tensor* row_dots,
    int64_t chunk_columns, void* workspace, size_t workspace_bytes, void* stream);

/* The recomputing backward leaving out of dW and dX the blocks of dZ whose every element is at most
 * skip_below |g[m]| row_scale[m] (skip_below in [0, 1), 0: none; e.g. 2^-12): the bound on the error
 * it leaves and how blocks are judged are coda::ops::CrossEntropyBackwardOptions::skip_below's. The
 * workspace: *bytes from coda_cross_entropy_backward_skipping_workspace_bytes, same skip_below.
 *
 *   coda_cross_entropy_backward_skipping_workspace_bytes(m, vocab, k, 0, 0x1p-12f, &bytes);
 *   coda_gemm_cross_entropy_backward_skipping(&x, &w, &t, &lse, &one, &dx, &dw, &o, NULL, NULL, 0,
 *                                             0x1p-12f, ws, bytes, stream); */
CODA_C_API coda_status coda_cross_entropy_backward_skipping_workspace_bytes(int64_t m, int64_t vocab, int64_t k,
                                                                            int64_t chunk_columns, float skip_below,
                                                                            size_t* bytes);
CODA_C_API coda_status coda_gemm_cross_entropy_backward_skipping(
    const coda_tensor* x, const coda_tensor* w, const coda_tensor* targets, const coda_tensor* lse,
    const coda_tensor* grad_loss, const coda_tensor* grad_x, const coda_tensor* grad_w,
    const coda_cross_entropy_options* options, const coda_tensor* row_scale, const coda_tensor* row_dots,
    int64_t chunk_columns, float skip_below, void* workspace, size_t workspace_bytes, void* stream);

/* The backward from the forward's stored logits (coda_gemm_cross_entropy's `logits` output, M x V of
 * x's type, with the same options): dZ from them into grad_logits (M x V, x's type; logits itself
 * works: in place), then dW = dZ^T x and dX = dZ w. Three GEMMs with the forward where
 * coda_gemm_cross_entropy_backward's recomputing takes four, for the M x V logits kept. row_dots is
 * refused with a soft-cap (it needs the logits before the cap). The workspace: *bytes from
 * coda_cross_entropy_backward_from_logits_workspace_bytes (16 bytes a row).
 *
 *   coda_gemm_cross_entropy(&x, &w, &t, &loss, &lse, &o, NULL, &logits, ws, ws_bytes, stream);
 *   coda_gemm_cross_entropy_backward_from_logits(&x, &w, &t, &lse, &one, &logits, &logits, &dx, &dw,
 *                                                &o, NULL, NULL, ws2, ws2_bytes, stream); */
CODA_C_API coda_status coda_cross_entropy_backward_from_logits_workspace_bytes(int64_t m, int64_t vocab, int64_t k,
                                                                               size_t* bytes);
CODA_C_API coda_status coda_gemm_cross_entropy_backward_from_logits(
    const coda_tensor* x, const coda_tensor* w, const coda_tensor* targets, const coda_tensor* lse,
    const coda_tensor* grad_loss, const coda_tensor* logits, const coda_tensor* grad_logits, const coda_tensor* grad_x,
    const coda_tensor* grad_w, const coda_cross_entropy_options* options, const coda_tensor* row_scale,
    const coda_tensor* row_dots, void* workspace, size_t workspace_bytes, void* stream);

/* ---- the MoE router (coda/ops/router.hpp, which has the full rules): scores = X W_r^T (M x E,
 * 1 <= E <= 512) reduced to k (weight, expert) pairs per token, selected on the fp32 scores.
 *
 *   coda_router_options o = {CODA_ROUTING_TOPK_SOFTMAX, 8, 1, NULL, 1, 1, 1.0f, 0};   // Mixtral
 *   coda_router_workspace_bytes(&x, &w, &o, NULL, &bytes);
 *   coda_gemm_router(&x, &w, &weights, &ids, &o, NULL, NULL, NULL, ws, bytes, stream);
 */
typedef enum coda_routing_mode {
  CODA_ROUTING_SOFTMAX_TOPK = 0, /* the k best scores, softmax over them */
  CODA_ROUTING_TOPK_SOFTMAX = 1, /* softmax over all E, the k best (Mixtral, Qwen) */
  CODA_ROUTING_SIGMOID_BIAS = 2  /* sigmoid, bias-ranked, grouped selection (DeepSeek-V3) */
} coda_routing_mode;

typedef struct coda_router_options {
  coda_routing_mode mode;
  int32_t k;                   /* experts per token, 1 <= k <= min(E, 32) */
  int32_t renormalize;         /* nonzero: the k weights sum to 1 (before the scaling factor) */
  const coda_tensor* expert_bias; /* sigmoid_bias only, may be NULL: f32 (E), ranks only (NaN: never
                                     selected; coda/ops/router.hpp) */
  int32_t n_group;             /* sigmoid_bias: groups (1: none); divides E, >= 2 experts each */
  int32_t topk_group;          /* groups kept, 1 <= topk_group <= n_group */
  float routed_scaling_factor; /* finite, > 0 (1: none) */
  int32_t fused_selection;     /* nonzero: select in the GEMM's epilogue wherever it can, not only where
                                  it measured faster (coda/ops/router.hpp); usually 0 */
} coda_router_options;

/* weights f32 (M x k) and ids int32 (M x k), contiguous; optional (NULL: not written):
 * token_expert_indices int32 (M x k, slot j of token m holds j M + m), expert_counts int32 (E,
 * slots per expert), scores f32 (M x E, the GEMM itself). NaN scores are never selected; slots no
 * selectable expert fills take the lowest unchosen ids at weight 0. The workspace: *bytes from
 * coda_router_workspace_bytes with the same x, w, options and scores, 16-byte aligned. */
CODA_C_API coda_status coda_router_workspace_bytes(const coda_tensor* x, const coda_tensor* w,
                                                   const coda_router_options* options, const coda_tensor* scores,
                                                   size_t* bytes);
CODA_C_API coda_status coda_gemm_router(const coda_tensor* x, const coda_tensor* w, const coda_tensor* weights,
                                        const coda_tensor* ids, const coda_router_options* options,
                                        const coda_tensor* token_expert_indices, const coda_tensor* expert_counts,
                                        const coda_tensor* scores, void* workspace, size_t workspace_bytes,
                                        void* stream);

/* ---- backward ops (coda/ops/swiglu.hpp, rmsnorm.hpp, rope.hpp; the math: docs/kernels.md). The
 * gradient of an RMSNorm's output reaches its backward scaled by rstd (dZs = rstd * dZ, the
 * producers' row_scale) with the row partials of <dZ, Z> (their row_dots: f32, M x
 * coda_row_partial_count(N) for an N-column gradient). */

/* ceil(n / 128) in *count: the row partials per row an op writes over n >= 1 columns. */
CODA_C_API coda_status coda_row_partial_count(int64_t n, int64_t* count);

/* grad_input = scale * grad_output row by row (the backward of a row scale Z = scale[m] Y, for a
 * gradient that comes from outside) and, with output (Z), row_dots (f32, M x ceil(N/128)): the
 * partials of <grad_output, Z>. output and row_dots may be NULL. */
CODA_C_API coda_status coda_row_scale_backward(const coda_tensor* grad_output, const coda_tensor* output,
                                               const coda_tensor* scale, const coda_tensor* grad_input,
                                               const coda_tensor* row_dots, void* stream);

/* dY = SwiGLU'(Y) * (dP W_down): grad_output dP (M x H), w_down (H x F, nn.Linear layout),
 * pre_activation Y and grad_pre_activation dY (M x 2F, interleaved). row_dots (f32, M x
 * ceil(F/128)), row_scale (f32, M; dY stored times it) and output (O = silu(g) u, M x F) may be NULL. */
CODA_C_API coda_status coda_gemm_swiglu_backward(const coda_tensor* grad_output, const coda_tensor* w_down,
                                                 const coda_tensor* pre_activation,
                                                 const coda_tensor* grad_pre_activation, const coda_tensor* row_dots,
                                                 const coda_tensor* row_scale, const coda_tensor* output,
                                                 void* stream);

/* grad_h = grad_residual + RMSNorm'(h) applied to dZ W (the backward of gemm_residual_rmsnorm
 * followed by a GEMM with weight w, N2 x hidden): grad_output dZs (M x N2; dZ itself when
 * grad_output_scaled is 0), h and rstd as the forward stored them, weight g (hidden), row_dots the
 * partials of <dZ, Z> (f32, M x P). grad_residual may be NULL. The workspace: *bytes from
 * coda_residual_rmsnorm_backward_workspace_bytes (M >= 1 rows). */
CODA_C_API coda_status coda_residual_rmsnorm_backward_workspace_bytes(int64_t m, size_t* bytes);
CODA_C_API coda_status coda_gemm_residual_rmsnorm_backward(
    const coda_tensor* grad_output, const coda_tensor* w, const coda_tensor* h, const coda_tensor* weight,
    const coda_tensor* rstd, const coda_tensor* row_dots, const coda_tensor* grad_h, const coda_tensor* grad_residual,
    int32_t grad_output_scaled, void* workspace, size_t workspace_bytes, void* stream);

/* The weight gradients around that RMSNorm from one GEMM G = dZs^T h: grad_w = G * g (N2 x
 * hidden, the operands' dtype or f32) and grad_weight = sum_i G * w (hidden). grad_output dZs
 * (T x N2), h (T x hidden), w (N2 x hidden). The workspace: *bytes from
 * coda_rmsnorm_weight_gradients_workspace_bytes. */
CODA_C_API coda_status coda_rmsnorm_weight_gradients_workspace_bytes(int64_t n2, int64_t hidden, size_t* bytes);
CODA_C_API coda_status coda_gemm_rmsnorm_weight_gradients(const coda_tensor* grad_output, const coda_tensor* h,
                                                          const coda_tensor* w, const coda_tensor* weight,
                                                          const coda_tensor* grad_w, const coda_tensor* grad_weight,
                                                          void* workspace, size_t workspace_bytes, void* stream);

/* grad_input = the inverse rotation of coda_gemm_rope applied to grad_output (M x N), same positions,
 * cache, head_dim and rotated_heads. output (the forward's Y) and row_dots (f32, M x ceil(N/128):
 * partials of <grad_output, Y>) go together; row_scale (f32, M) scales grad_input. Each may be NULL. */
CODA_C_API coda_status coda_rope_backward(const coda_tensor* grad_output, const coda_tensor* positions,
                                          const coda_tensor* cos, const coda_tensor* sin, int32_t head_dim,
                                          int32_t rotated_heads, const coda_tensor* grad_input,
                                          const coda_tensor* output, const coda_tensor* row_dots,
                                          const coda_tensor* row_scale, void* stream);

/* ---- the layer (coda/blocks/layer.hpp): the non-attention part of a LLaMA-style Transformer
 * layer, forward and backward, as coda's fused ops. Shapes and types as that header states; one
 * workspace of *bytes from coda_layer_workspace_bytes serves both calls.
 *
 *   coda_layer_weights w = {wo, g1, w_gate_up, w_down, g2, w_qkv, cos, sin, 128, q_heads + kv_heads, 1e-6f};
 *   coda_layer_workspace_bytes(&w, tokens, &bytes);
 *   coda_layer_forward(&w, &attn_out, &residual, &positions, &h2, &qkv, &saved, ws, bytes, stream);
 *   coda_layer_backward(&w, &attn_out, &positions, &h2, &qkv, &saved, &grad_h2, &grad_qkv, &grads, ws,
 *                       bytes, stream);
 */
typedef struct coda_layer_weights {
  coda_tensor wo;        /* H x H */
  coda_tensor norm1;     /* g1, H */
  coda_tensor w_gate_up; /* 2F x H, gate and up rows interleaved */
  coda_tensor w_down;    /* H x F */
  coda_tensor norm2;     /* g2, H */
  coda_tensor w_qkv;     /* Nqkv x H */
  coda_tensor cos;       /* f32, max_pos x head_dim / 2 */
  coda_tensor sin;
  int32_t head_dim;
  int32_t rotated_heads; /* Q and K heads; the V heads after them pass through */
  float eps;
} coda_layer_weights;

/* What the forward keeps for the backward. */
typedef struct coda_layer_saved {
  coda_tensor h1;             /* T x H */
  coda_tensor rstd1;          /* f32, T */
  coda_tensor pre_activation; /* T x 2F */
  coda_tensor activation;     /* T x F */
  coda_tensor rstd2;          /* f32, T */
} coda_layer_saved;

/* Where the backward writes each gradient (weight gradients in the activations' type or f32). */
typedef struct coda_layer_gradients {
  coda_tensor attn_out;  /* T x H */
  coda_tensor residual;  /* T x H */
  coda_tensor wo;        /* H x H */
  coda_tensor norm1;     /* H */
  coda_tensor w_gate_up; /* 2F x H */
  coda_tensor w_down;    /* H x F */
  coda_tensor norm2;     /* H */
  coda_tensor w_qkv;     /* Nqkv x H */
} coda_layer_gradients;

CODA_C_API coda_status coda_layer_workspace_bytes(const coda_layer_weights* weights, int64_t tokens, size_t* bytes);
CODA_C_API coda_status coda_layer_forward(const coda_layer_weights* weights, const coda_tensor* attn_out,
                                          const coda_tensor* residual, const coda_tensor* positions,
                                          const coda_tensor* h2, const coda_tensor* qkv, const coda_layer_saved* saved,
                                          void* workspace, size_t workspace_bytes, void* stream);
CODA_C_API coda_status coda_layer_backward(const coda_layer_weights* weights, const coda_tensor* attn_out,
                                           const coda_tensor* positions, const coda_tensor* h2,
                                           const coda_tensor* qkv, const coda_layer_saved* saved,
                                           const coda_tensor* grad_h2, const coda_tensor* grad_qkv,
                                           const coda_layer_gradients* grads, void* workspace,
                                           size_t workspace_bytes, void* stream);

#ifdef __cplusplus
}
#endif

#endif /* CODA_CODA_H */

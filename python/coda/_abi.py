"""The C ABI of libcoda (include/coda/coda.h) declared for ctypes: its constants, structs and every
function's signature. Plain ctypes, no torch: the package loads libcoda with it, and so do the ABI's
own checks (tests/python/c_abi_check.py, which load this file by path).

    lib = load("build/test/src/libcoda.so")
    status = lib.coda_gemm(ctypes.byref(a), K_MAJOR, ctypes.byref(b), K_MAJOR, ctypes.byref(c), None, 0, None)
"""
import ctypes

OK, INVALID_ARGUMENT, UNSUPPORTED = 0, 1, 2
F32, F16, BF16, E4M3, E5M2, I32 = range(6)
K_MAJOR, MN_MAJOR = 0, 1
REDUCTIONS = {"none": 0, "sum": 1, "mean": 2}


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int), ("rank", ctypes.c_int32),
                ("shape", ctypes.c_int64 * 3), ("stride", ctypes.c_int64 * 3)]


class CrossEntropyOptions(ctypes.Structure):
    _fields_ = [("ignore_index", ctypes.c_int32), ("label_smoothing", ctypes.c_float), ("z_loss", ctypes.c_float),
                ("softcap", ctypes.c_float), ("reduction", ctypes.c_int)]


ROUTING_MODES = {"softmax_topk": 0, "topk_softmax": 1, "sigmoid_bias": 2}


class RouterOptions(ctypes.Structure):
    _fields_ = [("mode", ctypes.c_int), ("k", ctypes.c_int32), ("renormalize", ctypes.c_int32),
                ("expert_bias", ctypes.c_void_p), ("n_group", ctypes.c_int32), ("topk_group", ctypes.c_int32),
                ("routed_scaling_factor", ctypes.c_float), ("fused_selection", ctypes.c_int32)]


class GemmPlan(ctypes.Structure):
    _fields_ = [("tile", ctypes.c_char_p), ("split_k", ctypes.c_int32), ("stream_k_tiles", ctypes.c_int32),
                ("ctas", ctypes.c_int32), ("output_tiles", ctypes.c_int64), ("workspace_bytes", ctypes.c_size_t)]


class LayerWeights(ctypes.Structure):
    _fields_ = [(name, Tensor) for name in ("wo", "norm1", "w_gate_up", "w_down", "norm2", "w_qkv", "cos", "sin")] + \
               [("head_dim", ctypes.c_int32), ("rotated_heads", ctypes.c_int32), ("eps", ctypes.c_float)]


class LayerSaved(ctypes.Structure):
    _fields_ = [(name, Tensor) for name in ("h1", "rstd1", "pre_activation", "activation", "rstd2")]


class LayerGradients(ctypes.Structure):
    _fields_ = [(name, Tensor)
                for name in ("attn_out", "residual", "wo", "norm1", "w_gate_up", "w_down", "norm2", "w_qkv")]


_p, _size, _f32, _i32, _i64 = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_float, ctypes.c_int32, ctypes.c_int64
SIGNATURES = {  # every function returning a coda_status: its argument types
    "coda_gemm": [_p, ctypes.c_int, _p, ctypes.c_int, _p, _p, _size, _p],
    "coda_gemm_workspace_bytes": [_p, ctypes.c_int, _p, ctypes.c_int, _p, _p],
    "coda_gemm_plan": [_p, ctypes.c_int, _p, ctypes.c_int, _p, _size, _p],
    "coda_gemm_prepare": [_p, ctypes.c_int, _p, ctypes.c_int, _p, _size, _p, _p],
    "coda_gemm_prepared_run": [_p, _p, _p, _p, _p, _p],
    "coda_gemm_swiglu": [_p, _p, _p, _p, _p, _p],
    "coda_gemm_rope": [_p, _p, _p, _p, _p, _i32, _i32, _p, _p, _p],
    "coda_residual_rmsnorm_workspace_bytes": [_i64, _i64, _p],
    "coda_gemm_residual_rmsnorm": [_p, _p, _p, _p, _f32, _p, _p, _p, _p, _size, _p],
    "coda_gemm_row_scale": [_p, _p, _p, _p, _p],
    "coda_cross_entropy_workspace_bytes": [_i64, _i64, _p, _p],
    "coda_gemm_cross_entropy": [_p, _p, _p, _p, _p, _p, _p, _p, _p, _size, _p],
    "coda_cross_entropy_backward_workspace_bytes": [_i64, _i64, _i64, _i64, _p],
    "coda_gemm_cross_entropy_backward": [_p, _p, _p, _p, _p, _p, _p, _p, _p, _p, _i64, _p, _size, _p],
    "coda_cross_entropy_backward_from_logits_workspace_bytes": [_i64, _i64, _i64, _p],
    "coda_cross_entropy_backward_skipping_workspace_bytes": [_i64, _i64, _i64, _i64, _f32, _p],
    "coda_gemm_cross_entropy_backward_skipping": [_p, _p, _p, _p, _p, _p, _p, _p, _p, _p, _i64, _f32, _p, _size, _p],
    "coda_gemm_cross_entropy_backward_from_logits": [_p, _p, _p, _p, _p, _p, _p, _p, _p, _p, _p, _p, _p, _size, _p],
    "coda_row_partial_count": [_i64, _p],
    "coda_router_workspace_bytes": [_p, _p, _p, _p, _p],
    "coda_gemm_router": [_p, _p, _p, _p, _p, _p, _p, _p, _p, _size, _p],
    "coda_row_scale_backward": [_p, _p, _p, _p, _p, _p],
    "coda_gemm_swiglu_backward": [_p, _p, _p, _p, _p, _p, _p, _p],
    "coda_residual_rmsnorm_backward_workspace_bytes": [_i64, _p],
    "coda_gemm_residual_rmsnorm_backward": [_p, _p, _p, _p, _p, _p, _p, _p, _i32, _p, _size, _p],
    "coda_rmsnorm_weight_gradients_workspace_bytes": [_i64, _i64, _p],
    "coda_gemm_rmsnorm_weight_gradients": [_p, _p, _p, _p, _p, _p, _p, _size, _p],
    "coda_rope_backward": [_p, _p, _p, _p, _i32, _i32, _p, _p, _p, _p, _p],
    "coda_layer_workspace_bytes": [_p, _i64, _p],
    "coda_layer_forward": [_p, _p, _p, _p, _p, _p, _p, _p, _size, _p],
    "coda_layer_backward": [_p, _p, _p, _p, _p, _p, _p, _p, _p, _p, _size, _p],
}


def load(path):
    """libcoda at `path` with every function's argument and result types set."""
    lib = ctypes.CDLL(path)
    for name, restype in (("coda_version", ctypes.c_char_p), ("coda_last_error", ctypes.c_char_p),
                          ("coda_status_name", ctypes.c_char_p), ("coda_device_count", ctypes.c_int32)):
        getattr(lib, name).restype = restype
    lib.coda_gemm_prepared_destroy.argtypes, lib.coda_gemm_prepared_destroy.restype = [ctypes.c_void_p], None
    for name, argtypes in SIGNATURES.items():
        function = getattr(lib, name)
        function.argtypes, function.restype = argtypes, ctypes.c_int
    return lib

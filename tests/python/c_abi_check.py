"""libcoda through ctypes inside a Python process: every function of the C ABI, with valid and
invalid arguments.

    python3 tests/python/c_abi_check.py build/test/src/libcoda.so [--require-gpu]

torch is imported first when it is installed (so its C++ runtime is in the process before libcoda's
calls run). With torch and a Hopper GPU the valid calls run for real: the GEMM against torch's fp64
product, split-K with a workspace full of garbage (correct and the same bits run after run), and
each fused op against torch's math, the backward ops against torch's autograd. Without them, each valid call must report CODA_UNSUPPORTED
under its own name. Invalid calls must report CODA_INVALID_ARGUMENT, naming the function and the
argument. Exit code 0 when every check passed.
"""
import ctypes
import importlib.util
import os
import sys

try:
    import torch
except ImportError:
    torch = None


def _load_abi():
    """python/coda/_abi.py, the C ABI's ctypes declarations, loaded by path (the package itself needs torch)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python", "coda", "_abi.py")
    spec = importlib.util.spec_from_file_location("coda_abi", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_abi = _load_abi()
OK, INVALID_ARGUMENT, UNSUPPORTED = _abi.OK, _abi.INVALID_ARGUMENT, _abi.UNSUPPORTED
F32, F16, BF16, E4M3, E5M2, I32 = _abi.F32, _abi.F16, _abi.BF16, _abi.E4M3, _abi.E5M2, _abi.I32
K_MAJOR, MN_MAJOR = _abi.K_MAJOR, _abi.MN_MAJOR
Tensor, CrossEntropyOptions, GemmPlan, RouterOptions = _abi.Tensor, _abi.CrossEntropyOptions, _abi.GemmPlan, \
    _abi.RouterOptions


failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAILED:", what, flush=True)


class Abi:
    def __init__(self, path):
        self.lib = _abi.load(path)

    def __getattr__(self, name):
        return getattr(self.lib, "coda_" + name)

    def message(self):
        return self.lib.coda_last_error().decode()


def start(argv, doc):
    """The checks' common start: libcoda from argv[1] (None, after printing `doc`, without one) and
    whether valid calls run on a GPU; with --require-gpu a missing one is a failure."""
    if len(argv) < 2:
        print(doc)
        return None, False
    abi = Abi(argv[1])  # valid calls run for real with torch's CUDA and a Hopper GPU libcoda sees
    gpu = (torch is not None and torch.cuda.is_available() and abi.device_count() > 0 and
           torch.cuda.get_device_capability() == (9, 0))
    check(gpu or "--require-gpu" not in argv, "--require-gpu: no Hopper GPU with torch here")
    return abi, gpu


def finish():
    """Print the verdict; the exit code: 0 when every check passed."""
    print(f"{'passed' if not failures else 'FAILED'}: {len(failures)} failures")
    return 0 if not failures else 1


def ref(x):
    return ctypes.byref(x) if x is not None else None


def expect_refused(abi, status, function, argument):
    message = abi.message()
    check(status == INVALID_ARGUMENT, f"{function} with a bad '{argument}': status {status} ({message})")
    check(message.startswith(f"{function}: argument '{argument}'"), f"{function}'s message: {message}")


def expect_runs(abi, gpu, status, function):
    message = abi.message()
    if gpu:
        check(status == OK, f"{function} with valid arguments: status {status} ({message})")
    else:
        check(status == UNSUPPORTED, f"{function} without a GPU: status {status} ({message})")
        check(message.startswith(function + ": "), f"{function}'s message: {message}")


class Memory:
    """Tensors as coda_tensor structs: torch's on the GPU, ctypes buffers (never read) elsewhere."""

    def __init__(self, gpu):
        self.gpu, self.keep = gpu, []

    def tensor(self, dtype, *shape, fill=None):
        sizes = {F32: 4, I32: 4, BF16: 2, F16: 2}
        if self.gpu:
            torch_type = {F32: torch.float32, I32: torch.int32, BF16: torch.bfloat16, F16: torch.float16}[dtype]
            if fill == "randn":
                t = torch.randn(*shape, device="cuda").to(torch_type)
            else:
                t = torch.zeros(*shape, device="cuda", dtype=torch_type)
            self.keep.append(t)
            pointer = t.data_ptr()
        else:
            count = 1
            for s in shape:
                count *= s
            buffer = ctypes.create_string_buffer(count * sizes[dtype] + 256)
            self.keep.append(buffer)
            pointer = (ctypes.addressof(buffer) + 255) // 256 * 256
            t = None
        strides = [1] * len(shape)
        for i in range(len(shape) - 2, -1, -1):
            strides[i] = strides[i + 1] * shape[i + 1]
        view = Tensor(pointer, dtype, len(shape), (ctypes.c_int64 * 3)(*shape), (ctypes.c_int64 * 3)(*strides))
        return view, t


def stream():
    return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream) if torch is not None and torch.cuda.is_available() else None


def every_function(abi, gpu):
    """Each function once with a bad argument and once with good ones."""
    mem = Memory(gpu)
    m, k, f, heads, head_dim, vocab = 64, 64, 32, 2, 32, 1000
    a, _ = mem.tensor(BF16, m, k, fill="randn")
    b, _ = mem.tensor(BF16, 48, k, fill="randn")
    c, _ = mem.tensor(BF16, m, 48)
    s = stream()
    expect_refused(abi, abi.gemm(None, K_MAJOR, ref(b), K_MAJOR, ref(c), None, 0, s), "coda_gemm", "a")
    expect_runs(abi, gpu, abi.gemm(ref(a), K_MAJOR, ref(b), K_MAJOR, ref(c), None, 0, s), "coda_gemm")
    size = ctypes.c_size_t(7)
    expect_refused(abi, abi.gemm_workspace_bytes(ref(a), K_MAJOR, ref(b), K_MAJOR, ref(c), None),
                   "coda_gemm_workspace_bytes", "bytes")
    expect_runs(abi, gpu, abi.gemm_workspace_bytes(ref(a), K_MAJOR, ref(b), K_MAJOR, ref(c), ctypes.byref(size)),
                "coda_gemm_workspace_bytes")
    plan = GemmPlan()
    expect_refused(abi, abi.gemm_plan(ref(a), 9, ref(b), K_MAJOR, ref(c), 0, ctypes.byref(plan)), "coda_gemm_plan",
                   "a_major")
    expect_runs(abi, gpu, abi.gemm_plan(ref(a), K_MAJOR, ref(b), K_MAJOR, ref(c), 0, ctypes.byref(plan)),
                "coda_gemm_plan")
    prepared = ctypes.c_void_p()
    expect_refused(abi, abi.gemm_prepare(ref(a), K_MAJOR, ref(b), K_MAJOR, ref(c), 0, None, None),
                   "coda_gemm_prepare", "prepared")
    expect_runs(abi, gpu, abi.gemm_prepare(ref(a), K_MAJOR, ref(b), K_MAJOR, ref(c), 0, ctypes.byref(prepared),
                                           ctypes.byref(plan)), "coda_gemm_prepare")
    check((prepared.value is not None) == gpu, f"coda_gemm_prepare's handle: {prepared.value}")
    expect_refused(abi, abi.gemm_prepared_run(prepared, None, b.data, c.data, None, s), "coda_gemm_prepared_run",
                   "a" if gpu else "prepared")
    if gpu:
        expect_runs(abi, gpu, abi.gemm_prepared_run(prepared, a.data, b.data, c.data, None, s),
                    "coda_gemm_prepared_run")
    abi.gemm_prepared_destroy(prepared)

    w_gu, _ = mem.tensor(BF16, 2 * f, k, fill="randn")
    out_f, _ = mem.tensor(BF16, m, f)
    expect_refused(abi, abi.gemm_swiglu(ref(a), ref(w_gu), None, None, None, s), "coda_gemm_swiglu", "out")
    expect_runs(abi, gpu, abi.gemm_swiglu(ref(a), ref(w_gu), ref(out_f), None, None, s), "coda_gemm_swiglu")

    w_qkv, _ = mem.tensor(BF16, heads * head_dim, k, fill="randn")
    out_qkv, _ = mem.tensor(BF16, m, heads * head_dim)
    positions, _ = mem.tensor(I32, m)
    cos, _ = mem.tensor(F32, 128, head_dim // 2, fill="randn")
    sin, _ = mem.tensor(F32, 128, head_dim // 2, fill="randn")
    expect_refused(abi, abi.gemm_rope(ref(a), ref(w_qkv), ref(positions), ref(cos), ref(sin), 7, heads, ref(out_qkv),
                                      None, s), "coda_gemm_rope", "head_dim")
    expect_runs(abi, gpu, abi.gemm_rope(ref(a), ref(w_qkv), ref(positions), ref(cos), ref(sin), head_dim, heads,
                                        ref(out_qkv), None, s), "coda_gemm_rope")

    w_h, _ = mem.tensor(BF16, k, k, fill="randn")
    residual, _ = mem.tensor(BF16, m, k, fill="randn")
    h, _ = mem.tensor(BF16, m, k)
    u, _ = mem.tensor(BF16, m, k)
    g, _ = mem.tensor(F32, k, fill="randn")
    rstd, _ = mem.tensor(F32, m)
    expect_refused(abi, abi.residual_rmsnorm_workspace_bytes(-5, 100, ctypes.byref(size)),
                   "coda_residual_rmsnorm_workspace_bytes", "m")
    check(abi.residual_rmsnorm_workspace_bytes(m, k, ctypes.byref(size)) == OK and size.value > 0,
          "coda_residual_rmsnorm_workspace_bytes: " + abi.message())
    workspace, _ = mem.tensor(F32, max(size.value // 4, 1))
    expect_refused(abi, abi.gemm_residual_rmsnorm(ref(a), ref(w_h), ref(residual), ref(g), 1e-6, ref(h), ref(u),
                                                  ref(rstd), None, size.value, s),
                   "coda_gemm_residual_rmsnorm", "workspace")
    expect_runs(abi, gpu, abi.gemm_residual_rmsnorm(ref(a), ref(w_h), ref(residual), ref(g), 1e-6, ref(h), ref(u),
                                                    ref(rstd), workspace.data, size.value, s),
                "coda_gemm_residual_rmsnorm")
    expect_refused(abi, abi.gemm_row_scale(ref(a), ref(w_h), None, ref(h), s), "coda_gemm_row_scale", "rstd")
    expect_runs(abi, gpu, abi.gemm_row_scale(ref(a), ref(w_h), ref(rstd), ref(h), s), "coda_gemm_row_scale")

    w_vocab, _ = mem.tensor(BF16, vocab, k, fill="randn")
    targets, _ = mem.tensor(I32, m)
    loss, _ = mem.tensor(F32, 1)
    lse, _ = mem.tensor(F32, m)
    options = CrossEntropyOptions(-100, 0.1, 1e-4, 0.0, 2)
    expect_refused(abi, abi.cross_entropy_workspace_bytes(-5, 100, None, ctypes.byref(size)),
                   "coda_cross_entropy_workspace_bytes", "m")
    check(abi.cross_entropy_workspace_bytes(m, vocab, ctypes.byref(options), ctypes.byref(size)) == OK,
          "coda_cross_entropy_workspace_bytes: " + abi.message())
    workspace, _ = mem.tensor(F32, max(size.value // 4, 1))
    expect_refused(abi, abi.gemm_cross_entropy(ref(a), ref(w_vocab), ref(targets), ref(loss), ref(lse),
                                               ref(options), None, None, workspace.data, 3, s),
                   "coda_gemm_cross_entropy", "workspace")
    expect_runs(abi, gpu, abi.gemm_cross_entropy(ref(a), ref(w_vocab), ref(targets), ref(loss), ref(lse),
                                                 ref(options), None, None, workspace.data, size.value, s),
                "coda_gemm_cross_entropy")
    # The backward from stored logits (three GEMMs): logits in, dZ over them.
    logits, _ = mem.tensor(BF16, m, vocab)
    grad_loss, _ = mem.tensor(F32, 1)
    grad_a, _ = mem.tensor(BF16, m, k)
    grad_w_vocab, _ = mem.tensor(BF16, vocab, k)
    expect_refused(abi, abi.cross_entropy_backward_from_logits_workspace_bytes(m, vocab, k, None),
                   "coda_cross_entropy_backward_from_logits_workspace_bytes", "bytes")
    check(abi.cross_entropy_backward_from_logits_workspace_bytes(m, vocab, k, ctypes.byref(size)) == OK,
          "coda_cross_entropy_backward_from_logits_workspace_bytes: " + abi.message())
    workspace, _ = mem.tensor(F32, max(size.value // 4, 1))
    expect_refused(abi, abi.gemm_cross_entropy_backward_from_logits(
        ref(a), ref(w_vocab), ref(targets), ref(lse), ref(grad_loss), None, ref(logits), ref(grad_a),
        ref(grad_w_vocab), ref(options), None, None, workspace.data, size.value, s),
        "coda_gemm_cross_entropy_backward_from_logits", "logits")
    expect_runs(abi, gpu, abi.gemm_cross_entropy_backward_from_logits(
        ref(a), ref(w_vocab), ref(targets), ref(lse), ref(grad_loss), ref(logits), ref(logits), ref(grad_a),
        ref(grad_w_vocab), ref(options), None, None, workspace.data, size.value, s),
        "coda_gemm_cross_entropy_backward_from_logits")

    w_router, _ = mem.tensor(BF16, 60, k, fill="randn")
    weights, _ = mem.tensor(F32, m, 4)
    ids, _ = mem.tensor(I32, m, 4)
    router = RouterOptions(_abi.ROUTING_MODES["topk_softmax"], 4, 1, None, 1, 1, 1.0, 0)
    expect_runs(abi, gpu, abi.router_workspace_bytes(ref(a), ref(w_router), ref(router), None, ctypes.byref(size)),
                "coda_router_workspace_bytes")
    workspace, _ = mem.tensor(F32, max(size.value // 4, 1))
    too_many = RouterOptions(_abi.ROUTING_MODES["topk_softmax"], 40, 1, None, 1, 1, 1.0, 0)
    expect_refused(abi, abi.gemm_router(ref(a), ref(w_router), ref(weights), ref(ids), ref(too_many), None, None, None,
                                        workspace.data, size.value, s), "coda_gemm_router", "options.k")
    expect_runs(abi, gpu, abi.gemm_router(ref(a), ref(w_router), ref(weights), ref(ids), ref(router), None, None, None,
                                          workspace.data, size.value, s), "coda_gemm_router")
    if gpu and size.value > 0:  # (sizing a GEMM path's workspace needs the device)
        workspace8, _ = mem.tensor(F32, size.value // 4 + 4)
        expect_refused(abi, abi.gemm_router(ref(a), ref(w_router), ref(weights), ref(ids), ref(router), None, None,
                                            None, ctypes.c_void_p(workspace8.data + 8), size.value, s),
                       "coda_gemm_router", "workspace")
    backward_functions(abi, gpu, mem, s)
    if gpu:
        torch.cuda.synchronize()


def backward_functions(abi, gpu, mem, s):
    """The backward ops, each once with a bad argument and once with good ones."""
    m, hidden, f, n2, heads, head_dim = 64, 64, 32, 96, 3, 32
    count = ctypes.c_int64(5)
    expect_refused(abi, abi.row_partial_count(0, ctypes.byref(count)), "coda_row_partial_count", "n")
    check(abi.row_partial_count(300, ctypes.byref(count)) == OK and count.value == 3, "coda_row_partial_count(300)")
    grad_p, _ = mem.tensor(BF16, m, hidden, fill="randn")
    w_down, _ = mem.tensor(BF16, hidden, f, fill="randn")
    y, _ = mem.tensor(BF16, m, 2 * f, fill="randn")
    dy, _ = mem.tensor(BF16, m, 2 * f)
    dots, _ = mem.tensor(F32, m, 1)
    rstd, _ = mem.tensor(F32, m, fill="randn")
    expect_refused(abi, abi.gemm_swiglu_backward(ref(grad_p), ref(w_down), ref(y), ref(y), ref(rstd), None, None, s),
                   "coda_gemm_swiglu_backward", "row_dots")
    expect_runs(abi, gpu, abi.gemm_swiglu_backward(ref(grad_p), ref(w_down), ref(y), ref(dy), ref(dots), ref(rstd),
                                                   None, s), "coda_gemm_swiglu_backward")

    expect_refused(abi, abi.row_scale_backward(ref(dy), ref(y), None, ref(dy), None, s), "coda_row_scale_backward",
                   "scale")
    expect_runs(abi, gpu, abi.row_scale_backward(ref(y), ref(y), ref(rstd), ref(dy), ref(dots), s),
                "coda_row_scale_backward")

    size = ctypes.c_size_t(7)
    expect_refused(abi, abi.residual_rmsnorm_backward_workspace_bytes(0, ctypes.byref(size)),
                   "coda_residual_rmsnorm_backward_workspace_bytes", "m")
    check(abi.residual_rmsnorm_backward_workspace_bytes(m, ctypes.byref(size)) == OK and size.value >= 4 * m,
          "coda_residual_rmsnorm_backward_workspace_bytes: " + abi.message())
    workspace, _ = mem.tensor(F32, size.value // 4)
    dzs, _ = mem.tensor(BF16, m, n2, fill="randn")
    w2, _ = mem.tensor(BF16, n2, hidden, fill="randn")
    h, _ = mem.tensor(BF16, m, hidden, fill="randn")
    g, _ = mem.tensor(F32, hidden, fill="randn")
    dh, _ = mem.tensor(BF16, m, hidden)
    expect_refused(abi, abi.gemm_residual_rmsnorm_backward(ref(dzs), ref(w2), ref(h), ref(g), ref(rstd), ref(dots),
                                                           ref(dh), None, 1, workspace.data, 4, s),
                   "coda_gemm_residual_rmsnorm_backward", "workspace")
    expect_runs(abi, gpu, abi.gemm_residual_rmsnorm_backward(ref(dzs), ref(w2), ref(h), ref(g), ref(rstd), ref(dots),
                                                             ref(dh), None, 1, workspace.data, size.value, s),
                "coda_gemm_residual_rmsnorm_backward")

    expect_refused(abi, abi.rmsnorm_weight_gradients_workspace_bytes(n2, 0, ctypes.byref(size)),
                   "coda_rmsnorm_weight_gradients_workspace_bytes", "hidden")
    check(abi.rmsnorm_weight_gradients_workspace_bytes(n2, hidden, ctypes.byref(size)) == OK,
          "coda_rmsnorm_weight_gradients_workspace_bytes: " + abi.message())
    workspace, _ = mem.tensor(F32, size.value // 4)
    dw2, _ = mem.tensor(F32, n2, hidden)
    dg, _ = mem.tensor(F32, hidden)
    expect_refused(abi, abi.gemm_rmsnorm_weight_gradients(ref(dzs), ref(h), ref(w2), ref(g), ref(dw2), ref(dots),
                                                          workspace.data, size.value, s),
                   "coda_gemm_rmsnorm_weight_gradients", "grad_weight")
    expect_runs(abi, gpu, abi.gemm_rmsnorm_weight_gradients(ref(dzs), ref(h), ref(w2), ref(g), ref(dw2), ref(dg),
                                                            workspace.data, size.value, s),
                "coda_gemm_rmsnorm_weight_gradients")

    grad_qkv, _ = mem.tensor(BF16, m, heads * head_dim, fill="randn")
    dz, _ = mem.tensor(BF16, m, heads * head_dim)
    positions, _ = mem.tensor(I32, m)
    cos, _ = mem.tensor(F32, 128, head_dim // 2, fill="randn")
    expect_refused(abi, abi.rope_backward(ref(grad_qkv), ref(positions), ref(cos), ref(cos), head_dim, 2, ref(dz),
                                          None, ref(dots), None, s), "coda_rope_backward", "options.output")
    expect_runs(abi, gpu, abi.rope_backward(ref(grad_qkv), ref(positions), ref(cos), ref(cos), head_dim, 2, ref(dz),
                                            None, None, None, s), "coda_rope_backward")


def view(t, dtype):
    shape = list(t.shape)
    strides = list(t.stride())
    return Tensor(t.data_ptr(), dtype, len(shape), (ctypes.c_int64 * 3)(*shape), (ctypes.c_int64 * 3)(*strides))


def relative_error(got, want):
    return ((got.double() - want).norm() / want.norm()).item()


def results_on_gpu(abi):
    """Real results against torch: the GEMM (both majors), split-K over a garbage workspace, the ops."""
    s = stream()
    for m, n, k in [(256, 512, 1024), (129, 1000, 72)]:
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        y = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        want = x.double() @ w.double().T
        check(abi.gemm(ref(view(x, BF16)), K_MAJOR, ref(view(w, BF16)), K_MAJOR, ref(view(y, BF16)), None, 0, s) == OK,
              abi.message())
        wt = w.T.contiguous()  # (K x N): N-major
        y2 = torch.full_like(y, float("nan"))
        check(abi.gemm(ref(view(x, BF16)), K_MAJOR, ref(view(wt, BF16)), MN_MAJOR, ref(view(y2, BF16)), None, 0, s) == OK,
              abi.message())
        torch.cuda.synchronize()
        check(relative_error(y, want) < 6e-3, f"coda_gemm {m}x{n}x{k}: error {relative_error(y, want):.2e}")
        check(relative_error(y2, want) < 6e-3, f"coda_gemm N-major {m}x{n}x{k}: error {relative_error(y2, want):.2e}")

    # Split-K across the CTAs of a cluster: no workspace asked for, none given. (16 weight tiles of 64 rows
    # and 3 tokens leave most SMs idle: the planner splits in clusters.)
    m, n, k = 3, 1024, 8192
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    y = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    size = ctypes.c_size_t(1)
    plan = GemmPlan()
    check(abi.gemm_workspace_bytes(ref(view(x, BF16)), K_MAJOR, ref(view(w, BF16)), K_MAJOR, ref(view(y, BF16)),
                                   ctypes.byref(size)) == OK and size.value == 0, "no workspace: " + abi.message())
    check(abi.gemm_plan(ref(view(x, BF16)), K_MAJOR, ref(view(w, BF16)), K_MAJOR, ref(view(y, BF16)), 0,
                        ctypes.byref(plan)) == OK and plan.split_k > 1 and plan.workspace_bytes == 0,
          f"the plan splits K in clusters: {plan.split_k}, {plan.workspace_bytes} bytes")
    check(abi.gemm(ref(view(x, BF16)), K_MAJOR, ref(view(w, BF16)), K_MAJOR, ref(view(y, BF16)), None, 0, s) == OK,
          abi.message())
    torch.cuda.synchronize()
    error = relative_error(y, x.double() @ w.double().T)
    check(error < 6e-3, f"split-K in clusters: error {error:.2e}")
    print(f"split-K x{plan.split_k} ({plan.tile.decode()}) across a cluster's CTAs, no workspace: error {error:.2e}")

    # Split-K with the workspace a caching allocator hands out: garbage, new garbage every call. (4 weight
    # tiles of 64 rows leave most SMs idle, and 40 tokens are too many for a cluster's slots: the planner
    # splits through the workspace.)
    m, n, k = 40, 256, 7168
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    want = x.double() @ w.double().T
    y = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    size = ctypes.c_size_t(0)
    check(abi.gemm_workspace_bytes(ref(view(x, BF16)), K_MAJOR, ref(view(w, BF16)), K_MAJOR, ref(view(y, BF16)),
                                   ctypes.byref(size)) == OK and size.value > 0, "a split-K workspace: " + abi.message())
    plan = GemmPlan()
    check(abi.gemm_plan(ref(view(x, BF16)), K_MAJOR, ref(view(w, BF16)), K_MAJOR, ref(view(y, BF16)), size.value,
                        ctypes.byref(plan)) == OK and plan.split_k > 1, f"the plan splits K: {plan.split_k}")
    results = []
    for trial in range(3):
        garbage = torch.randint(-2**31, 2**31 - 1, ((size.value + 3) // 4,), device="cuda", dtype=torch.int32)
        y.fill_(float("nan"))
        check(abi.gemm(ref(view(x, BF16)), K_MAJOR, ref(view(w, BF16)), K_MAJOR, ref(view(y, BF16)),
                       ctypes.c_void_p(garbage.data_ptr()), size.value, s) == OK, abi.message())
        torch.cuda.synchronize()
        error = relative_error(y, want)
        check(error < 6e-3, f"split-K over a garbage workspace, trial {trial}: error {error:.2e}")
        results.append(y.clone())
    check(all(torch.equal(results[0], r) for r in results[1:]), "split-K over garbage: the same bits every run")
    print(f"split-K x{plan.split_k} ({plan.tile.decode()}) over a garbage workspace of {size.value} bytes: "
          f"error {relative_error(results[0], want):.2e}, bitwise repeatable")
    # The same GEMM prepared once, run on another output over new garbage: coda_gemm's bits.
    prepared = ctypes.c_void_p()
    check(abi.gemm_prepare(ref(view(x, BF16)), K_MAJOR, ref(view(w, BF16)), K_MAJOR, ref(view(y, BF16)), size.value,
                           ctypes.byref(prepared), ctypes.byref(plan)) == OK and plan.split_k > 1,
          f"coda_gemm_prepare: {abi.message()} (split {plan.split_k})")
    garbage = torch.randint(-2**31, 2**31 - 1, ((size.value + 3) // 4,), device="cuda", dtype=torch.int32)
    y2 = torch.full_like(y, float("nan"))
    check(abi.gemm_prepared_run(prepared, x.data_ptr(), w.data_ptr(), y2.data_ptr(), garbage.data_ptr(), s) == OK,
          abi.message())
    torch.cuda.synchronize()
    check(torch.equal(y2, results[0]), "coda_gemm_prepared_run: not coda_gemm's bits")
    abi.gemm_prepared_destroy(prepared)

    # SwiGLU: out = silu(gate) * up, gate and up interleaved in W's rows.
    m, k, f = 300, 256, 192
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(2 * f, k, device="cuda", dtype=torch.bfloat16) / 16
    out = torch.full((m, f), float("nan"), device="cuda", dtype=torch.bfloat16)
    check(abi.gemm_swiglu(ref(view(x, BF16)), ref(view(w, BF16)), ref(view(out, BF16)), None, None, s) == OK,
          abi.message())
    y = x.double() @ w.double().T
    want = torch.nn.functional.silu(y[:, 0::2]) * y[:, 1::2]
    torch.cuda.synchronize()
    check(relative_error(out, want) < 1e-2, f"coda_gemm_swiglu: error {relative_error(out, want):.2e}")

    # Cross-entropy against torch, the workspace again garbage.
    m, k, vocab = 257, 128, 3000
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(vocab, k, device="cuda", dtype=torch.bfloat16) / 8
    targets = torch.randint(0, vocab, (m,), device="cuda", dtype=torch.int32)
    loss = torch.empty(1, device="cuda", dtype=torch.float32)
    lse = torch.empty(m, device="cuda", dtype=torch.float32)
    options = CrossEntropyOptions(-100, 0.1, 0.0, 0.0, 2)
    check(abi.cross_entropy_workspace_bytes(m, vocab, ref(options), ctypes.byref(size)) == OK, abi.message())
    garbage = torch.randint(-2**31, 2**31 - 1, ((size.value + 3) // 4,), device="cuda", dtype=torch.int32)
    check(abi.gemm_cross_entropy(ref(view(x, BF16)), ref(view(w, BF16)), ref(view(targets, I32)), ref(view(loss, F32)),
                                 ref(view(lse, F32)), ref(options), None, None, ctypes.c_void_p(garbage.data_ptr()),
                                 size.value, s) == OK, abi.message())
    logits = x.double() @ w.double().T
    want = torch.nn.functional.cross_entropy(logits, targets.long(), label_smoothing=0.1)
    torch.cuda.synchronize()
    check(abs(loss.item() - want.item()) < 1e-3 * abs(want.item()), f"coda_gemm_cross_entropy: {loss.item()} vs {want.item()}")

    # Its backward from the stored logits (in place) against torch's autograd in fp64, the workspace garbage.
    stored = torch.full((m, (vocab + 7) // 8 * 8), float("nan"), device="cuda", dtype=torch.bfloat16)[:, :vocab]
    check(abi.cross_entropy_workspace_bytes(m, vocab, ref(options), ctypes.byref(size)) == OK, abi.message())
    check(abi.gemm_cross_entropy(ref(view(x, BF16)), ref(view(w, BF16)), ref(view(targets, I32)), ref(view(loss, F32)),
                                 ref(view(lse, F32)), ref(options), None, ref(view(stored, BF16)),
                                 ctypes.c_void_p(garbage.data_ptr()), size.value, s) == OK, abi.message())
    check(abi.cross_entropy_backward_from_logits_workspace_bytes(m, vocab, k, ctypes.byref(size)) == OK, abi.message())
    garbage = torch.randint(-2**31, 2**31 - 1, ((size.value + 3) // 4,), device="cuda", dtype=torch.int32)
    one = torch.ones(1, device="cuda")
    dx, dw = torch.full_like(x, float("nan")), torch.full_like(w, float("nan"))
    check(abi.gemm_cross_entropy_backward_from_logits(
        ref(view(x, BF16)), ref(view(w, BF16)), ref(view(targets, I32)), ref(view(lse, F32)), ref(view(one, F32)),
        ref(view(stored, BF16)), ref(view(stored, BF16)), ref(view(dx, BF16)), ref(view(dw, BF16)), ref(options), None,
        None, ctypes.c_void_p(garbage.data_ptr()), size.value, s) == OK, abi.message())
    x64, w64 = x.double().requires_grad_(), w.double().requires_grad_()
    torch.nn.functional.cross_entropy(x64 @ w64.T, targets.long(), label_smoothing=0.1).backward()
    torch.cuda.synchronize()
    for name, got, want in (("dx", dx, x64.grad), ("dw", dw, w64.grad)):
        error = relative_error(got, want)
        check(error < 2e-2, f"coda_gemm_cross_entropy_backward_from_logits: {name} error {error:.2e}")


def part_sums(t, width):
    """Row sums of t over consecutive parts of `width` columns: the ops' row partials."""
    parts = (t.shape[1] + width - 1) // width
    return torch.stack([t[:, b * width:(b + 1) * width].sum(1) for b in range(parts)], 1)


def backward_results_on_gpu(abi):
    """The backward ops against torch's autograd in fp64."""
    s, nan, F = stream(), float("nan"), torch.nn.functional
    # SwiGLU backward: dY from dP, W_down and the saved Y, scaled by rstd, with the row partials of <dY, Y>.
    m, hidden, f = 300, 256, 192
    y = (2 * torch.randn(m, 2 * f, device="cuda")).to(torch.bfloat16)
    w_down = (torch.randn(hidden, f, device="cuda") / 16).to(torch.bfloat16)
    dp = torch.randn(m, hidden, device="cuda", dtype=torch.bfloat16)
    rstd = torch.rand(m, device="cuda") + 0.5
    y64 = y.double().requires_grad_()
    (F.silu(y64[:, 0::2]) * y64[:, 1::2] @ w_down.double().T).backward(dp.double())
    dy = torch.full((m, 2 * f), nan, device="cuda", dtype=torch.bfloat16)
    dots = torch.full((m, (f + 127) // 128), nan, device="cuda")
    check(abi.gemm_swiglu_backward(ref(view(dp, BF16)), ref(view(w_down, BF16)), ref(view(y, BF16)),
                                   ref(view(dy, BF16)), ref(view(dots, F32)), ref(view(rstd, F32)), None, s) == OK,
          abi.message())
    torch.cuda.synchronize()
    error = relative_error(dy, y64.grad * rstd.double()[:, None])
    check(error < 1e-2, f"coda_gemm_swiglu_backward: dY error {error:.2e}")
    error = relative_error(dots, part_sums(y64.grad * y64.detach(), 256))
    check(error < 1e-4, f"coda_gemm_swiglu_backward: row partials error {error:.2e}")

    # RMSNorm(h; g) W2^T backward from dZ: dZs and the partials, then dh, dW2 and dg through the three ops.
    m, hidden, n2, eps = 257, 256, 384, 1e-6
    h = torch.randn(m, hidden, device="cuda", dtype=torch.bfloat16)
    g = torch.rand(hidden, device="cuda") + 0.5
    w2 = (torch.randn(n2, hidden, device="cuda") / 16).to(torch.bfloat16)
    dz = torch.randn(m, n2, device="cuda", dtype=torch.bfloat16)
    h64, g64, w64 = (t.double().requires_grad_() for t in (h, g, w2))
    rstd64 = torch.rsqrt(h64.pow(2).mean(-1, keepdim=True) + eps)
    z64 = (h64 * rstd64 * g64) @ w64.T
    z64.backward(dz.double())
    rstd = rstd64.detach().float().squeeze(1).contiguous()
    z = z64.detach().to(torch.bfloat16)
    # dZs = rstd dZ and the partials of <dZ, Z>, as an epilogue producing dZ would store them.
    dzs = torch.full((m, n2), nan, device="cuda", dtype=torch.bfloat16)
    dots = torch.full((m, (n2 + 127) // 128), nan, device="cuda")
    check(abi.row_scale_backward(ref(view(dz, BF16)), ref(view(z, BF16)), ref(view(rstd, F32)), ref(view(dzs, BF16)),
                                 ref(view(dots, F32)), s) == OK, abi.message())
    size = ctypes.c_size_t(0)
    check(abi.residual_rmsnorm_backward_workspace_bytes(m, ctypes.byref(size)) == OK, abi.message())
    workspace = torch.randint(-2**31, 2**31 - 1, ((size.value + 3) // 4,), device="cuda", dtype=torch.int32)
    dh = torch.full((m, hidden), nan, device="cuda", dtype=torch.bfloat16)
    check(abi.gemm_residual_rmsnorm_backward(ref(view(dzs, BF16)), ref(view(w2, BF16)), ref(view(h, BF16)),
                                             ref(view(g, F32)), ref(view(rstd, F32)), ref(view(dots, F32)),
                                             ref(view(dh, BF16)), None, 1, ctypes.c_void_p(workspace.data_ptr()),
                                             size.value, s) == OK, abi.message())
    check(abi.rmsnorm_weight_gradients_workspace_bytes(n2, hidden, ctypes.byref(size)) == OK, abi.message())
    workspace = torch.randint(-2**31, 2**31 - 1, ((size.value + 3) // 4,), device="cuda", dtype=torch.int32)
    dw2 = torch.full((n2, hidden), nan, device="cuda")
    dg = torch.full((hidden,), nan, device="cuda")
    check(abi.gemm_rmsnorm_weight_gradients(ref(view(dzs, BF16)), ref(view(h, BF16)), ref(view(w2, BF16)),
                                            ref(view(g, F32)), ref(view(dw2, F32)), ref(view(dg, F32)),
                                            ctypes.c_void_p(workspace.data_ptr()), size.value, s) == OK, abi.message())
    torch.cuda.synchronize()
    error = relative_error(dots, part_sums(dz.double() * z.double(), 128))
    check(error < 1e-4, f"coda_row_scale_backward: row partials error {error:.2e}")
    for name, got, want in [("dh", dh, h64.grad), ("dW2", dw2, w64.grad), ("dg", dg, g64.grad)]:
        error = relative_error(got, want)
        check(error < 1e-2, f"the RMSNorm backward ops: {name} error {error:.2e}")

    # RoPE backward: the inverse rotation of two rotated heads of three, with the row partials of <dY, Y>.
    m, heads, head_dim, rotated, max_pos = 129, 3, 64, 2, 256
    inverse_frequencies = 1.0 / 10000 ** (torch.arange(0, head_dim, 2, device="cuda").double() / head_dim)
    angles = torch.arange(max_pos, device="cuda").double()[:, None] * inverse_frequencies[None, :]
    cos, sin = angles.cos().float(), angles.sin().float()
    positions = torch.randint(0, max_pos, (m,), device="cuda", dtype=torch.int32)
    z64 = torch.randn(m, heads * head_dim, device="cuda", dtype=torch.float64, requires_grad=True)
    pairs = z64.view(m, heads, head_dim // 2, 2)
    c, sn = cos.double()[positions.long()][:, None, :], sin.double()[positions.long()][:, None, :]
    turned = torch.stack((pairs[..., 0] * c - pairs[..., 1] * sn, pairs[..., 0] * sn + pairs[..., 1] * c), -1)
    qkv64 = torch.cat((turned[:, :rotated], pairs[:, rotated:]), 1).reshape(m, heads * head_dim)
    dqkv = torch.randn(m, heads * head_dim, device="cuda", dtype=torch.bfloat16)
    qkv64.backward(dqkv.double())
    qkv = qkv64.detach().to(torch.bfloat16)
    dz = torch.full((m, heads * head_dim), nan, device="cuda", dtype=torch.bfloat16)
    dots = torch.full((m, (heads * head_dim + 127) // 128), nan, device="cuda")
    check(abi.rope_backward(ref(view(dqkv, BF16)), ref(view(positions, I32)), ref(view(cos, F32)), ref(view(sin, F32)),
                            head_dim, rotated, ref(view(dz, BF16)), ref(view(qkv, BF16)), ref(view(dots, F32)), None,
                            s) == OK, abi.message())
    torch.cuda.synchronize()
    error = relative_error(dz, z64.grad)
    check(error < 1e-2, f"coda_rope_backward: error {error:.2e}")
    error = relative_error(dots, part_sums(dqkv.double() * qkv.double(), 128))
    check(error < 1e-4, f"coda_rope_backward: row partials error {error:.2e}")


def main(argv):
    abi, gpu = start(argv, __doc__)
    if abi is None:
        return 2
    print(f"coda {abi.version().decode()} through ctypes; torch {torch.__version__ if torch else 'not installed'}; "
          f"{'a Hopper GPU: valid calls run' if gpu else 'no Hopper GPU (or no torch): valid calls are unsupported'}",
          flush=True)
    check(abi.status_name(INVALID_ARGUMENT) == b"invalid argument", "coda_status_name")
    every_function(abi, gpu)
    if gpu:
        results_on_gpu(abi)
        backward_results_on_gpu(abi)
    return finish()


if __name__ == "__main__":
    sys.exit(main(sys.argv))

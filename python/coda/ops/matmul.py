"""coda.linear: y = x @ weight.T on coda's GEMM (F.linear without a bias), any operand majors.

    y = coda.linear(x, weight)   # x (..., K), weight (N, K): bf16 or f16 CUDA tensors
    y = coda.mm(a, b)            # a (M, K) @ b (K, N), like torch.mm

An operand whose transpose is contiguous (x.t(), weight.t() views) runs as an MN-major operand with
no copy; other layouts are copied into whichever layout has 16-byte-aligned rows. Gradients run on
coda's GEMM too: dx = dy @ weight (weight MN-major), dweight = dy.T @ x (both MN-major). Eager calls
on plain CUDA tensors skip torch's dispatcher (a plan cached per shape; with gradients a
torch.autograd.Function); torch.compile and dispatch modes see the custom op torch.ops.coda.linear.
"""
import torch

from .. import _checks as checks
from .. import _library as L

_lib = torch.library.Library("coda", "FRAGMENT")
_lib.define("linear(Tensor x, Tensor weight) -> Tensor")


def _layout(name, t):
    """(major, in place) for a logical (rows, K) operand: read in place when its rows (K-major) or, for a
    transposed view, its transpose's rows (MN-major) are contiguous at a stride of a multiple of 8
    elements; else copied into whichever of the two layouts has rows of a multiple of 8."""
    rows, k = t.shape
    s0, s1 = t.stride()
    if (s1 == 1 or k == 1) and (rows == 1 or (s0 % 8 == 0 and s0 >= k)):  # rows apart, not overlapping
        return L.K_MAJOR, True
    if rows > 1 and s0 == 1 and (k == 1 or (s1 % 8 == 0 and s1 >= rows)):
        return L.MN_MAJOR, True
    if k % 8 == 0:
        return L.K_MAJOR, False
    if rows % 8 == 0:
        return L.MN_MAJOR, False
    raise ValueError(f"coda.linear: {name} has shape {(rows, k)}; K ({k}) or its rows ({rows}) must be a multiple "
                     "of 8 (rows of 16 bytes, the tensor-memory-access rule)")


def _check(x, weight):
    checks.tensor("linear", "x", x, checks.FLOATS)
    checks.tensor("linear", "weight", weight, checks.FLOATS, rank=2)
    checks.same_dtype("linear", "weight", weight, "x", x)
    checks.same_device("linear", (("x", x), ("weight", weight)))
    if x.dim() < 1 or x.shape[-1] != weight.shape[1]:
        raise ValueError(f"coda.linear: x has shape {tuple(x.shape)} and weight {tuple(weight.shape)}; x's last "
                         "dimension must be weight's second (K)")
    checks.multiple_of_8("linear", "weight", weight.shape[0], "N (rows; the output's row length)")
    x2 = x if x.dim() == 2 else x.reshape(-1, x.shape[-1])
    return _layout("x", x2), _layout("weight", weight)


@torch.library.register_fake("coda::linear")
def _fake(x, weight):
    _check(x, weight)
    return x.new_empty(*x.shape[:-1], weight.shape[0])


def _operand(t, layout):
    """The tensor libcoda reads for a logical (rows, K) operand in `layout` (from _layout), and its major."""
    major, in_place = layout
    if major == L.K_MAJOR:
        return checks.rows(t), major  # copies when not in place or misaligned
    stored = t.t()
    if in_place and stored.data_ptr() % 16 == 0:
        return checks.rows(stored), major
    return t.new_empty(stored.shape).copy_(stored), major


def _gemm_workspace_bytes(a, a_major, b, b_major, out, va, vb, vc):
    """coda_gemm's split-K workspace for these shapes and majors (asked once per shape)."""
    key = ("gemm", a.shape, a_major, b.shape, b_major, out.shape, out.dtype)
    return L.cached_size(key, L.lib.coda_gemm_workspace_bytes, va, a_major, vb, b_major, vc)


def gemm(a, b, out, layouts=None):
    """out = a @ b.T through coda_gemm (a, b logical (M, K), (N, K); their layouts from _layout); the split-K
    workspace from torch."""
    a_layout, b_layout = layouts or (_layout("a", a), _layout("b", b))
    (a, a_major), (b, b_major) = _operand(a, a_layout), _operand(b, b_layout)
    va, vb, vc = L.view("a", a), L.view("b", b), L.view("c", out)
    bytes_ = _gemm_workspace_bytes(a, a_major, b, b_major, out, va, vb, vc)
    ws = L.workspace(bytes_, out.device) if bytes_ else None
    L.call(L.lib.coda_gemm, va, a_major, vb, b_major, vc, ws.data_ptr() if ws is not None else None, bytes_,
           L.stream(out.device))
    return out


@L.kernel(_lib, "linear")
def _linear(x, weight):
    layouts = _check(x, weight)
    x2 = x if x.dim() == 2 else x.reshape(-1, x.shape[-1])
    out = torch.empty(x2.shape[0], weight.shape[0], dtype=x.dtype, device=x.device)
    with L.on_device(x.device):
        gemm(x2, weight, out, layouts)
    return out if x.dim() == 2 else out.view(*x.shape[:-1], weight.shape[0])


def _setup(ctx, inputs, output):
    x, weight = inputs
    ctx.save_for_backward(x if ctx.needs_input_grad[1] else None, weight if ctx.needs_input_grad[0] else None)


def input_and_weight_grads(ctx, dy, x, w):
    """dx = dy W and dW = dy^T x for y = x W^T, each on coda's GEMM when ctx says its input needs a gradient
    (x, w: the first two inputs). dx takes x's shape; x may be None (not saved) when dW is not needed, and
    dx then takes dy's leading shape. Every projection op's backward ends with it."""
    dy2 = dy.reshape(-1, dy.shape[-1])
    lead = dy.shape[:-1] if x is None else x.shape[:-1]
    dx = linear(dy2, w.t()).view(*lead, w.shape[1]) if ctx.needs_input_grad[0] else None
    dw = linear(dy2.t(), x.reshape(-1, x.shape[-1]).t()) if ctx.needs_input_grad[1] else None
    return dx, dw


def _backward(ctx, dy):
    x, weight = ctx.saved_tensors
    return input_and_weight_grads(ctx, dy, x, weight)


torch.library.register_autograd("coda::linear", _backward, setup_context=_setup)


class _Plan:
    """A validated eager call of one shape, prepared in libcoda (coda_gemm_prepare: checked, planned and its
    tensor maps encoded once); a call passes only the addresses. Made only for operands libcoda reads in place,
    so the prepared shapes and strides describe every later call's tensors."""

    def __init__(self, x, weight, layouts):
        x2 = x if x.dim() == 2 else x.view(-1, x.shape[-1])
        (a, a_major), (b, b_major) = _operand(x2, layouts[0]), _operand(weight, layouts[1])
        self.in_place = a.data_ptr() == x.data_ptr() and b.data_ptr() == weight.data_ptr()
        self.out_shape = (*x.shape[:-1], weight.shape[0])
        out = x.new_empty(x2.shape[0], weight.shape[0])
        args = tuple(L.ctypes.byref(L.struct(t)) for t in (a, b, out))
        self.workspace_bytes = _gemm_workspace_bytes(a, a_major, b, b_major, out, *args)
        handle = L.ctypes.c_void_p()
        L.call(L.lib.coda_gemm_prepare, args[0], a_major, args[1], b_major, args[2], self.workspace_bytes,
               L.ctypes.byref(handle), None)
        run, destroy = L.lib.coda_gemm_prepared_run, L.lib.coda_gemm_prepared_destroy
        self.handle, self.run, self._destroy = handle.value, run, destroy

    def __del__(self):
        self._destroy(self.handle)


class _Plans(L.threading.local):
    def __init__(self):
        self.by_key = {}


_plans = _Plans()


def _linear_eager(x, weight, transposed=False):
    """_linear for plain CUDA tensors outside tracing (L.eager): one dictionary lookup replaces the checks when
    the shapes, strides and dtypes were seen before and neither operand needs a copy. `transposed`: weight is
    given as its (K, N) transpose (coda.mm), read in place without making the view."""
    key = (x.shape, x.stride(), weight.shape, weight.stride(), x.dtype, weight.dtype, x.get_device(),
           weight.get_device(), transposed)
    plans = _plans.by_key
    plan = plans.get(key)
    device = x.get_device()
    if plan is None:
        w = weight.t() if transposed else weight
        layouts = _check(x, w)
        if not (layouts[0][1] and layouts[1][1] and (x.dim() == 2 or x.is_contiguous())):
            plan = plans[key] = False  # this shape and these strides always need a copy
        elif (x.data_ptr() | weight.data_ptr()) % 16 == 0 and device == torch._C._cuda_getDevice():
            plan = _Plan(x, w, layouts)
            if plan.in_place:
                plans[key] = plan
    if not plan or not plan.in_place or (x.data_ptr() | weight.data_ptr()) % 16 or device != torch._C._cuda_getDevice():
        return _linear(x, weight.t() if transposed else weight)
    out = x.new_empty(plan.out_shape)
    ws = L.workspace(plan.workspace_bytes, x.device) if plan.workspace_bytes else None
    status = plan.run(plan.handle, x.data_ptr(), weight.data_ptr(), out.data_ptr(),
                      ws.data_ptr() if ws is not None else None, torch._C._cuda_getCurrentRawStream(device))
    if status:
        L.raise_for(status)
    return out


class _LinearFunction(torch.autograd.Function):
    """The op's autograd formula for eager calls (a torch.autograd.Function costs less host time than the
    custom op's Python autograd wrapper); torch.compile and the modes take torch.ops.coda.linear."""

    @staticmethod
    def forward(ctx, x, weight):
        _setup(ctx, (x, weight), None)
        return _linear_eager(x, weight)

    @staticmethod
    def backward(ctx, dy):
        return _backward(ctx, dy)


# Where torch.autograd.Function.apply is a Python classmethod (torch 2.11; newer torch implements it in C), its
# wrapper costs 0.7-5 µs of host time a call (docs/performance.md, "The PyTorch package"). For a Function without
# setup_context and no functorch transform active it only unwraps dead functorch wrappers and calls the C apply
# of torch._C._FunctionBase, so the eager path does the same itself.
_PYTHON_APPLY = isinstance(torch.autograd.Function.__dict__.get("apply"), classmethod)
_unwrap_if_dead = getattr(torch._C._functorch, "unwrap_if_dead", None)
_c_apply = super(torch.autograd.Function, _LinearFunction).apply


def _linear_function(x, weight):
    if _PYTHON_APPLY and _unwrap_if_dead is not None and not torch._C._are_functorch_transforms_active():
        return _c_apply(_unwrap_if_dead(x), _unwrap_if_dead(weight))
    return _LinearFunction.apply(x, weight)


def linear(x, weight):
    """y = x @ weight.T (torch.nn.functional.linear without a bias) on coda's GEMM.

    x: (..., K), weight: (N, K), one dtype (bf16 or f16; float32 inputs follow torch.autocast), on
    one CUDA device; N and the operands' stored row lengths multiples of 8. Returns (..., N).

        y = coda.linear(x, layer.weight)
    """
    if L.eager(x, weight):
        return _linear_function(x, weight) if L.needs_grad(x, weight) else _linear_eager(x, weight)
    x, weight = L.autocast(x, weight)
    return torch.ops.coda.linear(x, weight)


def mm(a, b):
    """a @ b on coda's GEMM, like torch.mm: a (M, K), b (K, N); a contiguous b runs N-major, no copy.

        c = coda.mm(a, b)
    """
    if L.eager(a, b) and not L.needs_grad(a, b):
        return _linear_eager(a, b, transposed=True)
    return linear(a, b.t())

"""The LM head with a fused cross-entropy loss: the M x V logits are never materialized.

    loss = coda.linear_cross_entropy(hidden, lm_head.weight, targets)          # mean over non-ignored
    loss = coda.linear_cross_entropy(hidden, w, targets, ignore_index=-100, label_smoothing=0.1,
                                     z_loss=1e-4, softcap=30.0, reduction="sum")

Losses follow torch.nn.functional.cross_entropy(hidden @ w.T, targets, ...) in f32 (z_loss adds
z_loss * lse^2 per row, softcap applies cap * tanh(logit / cap) first). The forward is one GEMM
whose epilogue reduces each tile of logits to row partials; the backward (coda's) recomputes the
logits chunk by chunk from the saved log-sum-exp, three GEMMs a chunk: dZ in the first's epilogue,
dW[chunk] = dZ^T x and dx += dZ W[chunk] (f32 running sum, fixed order). Extra memory: a
workspace of about 192 MiB at the largest chunk, from torch's caching allocator.
"""
import torch

from .. import _checks as checks
from .. import _library as L

_lib = torch.library.Library("coda", "FRAGMENT")
_OPTIONS = "int ignore_index, float label_smoothing, float z_loss, float softcap, str reduction"
_lib.define(f"linear_cross_entropy(Tensor x, Tensor weight, Tensor targets, {_OPTIONS}) -> (Tensor, Tensor)")
_lib.define(f"linear_cross_entropy_backward(Tensor grad_loss, Tensor x, Tensor weight, Tensor targets, Tensor lse, "
            f"{_OPTIONS}) -> (Tensor, Tensor)")
_OP = "linear_cross_entropy"


def _check(x, weight, targets, ignore_index, label_smoothing, z_loss, softcap, reduction):
    checks.tensor(_OP, "x", x, checks.FLOATS, rank=2)
    checks.tensor(_OP, "weight", weight, checks.FLOATS, rank=2)
    checks.same_dtype(_OP, "weight", weight, "x", x)
    checks.tensor(_OP, "targets", targets, (torch.int32,), rank=1)
    checks.same_device(_OP, (("x", x), ("weight", weight), ("targets", targets)))
    if x.shape[1] != weight.shape[1]:
        raise ValueError(f"coda.{_OP}: x has shape {tuple(x.shape)} and weight {tuple(weight.shape)}; x's columns "
                         "must be weight's (K)")
    checks.size(_OP, "targets", targets.shape[0], x.shape[0], "length")
    checks.multiple_of_8(_OP, "x", x.shape[1], "K (columns)")
    if reduction not in L.REDUCTIONS:
        raise ValueError(f"coda.{_OP}: reduction {reduction!r} must be 'none', 'sum' or 'mean'")
    if not 0 <= label_smoothing < 1:
        raise ValueError(f"coda.{_OP}: label_smoothing {label_smoothing} must be in [0, 1)")
    if not z_loss >= 0 or not softcap >= 0:
        raise ValueError(f"coda.{_OP}: z_loss {z_loss} and softcap {softcap} must be >= 0 (softcap 0: off)")


def _loss_shape(x, reduction):
    return (x.shape[0],) if reduction == "none" else ()


@torch.library.register_fake("coda::linear_cross_entropy")
def _fake(x, weight, targets, ignore_index, label_smoothing, z_loss, softcap, reduction):
    _check(x, weight, targets, ignore_index, label_smoothing, z_loss, softcap, reduction)
    return x.new_empty(_loss_shape(x, reduction), dtype=torch.float32), x.new_empty(x.shape[0], dtype=torch.float32)


_options_cache = {}


def _options(ignore_index, label_smoothing, z_loss, softcap, reduction):
    key = (ignore_index, label_smoothing, z_loss, softcap, reduction)
    options = _options_cache.get(key)
    if options is None:
        options = _options_cache[key] = L.CrossEntropyOptions(ignore_index, label_smoothing, z_loss, softcap,
                                                              L.REDUCTIONS[reduction])
    return options


@L.kernel(_lib, "linear_cross_entropy")
def _forward(x, weight, targets, ignore_index, label_smoothing, z_loss, softcap, reduction):
    _check(x, weight, targets, ignore_index, label_smoothing, z_loss, softcap, reduction)
    x, weight, targets = checks.rows(x), checks.rows(weight), checks.vector(targets)
    options = _options(ignore_index, label_smoothing, z_loss, softcap, reduction)
    loss = x.new_empty(x.shape[0] if reduction == "none" else 1, dtype=torch.float32)
    lse = x.new_empty(x.shape[0], dtype=torch.float32)
    m, vocab = x.shape[0], weight.shape[0]  # options structs live in _options_cache: id() is a stable key
    bytes_ = L.cached_size(("cross_entropy", m, vocab, id(options)), L.lib.coda_cross_entropy_workspace_bytes, m,
                           vocab, L.ctypes.byref(options))
    with L.on_device(x.device):
        ws = L.workspace(bytes_, x.device)
        L.call(L.lib.coda_gemm_cross_entropy, L.view("x", x), L.view("w", weight), L.view("t", targets),
               L.view("loss", loss), L.view("lse", lse), L.ctypes.byref(options), None, None, ws.data_ptr(), bytes_,
               L.stream(x.device))
    return loss.view(_loss_shape(x, reduction)), lse


@torch.library.register_fake("coda::linear_cross_entropy_backward")
def _backward_fake(grad_loss, x, weight, targets, lse, ignore_index, label_smoothing, z_loss, softcap, reduction):
    return x.new_empty(x.shape), weight.new_empty(weight.shape)


@L.kernel(_lib, "linear_cross_entropy_backward", checked=False)
def _backward_op(grad_loss, x, weight, targets, lse, ignore_index, label_smoothing, z_loss, softcap, reduction):
    x, weight, targets, lse = checks.rows(x), checks.rows(weight), checks.vector(targets), checks.vector(lse)
    grad_loss = grad_loss.reshape(-1).float().contiguous()
    options = _options(ignore_index, label_smoothing, z_loss, softcap, reduction)
    grad_x, grad_w = x.new_empty(x.shape), weight.new_empty(weight.shape)
    bytes_ = L.workspace_bytes("coda_cross_entropy_backward_workspace_bytes", x.shape[0], weight.shape[0],
                               x.shape[1], 0)
    with L.on_device(x.device):
        ws = L.workspace(bytes_, x.device)
        L.call(L.lib.coda_gemm_cross_entropy_backward, L.view("x", x), L.view("w", weight), L.view("t", targets),
               L.view("lse", lse), L.view("dl", grad_loss), L.view("dx", grad_x), L.view("dw", grad_w),
               L.ctypes.byref(options), None, None, 0, ws.data_ptr(), bytes_, L.stream(x.device))
    return grad_x, grad_w


def _setup(ctx, inputs, output):
    x, weight, targets, *options = inputs
    ctx.save_for_backward(x, weight, targets, output[1])
    ctx.options = options


def _backward(ctx, grad_loss, _grad_lse):
    x, weight, targets, lse = ctx.saved_tensors
    grad_x, grad_w = torch.ops.coda.linear_cross_entropy_backward(grad_loss, x, weight, targets, lse, *ctx.options)
    return (grad_x if ctx.needs_input_grad[0] else None, grad_w if ctx.needs_input_grad[1] else None) + (None,) * 6


torch.library.register_autograd("coda::linear_cross_entropy", _backward, setup_context=_setup)


def linear_cross_entropy(x, weight, targets, ignore_index=-100, label_smoothing=0.0, z_loss=0.0, softcap=0.0,
                         reduction="mean"):
    """cross_entropy(x @ weight.T, targets) without the logits: x (M, K) or (..., K), weight (V, K), targets
    (M) or (...) integer class indices (int64 is converted to int32). Returns the f32 loss: a scalar for
    'mean' (over non-ignored rows; NaN when all are ignored) and 'sum', the per-token losses for 'none'.

        loss = coda.linear_cross_entropy(h.flatten(0, 1), lm_head.weight, labels.flatten())
    """
    x, weight = L.autocast(x, weight)
    if x.dim() != 2:
        x = x.reshape(-1, x.shape[-1])
    if isinstance(targets, torch.Tensor):
        targets = targets.reshape(-1)
        if targets.dtype == torch.int64:
            targets = targets.to(torch.int32)
    loss, _ = torch.ops.coda.linear_cross_entropy(x, weight, targets, int(ignore_index), float(label_smoothing),
                                                  float(z_loss), float(softcap), reduction)
    return loss

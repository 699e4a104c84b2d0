"""The LM head with a fused cross-entropy loss: the M x V logits are never materialized.

    loss = coda.linear_cross_entropy(hidden, lm_head.weight, targets)          # mean over non-ignored
    loss = coda.linear_cross_entropy(hidden, w, targets, ignore_index=-100, label_smoothing=0.1,
                                     z_loss=1e-4, softcap=30.0, reduction="sum")
    # the final RMSNorm fused in: row_scale = its rstd, the norm's weight folded into w's columns
    loss = coda.linear_cross_entropy(residual, w * g, targets, row_scale=rstd)
    loss, logits = coda.linear_cross_entropy(hidden, w, targets, return_logits=True)  # also the logits

Losses follow torch.nn.functional.cross_entropy(hidden @ w.T, targets, ...) in f32 (z_loss adds
z_loss * lse^2 per row, softcap applies cap * tanh(logit / cap) first; with row_scale, the logits are
row_scale[:, None] * (hidden @ w.T) before the cap). The forward is one GEMM whose epilogue reduces
each tile of logits to row partials; the backward (coda's) recomputes the logits chunk by chunk from
the saved log-sum-exp, three GEMMs a chunk: dZ in the first's epilogue, dW[chunk] = dZ^T x and dx +=
dZ W[chunk] (f32 running sum, fixed order), and with a row scale the row sums of dZ * Z that its
gradient needs. Extra memory: a workspace of about 192 MiB at the largest chunk, from torch's
caching allocator. keep_logits=True trades memory for time: the forward also stores the logits and
the backward computes dZ from them (one pass) before two GEMMs, three GEMMs in all instead of four.
"""
import torch

from .. import _checks as checks
from .. import _library as L

_lib = torch.library.Library("coda", "FRAGMENT")
_OPTIONS = "int ignore_index, float label_smoothing, float z_loss, float softcap, str reduction"
# Returns (loss, lse, logits); logits has no elements unless return_logits.
# skip_below: the backward's (kept here so autograd hands it on; the forward does not read it).
_lib.define(f"linear_cross_entropy(Tensor x, Tensor weight, Tensor targets, {_OPTIONS}, Tensor? row_scale=None, "
            "bool return_logits=False, float skip_below=0.0) -> (Tensor, Tensor, Tensor)")
# Returns (grad_x, grad_weight, grad_row_scale); grad_row_scale has no elements unless row_scale_grad.
# logits: the forward's (return_logits); the backward then reads them instead of recomputing them.
_lib.define(f"linear_cross_entropy_backward(Tensor grad_loss, Tensor x, Tensor weight, Tensor targets, Tensor lse, "
            f"{_OPTIONS}, Tensor? row_scale=None, bool row_scale_grad=False, Tensor? logits=None, "
            "float skip_below=0.0) -> (Tensor, Tensor, Tensor)")
_OP = "linear_cross_entropy"


def _check_skip_below(skip_below):
    if not 0.0 <= L.ctypes.c_float(skip_below).value < 1.0:  # as libcoda reads it: an f32
        raise ValueError(f"coda.{_OP}: skip_below {skip_below} must lie in [0, 1) (0: no skipping)")


def _check(x, weight, targets, ignore_index, label_smoothing, z_loss, softcap, reduction, row_scale, skip_below=0.0):
    _check_skip_below(skip_below)
    checks.tensor(_OP, "x", x, checks.FLOATS, rank=2)
    checks.tensor(_OP, "weight", weight, checks.FLOATS, rank=2)
    checks.same_dtype(_OP, "weight", weight, "x", x)
    checks.tensor(_OP, "targets", targets, (torch.int32,), rank=1)
    if row_scale is not None:
        checks.tensor(_OP, "row_scale", row_scale, (torch.float32,), rank=1)
    checks.same_device(_OP, (("x", x), ("weight", weight), ("targets", targets), ("row_scale", row_scale)))
    if x.shape[1] != weight.shape[1]:
        raise ValueError(f"coda.{_OP}: x has shape {tuple(x.shape)} and weight {tuple(weight.shape)}; x's columns "
                         "must be weight's (K)")
    checks.size(_OP, "targets", targets.shape[0], x.shape[0], "length")
    if row_scale is not None:
        checks.size(_OP, "row_scale", row_scale.shape[0], x.shape[0], "length")
    checks.multiple_of_8(_OP, "x", x.shape[1], "K (columns)")
    if reduction not in L.REDUCTIONS:
        raise ValueError(f"coda.{_OP}: reduction {reduction!r} must be 'none', 'sum' or 'mean'")
    if not 0 <= label_smoothing < 1:
        raise ValueError(f"coda.{_OP}: label_smoothing {label_smoothing} must be in [0, 1)")
    if not z_loss >= 0 or not softcap >= 0:
        raise ValueError(f"coda.{_OP}: z_loss {z_loss} and softcap {softcap} must be >= 0 (softcap 0: off)")


def _loss_shape(x, reduction):
    return (x.shape[0],) if reduction == "none" else ()


def _new_logits(x, vocab, wanted):
    """The logits' buffer: M x V of x's type in rows padded to 16 bytes (libcoda's TMA stores write whole
    16-byte chunks), or no elements."""
    if not wanted:
        return x.new_empty(0)
    return x.new_empty(x.shape[0], checks.round_up_8(vocab))[:, :vocab]


@torch.library.register_fake("coda::linear_cross_entropy")
def _fake(x, weight, targets, ignore_index, label_smoothing, z_loss, softcap, reduction, row_scale=None,
          return_logits=False, skip_below=0.0):
    _check(x, weight, targets, ignore_index, label_smoothing, z_loss, softcap, reduction, row_scale, skip_below)
    return (x.new_empty(_loss_shape(x, reduction), dtype=torch.float32),
            x.new_empty(x.shape[0], dtype=torch.float32), _new_logits(x, weight.shape[0], return_logits))


_options_cache = {}


def _options(ignore_index, label_smoothing, z_loss, softcap, reduction):
    key = (ignore_index, label_smoothing, z_loss, softcap, reduction)
    options = _options_cache.get(key)
    if options is None:
        options = _options_cache[key] = L.CrossEntropyOptions(ignore_index, label_smoothing, z_loss, softcap,
                                                              L.REDUCTIONS[reduction])
    return options


@L.kernel(_lib, "linear_cross_entropy")
def _forward(x, weight, targets, ignore_index, label_smoothing, z_loss, softcap, reduction, row_scale=None,
             return_logits=False, skip_below=0.0):
    _check(x, weight, targets, ignore_index, label_smoothing, z_loss, softcap, reduction, row_scale, skip_below)
    x, weight, targets = checks.rows(x), checks.rows(weight), checks.vector(targets)
    row_scale = None if row_scale is None else checks.vector(row_scale)
    options = _options(ignore_index, label_smoothing, z_loss, softcap, reduction)
    loss = x.new_empty(x.shape[0] if reduction == "none" else 1, dtype=torch.float32)
    lse = x.new_empty(x.shape[0], dtype=torch.float32)
    logits = _new_logits(x, weight.shape[0], return_logits)
    m, vocab = x.shape[0], weight.shape[0]  # options structs live in _options_cache: id() is a stable key
    bytes_ = L.cached_size(("cross_entropy", m, vocab, id(options)), L.lib.coda_cross_entropy_workspace_bytes, m,
                           vocab, L.ctypes.byref(options))
    with L.on_device(x.device):
        ws = L.workspace(bytes_, x.device)
        L.call(L.lib.coda_gemm_cross_entropy, L.view("x", x), L.view("w", weight), L.view("t", targets),
               L.view("loss", loss), L.view("lse", lse), L.ctypes.byref(options), L.view("rs", row_scale),
               L.view("logits", logits) if return_logits else None, ws.data_ptr(), bytes_, L.stream(x.device))
    return loss.view(_loss_shape(x, reduction)), lse, logits


@torch.library.register_fake("coda::linear_cross_entropy_backward")
def _backward_fake(grad_loss, x, weight, targets, lse, ignore_index, label_smoothing, z_loss, softcap, reduction,
                   row_scale=None, row_scale_grad=False, logits=None, skip_below=0.0):
    return (x.new_empty(x.shape), weight.new_empty(weight.shape),
            x.new_empty(x.shape[0] if row_scale is not None and row_scale_grad else 0, dtype=torch.float32))


@L.kernel(_lib, "linear_cross_entropy_backward", checked=False)
def _backward_op(grad_loss, x, weight, targets, lse, ignore_index, label_smoothing, z_loss, softcap, reduction,
                 row_scale=None, row_scale_grad=False, logits=None, skip_below=0.0):
    """With the forward's logits, three GEMMs where recomputing takes four: dZ from them into a new M x V
    buffer (the saved logits stay as they are), then dW = dZ^T x and dX = dZ W over the whole vocabulary.
    Soft-capped logits cannot give the row scale's gradient (it needs them before the cap): recomputed.
    skip_below > 0 applies to the recomputing path only (libcoda's skipping backward)."""
    _check_skip_below(skip_below)
    x, weight, targets, lse = checks.rows(x), checks.rows(weight), checks.vector(targets), checks.vector(lse)
    grad_loss = grad_loss.reshape(-1).float().contiguous()
    options = _options(ignore_index, label_smoothing, z_loss, softcap, reduction)
    grad_x, grad_w = x.new_empty(x.shape), weight.new_empty(weight.shape)
    row_dots = None
    if row_scale is not None:
        row_scale = checks.vector(row_scale)
        if row_scale_grad:  # row partials of <dZ, Z>, Z = row_scale * (x w^T) before the cap
            row_dots = x.new_empty(x.shape[0], L.row_partial_count(weight.shape[0]), dtype=torch.float32)
    from_logits = logits is not None and logits.numel() and not (softcap > 0 and row_dots is not None)
    m, vocab, k = x.shape[0], weight.shape[0], x.shape[1]
    common = (L.view("x", x), L.view("w", weight), L.view("t", targets), L.view("lse", lse), L.view("dl", grad_loss))
    with L.on_device(x.device):
        if from_logits:
            bytes_ = L.workspace_bytes("coda_cross_entropy_backward_from_logits_workspace_bytes", m, vocab, k)
            ws = L.workspace(bytes_, x.device)
            L.call(L.lib.coda_gemm_cross_entropy_backward_from_logits, *common, L.view("logits", logits),
                   L.view("dz", _new_logits(x, vocab, True)), L.view("dx", grad_x), L.view("dw", grad_w),
                   L.ctypes.byref(options), L.view("rs", row_scale), L.view("dots", row_dots), ws.data_ptr(), bytes_,
                   L.stream(x.device))
        elif skip_below > 0:
            bytes_ = L.workspace_bytes("coda_cross_entropy_backward_skipping_workspace_bytes", m, vocab, k, 0,
                                       skip_below)
            ws = L.workspace(bytes_, x.device)
            L.call(L.lib.coda_gemm_cross_entropy_backward_skipping, *common, L.view("dx", grad_x),
                   L.view("dw", grad_w), L.ctypes.byref(options), L.view("rs", row_scale), L.view("dots", row_dots),
                   0, skip_below, ws.data_ptr(), bytes_, L.stream(x.device))
        else:
            bytes_ = L.workspace_bytes("coda_cross_entropy_backward_workspace_bytes", m, vocab, k, 0)
            ws = L.workspace(bytes_, x.device)
            L.call(L.lib.coda_gemm_cross_entropy_backward, *common, L.view("dx", grad_x), L.view("dw", grad_w),
                   L.ctypes.byref(options), L.view("rs", row_scale), L.view("dots", row_dots), 0, ws.data_ptr(),
                   bytes_, L.stream(x.device))
    # d loss / d row_scale[m] = sum_n dZ[m, n] (x w^T)[m, n] = <dZ, Z>[m] / row_scale[m]
    grad_row_scale = x.new_empty(0, dtype=torch.float32) if row_dots is None else row_dots.sum(1) / row_scale
    return grad_x, grad_w, grad_row_scale


def _setup(ctx, inputs, output):
    x, weight, targets, *options, row_scale, _return_logits, skip_below = inputs
    # With the logits made (return_logits: asked for, or kept for the backward), the backward reads them.
    ctx.save_for_backward(x, weight, targets, output[1], row_scale, output[2] if output[2].numel() else None)
    ctx.options = options
    ctx.skip_below = skip_below
    ctx.mark_non_differentiable(output[1], output[2])
    ctx.set_materialize_grads(False)  # no M x V zeros for the logits' (absent) gradient


def _backward(ctx, grad_loss, _grad_lse, _grad_logits):
    if grad_loss is None:  # the loss took no part in what is differentiated
        return (None,) * 11
    x, weight, targets, lse, row_scale, logits = ctx.saved_tensors
    needs = ctx.needs_input_grad
    row_scale_grad = row_scale is not None and needs[8]
    grad_x, grad_w, grad_row_scale = torch.ops.coda.linear_cross_entropy_backward(grad_loss, x, weight, targets, lse,
                                                                                 *ctx.options, row_scale,
                                                                                 row_scale_grad, logits,
                                                                                 ctx.skip_below)
    return ((grad_x if needs[0] else None, grad_w if needs[1] else None) + (None,) * 6 +
            (grad_row_scale if row_scale_grad else None, None, None))


torch.library.register_autograd("coda::linear_cross_entropy", _backward, setup_context=_setup)


def linear_cross_entropy(x, weight, targets, ignore_index=-100, label_smoothing=0.0, z_loss=0.0, softcap=0.0,
                         reduction="mean", row_scale=None, return_logits=False, keep_logits=False, skip_below=0.0):
    """cross_entropy(x @ weight.T, targets) without the logits: x (M, K) or (..., K), weight (V, K), targets
    (M) or (...) integer class indices (int64 is converted to int32). Returns the f32 loss: a scalar for
    'mean' (over non-ignored rows; NaN when all are ignored) and 'sum', the per-token losses for 'none'.

    row_scale: optional f32 (M), nonzero (an RMSNorm's rstd): the logits are row_scale[:, None] * (x @ weight.T),
    and row_scale gets a gradient. return_logits: also return the (soft-capped) logits, (M, V) in x's dtype, for
    inspection; they carry no gradient. keep_logits: keep them for the backward (not returned): it then reads them
    instead of recomputing them, three GEMMs of the forward's size in all where recomputing takes four, for M x V
    values held from the forward to the backward and as many again during it (torch.compile's trade). Made
    logits are always kept (return_logits too); the gradient then follows the 16-bit logits, as PyTorch's does.
    skip_below: in [0, 1), e.g. 2 ** -12: the recomputing backward leaves out of dW and dX the blocks of dZ whose
    every element is at most skip_below * |g| * row_scale (g the gradient reaching a row's loss): faster where the
    softmax is peaked, with an error bounded element by element (docs/kernels.md, "Skipping"). 0: off.

        loss = coda.linear_cross_entropy(h.flatten(0, 1), lm_head.weight, labels.flatten())
        loss = coda.linear_cross_entropy(h.flatten(0, 1), lm_head.weight, labels.flatten(), keep_logits=True)
        loss = coda.linear_cross_entropy(h.flatten(0, 1), lm_head.weight, labels.flatten(), skip_below=2 ** -12)
    """
    if skip_below and (keep_logits or return_logits):
        raise ValueError(f"coda.{_OP}: skip_below applies to the recomputing backward; with keep_logits or "
                         "return_logits the backward reads the logits instead")
    x, weight = L.autocast(x, weight)
    if x.dim() != 2:
        x = x.reshape(-1, x.shape[-1])
    if isinstance(targets, torch.Tensor):
        targets = targets.reshape(-1)
        if targets.dtype == torch.int64:
            targets = targets.to(torch.int32)
    if isinstance(row_scale, torch.Tensor):
        row_scale = row_scale.reshape(-1)
    loss, _, logits = torch.ops.coda.linear_cross_entropy(x, weight, targets, int(ignore_index),
                                                          float(label_smoothing), float(z_loss), float(softcap),
                                                          reduction, row_scale,
                                                          bool(return_logits) or bool(keep_logits),
                                                          float(skip_below))
    return (loss, logits) if return_logits else loss

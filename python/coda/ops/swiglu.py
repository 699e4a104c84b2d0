"""SwiGLU on coda's fused GEMM: the gate/up projection with silu(gate) * up in its epilogue.

    w_gate_up = coda.interleave_gate_up(mlp.gate_proj.weight, mlp.up_proj.weight)   # once, (2F, H)
    o = coda.swiglu_linear(x, w_gate_up)                  # silu(x Wg^T) * (x Wu^T), (..., F)
    y = coda.swiglu_mlp(x, w_gate_up, mlp.down_proj.weight)  # the whole MLP, (..., H)

The weight's rows interleave gate and up (row 2f = gate f, row 2f + 1 = up f), so each gate value
sits beside its up value in the GEMM's accumulators. swiglu_mlp's backward is coda's: one GEMM
dP W_down with SwiGLU's derivative in its epilogue (which also recomputes O for dW_down), then
GEMMs for dW_down, dx and dW_gate_up. swiglu_linear alone gets SwiGLU's derivative from torch math
on the saved pre-activation (documented), then coda's GEMMs.
"""
import torch

from .. import _checks as checks
from .. import _library as L
from .matmul import gemm, input_and_weight_grads, linear

_lib = torch.library.Library("coda", "FRAGMENT")
_lib.define("swiglu_linear(Tensor x, Tensor w_gate_up, bool save_pre_activation) -> (Tensor, Tensor)")
_lib.define("swiglu_mlp(Tensor x, Tensor w_gate_up, Tensor w_down) -> (Tensor, Tensor)")
_lib.define("swiglu_backward(Tensor grad_output, Tensor w_down, Tensor pre_activation) -> (Tensor, Tensor)")


def _check(op, x, w_gate_up, w_down=None):
    checks.tensor(op, "x", x, checks.FLOATS)
    checks.tensor(op, "w_gate_up", w_gate_up, checks.FLOATS, rank=2)
    checks.same_dtype(op, "w_gate_up", w_gate_up, "x", x)
    checks.same_device(op, (("x", x), ("w_gate_up", w_gate_up), ("w_down", w_down)))
    if x.dim() < 1 or x.shape[-1] != w_gate_up.shape[1]:
        raise ValueError(f"coda.{op}: x has shape {tuple(x.shape)} and w_gate_up {tuple(w_gate_up.shape)}; x's last "
                         "dimension must be w_gate_up's second (H)")
    checks.multiple_of_8(op, "x", x.shape[-1], "K (its last dimension)")
    if w_gate_up.shape[0] % 16:
        raise ValueError(f"coda.{op}: w_gate_up has {w_gate_up.shape[0]} rows; it must be 2F (gate and up rows "
                         "interleaved) with F a multiple of 8")
    if w_down is not None:
        checks.tensor(op, "w_down", w_down, checks.FLOATS, rank=2)
        checks.same_dtype(op, "w_down", w_down, "x", x)
        if w_down.shape[1] * 2 != w_gate_up.shape[0]:
            raise ValueError(f"coda.{op}: w_down has shape {tuple(w_down.shape)}; it must be (H_out, F) with "
                             f"F = {w_gate_up.shape[0] // 2} (half of w_gate_up's rows)")
        checks.multiple_of_8(op, "w_down", w_down.shape[0], "rows (the output's width)")


@torch.library.register_fake("coda::swiglu_linear")
def _swiglu_linear_fake(x, w_gate_up, save_pre_activation):
    _check("swiglu_linear", x, w_gate_up)
    pre = x.new_empty(*x.shape[:-1], w_gate_up.shape[0]) if save_pre_activation else x.new_empty(0)
    return x.new_empty(*x.shape[:-1], w_gate_up.shape[0] // 2), pre


def _swiglu(x2, w_gate_up, out, pre):
    L.call(L.lib.coda_gemm_swiglu, L.view("x", x2), L.view("w", w_gate_up), L.view("out", out), L.view("pre", pre),
           None, L.stream(x2.device))


@L.kernel(_lib, "swiglu_linear")
def _swiglu_linear(x, w_gate_up, save_pre_activation):
    _check("swiglu_linear", x, w_gate_up)
    x2, w = checks.rows(x), checks.rows(w_gate_up)
    out = x.new_empty(x2.shape[0], w.shape[0] // 2)
    pre = x.new_empty(x2.shape[0], w.shape[0]) if save_pre_activation else None
    with L.on_device(x.device):
        _swiglu(x2, w, out, pre)
    lead = x.shape[:-1]
    return out.view(*lead, -1), (pre.view(*lead, -1) if pre is not None else x.new_empty(0))


def _swiglu_derivative(grad_output, pre):
    """dY from dO and the saved Y = [g, u] interleaved: torch math in f32 (swiglu_linear's backward)."""
    y = pre.float().unflatten(-1, (-1, 2))
    g, u = y[..., 0], y[..., 1]
    s = torch.sigmoid(g)
    d = grad_output.float()
    return torch.stack((d * u * s * (1 + g * (1 - s)), d * g * s), dim=-1).flatten(-2).to(pre.dtype)


def _swiglu_linear_setup(ctx, inputs, output):
    x, w_gate_up, _ = inputs
    ctx.save_for_backward(x, w_gate_up, output[1])


def _swiglu_linear_backward(ctx, grad_output, _grad_pre):
    x, w_gate_up, pre = ctx.saved_tensors
    if pre.numel() == 0:
        raise RuntimeError("coda.swiglu_linear: backward needs the pre-activation, which this call did not save "
                           "(save_pre_activation=False); call coda.swiglu_linear, which saves it under autograd")
    dy = _swiglu_derivative(grad_output, pre)
    return input_and_weight_grads(ctx, dy, x, w_gate_up) + (None,)


torch.library.register_autograd("coda::swiglu_linear", _swiglu_linear_backward, setup_context=_swiglu_linear_setup)


@torch.library.register_fake("coda::swiglu_mlp")
def _swiglu_mlp_fake(x, w_gate_up, w_down):
    _check("swiglu_mlp", x, w_gate_up, w_down)
    return x.new_empty(*x.shape[:-1], w_down.shape[0]), x.new_empty(*x.shape[:-1], w_gate_up.shape[0])


@L.kernel(_lib, "swiglu_mlp")
def _swiglu_mlp(x, w_gate_up, w_down):
    _check("swiglu_mlp", x, w_gate_up, w_down)
    x2, w = checks.rows(x), checks.rows(w_gate_up)
    out = x.new_empty(x2.shape[0], w.shape[0] // 2)
    pre = x.new_empty(x2.shape[0], w.shape[0])
    y = x.new_empty(x2.shape[0], w_down.shape[0])
    with L.on_device(x.device):
        _swiglu(x2, w, out, pre)
        gemm(out, w_down, y)
    lead = x.shape[:-1]
    return y.view(*lead, -1), pre.view(*lead, -1)


@torch.library.register_fake("coda::swiglu_backward")
def _swiglu_backward_fake(grad_output, w_down, pre_activation):
    return pre_activation.new_empty(pre_activation.shape), pre_activation.new_empty(pre_activation.shape[0],
                                                                                    w_down.shape[1])


@L.kernel(_lib, "swiglu_backward", checked=False)
def _swiglu_backward(grad_output, w_down, pre_activation):
    """(dY, O): dY = SwiGLU'(Y) * (dP W_down) and O = silu(g) u recomputed, from one GEMM (2-D inputs)."""
    dp, w = checks.rows(grad_output), checks.rows(w_down)
    pre_activation = checks.rows(pre_activation)
    dy = pre_activation.new_empty(pre_activation.shape)
    out = pre_activation.new_empty(pre_activation.shape[0], w.shape[1])
    with L.on_device(dp.device):
        L.call(L.lib.coda_gemm_swiglu_backward, L.view("dp", dp), L.view("w", w), L.view("y", pre_activation),
               L.view("dy", dy), None, None, L.view("o", out), L.stream(dp.device))
    return dy, out


def _swiglu_mlp_setup(ctx, inputs, output):
    x, w_gate_up, w_down = inputs
    ctx.save_for_backward(x, w_gate_up, w_down, output[1])


def _swiglu_mlp_backward(ctx, grad_output, _grad_pre):
    x, w_gate_up, w_down, pre = ctx.saved_tensors
    dp = grad_output.reshape(-1, grad_output.shape[-1])
    dy, out = torch.ops.coda.swiglu_backward(dp, w_down, pre.reshape(-1, pre.shape[-1]))
    dw_down = linear(dp.t(), out.t()) if ctx.needs_input_grad[2] else None
    return input_and_weight_grads(ctx, dy, x, w_gate_up) + (dw_down,)


torch.library.register_autograd("coda::swiglu_mlp", _swiglu_mlp_backward, setup_context=_swiglu_mlp_setup)


def swiglu_linear(x, w_gate_up):
    """silu(x Wg^T) * (x Wu^T) from one GEMM: x (..., H), w_gate_up (2F, H) interleaved; returns (..., F).

        o = coda.swiglu_linear(x, coda.interleave_gate_up(w_gate, w_up))
    """
    x, w_gate_up = L.autocast(x, w_gate_up)
    save = torch.is_grad_enabled() and (x.requires_grad or w_gate_up.requires_grad)
    return torch.ops.coda.swiglu_linear(x, w_gate_up, save)[0]


def swiglu_mlp(x, w_gate_up, w_down):
    """The SwiGLU MLP, (silu(x Wg^T) * (x Wu^T)) W_down^T: x (..., H), w_gate_up (2F, H) interleaved, w_down
    (H_out, F); returns (..., H_out). Saves the pre-activation (..., 2F) for its backward.

        y = coda.swiglu_mlp(x, w_gate_up, mlp.down_proj.weight)
    """
    x, w_gate_up, w_down = L.autocast(x, w_gate_up, w_down)
    return torch.ops.coda.swiglu_mlp(x, w_gate_up, w_down)[0]


def interleave_gate_up(w_gate, w_up):
    """The (2F, H) weight of swiglu_linear/swiglu_mlp from nn.Linear weights gate (F, H) and up (F, H):
    row 2f = gate f, row 2f + 1 = up f. Works on any device; do it once, not per call."""
    if w_gate.shape != w_up.shape:
        raise ValueError(f"coda.interleave_gate_up: w_gate {tuple(w_gate.shape)} and w_up {tuple(w_up.shape)} must "
                         "have one shape")
    return torch.stack((w_gate, w_up), dim=1).reshape(-1, w_gate.shape[1])


def split_gate_up(w_gate_up):
    """The inverse of interleave_gate_up: (w_gate, w_up) views."""
    return w_gate_up[0::2], w_gate_up[1::2]

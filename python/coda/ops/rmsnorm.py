"""Residual + RMSNorm between two projections, on coda's fused GEMMs (the pre-norm pattern).

    z, h = coda.residual_rmsnorm_linear(x, w1, residual, norm_weight, w2, eps=1e-6)
    # h = residual + x @ w1.T (the new residual stream), z = RMSNorm(h) * norm_weight @ w2.T

The norm is split across the GEMM boundary: the first GEMM's epilogue adds the residual, stores h
and U = h * g and the row partials of sum h^2; the second GEMM scales its rows by rstd (one
scalar per row commutes with the GEMM). The backward is coda's: rstd dz with the row partials of
<dz, z> (one pass), dh from one GEMM with the norm's backward in its epilogue, dW2 and dg from
one GEMM, then dx, dW1 on coda's GEMM; the gradient reaching h from later layers is added in the
dh GEMM's epilogue.
"""
import torch

from .. import _checks as checks
from .. import _library as L
from .matmul import input_and_weight_grads

_lib = torch.library.Library("coda", "FRAGMENT")
_lib.define("residual_rmsnorm_linear(Tensor x, Tensor w1, Tensor residual, Tensor norm_weight, Tensor w2, "
            "float eps) -> (Tensor, Tensor, Tensor)")
_lib.define("residual_rmsnorm_backward(Tensor grad_z, Tensor z, Tensor? grad_h, Tensor h, Tensor rstd, "
            "Tensor norm_weight, Tensor w2) -> (Tensor, Tensor, Tensor)")

_OP = "residual_rmsnorm_linear"


def _check(x, w1, residual, norm_weight, w2, eps):
    checks.tensor(_OP, "x", x, checks.FLOATS)
    for name, t in (("w1", w1), ("w2", w2)):
        checks.tensor(_OP, name, t, checks.FLOATS, rank=2)
        checks.same_dtype(_OP, name, t, "x", x)
    checks.tensor(_OP, "residual", residual, checks.FLOATS)
    checks.same_dtype(_OP, "residual", residual, "x", x)
    checks.tensor(_OP, "norm_weight", norm_weight, checks.FLOATS + (torch.float32,), rank=1)
    checks.same_device(_OP, (("x", x), ("w1", w1), ("residual", residual), ("norm_weight", norm_weight),
                             ("w2", w2)))
    hidden = w1.shape[0]
    if x.dim() < 1 or x.shape[-1] != w1.shape[1]:
        raise ValueError(f"coda.{_OP}: x has shape {tuple(x.shape)} and w1 {tuple(w1.shape)}; x's last dimension "
                         "must be w1's second (K)")
    if residual.shape != (*x.shape[:-1], hidden):
        raise ValueError(f"coda.{_OP}: residual has shape {tuple(residual.shape)}; it must be "
                         f"{(*x.shape[:-1], hidden)} (x's leading shape, w1's rows)")
    checks.size(_OP, "norm_weight", norm_weight.shape[0], hidden, "length")
    checks.size(_OP, "w2", w2.shape[1], hidden, "columns")
    if not eps >= 0:
        raise ValueError(f"coda.{_OP}: eps {eps} must be >= 0")
    checks.multiple_of_8(_OP, "x", x.shape[-1], "K (its last dimension)")
    checks.multiple_of_8(_OP, "w1", hidden, "rows (the hidden size)")
    checks.multiple_of_8(_OP, "w2", w2.shape[0], "rows (the output's width)")


@torch.library.register_fake("coda::residual_rmsnorm_linear")
def _fake(x, w1, residual, norm_weight, w2, eps):
    _check(x, w1, residual, norm_weight, w2, eps)
    lead = x.shape[:-1]
    return x.new_empty(*lead, w2.shape[0]), x.new_empty(*lead, w1.shape[0]), x.new_empty(lead, dtype=torch.float32)


@L.kernel(_lib, "residual_rmsnorm_linear")
def _forward(x, w1, residual, norm_weight, w2, eps):
    _check(x, w1, residual, norm_weight, w2, eps)
    x2, w1, w2 = checks.rows(x), checks.rows(w1), checks.rows(w2)
    r = checks.rows(residual)
    m, hidden = x2.shape[0], w1.shape[0]
    h, u = x.new_empty(m, hidden), x.new_empty(m, hidden)
    rstd = x.new_empty(m, dtype=torch.float32)
    z = x.new_empty(m, w2.shape[0])
    g = checks.vector(norm_weight)
    bytes_ = L.workspace_bytes("coda_residual_rmsnorm_workspace_bytes", m, hidden)
    with L.on_device(x.device):
        ws = L.workspace(bytes_, x.device)
        L.call(L.lib.coda_gemm_residual_rmsnorm, L.view("x", x2), L.view("w1", w1), L.view("r", r), L.view("g", g),
               eps, L.view("h", h), L.view("u", u), L.view("rstd", rstd), ws.data_ptr(), bytes_, L.stream(x.device))
        L.call(L.lib.coda_gemm_row_scale, L.view("u", u), L.view("w2", w2), L.view("rstd", rstd), L.view("z", z),
               L.stream(x.device))
    lead = x.shape[:-1]
    return z.view(*lead, -1), h.view(*lead, -1), rstd.view(lead)


@torch.library.register_fake("coda::residual_rmsnorm_backward")
def _backward_fake(grad_z, z, grad_h, h, rstd, norm_weight, w2):
    return h.new_empty(h.shape), w2.new_empty(w2.shape), norm_weight.new_empty(norm_weight.shape)


@L.kernel(_lib, "residual_rmsnorm_backward", checked=False)
def _backward_op(grad_z, z, grad_h, h, rstd, norm_weight, w2):
    """(dh, dW2, dg) from dz (2-D) and the gradient reaching h from later layers (grad_h, may be None)."""
    dz, z, h = checks.rows(grad_z), checks.rows(z), checks.rows(h)
    grad_h = checks.rows(grad_h) if grad_h is not None else None
    w2, norm_weight, rstd = checks.rows(w2), checks.vector(norm_weight), checks.vector(rstd)
    m, n2 = dz.shape
    device, stream = dz.device, L.stream(dz.device)
    dzs = dz.new_empty(dz.shape)
    row_dots = dz.new_empty(m, L.row_partial_count(n2), dtype=torch.float32)
    dh, dw2, dg = h.new_empty(h.shape), w2.new_empty(w2.shape), norm_weight.new_empty(norm_weight.shape)
    bytes_h = L.workspace_bytes("coda_residual_rmsnorm_backward_workspace_bytes", m)
    bytes_w = L.workspace_bytes("coda_rmsnorm_weight_gradients_workspace_bytes", n2, h.shape[1])
    with L.on_device(device):
        ws = L.workspace(max(bytes_h, bytes_w), device)
        L.call(L.lib.coda_row_scale_backward, L.view("dz", dz), L.view("z", z), L.view("rstd", rstd),
               L.view("dzs", dzs), L.view("dots", row_dots), stream)
        L.call(L.lib.coda_gemm_residual_rmsnorm_backward, L.view("dzs", dzs), L.view("w2", w2), L.view("h", h),
               L.view("g", norm_weight), L.view("rstd", rstd), L.view("dots", row_dots), L.view("dh", dh),
               L.view("dh_out", grad_h), 1, ws.data_ptr(), bytes_h, stream)
        L.call(L.lib.coda_gemm_rmsnorm_weight_gradients, L.view("dzs", dzs), L.view("h", h), L.view("w2", w2),
               L.view("g", norm_weight), L.view("dw2", dw2), L.view("dg", dg), ws.data_ptr(), bytes_w, stream)
    return dh, dw2, dg


def _setup(ctx, inputs, output):
    x, w1, residual, norm_weight, w2, eps = inputs
    z, h, rstd = output
    ctx.save_for_backward(x, w1, norm_weight, w2, z, h, rstd)


def _backward(ctx, grad_z, grad_h, _grad_rstd):
    x, w1, norm_weight, w2, z, h, rstd = ctx.saved_tensors
    flat = lambda t: t.reshape(-1, t.shape[-1])  # noqa: E731
    dh, dw2, dg = torch.ops.coda.residual_rmsnorm_backward(
        flat(grad_z), flat(z), flat(grad_h) if grad_h is not None else None, flat(h), rstd.reshape(-1),
        norm_weight, w2)
    dx, dw1 = input_and_weight_grads(ctx, dh, x, w1)
    d_residual = dh.view(h.shape) if ctx.needs_input_grad[2] else None
    return dx, dw1, d_residual, dg, dw2, None


torch.library.register_autograd("coda::residual_rmsnorm_linear", _backward, setup_context=_setup)


def residual_rmsnorm_linear(x, w1, residual, norm_weight, w2, eps=1e-6):
    """(z, h): h = residual + x @ w1.T, z = RMSNorm(h; norm_weight, eps) @ w2.T.

    x (..., K), w1 (H, K), residual (..., H), norm_weight (H; f32, bf16 or f16), w2 (N2, H); x, w1, w2,
    residual one dtype (bf16 or f16). Returns z (..., N2) and h (..., H), x's dtype.

        z, h = coda.residual_rmsnorm_linear(attn, o_proj.weight, hidden, norm.weight, w_qkv, norm.eps)
    """
    x, w1, residual, w2 = L.autocast(x, w1, residual, w2)
    z, h, _ = torch.ops.coda.residual_rmsnorm_linear(x, w1, residual, norm_weight, w2, eps)
    return z, h

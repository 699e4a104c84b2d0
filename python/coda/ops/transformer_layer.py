"""The non-attention part of a LLaMA-style layer as one op: coda's layer block (coda_layer_forward and
coda_layer_backward), forward and backward.

    h2, qkv = coda.layer(attn_out, residual, positions, wo, norm1, w_gate_up, w_down, norm2, w_qkv,
                         cos, sin, head_dim=128, rotated_heads=q_heads + kv_heads, eps=1e-6)

    h1  = residual + attn_out @ wo.T                      (out-projection + residual)
    h2  = h1 + SwiGLU(RMSNorm(h1; norm1) @ w_gate_up.T) @ w_down.T
    qkv = RoPE(RMSNorm(h2; norm2) @ w_qkv.T)              (the next layer's Q, K, V)

w_gate_up has gate and up rows interleaved (coda.interleave_gate_up); w_qkv's rotated heads have
interleaved pairs (coda.rotate_half_to_interleaved); norm weights f32, bf16 or f16; cos/sin the f32
cache of coda.rope_cache. The forward saves h1, both rstd, the pre-activation and the activation;
the backward is coda's (docs/kernels.md) and gives every input's gradient but positions and the cache.
"""
import torch

from .. import _checks as checks
from .. import _library as L

_lib = torch.library.Library("coda", "FRAGMENT")
_WEIGHTS = ("Tensor wo, Tensor norm1, Tensor w_gate_up, Tensor w_down, Tensor norm2, Tensor w_qkv, Tensor cos, "
            "Tensor sin, int head_dim, int rotated_heads, float eps")
_lib.define(f"layer(Tensor attn_out, Tensor residual, Tensor positions, {_WEIGHTS}) -> "
            "(Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)")
_lib.define(f"layer_backward(Tensor grad_h2, Tensor grad_qkv, Tensor attn_out, Tensor positions, Tensor h2, "
            f"Tensor qkv, Tensor h1, Tensor rstd1, Tensor pre_activation, Tensor activation, Tensor rstd2, "
            f"{_WEIGHTS}) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)")
_OP = "layer"


def _check(attn_out, residual, positions, wo, norm1, w_gate_up, w_down, norm2, w_qkv, cos, sin, head_dim,
           rotated_heads, eps):
    for name, t in (("attn_out", attn_out), ("residual", residual), ("wo", wo), ("w_gate_up", w_gate_up),
                    ("w_down", w_down), ("w_qkv", w_qkv)):
        checks.tensor(_OP, name, t, checks.FLOATS, rank=2)
        checks.same_dtype(_OP, name, t, "attn_out", attn_out)
    for name, t in (("norm1", norm1), ("norm2", norm2)):
        checks.tensor(_OP, name, t, checks.FLOATS + (torch.float32,), rank=1)
    checks.tensor(_OP, "positions", positions, (torch.int32,), rank=1)
    checks.tensor(_OP, "cos", cos, (torch.float32,), rank=2)
    checks.tensor(_OP, "sin", sin, (torch.float32,), rank=2)
    checks.same_device(_OP, (("attn_out", attn_out), ("residual", residual), ("positions", positions), ("wo", wo),
                             ("norm1", norm1), ("w_gate_up", w_gate_up), ("w_down", w_down), ("norm2", norm2),
                             ("w_qkv", w_qkv), ("cos", cos), ("sin", sin)))
    tokens, hidden = attn_out.shape
    checks.size(_OP, "wo", tuple(wo.shape), (hidden, hidden), "shape")
    checks.size(_OP, "residual", tuple(residual.shape), (tokens, hidden), "shape")
    checks.size(_OP, "positions", positions.shape[0], tokens, "length")
    checks.size(_OP, "w_gate_up", w_gate_up.shape[1], hidden, "columns")
    checks.size(_OP, "w_down", tuple(w_down.shape), (hidden, w_gate_up.shape[0] // 2), "shape")
    checks.size(_OP, "w_qkv", w_qkv.shape[1], hidden, "columns")
    checks.size(_OP, "norm1", norm1.shape[0], hidden, "length")
    checks.size(_OP, "norm2", norm2.shape[0], hidden, "length")
    if head_dim <= 0 or head_dim % 2 or w_qkv.shape[0] % head_dim or cos.shape[1] != head_dim // 2:
        raise ValueError(f"coda.{_OP}: head_dim {head_dim} must be even, divide w_qkv's rows ({w_qkv.shape[0]}) "
                         f"and be twice cos's columns ({cos.shape[1]})")
    if not 0 <= rotated_heads <= w_qkv.shape[0] // head_dim:
        raise ValueError(f"coda.{_OP}: rotated_heads {rotated_heads} must be in [0, {w_qkv.shape[0] // head_dim}]")
    if not eps >= 0:
        raise ValueError(f"coda.{_OP}: eps {eps} must be >= 0")


def _weights(wo, norm1, w_gate_up, w_down, norm2, w_qkv, cos, sin, head_dim, rotated_heads, eps):
    """The coda_layer_weights struct (rebuilt per call: its eight tensors' pointers)."""
    tensors = [checks.rows(wo), checks.vector(norm1), checks.rows(w_gate_up), checks.rows(w_down),
               checks.vector(norm2), checks.rows(w_qkv), checks.vector(cos), checks.vector(sin)]
    return L.LayerWeights(*(L.struct(t) for t in tensors), head_dim, rotated_heads, eps), tensors


def _run(function, weights, kept, x, *args):
    """function(weights, *args, workspace, bytes, stream): the layer's forward or backward with a workspace
    (its size asked once per shape) from torch's allocator."""
    key = (x.shape, tuple(t.shape for t in kept), tuple(t.dtype for t in kept))
    with L.on_device(x.device):
        bytes_ = L.cached_size(("layer",) + key, L.lib.coda_layer_workspace_bytes, L.ctypes.byref(weights), x.shape[0])
        ws = L.workspace(bytes_, x.device)
        L.call(function, L.ctypes.byref(weights), *args, ws.data_ptr(), bytes_, L.stream(x.device))


def _outputs_like(attn_out, w_gate_up, w_qkv):
    tokens, hidden = attn_out.shape
    f32 = dict(dtype=torch.float32)
    return (attn_out.new_empty(tokens, hidden), attn_out.new_empty(tokens, w_qkv.shape[0]),
            attn_out.new_empty(tokens, hidden), attn_out.new_empty(tokens, **f32),
            attn_out.new_empty(tokens, w_gate_up.shape[0]), attn_out.new_empty(tokens, w_gate_up.shape[0] // 2),
            attn_out.new_empty(tokens, **f32))


@torch.library.register_fake("coda::layer")
def _fake(attn_out, residual, positions, *weights):
    _check(attn_out, residual, positions, *weights)
    return _outputs_like(attn_out, weights[2], weights[5])


@L.kernel(_lib, "layer")
def _forward(attn_out, residual, positions, *weight_args):
    _check(attn_out, residual, positions, *weight_args)
    weights, kept = _weights(*weight_args)
    x, r, pos = checks.rows(attn_out), checks.rows(residual), checks.vector(positions)
    h2, qkv, *saved = _outputs_like(x, weight_args[2], weight_args[5])
    saved_struct = L.LayerSaved(*(L.struct(t) for t in saved))
    _run(L.lib.coda_layer_forward, weights, kept, x, L.view("x", x), L.view("r", r), L.view("pos", pos),
         L.view("h2", h2), L.view("qkv", qkv), L.ctypes.byref(saved_struct))
    return (h2, qkv, *saved)


@torch.library.register_fake("coda::layer_backward")
def _backward_fake(grad_h2, grad_qkv, attn_out, positions, h2, qkv, h1, rstd1, pre, act, rstd2, *weights):
    return tuple(t.new_empty(t.shape) for t in (attn_out, attn_out, *weights[:6]))


@L.kernel(_lib, "layer_backward", checked=False)
def _backward_op(grad_h2, grad_qkv, attn_out, positions, h2, qkv, h1, rstd1, pre, act, rstd2, *weight_args):
    weights, kept = _weights(*weight_args)
    x, pos = checks.rows(attn_out), checks.vector(positions)
    dh2, dqkv = checks.rows(grad_h2), checks.rows(grad_qkv)
    saved_struct = L.LayerSaved(*(L.struct(t) for t in (h1, rstd1, pre, act, rstd2)))
    grads = tuple(t.new_empty(t.shape) for t in (x, x, *kept[:6]))
    grads_struct = L.LayerGradients(*(L.struct(t) for t in grads))
    _run(L.lib.coda_layer_backward, weights, kept, x, L.view("x", x), L.view("pos", pos), L.view("h2", h2),
         L.view("qkv", qkv), L.ctypes.byref(saved_struct), L.view("dh2", dh2), L.view("dqkv", dqkv),
         L.ctypes.byref(grads_struct))
    return grads


def _setup(ctx, inputs, output):
    attn_out, residual, positions, *weights = inputs
    h2, qkv, *saved = output
    ctx.save_for_backward(attn_out, positions, h2, qkv, *saved, *weights[:8])
    ctx.head_dim, ctx.rotated_heads, ctx.eps = weights[8:]


def _backward(ctx, grad_h2, grad_qkv, *_saved_grads):
    attn_out, positions, h2, qkv, *rest = ctx.saved_tensors
    saved, weights = rest[:5], rest[5:]
    grads = torch.ops.coda.layer_backward(grad_h2, grad_qkv, attn_out, positions, h2, qkv, *saved, *weights,
                                          ctx.head_dim, ctx.rotated_heads, ctx.eps)
    d_attn, d_residual, *d_weights = grads
    return (d_attn, d_residual, None, *d_weights, None, None, None, None, None)


torch.library.register_autograd("coda::layer", _backward, setup_context=_setup)


def layer(attn_out, residual, positions, wo, norm1, w_gate_up, w_down, norm2, w_qkv, cos, sin, head_dim,
          rotated_heads, eps=1e-6):
    """(h2, qkv) of the layer's non-attention part (module docstring): attn_out and residual (T, H), positions
    (T) int32 (int64 is converted), weights in coda's layouts. Differentiable in every tensor but positions
    and the cache.

        h2, qkv = coda.layer(attn, h, positions, wo, g1, w_gate_up, w_down, g2, w_qkv, cos, sin, 128, 24)
    """
    attn_out, residual, wo, w_gate_up, w_down, w_qkv = L.autocast(attn_out, residual, wo, w_gate_up, w_down, w_qkv)
    if isinstance(positions, torch.Tensor) and positions.dtype == torch.int64:
        positions = positions.to(torch.int32)
    h2, qkv, *_ = torch.ops.coda.layer(attn_out, residual, positions, wo, norm1, w_gate_up, w_down, norm2, w_qkv,
                                       cos, sin, head_dim, rotated_heads, eps)
    return h2, qkv

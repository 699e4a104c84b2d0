"""RoPE on coda's fused GEMM: the QKV projection with the rotation in its epilogue.

    cos, sin = coda.rope_cache(max_positions, head_dim=128, device="cuda")   # f32, (max_pos, d/2)
    w_qkv = coda.rotate_half_to_interleaved(w_qkv_hf, head_dim=128, rotated_heads=q_heads + kv_heads)  # once
    qkv = coda.rope_linear(x, w_qkv, positions, cos, sin, head_dim=128, rotated_heads=q_heads + kv_heads)

Each head's pairs are adjacent columns (2i, 2i + 1), rotated by positions[m]'s angle i; heads from
rotated_heads on (V) pass through. Hugging Face checkpoints rotate halves (i, i + d/2): permute their
Q and K rows once with rotate_half_to_interleaved (attention scores are unchanged when Q and K are
permuted alike). The backward rotates the gradient back (one pass, coda_rope_backward), then runs
dx and dW on coda's GEMM.
"""
import torch

from .. import _checks as checks
from .. import _library as L
from .matmul import input_and_weight_grads

_lib = torch.library.Library("coda", "FRAGMENT")
_lib.define("rope_linear(Tensor x, Tensor weight, Tensor positions, Tensor cos, Tensor sin, int head_dim, "
            "int rotated_heads) -> Tensor")
_lib.define("rope_backward(Tensor grad_output, Tensor positions, Tensor cos, Tensor sin, int head_dim, "
            "int rotated_heads) -> Tensor")


def _check(x, weight, positions, cos, sin, head_dim, rotated_heads):
    op = "rope_linear"
    checks.tensor(op, "x", x, checks.FLOATS)
    checks.tensor(op, "weight", weight, checks.FLOATS, rank=2)
    checks.same_dtype(op, "weight", weight, "x", x)
    checks.tensor(op, "positions", positions, (torch.int32,))
    checks.tensor(op, "cos", cos, (torch.float32,), rank=2)
    checks.tensor(op, "sin", sin, (torch.float32,), rank=2)
    checks.same_device(op, (("x", x), ("weight", weight), ("positions", positions), ("cos", cos), ("sin", sin)))
    if x.dim() < 1 or x.shape[-1] != weight.shape[1]:
        raise ValueError(f"coda.{op}: x has shape {tuple(x.shape)} and weight {tuple(weight.shape)}; x's last "
                         "dimension must be weight's second (K)")
    if positions.shape != x.shape[:-1]:
        raise ValueError(f"coda.{op}: positions has shape {tuple(positions.shape)}; it must be x's leading shape "
                         f"{tuple(x.shape[:-1])} (one position per token)")
    if head_dim <= 0 or head_dim % 2 or weight.shape[0] % head_dim:
        raise ValueError(f"coda.{op}: head_dim {head_dim} must be even and divide weight's rows ({weight.shape[0]})")
    if not 0 <= rotated_heads <= weight.shape[0] // head_dim:
        raise ValueError(f"coda.{op}: rotated_heads {rotated_heads} must be in [0, {weight.shape[0] // head_dim}] "
                         "(weight's heads)")
    if cos.shape != sin.shape or cos.shape[1] != head_dim // 2:
        raise ValueError(f"coda.{op}: cos {tuple(cos.shape)} and sin {tuple(sin.shape)} must both be (max_positions, "
                         f"head_dim / 2 = {head_dim // 2})")
    checks.multiple_of_8(op, "x", x.shape[-1], "K (its last dimension)")
    checks.multiple_of_8(op, "weight", weight.shape[0], "rows (the output's width)")


@torch.library.register_fake("coda::rope_linear")
def _fake(x, weight, positions, cos, sin, head_dim, rotated_heads):
    _check(x, weight, positions, cos, sin, head_dim, rotated_heads)
    return x.new_empty(*x.shape[:-1], weight.shape[0])


@L.kernel(_lib, "rope_linear")
def _rope_linear(x, weight, positions, cos, sin, head_dim, rotated_heads):
    _check(x, weight, positions, cos, sin, head_dim, rotated_heads)
    x2, w = checks.rows(x), checks.rows(weight)
    pos, cos, sin = checks.vector(positions.reshape(-1)), checks.vector(cos), checks.vector(sin)
    out = x.new_empty(x2.shape[0], w.shape[0])
    with L.on_device(x.device):
        L.call(L.lib.coda_gemm_rope, L.view("x", x2), L.view("w", w), L.view("pos", pos), L.view("cos", cos),
               L.view("sin", sin), head_dim, rotated_heads, L.view("out", out), None, L.stream(x.device))
    return out.view(*x.shape[:-1], w.shape[0])


@torch.library.register_fake("coda::rope_backward")
def _backward_fake(grad_output, positions, cos, sin, head_dim, rotated_heads):
    return grad_output.new_empty(grad_output.shape)


@L.kernel(_lib, "rope_backward", checked=False)
def _rope_backward(grad_output, positions, cos, sin, head_dim, rotated_heads):
    dz = checks.rows(grad_output)
    pos, cos, sin = checks.vector(positions.reshape(-1)), checks.vector(cos), checks.vector(sin)
    dy = dz.new_empty(dz.shape)
    with L.on_device(dz.device):
        L.call(L.lib.coda_rope_backward, L.view("dz", dz), L.view("pos", pos), L.view("cos", cos),
               L.view("sin", sin), head_dim, rotated_heads, L.view("dy", dy), None, None, None, L.stream(dz.device))
    return dy


def _setup(ctx, inputs, output):
    x, weight, positions, cos, sin, head_dim, rotated_heads = inputs
    ctx.save_for_backward(x, weight, positions, cos, sin)
    ctx.head_dim, ctx.rotated_heads = head_dim, rotated_heads


def _backward(ctx, grad_output):
    x, weight, positions, cos, sin = ctx.saved_tensors
    dz = grad_output.reshape(-1, grad_output.shape[-1])
    dy = torch.ops.coda.rope_backward(dz, positions, cos, sin, ctx.head_dim, ctx.rotated_heads)
    return input_and_weight_grads(ctx, dy, x, weight) + (None,) * 5


torch.library.register_autograd("coda::rope_linear", _backward, setup_context=_setup)


def rope_linear(x, weight, positions, cos, sin, head_dim, rotated_heads):
    """RoPE(x W^T): x (..., K), weight (heads * head_dim, K) with interleaved pairs, positions (...) int32
    (int64 is converted), cos/sin f32 (max_positions, head_dim / 2); the first rotated_heads heads rotate.

        qkv = coda.rope_linear(x, w_qkv, positions, cos, sin, head_dim=128, rotated_heads=40)
    """
    x, weight = L.autocast(x, weight)
    if isinstance(positions, torch.Tensor) and positions.dtype == torch.int64:
        positions = positions.to(torch.int32)
    return torch.ops.coda.rope_linear(x, weight, positions, cos, sin, head_dim, rotated_heads)


def rope_cache(max_positions, head_dim, theta=10000.0, device=None):
    """(cos, sin), each f32 (max_positions, head_dim / 2): angle p * theta^(-2i / head_dim), as LLaMA's."""
    inv = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float64, device=device) / head_dim)
    angles = torch.arange(max_positions, dtype=torch.float64, device=device)[:, None] * inv[None, :]
    return angles.cos().float(), angles.sin().float()


def rotate_half_to_interleaved(weight, head_dim, rotated_heads):
    """A rotate-half (Hugging Face) projection's rows in coda's interleaved order: within each of the first
    rotated_heads heads, new row 2i = old row i and new row 2i + 1 = old row i + head_dim / 2."""
    if head_dim <= 0 or head_dim % 2 or weight.shape[0] % head_dim:
        raise ValueError(f"coda.rotate_half_to_interleaved: head_dim {head_dim} must be even and divide weight's "
                         f"rows ({weight.shape[0]})")
    heads = weight.shape[0] // head_dim
    if not 0 <= rotated_heads <= heads:
        raise ValueError(f"coda.rotate_half_to_interleaved: rotated_heads {rotated_heads} must be in [0, {heads}]")
    order = torch.arange(weight.shape[0], device=weight.device).view(heads, head_dim)
    half = torch.arange(head_dim // 2, device=weight.device)
    interleaved = torch.stack((half, half + head_dim // 2), dim=1).reshape(-1)
    order[:rotated_heads] = order[:rotated_heads][:, interleaved]
    return weight[order.reshape(-1)]

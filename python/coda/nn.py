"""torch.nn modules on coda's fused ops. Each holds its weights in the layout its op reads (the
SwiGLU MLP's gate and up rows interleaved, the QKV rows permuted for interleaved RoPE); the
`from_*` constructors convert standard weights once.

    mlp = coda.nn.SwiGLUMLP.from_linears(block.gate_proj, block.up_proj, block.down_proj)
    head = coda.nn.LinearCrossEntropy(hidden=2048, vocab=128256, dtype=torch.bfloat16, device="cuda")
    loss = head(hidden_states, labels)
    router = coda.nn.Router.from_linear(moe.gate, k=8, mode="topk_softmax", renormalize=True)
"""
import torch

from . import ops


def _parameter(rows, columns, dtype, device):
    weight = torch.empty(rows, columns, dtype=dtype, device=device)
    torch.nn.init.kaiming_uniform_(weight, a=5 ** 0.5)  # nn.Linear's initialisation
    return torch.nn.Parameter(weight)


class Linear(torch.nn.Module):
    """y = x @ weight.T (no bias) on coda's GEMM."""

    def __init__(self, in_features, out_features, dtype=torch.bfloat16, device=None):
        super().__init__()
        self.weight = _parameter(out_features, in_features, dtype, device)

    def forward(self, x):
        return ops.linear(x, self.weight)


class SwiGLUMLP(torch.nn.Module):
    """down(silu(gate(x)) * up(x)), the LLaMA MLP: one fused GEMM for gate/up + SwiGLU, one for down; the
    backward on coda's fused backward GEMM. w_gate_up is (2 * intermediate, hidden), gate and up rows
    interleaved (coda.interleave_gate_up)."""

    def __init__(self, hidden, intermediate, dtype=torch.bfloat16, device=None):
        super().__init__()
        self.w_gate_up = _parameter(2 * intermediate, hidden, dtype, device)
        self.w_down = _parameter(hidden, intermediate, dtype, device)

    @classmethod
    def from_linears(cls, gate, up, down):
        """From three bias-free nn.Linear layers (gate_proj, up_proj, down_proj), weights copied once."""
        if any(layer.bias is not None for layer in (gate, up, down)):
            raise ValueError("coda.nn.SwiGLUMLP.from_linears: the projections must have no bias")
        weight = gate.weight
        mlp = cls(weight.shape[1], weight.shape[0], dtype=weight.dtype, device=weight.device)
        with torch.no_grad():
            mlp.w_gate_up.copy_(ops.interleave_gate_up(gate.weight, up.weight))
            mlp.w_down.copy_(down.weight)
        mlp.w_gate_up.requires_grad_(gate.weight.requires_grad or up.weight.requires_grad)
        mlp.w_down.requires_grad_(down.weight.requires_grad)
        return mlp

    def forward(self, x):
        return ops.swiglu_mlp(x, self.w_gate_up, self.w_down)


class RoPELinear(torch.nn.Module):
    """RoPE(x @ weight.T) for a fused QKV projection: the first rotated_heads heads rotate by each token's
    position (interleaved pairs), the rest (V) pass through. Holds its f32 cos/sin cache."""

    def __init__(self, in_features, heads, head_dim, rotated_heads, max_positions, theta=10000.0,
                 dtype=torch.bfloat16, device=None):
        super().__init__()
        self.head_dim, self.rotated_heads = head_dim, rotated_heads
        self.weight = _parameter(heads * head_dim, in_features, dtype, device)
        cos, sin = ops.rope_cache(max_positions, head_dim, theta, device=device)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, x, positions):
        # .float(): the f32 tables the op reads, also after module.to(dtype) cast the buffers (no copy when f32)
        return ops.rope_linear(x, self.weight, positions, self.cos.float(), self.sin.float(), self.head_dim,
                               self.rotated_heads)


class ResidualRMSNormLinear(torch.nn.Module):
    """(z, h) = (RMSNorm(h) @ w2.T, h) with h = residual + x @ w1.T: a projection, the residual add and a
    pre-norm, then the next projection, fused across the GEMM boundary."""

    def __init__(self, in_features, hidden, out_features, eps=1e-6, dtype=torch.bfloat16, device=None):
        super().__init__()
        self.eps = eps
        self.w1 = _parameter(hidden, in_features, dtype, device)
        self.norm_weight = torch.nn.Parameter(torch.ones(hidden, dtype=dtype, device=device))
        self.w2 = _parameter(out_features, hidden, dtype, device)

    def forward(self, x, residual):
        return ops.residual_rmsnorm_linear(x, self.w1, residual, self.norm_weight, self.w2, self.eps)


class LinearCrossEntropy(torch.nn.Module):
    """The LM head with its loss fused: forward(hidden, targets) = cross_entropy(hidden @ weight.T, targets)
    without the logits in memory (keep_logits=True: kept for a faster backward; skip_below=2 ** -12: a backward
    that leaves out the negligible blocks of the gradient). Options, and forward's row_scale, as
    coda.linear_cross_entropy."""

    def __init__(self, hidden, vocab, ignore_index=-100, label_smoothing=0.0, z_loss=0.0, softcap=0.0,
                 reduction="mean", keep_logits=False, skip_below=0.0, dtype=torch.bfloat16, device=None):
        super().__init__()
        self.weight = _parameter(vocab, hidden, dtype, device)
        self.options = dict(ignore_index=ignore_index, label_smoothing=label_smoothing, z_loss=z_loss,
                            softcap=softcap, reduction=reduction, keep_logits=keep_logits, skip_below=skip_below)

    def forward(self, hidden, targets, row_scale=None):
        return ops.linear_cross_entropy(hidden, self.weight, targets, row_scale=row_scale, **self.options)


class Router(torch.nn.Module):
    """The MoE router (coda.route): forward(x) = (weights, ids) of each token's k experts, x (..., hidden) with the
    tokens flattened (M, k); dispatch=True adds token_expert_indices and the tokens per expert. Holds the gate
    weight (experts, hidden) and, for mode="sigmoid_bias", the per-expert bias that steers selection only (a
    buffer: DeepSeek-V3 updates it outside the gradient). No gradient flows through the routing: a model that
    trains the gate takes its softmax in torch at the returned ids (coda.route's docstring).

        router = coda.nn.Router(7168, 256, 8, mode="sigmoid_bias", n_group=8, topk_group=4, renormalize=True,
                                routed_scaling_factor=2.5, device="cuda")
        weights, ids = router(hidden_states)
    """

    def __init__(self, hidden, experts, k, mode="topk_softmax", renormalize=False, n_group=1, topk_group=1,
                 routed_scaling_factor=1.0, dispatch=False, dtype=torch.bfloat16, device=None):
        super().__init__()
        self.k = k
        self.weight = _parameter(experts, hidden, dtype, device)  # trained through torch's softmax at the ids
        bias = torch.zeros(experts, device=device) if mode == "sigmoid_bias" else None
        self.register_buffer("expert_bias", bias)
        self.options = dict(mode=mode, renormalize=renormalize, n_group=n_group, topk_group=topk_group,
                            routed_scaling_factor=routed_scaling_factor, dispatch=dispatch)

    @classmethod
    def from_linear(cls, gate, k, **options):
        """From a model's bias-free gate nn.Linear (experts, hidden), its weight copied once."""
        if gate.bias is not None:
            raise ValueError("coda.nn.Router.from_linear: the gate must have no bias")
        options = dict(dtype=gate.weight.dtype, device=gate.weight.device) | options
        router = cls(gate.in_features, gate.out_features, k, **options)
        with torch.no_grad():
            router.weight.copy_(gate.weight)
        router.weight.requires_grad_(gate.weight.requires_grad)
        return router

    def forward(self, x):
        bias = None if self.expert_bias is None else self.expert_bias.float()  # f32 after module.to(dtype) too
        return ops.route(x, self.weight, self.k, expert_bias=bias, **self.options)


class Layer(torch.nn.Module):
    """The non-attention part of a LLaMA-style layer (coda.layer): out-projection + residual, RMSNorm, the
    SwiGLU MLP + residual, RMSNorm, and the next layer's QKV projection with RoPE. forward(attn_out, residual,
    positions) -> (h2, qkv). Weights in coda's layouts (gate/up interleaved, Q and K pairs interleaved)."""

    def __init__(self, hidden, intermediate, heads, head_dim, rotated_heads, max_positions, eps=1e-6,
                 theta=10000.0, dtype=torch.bfloat16, device=None):
        super().__init__()
        self.head_dim, self.rotated_heads, self.eps = head_dim, rotated_heads, eps
        self.wo = _parameter(hidden, hidden, dtype, device)
        self.norm1 = torch.nn.Parameter(torch.ones(hidden, device=device))
        self.w_gate_up = _parameter(2 * intermediate, hidden, dtype, device)
        self.w_down = _parameter(hidden, intermediate, dtype, device)
        self.norm2 = torch.nn.Parameter(torch.ones(hidden, device=device))
        self.w_qkv = _parameter(heads * head_dim, hidden, dtype, device)
        cos, sin = ops.rope_cache(max_positions, head_dim, theta, device=device)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, attn_out, residual, positions):
        return ops.layer(attn_out, residual, positions, self.wo, self.norm1, self.w_gate_up, self.w_down, self.norm2,
                         self.w_qkv, self.cos.float(), self.sin.float(), self.head_dim, self.rotated_heads, self.eps)

"""coda.patch(model): a Hugging Face LLaMA-style causal LM with coda's fused ops, weights kept.

    model = transformers.AutoModelForCausalLM.from_config(config).cuda().bfloat16()
    coda.patch(model)                       # in place; returns the model
    loss = model(input_ids, labels=labels).loss

What it replaces: each decoder layer's MLP (gate/up/down with SiLU) by coda.nn.SwiGLUMLP (gate and up
rows interleaved once, a copy of the weights); each LlamaAttention's Q, K and V projections and
their RoPE by one coda.rope_linear (the three weights stacked into self_attn.w_qkv, Q and K rows
permuted for interleaved pairs, which leaves every attention score as it was; the rotation takes
the model's own cos/sin, so any rope_type works); and, when labels are given, the LM head and the
loss by coda.linear_cross_entropy (the output's `logits` is None). The attention kernel and, by
default, o_proj, the norms and the residual adds stay Hugging Face's. Models whose head scales or caps its logits
(Cohere, Granite, Gemma 2) keep their own loss; attentions with biases or another class keep theirs.

keep_logits (default True): the fused loss keeps the M x V logits for its backward, three GEMMs in
all, as torch.compile's loss does; False recomputes them (four GEMMs, no logits held). attention:
False leaves attention untouched. layers (default False): True also replaces the steps between one
layer's attention and the next's (Hugging Face 5's LlamaDecoderLayer, LlamaRMSNorm): one coda.layer
runs o_proj, the residual add, the post-attention norm, the MLP, the residual add and the next
layer's input norm, QKV projection and RoPE, the norms moved across the GEMM boundaries
(docs/kernels.md); the last layer keeps the separate steps. A call takes the separate steps too
under Hugging Face's gradient checkpointing or torch.autocast, or when hooks sit on the modules
coda.layer replaces or o_proj is no longer a plain Linear (an adapter added after patching); a
layer takes the Q, K, V handed to it only when they were made for it, in this forward, with
autograd history when it needs one. Weights sharded or offloaded per layer (FSDP, ZeRO-3,
accelerate's offloading) and other checkpoint wrappers need layers=False: one layer's call reads
the next layer's weights, and a rerun layer finds no Q, K, V handed to it. It is off by default
because it measured slower on the small LLaMA of `python -m coda.bench` (docs/performance.md,
"The PyTorch package").

The new modules keep each weight's requires_grad (frozen weights stay frozen); their parameter names
differ (mlp.w_gate_up, mlp.w_down, self_attn.w_qkv), so save checkpoints from an unpatched model
(coda.split_gate_up gives gate and up back).
"""
import functools
import inspect
import sys
import types
import typing

import torch

from . import nn, ops


_PROBE = torch.tensor([-3.0, -0.5, 0.0, 0.7, 4.0])


def _is_silu(act):
    """act computes SiLU (torch.nn.SiLU, transformers' SiLUActivation, F.silu): checked on five values."""
    try:
        with torch.no_grad():
            return callable(act) and torch.allclose(act(_PROBE), torch.nn.functional.silu(_PROBE))
    except Exception:  # an activation that takes no CPU tensor is not one we replace
        return False


def _is_llama_mlp(module):
    projections = [getattr(module, name, None) for name in ("gate_proj", "up_proj", "down_proj")]
    return (all(isinstance(p, torch.nn.Linear) and p.bias is None for p in projections)
            and _is_silu(getattr(module, "act_fn", None)))


_LOSS_KWARGS = ("num_items_in_batch", "logits_to_keep", "num_logits_to_keep", "return_dict")
# Heads that scale or cap their logits (Cohere, Granite, Gemma 2): their loss is not plain cross-entropy
# of the head's product, so their forward stays Hugging Face's.
_LOGIT_TRANSFORMS = ("logit_scale", "logits_scaling", "final_logit_softcapping")


def _is_llama_attention(module):
    projections = [getattr(module, name, None) for name in ("q_proj", "k_proj", "v_proj")]
    return (type(module).__name__ == "LlamaAttention" and hasattr(module, "head_dim")
            and all(isinstance(p, torch.nn.Linear) and p.bias is None for p in projections)
            and getattr(module.config, "partial_rotary_factor", 1.0) == 1.0)


_CACHE_NAMES = ("cache", "past_key_values", "past_key_value")  # Hugging Face's name for it over the versions
_HF_MODULES = {}  # attention class -> its modeling module (eager_attention_forward, ALL_ATTENTION_FUNCTIONS)


def _rotary_rows(position_embeddings, shape, head_dim):
    """(positions, cos, sin) for coda's RoPE from the model's per-token cos/sin (Hugging Face's, halves repeated):
    f32 tables of head_dim / 2 columns, token m reading row m, positions (tokens,) int32."""
    cos, sin = position_embeddings
    if cos.shape[-1] != head_dim:
        raise ValueError(f"coda.patch: the rotary tables have {cos.shape[-1]} columns; the patched attention "
                         f"rotates whole heads of {head_dim}")
    tokens, half = shape.numel(), head_dim // 2
    cos_rows = cos[..., :half].expand(*shape, half).reshape(tokens, half).float()
    sin_rows = sin[..., :half].expand(*shape, half).reshape(tokens, half).float()
    return torch.arange(tokens, dtype=torch.int32, device=cos.device), cos_rows, sin_rows


def _rope_attention_forward(self, hidden_states, position_embeddings=None, attention_mask=None, coda_qkv=None,
                            coda_output_projection=True, **kwargs):
    """LlamaAttention.forward with Q, K, V and RoPE from one coda.rope_linear, or given (coda_qkv: a chained
    layer's, made by the previous layer's coda.layer; hidden_states is then unused). coda_output_projection=False
    returns the heads' output before o_proj (the chained layer's coda.layer applies it)."""
    cache_name = next((name for name in _CACHE_NAMES if kwargs.get(name) is not None), None)
    cache = kwargs.pop(cache_name) if cache_name else None
    for name in _CACHE_NAMES:
        kwargs.pop(name, None)
    qkv = coda_qkv
    if qkv is None:
        shape = hidden_states.shape[:-1]
        positions, cos_rows, sin_rows = _rotary_rows(position_embeddings, shape, self.head_dim)
        qkv = ops.rope_linear(hidden_states, self.w_qkv, positions.view(shape), cos_rows, sin_rows, self.head_dim,
                              self.coda_rotated_heads)
    shape = qkv.shape[:-1]
    q, k, v = (t.view(*shape, -1, self.head_dim).transpose(1, 2) for t in qkv.split(self.coda_rows, dim=-1))
    if cache is not None:
        if cache_name == "cache":
            k, v = cache.update(k, v, self.layer_idx, kwargs=kwargs)
        else:
            cos, sin = position_embeddings
            k, v = cache.update(k, v, self.layer_idx,
                                {"sin": sin, "cos": cos, "cache_position": kwargs.get("cache_position")})
    hf = _HF_MODULES[type(self)]
    implementation = getattr(self.config, "_attn_implementation", None)
    attend = (hf.eager_attention_forward if implementation in (None, "eager")
              else hf.ALL_ATTENTION_FUNCTIONS[implementation])
    out, weights = attend(self, q, k, v, attention_mask, dropout=self.attention_dropout if self.training else 0.0,
                          scaling=self.scaling, **kwargs)
    out = out.reshape(*shape, -1).contiguous()
    return (self.o_proj(out) if coda_output_projection else out), weights


def _patch_attention(attention):
    """q_proj, k_proj, v_proj -> one w_qkv (a copy; Q and K rows interleaved) and the coda forward."""
    projections = [attention.q_proj, attention.k_proj, attention.v_proj]
    head_dim = attention.head_dim
    rows = tuple(p.weight.shape[0] for p in projections)
    rotated = (rows[0] + rows[1]) // head_dim
    with torch.no_grad():
        weight = ops.rotate_half_to_interleaved(torch.cat([p.weight for p in projections]), head_dim, rotated)
    attention.w_qkv = torch.nn.Parameter(weight.contiguous(),
                                         requires_grad=any(p.weight.requires_grad for p in projections))
    for name in ("q_proj", "k_proj", "v_proj"):
        delattr(attention, name)
    attention.coda_rows, attention.coda_rotated_heads = rows, rotated
    _HF_MODULES[type(attention)] = sys.modules[type(attention).__module__]
    attention.forward = types.MethodType(_rope_attention_forward, attention)


def _is_llama_rmsnorm(norm, hidden):
    return (type(norm).__name__ == "LlamaRMSNorm" and hasattr(norm, "variance_epsilon")
            and tuple(norm.weight.shape) == (hidden,))


def _chainable(layer):
    """A Hugging Face 5 LlamaDecoderLayer that coda.layer can run: its attention and MLP patched or patchable,
    a bias-free square torch.nn.Linear o_proj (coda.layer's residual add), LlamaRMSNorm norms."""
    attention, mlp = getattr(layer, "self_attn", None), getattr(layer, "mlp", None)
    o_proj = getattr(attention, "o_proj", None)
    return (type(layer).__name__ == "LlamaDecoderLayer"
            and (hasattr(attention, "w_qkv") or _is_llama_attention(attention))
            and (isinstance(mlp, nn.SwiGLUMLP) or _is_llama_mlp(mlp))
            and type(o_proj) is torch.nn.Linear and o_proj.bias is None
            and o_proj.in_features == o_proj.out_features
            and all(_is_llama_rmsnorm(getattr(layer, name, None), o_proj.out_features)
                    for name in ("input_layernorm", "post_attention_layernorm")))


class _Handoff(typing.NamedTuple):
    """What one layer's coda.layer leaves for the next within a forward."""
    output: torch.Tensor  # the layer's output, the next layer's hidden_states
    qkv: torch.Tensor     # the next layer's Q, K, V (RoPE applied)
    tables: tuple         # the rotary tables (_rotary_rows) they were rotated with
    layer: object         # the layer they are for
    cos: torch.Tensor     # the model's cos table the tables came from


class _Chain:
    """A patched model's decoder layers, each linked to the next: coda.layer runs a layer's output projection,
    residual add, post-attention norm, MLP and residual add together with the next layer's input norm, QKV
    projection and RoPE. `pending` holds a _Handoff within one forward; the next layer takes it only when it is
    the handoff's layer, called on its very output with the very cos table (and, under autograd, the qkv's history
    is there)."""

    def __init__(self, layers):
        self.pending = None
        chainable = [_chainable(layer) for layer in layers]
        self.following = []  # a plain list, not a ModuleList: each layer stays registered once, in the model
        for index, layer in enumerate(layers):
            next_layer = layers[index + 1] if index + 1 < len(layers) else None
            linked = (next_layer is not None and chainable[index] and chainable[index + 1]
                      and next_layer.self_attn.head_dim == layer.self_attn.head_dim
                      and next_layer.input_layernorm.variance_epsilon
                      == layer.post_attention_layernorm.variance_epsilon)
            self.following.append(next_layer if linked else None)

    def clear(self, *_):
        """Drop what a forward left pending (a forward hook of the model: a layer run alone, layers left out)."""
        self.pending = None


def _hooked(*modules):
    return any(m._forward_hooks or m._forward_pre_hooks for m in modules)


def _following(self, chain):
    """The next layer if this call may hand it Q, K, V through coda.layer: linked, no hooks on the modules
    coda.layer replaces (they would not fire), o_proj still a plain Linear (not wrapped by an adapter since
    patching), no autocast (coda.layer would round the residual stream to its dtype)."""
    following = chain.following[self.coda_index]
    if following is None or torch.is_autocast_enabled("cuda") or type(self.self_attn.o_proj) is not torch.nn.Linear:
        return None
    if _hooked(self.self_attn.o_proj, self.mlp, self.post_attention_layernorm, following.input_layernorm):
        return None
    return following


def _chained_layer_forward(self, hidden_states, *args, **kwargs):
    """LlamaDecoderLayer.forward on a _Chain: Q, K and V are the previous layer's coda.layer output when it was
    made for this layer and this very hidden_states (else projected here), and when the next layer may take them
    (_following) one coda.layer runs every step after attention together with the next layer's Q, K, V.
    Positional arguments beyond hidden_states and gradient checkpointing (which reruns single layers) take
    Hugging Face's own forward."""
    chain = self.coda_chain
    pending, chain.pending = chain.pending, None
    position_embeddings = kwargs.get("position_embeddings")
    if args or position_embeddings is None or (getattr(self, "gradient_checkpointing", False) and self.training):
        return type(self).forward(self, hidden_states, *args, **kwargs)
    attention, shape = self.self_attn, hidden_states.shape[:-1]
    qkv, tables, normed = None, None, hidden_states
    if (pending is not None and pending.output is hidden_states and pending.layer is self
            and pending.cos is position_embeddings[0]
            and (pending.qkv.requires_grad or not (torch.is_grad_enabled() and hidden_states.requires_grad))):
        qkv, tables = pending.qkv, pending.tables
    else:
        normed = self.input_layernorm(hidden_states)
    out, _ = attention(normed, coda_qkv=qkv, coda_output_projection=False, **kwargs)
    following = _following(self, chain)
    if following is None:
        hidden_states = hidden_states + attention.o_proj(out)
        return hidden_states + self.mlp(self.post_attention_layernorm(hidden_states))
    if tables is None:
        tables = _rotary_rows(position_embeddings, shape, attention.head_dim)
    hidden, next_attention = hidden_states.shape[-1], following.self_attn
    h2, qkv = ops.layer(out.view(-1, out.shape[-1]), hidden_states.reshape(-1, hidden), tables[0],
                        attention.o_proj.weight, self.post_attention_layernorm.weight, self.mlp.w_gate_up,
                        self.mlp.w_down, following.input_layernorm.weight, next_attention.w_qkv, *tables[1:],
                        next_attention.head_dim, next_attention.coda_rotated_heads,
                        self.post_attention_layernorm.variance_epsilon)
    h2 = h2.view(hidden_states.shape)
    chain.pending = _Handoff(h2, qkv.view(*shape, -1), tables, following, position_embeddings[0])
    return h2


def _plan_chain(model):
    """The _Chain of model.model.layers (checked before anything is replaced), or None without a link."""
    layers = getattr(getattr(model, "model", None), "layers", None)
    if not isinstance(layers, torch.nn.ModuleList):
        return None
    chain = _Chain(layers)
    if not any(following is not None for following in chain.following):
        return None
    import transformers
    return chain if int(transformers.__version__.split(".")[0]) >= 5 else None  # 4.x decoder layers return tuples


def _install_chain(model, chain):
    for index, layer in enumerate(model.model.layers):
        if chain.following[index] is not None or (index > 0 and chain.following[index - 1] is not None):
            layer.coda_chain, layer.coda_index = chain, index
            layer.forward = types.MethodType(_chained_layer_forward, layer)
    model.model.register_forward_hook(chain.clear)


def _fused_loss_forward(model, keep_logits):
    """model.forward with, when labels are given, the LM head + loss fused (Hugging Face's shift: token t
    predicts t + 1, the last position ignored; mean over non-ignored tokens, or sum / num_items_in_batch).
    Arguments bind as the original forward's (positional ones included); its signature is kept, so tools
    that inspect it (Trainer's column filter) see the same parameters."""
    original = model.forward
    signature = inspect.signature(original)
    var_keyword = next((p.name for p in signature.parameters.values() if p.kind is p.VAR_KEYWORD), None)

    @functools.wraps(original)
    def forward(*args, **kwargs):
        arguments = signature.bind(*args, **kwargs).arguments
        arguments.update(arguments.pop(var_keyword, {}) if var_keyword else {})
        labels = arguments.pop("labels", None)
        if labels is None or "shift_labels" in arguments:  # nothing to fuse, or a loss option coda lacks
            return original(*args, **kwargs)
        options = {name: arguments.pop(name, None) for name in _LOSS_KWARGS}
        return_dict = options["return_dict"]
        if return_dict is None:
            return_dict = getattr(model.config, "return_dict", True)
        outputs = model.model(**arguments, return_dict=True)
        hidden = outputs.last_hidden_state
        targets = torch.nn.functional.pad(labels, (0, 1), value=-100)[..., 1:]
        num_items = options["num_items_in_batch"]
        loss = ops.linear_cross_entropy(hidden.reshape(-1, hidden.shape[-1]), model.lm_head.weight,
                                        targets.reshape(-1), reduction="mean" if num_items is None else "sum",
                                        keep_logits=keep_logits)
        if num_items is not None:
            loss = loss / num_items
        from transformers.modeling_outputs import CausalLMOutputWithPast
        rest = {key: value for key, value in outputs.items() if key != "last_hidden_state"}  # cache, hidden states
        result = CausalLMOutputWithPast(loss=loss, logits=None, **rest)
        return result if return_dict else result.to_tuple()

    return forward


def patch(model, keep_logits=True, attention=True, layers=False):
    """Replace model's LLaMA-style MLPs, attention projections + RoPE, (with layers=True) the steps between one
    layer's attention and the next's, and (with labels) its LM head + loss by coda's fused ops, in place.

    Works on LlamaForCausalLM and models of the same structure (model.model.layers[i].mlp with
    gate_proj/up_proj/down_proj and SiLU, model.lm_head without a bias). Returns the model.

        coda.patch(model)                                  # loss with kept logits: fastest
        coda.patch(model, keep_logits=False)               # the loss holds no M x V logits
        coda.patch(model, layers=True)                     # norms and residual adds in coda.layer too
    """
    chain = _plan_chain(model) if layers and attention else None
    if layers and chain is None:
        raise ValueError("coda.patch: layers=True needs attention=True and two consecutive LlamaDecoderLayers "
                         "(Hugging Face 5) with a bias-free square o_proj, LlamaRMSNorm norms of one eps and one "
                         "head_dim; the model is unchanged")
    replaced = 0
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            if _is_llama_mlp(child):
                setattr(module, child_name, nn.SwiGLUMLP.from_linears(child.gate_proj, child.up_proj,
                                                                      child.down_proj))
                replaced += 1
            elif attention and _is_llama_attention(child):
                _patch_attention(child)
    if replaced == 0:
        raise ValueError("coda.patch: found no LLaMA-style MLP (gate_proj, up_proj, down_proj nn.Linear without "
                         "bias, act_fn SiLU) in the model")
    if chain is not None:
        _install_chain(model, chain)
    head = getattr(model, "lm_head", None)
    config = getattr(model, "config", None)
    transformed = any(getattr(config, name, None) not in (None, 1, 1.0) for name in _LOGIT_TRANSFORMS)
    if isinstance(head, torch.nn.Linear) and head.bias is None and hasattr(model, "model") and not transformed:
        model.forward = _fused_loss_forward(model, keep_logits)
    return model

"""coda.patch(model): a Hugging Face LLaMA-style causal LM with coda's fused ops, weights kept.

    model = transformers.AutoModelForCausalLM.from_config(config).cuda().bfloat16()
    coda.patch(model)                       # in place; returns the model
    loss = model(input_ids, labels=labels).loss

What it replaces: each decoder layer's MLP (gate/up/down with SiLU) by coda.nn.SwiGLUMLP (gate and up
rows interleaved once, a copy of the weights); each LlamaAttention's Q, K and V projections and
their RoPE by one coda.rope_linear (the three weights stacked into self_attn.w_qkv, Q and K rows
permuted for interleaved pairs, which leaves every attention score as it was; the rotation takes
the model's own cos/sin, so any rope_type works); and, when labels are given, the LM head and the
loss by coda.linear_cross_entropy (the output's `logits` is None). The attention kernel, o_proj,
the norms and the residual adds stay Hugging Face's. Models whose head scales or caps its logits
(Cohere, Granite, Gemma 2) keep their own loss; attentions with biases or another class keep theirs.

keep_logits (default True): the fused loss keeps the M x V logits for its backward, three GEMMs in
all, as torch.compile's loss does; False recomputes them (four GEMMs, no logits held). attention:
False leaves attention untouched. The new modules keep each weight's requires_grad (frozen weights
stay frozen); their parameter names differ (mlp.w_gate_up, mlp.w_down, self_attn.w_qkv), so save
checkpoints from an unpatched model (coda.split_gate_up gives gate and up back).
"""
import functools
import inspect
import sys
import types

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


def _rope_attention_forward(self, hidden_states, position_embeddings=None, attention_mask=None, **kwargs):
    """LlamaAttention.forward with Q, K, V and RoPE from one coda.rope_linear. The rotation's tables are the
    model's per-token cos/sin (Hugging Face's, halves repeated): token m reads row m."""
    cache_name = next((name for name in _CACHE_NAMES if kwargs.get(name) is not None), None)
    cache = kwargs.pop(cache_name) if cache_name else None
    for name in _CACHE_NAMES:
        kwargs.pop(name, None)
    cos, sin = position_embeddings
    shape, half = hidden_states.shape[:-1], self.head_dim // 2
    if cos.shape[-1] != self.head_dim:
        raise ValueError(f"coda.patch: the rotary tables have {cos.shape[-1]} columns; the patched attention "
                         f"rotates whole heads of {self.head_dim}")
    tokens = shape.numel()
    cos_rows = cos[..., :half].expand(*shape, half).reshape(tokens, half).float()
    sin_rows = sin[..., :half].expand(*shape, half).reshape(tokens, half).float()
    positions = torch.arange(tokens, dtype=torch.int32, device=hidden_states.device).view(shape)
    qkv = ops.rope_linear(hidden_states, self.w_qkv, positions, cos_rows, sin_rows, self.head_dim,
                          self.coda_rotated_heads)
    q, k, v = (t.view(*shape, -1, self.head_dim).transpose(1, 2) for t in qkv.split(self.coda_rows, dim=-1))
    if cache is not None:
        if cache_name == "cache":
            k, v = cache.update(k, v, self.layer_idx, kwargs=kwargs)
        else:
            k, v = cache.update(k, v, self.layer_idx,
                                {"sin": sin, "cos": cos, "cache_position": kwargs.get("cache_position")})
    hf = _HF_MODULES[type(self)]
    implementation = getattr(self.config, "_attn_implementation", None)
    attend = (hf.eager_attention_forward if implementation in (None, "eager")
              else hf.ALL_ATTENTION_FUNCTIONS[implementation])
    out, weights = attend(self, q, k, v, attention_mask, dropout=self.attention_dropout if self.training else 0.0,
                          scaling=self.scaling, **kwargs)
    return self.o_proj(out.reshape(*shape, -1).contiguous()), weights


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


def patch(model, keep_logits=True, attention=True):
    """Replace model's LLaMA-style MLPs, attention projections + RoPE and (with labels) its LM head + loss by
    coda's fused ops, in place.

    Works on LlamaForCausalLM and models of the same structure (model.model.layers[i].mlp with
    gate_proj/up_proj/down_proj and SiLU, model.lm_head without a bias). Returns the model.

        coda.patch(model)                                  # loss with kept logits: fastest
        coda.patch(model, keep_logits=False)               # the loss holds no M x V logits
    """
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
    head = getattr(model, "lm_head", None)
    config = getattr(model, "config", None)
    transformed = any(getattr(config, name, None) not in (None, 1, 1.0) for name in _LOGIT_TRANSFORMS)
    if isinstance(head, torch.nn.Linear) and head.bias is None and hasattr(model, "model") and not transformed:
        model.forward = _fused_loss_forward(model, keep_logits)
    return model

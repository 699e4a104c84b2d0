"""coda.patch(model): a Hugging Face LLaMA-style causal LM with coda's fused ops, weights kept.

    model = transformers.AutoModelForCausalLM.from_config(config).cuda().bfloat16()
    coda.patch(model)                       # in place; returns the model
    loss = model(input_ids, labels=labels).loss

What it replaces: each decoder layer's MLP (gate/up/down with SiLU) by coda.nn.SwiGLUMLP (gate and up
rows interleaved once, a copy of the weights), and, when labels are given, the LM head and the
loss by coda.linear_cross_entropy (the logits are not computed: the output's `logits` is None).
Attention, the norms and the residual adds stay Hugging Face's. Models whose head scales or caps its
logits (Cohere, Granite, Gemma 2) keep their own loss. The new modules keep each weight's
requires_grad (frozen weights stay frozen); their parameter names differ (mlp.w_gate_up, mlp.w_down),
so save checkpoints from an unpatched model (coda.split_gate_up gives gate and up back).
"""
import functools
import inspect

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


def _fused_loss_forward(model):
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
                                        targets.reshape(-1), reduction="mean" if num_items is None else "sum")
        if num_items is not None:
            loss = loss / num_items
        from transformers.modeling_outputs import CausalLMOutputWithPast
        rest = {key: value for key, value in outputs.items() if key != "last_hidden_state"}  # cache, hidden states
        result = CausalLMOutputWithPast(loss=loss, logits=None, **rest)
        return result if return_dict else result.to_tuple()

    return forward


def patch(model):
    """Replace model's LLaMA-style MLPs and (with labels) its LM head + loss by coda's fused ops, in place.

    Works on LlamaForCausalLM and models of the same structure (model.model.layers[i].mlp with
    gate_proj/up_proj/down_proj and SiLU, model.lm_head without a bias). Returns the model.
    """
    replaced = 0
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            if _is_llama_mlp(child):
                setattr(module, child_name, nn.SwiGLUMLP.from_linears(child.gate_proj, child.up_proj,
                                                                      child.down_proj))
                replaced += 1
    if replaced == 0:
        raise ValueError("coda.patch: found no LLaMA-style MLP (gate_proj, up_proj, down_proj nn.Linear without "
                         "bias, act_fn SiLU) in the model")
    head = getattr(model, "lm_head", None)
    config = getattr(model, "config", None)
    transformed = any(getattr(config, name, None) not in (None, 1, 1.0) for name in _LOGIT_TRANSFORMS)
    if isinstance(head, torch.nn.Linear) and head.bias is None and hasattr(model, "model") and not transformed:
        model.forward = _fused_loss_forward(model)
    return model

"""coda.patch(model): a Hugging Face LLaMA-style causal LM with coda's fused ops, weights kept.

    model = transformers.AutoModelForCausalLM.from_config(config).cuda().bfloat16()
    coda.patch(model)                       # in place; returns the model
    loss = model(input_ids, labels=labels).loss

What it replaces: each decoder layer's MLP (gate/up/down with SiLU) by coda.nn.SwiGLUMLP (gate and up
rows interleaved once, a copy of the weights), and, when labels are given, the LM head and the
loss by coda.linear_cross_entropy (the logits are not computed: the output's `logits` is None).
Attention, the norms and the residual adds stay Hugging Face's.
"""
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


def _causal_lm_forward(self, input_ids=None, labels=None, **kwargs):
    """The patched forward: with labels, the fused LM head + loss (Hugging Face's shift: token t predicts
    t + 1, the last position ignored; mean over non-ignored tokens, or sum / num_items_in_batch)."""
    if labels is None:
        return self._coda_original_forward(input_ids=input_ids, **kwargs)
    num_items = kwargs.pop("num_items_in_batch", None)
    kwargs.pop("logits_to_keep", None)
    outputs = self.model(input_ids=input_ids, **kwargs)
    hidden = outputs.last_hidden_state
    targets = torch.nn.functional.pad(labels, (0, 1), value=-100)[..., 1:]
    loss = ops.linear_cross_entropy(hidden.reshape(-1, hidden.shape[-1]), self.lm_head.weight, targets.reshape(-1),
                                    reduction="mean" if num_items is None else "sum")
    if num_items is not None:
        loss = loss / num_items
    from transformers.modeling_outputs import CausalLMOutputWithPast
    rest = {key: value for key, value in outputs.items() if key != "last_hidden_state"}  # cache, hidden states
    return CausalLMOutputWithPast(loss=loss, logits=None, **rest)


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
    if isinstance(head, torch.nn.Linear) and head.bias is None and hasattr(model, "model"):
        model._coda_original_forward = model.forward
        model.forward = types.MethodType(_causal_lm_forward, model)
    return model

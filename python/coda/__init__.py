"""coda: fused Transformer ops for NVIDIA Hopper as PyTorch custom ops (GEMMs with their epilogues).

    import coda
    y = coda.linear(x, w)                                     # x @ w.T on coda's GEMM
    y = coda.swiglu_mlp(x, coda.interleave_gate_up(wg, wu), w_down)
    loss = coda.linear_cross_entropy(h, lm_head.weight, labels)   # no logits in memory
    weights, ids = coda.route(h, gate.weight, 8, mode="topk_softmax")   # MoE routing in one GEMM
    model = coda.patch(model)                                 # a Hugging Face LLaMA, fused

Every op is torch.ops.coda.<name> with a fake implementation (torch.compile(fullgraph=True) traces
it) and an autograd formula; it runs on torch's current CUDA stream and never syncs the host, so
CUDA-graph capture works. Inputs: bf16 or f16 CUDA tensors (float32 follows torch.autocast).
"""
import torch  # noqa: F401  (torch's runtime first: libcoda loads beside it)

from . import nn
from ._library import CodaArgumentError, CodaError, library_path, version
from .ops import (interleave_gate_up, layer, linear, linear_cross_entropy, mm, residual_rmsnorm_linear, rope_cache,
                  rope_linear, rotate_half_to_interleaved, route, split_gate_up, swiglu_linear, swiglu_mlp)
from .patch import patch

__version__ = "0.1.0"
__all__ = ["linear", "mm", "swiglu_linear", "swiglu_mlp", "interleave_gate_up", "split_gate_up", "rope_linear",
           "rope_cache", "rotate_half_to_interleaved", "residual_rmsnorm_linear", "linear_cross_entropy", "layer",
           "route", "nn", "patch", "CodaError", "CodaArgumentError", "version", "library_path"]

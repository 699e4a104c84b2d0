"""coda's ops as torch custom ops (torch.ops.coda.*), each with a fake implementation for
torch.compile and an autograd formula. The functions here are the public entry points."""
from .cross_entropy import linear_cross_entropy
from .matmul import linear, mm
from .rmsnorm import residual_rmsnorm_linear
from .router import route
from .rope import rope_cache, rope_linear, rotate_half_to_interleaved
from .swiglu import interleave_gate_up, split_gate_up, swiglu_linear, swiglu_mlp
from .transformer_layer import layer

__all__ = ["linear", "mm", "swiglu_linear", "swiglu_mlp", "interleave_gate_up", "split_gate_up", "rope_linear",
           "rope_cache", "rotate_half_to_interleaved", "residual_rmsnorm_linear", "linear_cross_entropy", "layer",
           "route"]

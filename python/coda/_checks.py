"""Argument checks shared by the ops' real and fake (meta) implementations, so that a bad argument
fails the same way in eager mode and while torch.compile traces. Each error names the op, the
argument and the rule. The checks read only shapes, strides, dtypes and devices (no device sync).
"""
import torch

FLOATS = (torch.bfloat16, torch.float16)
DEVICES = ("cuda", "meta")  # meta: tracing (fake tensors carry their real device)
_NAMES = {torch.bfloat16: "bfloat16", torch.float16: "float16", torch.float32: "float32", torch.int32: "int32",
          torch.int64: "int64"}


def _name(dtype):
    return _NAMES.get(dtype, str(dtype).replace("torch.", ""))


def tensor(op, name, t, dtypes, rank=None):
    """t is a tensor on a CUDA device (or a meta/fake one while tracing) with one of `dtypes`."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"coda.{op}: {name} must be a torch.Tensor, got {type(t).__name__}")
    if t.device.type not in DEVICES:
        raise ValueError(f"coda.{op}: {name} is on {t.device}; coda's ops run on CUDA tensors (move it with .cuda())")
    if t.dtype not in dtypes:
        allowed = " or ".join(_name(d) for d in dtypes)
        raise TypeError(f"coda.{op}: {name} has dtype {_name(t.dtype)}; it must be {allowed}"
                        + (" (use torch.autocast or .to(torch.bfloat16))" if t.dtype == torch.float32 else ""))
    if rank is not None and t.dim() != rank:
        raise ValueError(f"coda.{op}: {name} must have {rank} dimension{'s' if rank > 1 else ''}, "
                         f"got shape {tuple(t.shape)}")


def same_dtype(op, name, t, reference_name, reference):
    if t.dtype != reference.dtype:
        raise TypeError(f"coda.{op}: {name} has dtype {_name(t.dtype)}, {reference_name} {_name(reference.dtype)}; "
                        "they must be the same")


def same_device(op, tensors):
    devices = {t.device for _, t in tensors if t is not None}
    if len(devices) > 1:
        listed = ", ".join(f"{name} on {t.device}" for name, t in tensors if t is not None)
        raise ValueError(f"coda.{op}: all tensors must be on one device ({listed})")


def size(op, name, value, expected, what):
    if value != expected:
        raise ValueError(f"coda.{op}: {name} has {what} {value}, expected {expected}")


def multiple_of_8(op, name, value, what):
    """Rows of 16-byte-aligned 2-byte elements (TMA's rule for every row stride)."""
    if value % 8:
        raise ValueError(f"coda.{op}: {name} has {what} {value}; it must be a multiple of 8 (rows of 16 bytes, "
                         "the tensor-memory-access rule)")


def round_up_8(n):
    return (n + 7) // 8 * 8


def rows(t):
    """t as a matrix (leading dimensions flattened) of unit column stride and 16-byte-aligned rows, what
    libcoda's TMA reads: t itself (a size-1 dimension's stride normalized), else a copy."""
    if t.dim() != 2:
        t = t.reshape(-1, t.shape[-1])
    r, c = t.shape
    row_stride = t.stride(0) if r > 1 else round_up_8(c)
    if (t.stride(1) == 1 or c == 1) and row_stride % 8 == 0 and row_stride >= c and t.data_ptr() % 16 == 0:
        return t if t.stride() == (row_stride, 1) else t.as_strided((r, c), (row_stride, 1))
    return t.new_empty(r, c).copy_(t)


def vector(t):
    return t if t.is_contiguous() else t.contiguous()

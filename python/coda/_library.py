"""libcoda through its C ABI (include/coda/coda.h), loaded with ctypes.

The package's libcoda is coda/lib/libcoda.so (CODA_LIBRARY overrides the path). Loading it needs
no GPU: on a machine without one, every call that would launch a kernel fails with CODA_UNSUPPORTED
after checking its arguments.

Speed: an op's call converts its tensors into `coda_tensor` structs kept per call site and shape
(only the data pointer is written per call) and takes the stream from torch's raw-stream accessor,
so the Python side of a call is a few attribute reads and one foreign call.
"""
import ctypes
import os
import threading

import torch

from ._abi import (INVALID_ARGUMENT, K_MAJOR, MN_MAJOR, OK, REDUCTIONS, ROUTING_MODES, SIGNATURES,  # noqa: F401
                   CrossEntropyOptions, LayerGradients, LayerSaved, LayerWeights, RouterOptions, Tensor,  # (the ops use
                   load)  # them through L)

DTYPES = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2, torch.float8_e4m3fn: 3, torch.float8_e5m2: 4,
          torch.int32: 5}


class CodaError(RuntimeError):
    """A libcoda call failed; the message names the C function, the argument and the rule."""


class CodaArgumentError(CodaError, ValueError):
    """libcoda refused an argument (CODA_INVALID_ARGUMENT)."""


def library_path():
    """Where libcoda is loaded from: $CODA_LIBRARY, else the package's own coda/lib/libcoda.so."""
    return os.environ.get("CODA_LIBRARY") or os.path.join(os.path.dirname(__file__), "lib", "libcoda.so")


def _load():
    path = library_path()
    if not os.path.exists(path):
        raise ImportError(f"coda: libcoda not found at {path} (install the package with `pip install ./python`, "
                          "or set CODA_LIBRARY to a built libcoda.so)")
    return load(path)


lib = _load()


def version():
    return lib.coda_version().decode()


def raise_for(status):
    """Raise the libcoda error of a failed call (its message names the function and the argument)."""
    message = lib.coda_last_error().decode()
    kind = CodaArgumentError if status == INVALID_ARGUMENT else CodaError
    raise kind(f"{message} [{lib.coda_status_name(status).decode()}]")


def call(function, *args):
    status = function(*args)
    if status != OK:
        raise_for(status)


class _Views(threading.local):
    """coda_tensor structs by (call site, shape, strides, dtype): a call writes only `data`. Per thread, and per
    call site so that two arguments of one call never share a struct."""

    def __init__(self):
        self.structs = {}


_views = _Views()


def struct(t):
    """A new coda_tensor describing t (its data pointer included)."""
    s = Tensor()
    s.data, s.dtype, s.rank = t.data_ptr(), DTYPES[t.dtype], t.dim()
    for i in range(t.dim()):
        s.shape[i], s.stride[i] = t.shape[i], t.stride(i)
    return s


def view(slot, t):
    """The coda_tensor of `t` (checked by the caller) for argument `slot` of a call; None stays None (NULL)."""
    if t is None:
        return None
    key = (slot, t.shape, t.stride(), t.dtype)
    structs = _views.structs
    cached = structs.get(key)
    if cached is None:
        if len(structs) > 4096:
            structs.clear()
        cached = structs[key] = struct(t)
    else:
        cached.data = t.data_ptr()
    return ctypes.byref(cached)


def stream(device):
    """torch's current stream on `device` as a cudaStream_t value."""
    return torch._C._cuda_getCurrentRawStream(device.index)


_sizes = {}


def cached_size(key, query, *args):
    """What a size query (a libcoda function whose last argument is a size_t*) answers for `args`, asked once
    per `key` (the arguments the answer depends on, hashable)."""
    size = _sizes.get(key)
    if size is None:
        out = ctypes.c_size_t()
        call(query, *args, ctypes.byref(out))
        size = _sizes[key] = out.value
    return size


def workspace_bytes(query, *args):
    """A workspace size query by name whose arguments are plain integers (they are the key)."""
    return cached_size((query, args), getattr(lib, query), *args)


def workspace(bytes_, device):
    """Device memory from torch's caching allocator (contents arbitrary: libcoda writes what it reads)."""
    return torch.empty(max(bytes_, 1), dtype=torch.uint8, device=device)


def row_partial_count(n):
    """ceil(n / 128): the row partials an op writes over n columns."""
    return (n + 127) // 128


class _Current:
    """No-op context: the tensors are on the current device already."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


_current = _Current()


def on_device(device):
    """libcoda launches on the current CUDA device: make it the tensors' device for the call."""
    return _current if device.index == torch.cuda.current_device() else torch.cuda.device(device)


def autocast(*tensors):
    """The GEMM operands in torch.autocast's dtype when autocast is on for CUDA (as torch's own matmuls)."""
    if not torch.is_autocast_enabled("cuda"):
        return tensors
    dtype = torch.get_autocast_dtype("cuda")
    return tuple(t.to(dtype) if t is not None and t.is_floating_point() else t for t in tensors)


def kernel(library, name, checked=True):
    """Register an op's implementation for CUDA tensors and, when it checks its arguments first (the public
    ops; not the backward ops, whose inputs a checked forward made), for CPU ones too: the check then
    raises the error naming the argument on the CPU, instead of torch's 'no CPU kernel'."""

    def register(function):
        library.impl(name, function, "CUDA")
        if checked:
            library.impl(name, function, "CPU")
        return function

    return register


_PLAIN = (torch.Tensor, torch.nn.Parameter)


def eager(*tensors):
    """True when a call may go straight to libcoda, skipping torch's dispatcher: plain CUDA tensors, no
    autocast, not traced by torch.compile, no Python dispatch mode (fake tensors, make_fx, user modes) or
    function mode. Anything else takes the custom op, so modes and tracers see it. Gradients may be
    needed: the op's eager path records them with a torch.autograd.Function of the same formula."""
    for t in tensors:
        if type(t) not in _PLAIN or not t.is_cuda:
            return False
    return not (torch._C._is_any_autocast_enabled() or torch.compiler.is_compiling()
                or torch._C._len_torch_dispatch_stack() or torch._C._is_torch_function_mode_enabled())


def needs_grad(*tensors):
    if not torch.is_grad_enabled():
        return False
    for t in tensors:
        if t.requires_grad:
            return True
    return False

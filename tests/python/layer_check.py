"""The layer block through the C ABI (coda_layer_*), inside a Python process, against torch.

    python3 tests/python/layer_check.py build/test/src/libcoda.so [--require-gpu]

Without a Hopper GPU and torch: each function refuses bad arguments (CODA_INVALID_ARGUMENT, naming
the argument) and reports CODA_UNSUPPORTED for good ones. With them: the layer forward and backward
at T = 1, 7, 129, 4095 and 16384 against torch's autograd in fp64, every output and gradient within
the error of the same layer run by torch in bf16 (unfused, the fp32 norms and rotation of
torch_layer.py), or better; the same bits on a second run. Exit code 0 when every check passed.
"""
import ctypes
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from c_abi_check import (BF16, F32, I32, OK, Memory, _abi, check, expect_refused, expect_runs, finish,
                         ref, relative_error, start, stream, torch, view)


LayerWeights, LayerSaved, LayerGradients = _abi.LayerWeights, _abi.LayerSaved, _abi.LayerGradients


# ---- the layer in torch, with coda's conventions: gate and up rows interleaved in w_gate_up, the
# rotated heads' pairs interleaved, cos and sin indexed by position.

def rmsnorm(x, g, eps):
    xf = x.float() if x.dtype != torch.float64 else x
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * g).to(x.dtype)


def rope(y, cos, sin, positions, head_dim, rotated_heads):
    t, dtype = y.shape[0], y.dtype
    yf = y.float() if dtype != torch.float64 else y
    pairs = yf.view(t, -1, head_dim // 2, 2)
    c, s = cos[positions.long()][:, None, :].to(yf.dtype), sin[positions.long()][:, None, :].to(yf.dtype)
    turned = torch.stack((pairs[..., 0] * c - pairs[..., 1] * s, pairs[..., 0] * s + pairs[..., 1] * c), -1)
    return torch.cat((turned[:, :rotated_heads], pairs[:, rotated_heads:]), 1).reshape(t, -1).to(dtype)


def torch_layer(x, r, wo, g1, wgu, wd, g2, wqkv, cos, sin, positions, head_dim, rotated_heads, eps):
    h1 = r + x @ wo.T
    p = rmsnorm(h1, g1, eps) @ wgu.T
    h2 = h1 + (torch.nn.functional.silu(p[:, 0::2]) * p[:, 1::2]) @ wd.T
    return h2, rope(rmsnorm(h2, g2, eps) @ wqkv.T, cos, sin, positions, head_dim, rotated_heads)


class Layer:
    """A random layer and its inputs, coda's buffers (poisoned) and the C structs over them."""

    def __init__(self, tokens, hidden, ffn, heads, head_dim, rotated_heads, eps=1e-6, max_pos=4096):
        dev, bf = "cuda", torch.bfloat16
        rand = lambda *s, scale=1.0: (torch.randn(*s, device=dev) * scale).to(bf)
        self.head_dim, self.rotated_heads, self.eps, nqkv = head_dim, rotated_heads, eps, heads * head_dim
        self.weights = [rand(hidden, hidden, scale=hidden ** -0.5), torch.rand(hidden, device=dev) + 0.5,
                        rand(2 * ffn, hidden, scale=hidden ** -0.5), rand(hidden, ffn, scale=ffn ** -0.5),
                        torch.rand(hidden, device=dev) + 0.5, rand(nqkv, hidden, scale=hidden ** -0.5)]
        frequencies = 1.0 / 10000 ** (torch.arange(0, head_dim, 2, device=dev).double() / head_dim)
        angles = torch.arange(max_pos, device=dev).double()[:, None] * frequencies[None, :]
        self.cos, self.sin = angles.cos().float(), angles.sin().float()
        self.attn_out, self.residual = rand(tokens, hidden), rand(tokens, hidden, scale=2.0)
        self.positions = torch.randint(0, max_pos, (tokens,), device=dev, dtype=torch.int32)
        self.grad_h2, self.grad_qkv = rand(tokens, hidden), rand(tokens, nqkv)
        nan = lambda *s, dtype=bf: torch.full(s, float("nan"), device=dev, dtype=dtype)
        self.h2, self.qkv = nan(tokens, hidden), nan(tokens, nqkv)
        self.saved = [nan(tokens, hidden), nan(tokens, dtype=torch.float32), nan(tokens, 2 * ffn), nan(tokens, ffn),
                      nan(tokens, dtype=torch.float32)]
        self.grads = [nan(tokens, hidden), nan(tokens, hidden), nan(hidden, hidden), nan(hidden, dtype=torch.float32),
                      nan(2 * ffn, hidden), nan(hidden, ffn), nan(hidden, dtype=torch.float32), nan(nqkv, hidden)]
        kind = lambda t: {torch.bfloat16: BF16, torch.float32: F32, torch.int32: I32}[t.dtype]
        v = lambda t: view(t, kind(t))
        self.c_weights = LayerWeights(*[v(w) for w in self.weights], v(self.cos), v(self.sin), head_dim,
                                      rotated_heads, eps)
        self.c_saved = LayerSaved(*[v(t) for t in self.saved])
        self.c_grads = LayerGradients(*[v(t) for t in self.grads])
        self.views = {name: v(getattr(self, name))
                      for name in ("attn_out", "residual", "positions", "h2", "qkv", "grad_h2", "grad_qkv")}

    def run(self, abi, workspace):
        s, c = stream(), self.views
        check(abi.layer_forward(ref(self.c_weights), ref(c["attn_out"]), ref(c["residual"]), ref(c["positions"]),
                                ref(c["h2"]), ref(c["qkv"]), ref(self.c_saved), ctypes.c_void_p(workspace.data_ptr()),
                                workspace.numel() * 4, s) == OK, abi.message())
        check(abi.layer_backward(ref(self.c_weights), ref(c["attn_out"]), ref(c["positions"]), ref(c["h2"]),
                                 ref(c["qkv"]), ref(self.c_saved), ref(c["grad_h2"]), ref(c["grad_qkv"]),
                                 ref(self.c_grads), ctypes.c_void_p(workspace.data_ptr()), workspace.numel() * 4,
                                 s) == OK, abi.message())
        torch.cuda.synchronize()
        return [self.h2, self.qkv] + self.grads

    def torch_results(self, dtype):
        """Outputs and gradients of torch's layer from the same inputs, computed in `dtype`."""
        inputs = [t.to(dtype).requires_grad_() for t in [self.attn_out, self.residual] + self.weights]
        cast = (lambda t: t.double()) if dtype == torch.float64 else (lambda t: t)
        h2, qkv = torch_layer(*inputs, cast(self.cos), cast(self.sin), self.positions, self.head_dim,
                              self.rotated_heads, self.eps)
        torch.autograd.backward([h2, qkv], [self.grad_h2.to(dtype), self.grad_qkv.to(dtype)])
        return [h2.detach(), qkv.detach()] + [t.grad for t in inputs]


NAMES = ["h2", "qkv", "d attn_out", "dr", "dWo", "dg1", "dWgu", "dWd", "dg2", "dWqkv"]


def results_on_gpu(abi):
    sizes = [(1, 256, 512, 6, 64, 4), (7, 256, 512, 6, 64, 4), (129, 512, 1376, 12, 64, 8),
             (4095, 1024, 2816, 24, 128, 16), (16384, 2048, 5632, 48, 128, 32)]
    for tokens, hidden, ffn, heads, head_dim, rotated in sizes:
        torch.manual_seed(tokens)
        layer = Layer(tokens, hidden, ffn, heads, head_dim, rotated)
        bytes_ = ctypes.c_size_t(0)
        check(abi.layer_workspace_bytes(ref(layer.c_weights), tokens, ctypes.byref(bytes_)) == OK, abi.message())
        workspace = torch.randint(-2**31, 2**31 - 1, ((bytes_.value + 3) // 4,), device="cuda", dtype=torch.int32)
        got = [t.clone() for t in layer.run(abi, workspace)]
        want = layer.torch_results(torch.float64)
        unfused = layer.torch_results(torch.bfloat16)
        line = []
        for name, g, w, u in zip(NAMES, got, want, unfused):
            coda_error, torch_error = relative_error(g, w), relative_error(u, w)
            # bf16 rounding of the outputs alone: a floor for tensors both compute to the last bit.
            floor = relative_error(w.to(torch.bfloat16), w)
            check(coda_error <= max(torch_error, 1.5 * floor),
                  f"T={tokens} H={hidden} F={ffn}: {name} error {coda_error:.2e}, torch bf16 {torch_error:.2e}")
            line.append(f"{name} {coda_error:.1e} ({torch_error:.1e})")
        workspace.random_(-2**31, 2**31 - 1)
        again = layer.run(abi, workspace)
        check(all(torch.equal(a, b) for a, b in zip(got, again)), f"T={tokens}: the same bits on a second run")
        print(f"T={tokens} H={hidden} F={ffn}: coda (torch bf16) against fp64: " + ", ".join(line), flush=True)


def every_function(abi, gpu):
    """Bad arguments are refused by name; good ones run (or are unsupported without a GPU)."""
    mem = Memory(gpu)
    t, hidden, ffn, heads, head_dim = 16, 64, 96, 3, 32
    tile = lambda *s, dtype=BF16: mem.tensor(dtype, *s)[0]
    weights = LayerWeights(tile(hidden, hidden), tile(hidden, dtype=F32), tile(2 * ffn, hidden), tile(hidden, ffn),
                           tile(hidden, dtype=F32), tile(heads * head_dim, hidden), tile(64, head_dim // 2, dtype=F32),
                           tile(64, head_dim // 2, dtype=F32), head_dim, 2, 1e-6)
    saved = LayerSaved(tile(t, hidden), tile(t, dtype=F32), tile(t, 2 * ffn), tile(t, ffn), tile(t, dtype=F32))
    grads = LayerGradients(tile(t, hidden), tile(t, hidden), tile(hidden, hidden), tile(hidden, dtype=F32),
                           tile(2 * ffn, hidden), tile(hidden, ffn), tile(hidden, dtype=F32),
                           tile(heads * head_dim, hidden))
    x, r, h2, dh2 = (tile(t, hidden) for _ in range(4))
    qkv, dqkv, positions = tile(t, heads * head_dim), tile(t, heads * head_dim), tile(t, dtype=I32)
    s, size = stream(), ctypes.c_size_t(0)

    check(abi.layer_workspace_bytes(ref(weights), t, ctypes.byref(size)) == OK and size.value > 0,
          "coda_layer_workspace_bytes: " + abi.message())
    workspace = tile(max(size.value // 4, 1), dtype=F32)
    refused = ctypes.c_size_t(7)
    expect_refused(abi, abi.layer_workspace_bytes(None, t, ctypes.byref(refused)), "coda_layer_workspace_bytes",
                   "weights")
    check(refused.value == 0, "coda_layer_workspace_bytes: *bytes is 0 after a refusal")
    expect_refused(abi, abi.layer_workspace_bytes(ref(weights), 0, ctypes.byref(refused)),
                   "coda_layer_workspace_bytes", "tokens")
    expect_refused(abi, abi.layer_workspace_bytes(ref(weights), t, None), "coda_layer_workspace_bytes", "bytes")
    bad = LayerWeights.from_buffer_copy(weights)
    bad.w_down = tile(hidden, ffn + 8)
    expect_refused(abi, abi.layer_workspace_bytes(ref(bad), t, ctypes.byref(refused)),
                   "coda_layer_workspace_bytes", "weights.w_gate_up")
    bad = LayerWeights.from_buffer_copy(weights)
    bad.rotated_heads = heads + 1
    forward = lambda w, saved_, ws, bytes_: abi.layer_forward(ref(w), ref(x), ref(r), ref(positions), ref(h2),
                                                              ref(qkv), ref(saved_), ws, bytes_, s)
    expect_refused(abi, forward(bad, saved, workspace.data, size.value), "coda_layer_forward",
                   "weights.rotated_heads")
    expect_refused(abi, forward(weights, saved, workspace.data, size.value - 1), "coda_layer_forward", "workspace")
    short = LayerSaved.from_buffer_copy(saved)
    short.rstd1 = tile(t - 1, dtype=F32)
    expect_refused(abi, forward(weights, short, workspace.data, size.value), "coda_layer_forward", "saved.rstd1")
    expect_refused(abi, forward(weights, None, workspace.data, size.value), "coda_layer_forward", "saved")
    expect_runs(abi, gpu, forward(weights, saved, workspace.data, size.value), "coda_layer_forward")

    backward = lambda g: abi.layer_backward(ref(weights), ref(x), ref(positions), ref(h2), ref(qkv), ref(saved),
                                            ref(dh2), ref(dqkv), ref(g), workspace.data, size.value, s)
    wrong = LayerGradients.from_buffer_copy(grads)
    wrong.w_down = tile(ffn, hidden)
    expect_refused(abi, backward(wrong), "coda_layer_backward", "grads.w_down")
    wrong = LayerGradients.from_buffer_copy(grads)
    wrong.norm2 = tile(hidden - 8, dtype=F32)
    expect_refused(abi, backward(wrong), "coda_layer_backward", "grads.norm2")
    expect_refused(abi, backward(None), "coda_layer_backward", "grads")
    expect_runs(abi, gpu, backward(grads), "coda_layer_backward")
    if gpu:
        torch.cuda.synchronize()


def main(argv):
    abi, gpu = start(argv, __doc__)
    if abi is None:
        return 2
    every_function(abi, gpu)
    if gpu:
        results_on_gpu(abi)
    return finish()


if __name__ == "__main__":
    sys.exit(main(sys.argv))

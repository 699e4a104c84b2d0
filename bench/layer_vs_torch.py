"""The layer forward and forward + backward: coda against PyTorch eager and torch.compile, one table.

    python3 bench/layer_vs_torch.py --coda build/bench/coda --library build/bench/src/libcoda.so \\
        [--tokens 16384] [--json bench_layer_vs_torch.json]

Runs `coda bench layer` first (coda's fused block, its unfused sequence and its GEMMs alone, timed by
CUDA-graph replay), then, in this process on the same GPU: the layer of
../shared/design/torch_baselines/torch_layer.py in eager mode and under torch.compile, and coda's
block through the C ABI (coda_layer_forward / coda_layer_backward on torch's tensors), all three
timed alike (triton's do_bench, median) with the same peak-memory measure: the most memory allocated
during one forward + backward beyond what was allocated before it (inputs, weights and their
gradients), as torch.cuda.max_memory_allocated sees it.
"""
import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F
from triton.testing import do_bench

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
from c_abi_check import BF16, F32, I32, Abi, view  # noqa: E402
from layer_check import LayerGradients, LayerSaved, LayerWeights  # noqa: E402

dev, bf = "cuda", torch.bfloat16
HEAD_DIM, MAX_POSITION = 128, 4096


# ---- torch_layer.py's definition, verbatim in substance.
def rmsnorm(x, w, eps=1e-6):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)


def rope(y, cos, sin):
    y = y.float()
    y1, y2 = y[..., 0::2], y[..., 1::2]
    return torch.stack((y1 * cos - y2 * sin, y1 * sin + y2 * cos), -1).flatten(-2).to(bf)


def layer(attn_out, r, Wo, g1, Wgu, Wd, g2, Wqkv, cos, sin):
    h1 = r + attn_out @ Wo.t()
    gu = rmsnorm(h1, g1) @ Wgu.t()
    gate, up = gu.chunk(2, dim=-1)
    h2 = h1 + (F.silu(gate) * up) @ Wd.t()
    return h2, rope(rmsnorm(h2, g2) @ Wqkv.t(), cos, sin)


def torch_case(t, h, f):
    p = lambda *s: (torch.randn(*s, device=dev, dtype=bf) / s[-1] ** 0.5).requires_grad_()
    args = [p(t, h), p(t, h), p(h, h), p(h), p(2 * f, h), p(h, f), p(h), p(3 * h, h),
            torch.randn(t, 3 * h // 2, device=dev), torch.randn(t, 3 * h // 2, device=dev)]
    grads = [torch.randn(t, h, device=dev, dtype=bf), torch.randn(t, 3 * h, device=dev, dtype=bf)]
    return args, grads


def kind(t):
    return {torch.bfloat16: BF16, torch.float32: F32, torch.int32: I32}[t.dtype]


class CodaLayer:
    """coda's block on torch tensors: weights, inputs and gradients allocated once (as a module's
    parameters and their .grad would be); outputs, saved tensors and workspace on each call."""

    def __init__(self, abi, t, h, f):
        self.abi, self.t, self.h, self.f = abi, t, h, f
        r = lambda *s: torch.randn(*s, device=dev, dtype=bf) / s[-1] ** 0.5
        self.weights = [r(h, h), torch.rand(h, device=dev) + 0.5, r(2 * f, h), r(h, f), torch.rand(h, device=dev) + 0.5,
                        r(3 * h, h)]
        angles = torch.rand(MAX_POSITION, HEAD_DIM // 2, device=dev) * 6.28
        self.cos, self.sin = angles.cos(), angles.sin()
        self.attn_out, self.residual = r(t, h), r(t, h)
        self.positions = (torch.arange(t, device=dev) % MAX_POSITION).to(torch.int32)
        self.grad_h2, self.grad_qkv = r(t, h), r(t, 3 * h)
        self.grads = [torch.empty(t, h, device=dev, dtype=bf), torch.empty(t, h, device=dev, dtype=bf),
                      torch.empty(h, h, device=dev, dtype=bf), torch.empty(h, device=dev),
                      torch.empty(2 * f, h, device=dev, dtype=bf), torch.empty(h, f, device=dev, dtype=bf),
                      torch.empty(h, device=dev), torch.empty(3 * h, h, device=dev, dtype=bf)]
        v = lambda x: view(x, kind(x))
        self.c_weights = LayerWeights(*[v(w) for w in self.weights], v(self.cos), v(self.sin), HEAD_DIM,
                                      2 * h // HEAD_DIM, 1e-6)
        self.c_grads = LayerGradients(*[v(g) for g in self.grads])
        self.views = [v(x) for x in (self.attn_out, self.residual, self.positions, self.grad_h2, self.grad_qkv)]
        size = ctypes.c_size_t(0)
        self.check(abi.layer_workspace_bytes(ctypes.byref(self.c_weights), t, ctypes.byref(size)))
        self.workspace_bytes = size.value

    def check(self, status):
        if status != 0:
            raise RuntimeError(self.abi.message())

    def forward(self):
        t, h, f = self.t, self.h, self.f
        h2, qkv = torch.empty(t, h, device=dev, dtype=bf), torch.empty(t, 3 * h, device=dev, dtype=bf)
        saved = [torch.empty(t, h, device=dev, dtype=bf), torch.empty(t, device=dev),
                 torch.empty(t, 2 * f, device=dev, dtype=bf), torch.empty(t, f, device=dev, dtype=bf),
                 torch.empty(t, device=dev)]
        workspace = torch.empty(self.workspace_bytes, device=dev, dtype=torch.uint8)
        c_saved = LayerSaved(*[view(s, kind(s)) for s in saved])
        out = [view(h2, BF16), view(qkv, BF16)]
        a, r, p = (ctypes.byref(x) for x in self.views[:3])
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        self.check(self.abi.layer_forward(ctypes.byref(self.c_weights), a, r, p, ctypes.byref(out[0]),
                                          ctypes.byref(out[1]), ctypes.byref(c_saved),
                                          ctypes.c_void_p(workspace.data_ptr()), self.workspace_bytes, stream))
        return h2, qkv, saved, workspace, out, c_saved

    def forward_backward(self):
        h2, qkv, saved, workspace, out, c_saved = self.forward()
        a, _, p, dh2, dqkv = (ctypes.byref(x) for x in self.views)
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        self.check(self.abi.layer_backward(ctypes.byref(self.c_weights), a, p, ctypes.byref(out[0]),
                                           ctypes.byref(out[1]), ctypes.byref(c_saved), dh2, dqkv,
                                           ctypes.byref(self.c_grads), ctypes.c_void_p(workspace.data_ptr()),
                                           self.workspace_bytes, stream))


def peak_gib(step):
    """GiB allocated at the peak of one call of `step` beyond what was allocated before it."""
    step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    step()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - base) / 2 ** 30


def timed(step):
    return do_bench(step, warmup=25, rep=200, return_mode="median")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--coda", required=True, help="the coda command (built with benchmarks)")
    parser.add_argument("--library", required=True, help="libcoda.so")
    parser.add_argument("--tokens", type=int, default=16384)
    parser.add_argument("--json", default="bench_layer_vs_torch.json")
    o = parser.parse_args()

    with tempfile.TemporaryDirectory() as scratch:
        coda_json = os.path.join(scratch, "layer.json")
        subprocess.run([o.coda, "bench", "layer", "--tokens", str(o.tokens), "--json", coda_json], check=True)
        with open(coda_json) as f:
            native = {(r["hidden"], r["ffn"]): r for r in json.load(f)["rows"]}

    abi = Abi(o.library)
    torch.manual_seed(0)
    rows = []
    for (h, f) in [(2048, 5632), (4096, 11008)]:
        t = o.tokens
        flops = 3 * 2 * t * h * (h + 3 * f + 3 * h)
        results = {}
        coda = CodaLayer(abi, t, h, f)
        results["coda (C ABI)"] = (timed(coda.forward), timed(coda.forward_backward), peak_gib(coda.forward_backward))
        del coda
        args, grads = torch_case(t, h, f)
        for name, fn in [("eager", layer), ("torch.compile", torch.compile(layer))]:
            step = lambda: torch.autograd.backward(fn(*args), grads)
            step()  # compiles; allocates the .grad tensors
            with torch.no_grad():
                forward_ms = timed(lambda: fn(*args))
            results[name] = (forward_ms, timed(step), peak_gib(step))
        del args, grads
        torch.cuda.empty_cache()
        n = native[(h, f)]
        results["coda (graph)"] = (n["fused_forward_ms"], n["fused_forward_backward_ms"], None)
        results["coda unfused (graph)"] = (n["unfused_forward_ms"], n["unfused_forward_backward_ms"], None)
        compiled = results["torch.compile"]
        print(f"\nlayer T={t} H={h} F={f} on {torch.cuda.get_device_name()}: forward, forward + backward "
              f"(TF/s of the GEMMs), peak memory beyond inputs, weights and gradients; x: torch.compile's time / this")
        print(f"  {'':22s} {'fwd ms':>8s} {'fwd+bwd ms':>11s} {'TF/s':>6s} {'x compile':>10s} {'peak GiB':>9s}")
        for name, (fwd, step_ms, peak) in results.items():
            peak_text = f"{peak:9.2f}" if peak is not None else f"{'-':>9s}"
            print(f"  {name:22s} {fwd:8.3f} {step_ms:11.3f} {flops / step_ms / 1e9:6.0f} "
                  f"{compiled[1] / step_ms:10.3f} {peak_text}")
            rows.append({"tokens": t, "hidden": h, "ffn": f, "what": name, "forward_ms": fwd,
                         "forward_backward_ms": step_ms, "peak_gib": peak})
        print(f"  coda backward / its GEMMs alone (graph): {n['fused_backward_ms']:.3f} / {n['gemm_backward_ms']:.3f} ms"
              f" = {n['fused_backward_ms'] / n['gemm_backward_ms']:.3f}")
    with open(o.json, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f, indent=1)
    print(f"wrote {o.json}")


if __name__ == "__main__":
    main()

"""python -m coda.bench: coda's ops and a small LLaMA's training step against PyTorch eager and
torch.compile, same process, same data; prints a table and saves a PNG chart (with matplotlib).

    python -m coda.bench                       # everything (a few minutes on an H100)
    python -m coda.bench --only ops --json out.json --png chart.png
    python -m coda.bench --only overhead       # host time of an eager call against torch.mm

Each row is forward + backward (a training step's work) timed with CUDA events: median of the
iterations after warm-up. Peak memory is torch.cuda.max_memory_allocated during one step, beyond
what was allocated before it (inputs and weights). The torch baselines are the definitions of
shared/design/torch_baselines (the SwiGLU, RoPE, residual + RMSNorm and LM head + CE patterns).
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F

import coda

BF16 = torch.bfloat16


def timed(step, iterations=20, warmup=3):
    """(median ms, peak MiB beyond the memory in use before) of step()."""
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    step()
    torch.cuda.synchronize()
    peak = (torch.cuda.max_memory_allocated() - base) / 2 ** 20
    times = []
    for _ in range(iterations):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times), peak


def training(function, inputs):
    """A step: forward, backward of the output's sum (or the loss) into the inputs that need gradients."""
    leaves = [t for t in inputs if isinstance(t, torch.Tensor) and t.requires_grad]

    def step():
        out = function(*inputs)
        out = out[0] if isinstance(out, tuple) else out
        torch.autograd.grad(out.sum() if out.dim() else out, leaves)

    return step


def rmsnorm(x, w, eps=1e-6):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)


def torch_swiglu_mlp(x, w_gate_up, w_down):
    y = x @ w_gate_up.t()
    return (F.silu(y[:, 0::2].float()) * y[:, 1::2].float()).to(x.dtype) @ w_down.t()


def torch_rope_linear(x, w, positions, cos, sin, head_dim, rotated_heads):
    y = (x @ w.t()).float().unflatten(-1, (-1, head_dim))
    c, s = cos[positions][:, None], sin[positions][:, None]
    even, odd = y[:, :rotated_heads, 0::2], y[:, :rotated_heads, 1::2]
    rotated = torch.stack((even * c - odd * s, even * s + odd * c), dim=-1).flatten(-2)
    return torch.cat((rotated, y[:, rotated_heads:]), dim=1).flatten(1).to(x.dtype)


def torch_residual_rmsnorm_linear(x, w1, residual, g, w2, eps=1e-6):
    h = residual + x @ w1.t()
    return rmsnorm(h, g, eps) @ w2.t(), h


def torch_layer(attn_out, residual, positions, wo, norm1, w_gate_up, w_down, norm2, w_qkv, cos, sin, head_dim,
                rotated_heads, eps=1e-6):
    """coda.layer's (h2, qkv) in torch's math (coda's weight layouts)."""
    h1 = residual + attn_out @ wo.t()
    h2 = h1 + torch_swiglu_mlp(rmsnorm(h1, norm1, eps), w_gate_up, w_down)
    return h2, torch_rope_linear(rmsnorm(h2, norm2, eps), w_qkv, positions.long(), cos, sin, head_dim, rotated_heads)


def torch_linear_cross_entropy(x, w, targets):
    return F.cross_entropy((x @ w.t()).float(), targets)


def op_cases(tokens=8192, hidden=2048, intermediate=5632, vocab=128256, head_dim=128):
    def rand(*shape, scale=1.0, grad=True):
        return (torch.randn(*shape, device="cuda") * scale).to(BF16).requires_grad_(grad)

    x = rand(tokens, hidden, grad=True)
    heads = 3 * (hidden // head_dim)  # Q, K and V of multi-head attention: N = 3H, Q and K rotated
    cos, sin = coda.rope_cache(4096, head_dim, device="cuda")
    positions = (torch.arange(tokens, device="cuda") % 4096).to(torch.int32)
    cases = [
        ("linear", f"T={tokens} {hidden}->{4 * hidden}", torch.nn.functional.linear, coda.linear,
         (x, rand(4 * hidden, hidden, scale=0.02))),
        ("swiglu_mlp", f"T={tokens} H={hidden} F={intermediate}", torch_swiglu_mlp, coda.swiglu_mlp,
         (x, rand(2 * intermediate, hidden, scale=0.02), rand(hidden, intermediate, scale=0.02))),
        ("rope_linear", f"T={tokens} H={hidden} N={heads * head_dim}", torch_rope_linear, coda.rope_linear,
         (x, rand(heads * head_dim, hidden, scale=0.02), positions, cos, sin, head_dim, heads * 2 // 3)),
        ("residual_rmsnorm_linear", f"T={tokens} H={hidden} N2={2 * intermediate}", torch_residual_rmsnorm_linear,
         coda.residual_rmsnorm_linear,
         (x, rand(hidden, hidden, scale=0.02), rand(tokens, hidden), rand(hidden), rand(2 * intermediate, hidden,
                                                                                      scale=0.02))),
        ("linear_cross_entropy", f"T={tokens} H={hidden} V={vocab}", torch_linear_cross_entropy,
         coda.linear_cross_entropy, (x, rand(vocab, hidden, scale=0.02), torch.randint(0, vocab, (tokens,),
                                                                                      device="cuda"))),
    ]
    name, shape, reference, _, inputs = cases[-1]
    cases.append((name + " keep_logits", shape, reference,
                  lambda *args: coda.linear_cross_entropy(*args, keep_logits=True), inputs))
    return cases


def bench_ops(rows):
    for name, shape, reference, ours, inputs in op_cases():
        row = {"case": name, "shape": shape}
        for label, function in (("coda", ours), ("eager", reference), ("compile", torch.compile(reference))):
            row[label + "_ms"], row[label + "_mib"] = timed(training(function, inputs))
        rows.append(row)
        print_row(row)
        torch.cuda.empty_cache()


def small_llama(layers=8, hidden=2048, intermediate=5632, heads=16, vocab=32000, tokens=8192):
    import transformers
    config = transformers.LlamaConfig(hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=layers,
                                      num_attention_heads=heads, num_key_value_heads=heads, vocab_size=vocab,
                                      max_position_embeddings=4096, attn_implementation="sdpa")
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).to("cuda", BF16)
    ids = torch.randint(0, vocab, (tokens // 2048, 2048), device="cuda")
    return model, ids


def bench_llama(rows, compile_patched=True):
    model, ids = small_llama()
    shape = f"8 layers, H=2048, F=5632, V=32000, {ids.numel()} tokens"

    def step_of(forward):
        def step():
            loss = forward(input_ids=ids, labels=ids).loss
            loss.backward()
        return step

    row = {"case": "llama training step", "shape": shape}
    variants = [("eager", lambda: model), ("compile", lambda: torch.compile(model)),
                ("coda", lambda: coda.patch(model))]
    if compile_patched:
        variants.append(("coda_compile", lambda: torch.compile(model, fullgraph=True)))
    for label, make in variants:
        start = time.perf_counter()
        try:
            row[label + "_ms"], row[label + "_mib"] = timed(step_of(make()), iterations=10)
        except Exception as error:  # report and go on: one failing variant should not hide the others
            print(f"llama {label}: {type(error).__name__}: {str(error)[:300]}", flush=True)
            row[label + "_ms"] = row[label + "_mib"] = float("nan")
        print(f"llama {label}: {row[label + '_ms']:.2f} ms, {row[label + '_mib']:.0f} MiB "
              f"({time.perf_counter() - start:.0f} s with compilation)", flush=True)
    rows.append(row)
    print_row(row)


def host_overhead(m=16, k=1024, n=1024, calls=100, rounds=31):
    """Host microseconds per eager call, the GPU held busy so that only the CPU side is timed: torch's
    calls, coda's (the eager path, the custom op through torch's dispatcher, the op with autograd), and
    libcoda alone through ctypes: coda_gemm, and the prepared run the eager path calls."""
    from coda import _library
    from coda.ops.matmul import _check, _Plan
    a, b = torch.randn(m, k, device="cuda", dtype=BF16), torch.randn(n, k, device="cuda", dtype=BF16)
    bt, b_grad = b.t(), b.clone().requires_grad_(True)
    plan = _Plan(a, b, _check(a, b))
    out = torch.empty(m, n, device="cuda", dtype=BF16)
    structs = tuple(_library.ctypes.byref(_library.struct(t)) for t in (a, b, out))
    stream = torch.cuda.current_stream().cuda_stream

    def libcoda_alone():
        _library.lib.coda_gemm(structs[0], _library.K_MAJOR, structs[1], _library.K_MAJOR, structs[2], None, 0, stream)

    def libcoda_prepared():
        _library.lib.coda_gemm_prepared_run(plan.handle, a.data_ptr(), b.data_ptr(), out.data_ptr(), None, stream)

    class Empty(torch.autograd.Function):  # the floor of any Python autograd formula: apply, node, one output
        @staticmethod
        def forward(ctx, x, w):
            return x.new_empty(m, n)

        @staticmethod
        def backward(ctx, dy):
            return None, None

    variants = (("torch.mm", lambda: torch.mm(a, bt)), ("coda.mm", lambda: coda.mm(a, bt)),
                ("F.linear", lambda: F.linear(a, b)), ("coda.linear", lambda: coda.linear(a, b)),
                ("torch.ops.coda.linear", lambda: torch.ops.coda.linear(a, b)),
                ("F.linear, weight requires grad", lambda: F.linear(a, b_grad)),
                ("coda.linear, weight requires grad", lambda: coda.linear(a, b_grad)),
                ("empty torch.autograd.Function, grad", lambda: Empty.apply(a, b_grad)),
                ("torch.empty of the output", lambda: a.new_empty(m, n)),
                ("libcoda coda_gemm alone (ctypes)", libcoda_alone),
                ("libcoda coda_gemm_prepared_run (ctypes)", libcoda_prepared))
    samples = {label: [] for label, _ in variants}
    for _, call in variants:
        for _ in range(20):
            call()
    for _ in range(rounds):  # round-robin, so drift in the CPU's speed falls on every variant alike
        for label, call in variants:
            torch.cuda.synchronize()
            torch.cuda._sleep(20_000_000)  # keeps the GPU busy: launches queue, host time alone is measured
            start = time.perf_counter()
            for _ in range(calls):
                call()
            samples[label].append((time.perf_counter() - start) / calls * 1e6)
    torch.cuda.synchronize()
    results = {label: statistics.median(values) for label, values in samples.items()}
    print(f"host time of an eager call, M={m} K={k} N={n} bf16 (median of {rounds} rounds of {calls} calls, "
          "variants interleaved):")
    for label, us in results.items():
        print(f"  {label:36s} {us:6.2f} us")
    r = results
    autograd_cost = r["F.linear, weight requires grad"] - r["F.linear"]
    function_cost = r["empty torch.autograd.Function, grad"] - r["torch.empty of the output"]
    print(f"  coda.mm - torch.mm = {r['coda.mm'] - r['torch.mm']:.2f} us, coda.linear - F.linear = "
          f"{r['coda.linear'] - r['F.linear']:.2f} us; with a weight requiring grad "
          f"{r['coda.linear, weight requires grad'] - r['F.linear, weight requires grad']:.2f} us, where an empty "
          f"autograd.Function costs {function_cost - autograd_cost:.2f} us more than F.linear's C++ autograd")
    return results


def print_row(row):
    extra = ""
    if "coda_compile_ms" in row:
        extra = f"  coda+compile {row['coda_compile_ms']:8.2f} ms {row['coda_compile_mib']:8.0f} MiB"
    print(f"{row['case']:24s} {row['shape']:38s} coda {row['coda_ms']:8.2f} ms {row['coda_mib']:8.0f} MiB  "
          f"eager {row['eager_ms']:8.2f} ms {row['eager_mib']:8.0f} MiB  compile {row['compile_ms']:8.2f} ms "
          f"{row['compile_mib']:8.0f} MiB  compile/coda {row['compile_ms'] / row['coda_ms']:5.2f}x{extra}",
          flush=True)


def chart(rows, path, device):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"matplotlib is not installed: no chart written ({path})")
        return
    labels = [row["case"].replace("_", " ") for row in rows]
    series = (("coda", "coda", "#1f77b4"), ("coda_compile", "coda + torch.compile", "#2ca02c"),
              ("eager", "eager", "#aaaaaa"), ("compile", "torch.compile", "#ff7f0e"))
    width = 0.2
    figure, (speed, memory) = plt.subplots(1, 2, figsize=(13, 0.7 * len(rows) + 1.6))
    for axis, key, title in ((speed, "ms", "time relative to torch.compile (lower is better)"),
                             (memory, "mib", "peak memory beyond inputs, MiB")):
        for i, (name, label, color) in enumerate(series):
            positions, values = [], []
            for j, row in enumerate(rows):
                value = row.get(f"{name}_{key}")
                if value is not None and value == value:  # present and not NaN
                    positions.append(j + width * (i - 1.5))
                    values.append(value / row[f"compile_{key}"] if key == "ms" else value)
            axis.barh(positions, values, height=width, color=color, label=label)
        axis.set_yticks(range(len(rows)), labels)
        axis.invert_yaxis()
        axis.set_title(title, fontsize=10)
    speed.axvline(1.0, color="#555555", linewidth=0.8)
    speed.legend(loc="lower right", fontsize=8)
    figure.suptitle(f"coda vs PyTorch, forward + backward, {device}", fontsize=11)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    print(f"wrote {path}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=("ops", "llama", "overhead"), help="run one part")
    parser.add_argument("--json", help="write the rows here")
    parser.add_argument("--png", default="coda_bench.png", help="the chart (default coda_bench.png)")
    parser.add_argument("--chart-from", metavar="JSON", help="only draw the chart of an earlier run's --json")
    args = parser.parse_args()
    if args.chart_from:
        with open(args.chart_from) as f:
            saved = json.load(f)
        chart(saved["rows"], args.png, saved["device"])
        return
    print(f"coda {coda.version()} on {torch.cuda.get_device_name()}, torch {torch.__version__}")
    rows, overhead = [], None
    if args.only in (None, "overhead"):
        overhead = host_overhead()
    if args.only in (None, "ops"):
        bench_ops(rows)
    if args.only in (None, "llama"):
        bench_llama(rows)
    if rows:
        chart(rows, args.png, torch.cuda.get_device_name())
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "rows": rows, "host_overhead_us": overhead}, f, indent=1)


if __name__ == "__main__":
    main()

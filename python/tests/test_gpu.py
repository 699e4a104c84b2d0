"""GPU tests (a Hopper GPU; skipped without one): every op against torch's math in fp64/fp32 on fresh
random inputs, forward and gradients, with torch's caching allocator poisoned (NaN) first so an
unwritten output shows; determinism; torch.compile(fullgraph=True); CUDA-graph capture and replay;
a small randomly initialised LLaMA patched with coda.patch against the unpatched one."""
import pytest
import torch
import torch.nn.functional as F

import coda

pytestmark = pytest.mark.gpu
BF16, F16 = torch.bfloat16, torch.float16


def poison():
    """Fill blocks of the caching allocator with NaN and free them: outputs allocated next start as NaN."""
    blocks = [torch.full((n,), float("nan"), device="cuda") for n in (1 << 10, 1 << 16, 1 << 20, 1 << 24, 1 << 26)]
    del blocks


def rel(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def rand(*shape, dtype=BF16, scale=1.0, grad=False):
    return (torch.randn(*shape, device="cuda", dtype=torch.float64) * scale).to(dtype).requires_grad_(grad)


def grads(outputs, inputs, seed_grads):
    return torch.autograd.grad(outputs, inputs, seed_grads)


@pytest.mark.parametrize("dtype", [BF16, F16])
@pytest.mark.parametrize("m", [1, 7, 64, 129, 1000])
@pytest.mark.parametrize("x_mn,w_mn", [(False, False), (True, False), (False, True), (True, True)])
def test_linear_against_fp64(dtype, m, x_mn, w_mn):
    torch.manual_seed(m)
    k, n = 264, 392
    x = rand(k, m, dtype=dtype).t() if x_mn else rand(m, k, dtype=dtype)
    w = rand(k, n, dtype=dtype).t() if w_mn else rand(n, k, dtype=dtype)
    x.requires_grad_(True), w.requires_grad_(True)
    poison()
    y = coda.linear(x, w)
    assert y.shape == (m, n) and y.dtype == dtype
    reference = x.double() @ w.double().t()
    assert rel(y, reference) < 8e-3
    with torch.no_grad():  # the eager path (no dispatcher) gives the op's bits
        assert torch.equal(coda.linear(x, w), y)
    dy = rand(m, n, dtype=dtype)
    dx, dw = grads(y, (x, w), dy)
    assert rel(dx, dy.double() @ w.double()) < 8e-3
    assert rel(dw, dy.double().t() @ x.double()) < 8e-3


def test_linear_eager_path_and_custom_op_agree():
    """coda.linear's eager path (torch.autograd.Function, no dispatcher) and torch.ops.coda.linear (the custom op
    with its registered autograd, what torch.compile sees) give the same bits, forward and backward."""
    x, w, dy = rand(300, 256, grad=True), rand(512, 256, grad=True), rand(300, 512)
    eager = coda.linear(x, w)
    op = torch.ops.coda.linear(x, w)
    assert torch.equal(eager, op)
    assert all(torch.equal(a, b) for a, b in zip(grads(eager, (x, w), dy), grads(op, (x, w), dy)))


def test_linear_leading_dims_and_mm():
    x, w = rand(3, 5, 128), rand(256, 128)
    assert rel(coda.linear(x, w), x.double() @ w.double().t()) < 8e-3
    a, b = rand(33, 128), rand(128, 64)
    assert rel(coda.mm(a, b), a.double() @ b.double()) < 8e-3


def swiglu_reference(x, w_gate_up, w_down=None):
    y = x.double() @ w_gate_up.double().t()
    o = F.silu(y[..., 0::2]) * y[..., 1::2]
    return o if w_down is None else o @ w_down.double().t()


@pytest.mark.parametrize("m", [1, 100, 1024])
def test_swiglu_mlp_and_linear(m):
    torch.manual_seed(1)
    h, f = 256, 384
    x, wgu, wd = rand(m, h, grad=True), rand(2 * f, h, scale=0.1, grad=True), rand(h, f, scale=0.1, grad=True)
    poison()
    y = coda.swiglu_mlp(x, wgu, wd)
    x64, wgu64, wd64 = (t.detach().double().requires_grad_(True) for t in (x, wgu, wd))
    ref = swiglu_reference(x64, wgu64, wd64)
    assert rel(y, ref) < 1e-2
    dy = rand(m, h)
    for ours, theirs in zip(grads(y, (x, wgu, wd), dy), grads(ref, (x64, wgu64, wd64), dy.double())):
        assert rel(ours, theirs) < 2e-2
    o = coda.swiglu_linear(x, wgu)
    ref_o = swiglu_reference(x64, wgu64)
    assert rel(o, ref_o) < 1e-2
    do = rand(m, f)
    for ours, theirs in zip(grads(o, (x, wgu), do), grads(ref_o, (x64, wgu64), do.double())):
        assert rel(ours, theirs) < 2e-2


def rope_reference(y, positions, cos, sin, head_dim, rotated_heads):
    heads = y.view(y.shape[0], -1, head_dim)
    c, s = cos.double()[positions.long()][:, None, :], sin.double()[positions.long()][:, None, :]
    even, odd = heads[..., 0::2], heads[..., 1::2]
    rotated = torch.stack((even * c - odd * s, even * s + odd * c), dim=-1).flatten(-2)
    out = torch.cat((rotated[:, :rotated_heads], heads[:, rotated_heads:]), dim=1)
    return out.reshape(y.shape)


@pytest.mark.parametrize("m", [1, 77, 512])
def test_rope_linear(m):
    torch.manual_seed(2)
    k, head_dim, heads, rotated = 256, 64, 6, 4
    x, w = rand(m, k, grad=True), rand(heads * head_dim, k, scale=0.1, grad=True)
    positions = torch.randint(0, 4096, (m,), device="cuda", dtype=torch.int32)
    cos, sin = coda.rope_cache(4096, head_dim, device="cuda")
    poison()
    q = coda.rope_linear(x, w, positions, cos, sin, head_dim, rotated)
    x64, w64 = x.detach().double().requires_grad_(True), w.detach().double().requires_grad_(True)
    ref = rope_reference(x64 @ w64.t(), positions, cos, sin, head_dim, rotated)
    assert rel(q, ref) < 1e-2
    dq = rand(m, heads * head_dim)
    eager = grads(q, (x, w), dq)
    for ours, theirs in zip(eager, grads(ref, (x64, w64), dq.double())):
        assert rel(ours, theirs) < 1e-2
    # compiled: the same kernels through the custom ops (Inductor may order the gradient's reshapes differently)
    compiled = torch.compile(lambda *a: coda.rope_linear(*a), fullgraph=True)
    q_compiled = compiled(x, w, positions, cos, sin, head_dim, rotated)
    assert torch.equal(q_compiled, q)
    for ours, theirs in zip(grads(q_compiled, (x, w), dq), eager):
        assert rel(ours, theirs) < 1e-3


@pytest.mark.parametrize("m", [1, 200, 1024])
def test_residual_rmsnorm_linear(m):
    torch.manual_seed(3)
    k, hidden, n2 = 256, 512, 384
    x, w1, r = rand(m, k, grad=True), rand(hidden, k, scale=0.1, grad=True), rand(m, hidden, grad=True)
    g, w2 = (1 + 0.1 * torch.randn(hidden, device="cuda")).to(BF16).requires_grad_(True), rand(n2, hidden, scale=0.1,
                                                                                             grad=True)
    poison()
    z, h = coda.residual_rmsnorm_linear(x, w1, r, g, w2, eps=1e-6)
    leaves = [t.detach().double().requires_grad_(True) for t in (x, w1, r, g, w2)]
    x64, w164, r64, g64, w264 = leaves
    h64 = r64 + x64 @ w164.t()
    z64 = (h64 * torch.rsqrt(h64.pow(2).mean(-1, keepdim=True) + 1e-6) * g64) @ w264.t()
    assert rel(h, h64) < 1e-2 and rel(z, z64) < 1e-2
    dz, dh = rand(m, n2), rand(m, hidden)
    ours = torch.autograd.grad((z, h), (x, w1, r, g, w2), (dz, dh))
    theirs = torch.autograd.grad((z64, h64), leaves, (dz.double(), dh.double()))
    for name, a, b in zip(("x", "w1", "residual", "norm_weight", "w2"), ours, theirs):
        assert rel(a, b) < 2e-2, name


@pytest.mark.parametrize("tokens", [1, 77, 1024])
def test_layer_against_fp64(tokens):
    """coda.layer (the layer block) forward and every gradient against the same layer in fp64 autograd."""
    torch.manual_seed(9)
    hidden, ffn, head_dim, heads, rotated = 256, 384, 64, 12, 8
    block = coda.nn.Layer(hidden, ffn, heads, head_dim, rotated, max_positions=4096, device="cuda")
    with torch.no_grad():
        for w in (block.wo, block.w_gate_up, block.w_down, block.w_qkv):
            w.normal_(0, w.shape[1] ** -0.5)
        block.norm1.uniform_(0.5, 1.5), block.norm2.uniform_(0.5, 1.5)
    attn, residual = rand(tokens, hidden, grad=True), rand(tokens, hidden, scale=2.0, grad=True)
    positions = torch.randint(0, 4096, (tokens,), device="cuda", dtype=torch.int32)
    poison()
    h2, qkv = block(attn, residual, positions)
    leaves = [t.detach().double().requires_grad_(True) for t in
              (attn, residual, block.wo, block.norm1, block.w_gate_up, block.w_down, block.norm2, block.w_qkv)]
    a, r, wo, g1, wgu, wd, g2, wqkv = leaves

    def norm(h, g):
        return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + block.eps) * g

    h1 = r + a @ wo.t()
    ref_h2 = h1 + swiglu_reference(norm(h1, g1), wgu, wd)
    ref_qkv = rope_reference(norm(ref_h2, g2) @ wqkv.t(), positions, block.cos, block.sin, head_dim, rotated)
    assert rel(h2, ref_h2) < 1e-2 and rel(qkv, ref_qkv) < 1e-2
    dh2, dqkv = rand(tokens, hidden), rand(tokens, heads * head_dim)
    ours = torch.autograd.grad((h2, qkv), (attn, residual, block.wo, block.norm1, block.w_gate_up, block.w_down,
                                           block.norm2, block.w_qkv), (dh2, dqkv))
    theirs = torch.autograd.grad((ref_h2, ref_qkv), leaves, (dh2.double(), dqkv.double()))
    for name, x, y in zip(("attn_out", "residual", "wo", "norm1", "w_gate_up", "w_down", "norm2", "w_qkv"), ours,
                          theirs):
        assert rel(x, y) < 2e-2, name


def cross_entropy_reference(x, w, targets, ignore_index, label_smoothing, z_loss, softcap, reduction, row_scale=None,
                            return_logits=False):
    logits = x.double() @ w.double().t()
    if row_scale is not None:
        logits = row_scale.double()[:, None] * logits
    if softcap:
        logits = softcap * torch.tanh(logits / softcap)
    lse = torch.logsumexp(logits, -1)
    valid = targets != ignore_index
    picked = logits.gather(1, targets.long().clamp_min(0)[:, None])[:, 0]
    loss = lse - (1 - label_smoothing) * picked - label_smoothing * logits.mean(-1) + z_loss * lse ** 2
    loss = torch.where(valid, loss, torch.zeros_like(loss))
    loss = {"none": loss, "sum": loss.sum(), "mean": loss.sum() / valid.sum()}[reduction]
    return (loss, logits) if return_logits else loss


@pytest.mark.parametrize("options", [
    dict(), dict(reduction="sum"), dict(reduction="none"), dict(label_smoothing=0.1), dict(z_loss=1e-4),
    dict(softcap=30.0), dict(ignore_index=7, label_smoothing=0.05, z_loss=1e-4, softcap=15.0)])
@pytest.mark.parametrize("m,vocab", [(5, 1000), (300, 32000)])
@pytest.mark.parametrize("keep_logits,skip_below", [(False, 0.0), (True, 0.0), (False, 2 ** -12)])
def test_linear_cross_entropy(options, m, vocab, keep_logits, skip_below):
    """Every option, the three backwards (recomputing; from kept logits; recomputing with the blocks below
    2^-12 |g| left out: a near-uniform softmax here, so only the targets' blocks stay, within 1e-2)."""
    torch.manual_seed(4)
    k = 256
    x, w = rand(m, k, grad=True), rand(vocab, k, scale=0.05, grad=True)
    targets = torch.randint(0, vocab, (m,), device="cuda")
    targets[::4] = options.get("ignore_index", -100)
    poison()
    loss = coda.linear_cross_entropy(x, w, targets, keep_logits=keep_logits, skip_below=skip_below, **options)
    full = dict(ignore_index=-100, label_smoothing=0.0, z_loss=0.0, softcap=0.0, reduction="mean") | options
    x64, w64 = x.detach().double().requires_grad_(True), w.detach().double().requires_grad_(True)
    ref = cross_entropy_reference(x64, w64, targets, **full)
    assert loss.dtype == torch.float32 and loss.shape == ref.shape
    assert rel(loss, ref) < 1e-4
    seed = torch.rand_like(loss) + 0.5
    for ours, theirs in zip(grads(loss, (x, w), seed), grads(ref, (x64, w64), seed.double())):
        assert rel(ours, theirs) < 1e-2


@pytest.mark.parametrize("options", [dict(), dict(softcap=2.0, label_smoothing=0.1, reduction="none")])
@pytest.mark.parametrize("m,vocab", [(1, 1003), (130, 32000)])
def test_linear_cross_entropy_row_scale_and_logits(options, m, vocab):
    """The final RMSNorm's rstd as the row scale (its gradient from the backward's row sums of dZ * Z) and
    the logits output (vocabularies not a multiple of 8 included), against fp64. Logits of about 3 against a
    cap of 2: the cap's derivative and where the scale applies (before it) both show."""
    torch.manual_seed(m)
    k = 128
    x, w = rand(m, k, grad=True), rand(vocab, k, scale=0.25, grad=True)
    row_scale = (torch.rand(m, device="cuda") + 0.5).requires_grad_(True)
    targets = torch.randint(0, vocab, (m,), device="cuda")
    poison()
    loss, logits = coda.linear_cross_entropy(x, w, targets, row_scale=row_scale, return_logits=True, **options)
    full = dict(ignore_index=-100, label_smoothing=0.0, z_loss=0.0, softcap=0.0, reduction="mean") | options
    leaves = [t.detach().double().requires_grad_(True) for t in (x, w, row_scale)]
    ref, ref_logits = cross_entropy_reference(leaves[0], leaves[1], targets, **full, row_scale=leaves[2],
                                              return_logits=True)
    assert rel(loss, ref) < 1e-4
    assert logits.shape == (m, vocab) and logits.dtype == BF16 and rel(logits, ref_logits) < 1e-2
    seed = torch.rand_like(loss) + 0.5
    # The backward reads the returned bf16 logits (stored: three GEMMs); row_scale's gradient sums dZ * Z over
    # them, and so carries their rounding (about 1e-2 here).
    for name, ours, theirs, tolerance in zip(("x", "w", "row_scale"), grads(loss, (x, w, row_scale), seed),
                                             grads(ref, leaves, seed.double()), (1e-2, 1e-2, 2e-2)):
        assert rel(ours, theirs) < tolerance, name


def test_cross_entropy_matches_torch_with_int64_targets():
    x, w = rand(64, 128, grad=True), rand(500, 128, scale=0.1, grad=True)
    targets = torch.randint(0, 500, (64,), device="cuda")
    ours = coda.linear_cross_entropy(x, w, targets, label_smoothing=0.1)
    theirs = F.cross_entropy(x.float() @ w.float().t(), targets, label_smoothing=0.1)
    assert abs(ours.item() - theirs.item()) < 1e-4 * abs(theirs.item()) + 1e-5


def test_same_bits_every_run():
    torch.manual_seed(5)
    x, wgu, wd = rand(512, 256, grad=True), rand(768, 256, scale=0.1, grad=True), rand(256, 384, scale=0.1, grad=True)
    w, targets = rand(8000, 256, scale=0.05, grad=True), torch.randint(0, 8000, (512,), device="cuda")

    def run():
        poison()
        loss = coda.linear_cross_entropy(coda.swiglu_mlp(x, wgu, wd), w, targets)
        return (loss,) + torch.autograd.grad(loss, (x, wgu, wd, w))

    first, second = run(), run()
    assert all(torch.equal(a, b) for a, b in zip(first, second))


class Block(torch.nn.Module):
    def __init__(self, hidden=256, intermediate=512, vocab=4000):
        super().__init__()
        self.pair = coda.nn.ResidualRMSNormLinear(hidden, hidden, hidden, device="cuda")
        self.mlp = coda.nn.SwiGLUMLP(hidden, intermediate, device="cuda")
        self.head = coda.nn.LinearCrossEntropy(hidden, vocab, device="cuda")

    def forward(self, x, residual, targets):
        z, h = self.pair(x, residual)
        return self.head(self.mlp(z) + h, targets)


def test_compile_fullgraph_matches_eager():
    torch.manual_seed(6)
    block = Block()
    x, r = rand(256, 256, grad=True), rand(256, 256)
    targets = torch.randint(0, 4000, (256,), device="cuda")
    eager = block(x, r, targets)
    eager_grads = torch.autograd.grad(eager, [x] + list(block.parameters()))
    compiled = torch.compile(block, fullgraph=True)(x, r, targets)
    compiled_grads = torch.autograd.grad(compiled, [x] + list(block.parameters()))
    # Inductor may round the residual add's gradient sum once instead of twice: bf16 tolerance, not bits.
    assert rel(compiled, eager) < 1e-3
    assert all(rel(a, b) < 1e-2 for a, b in zip(compiled_grads, eager_grads))


def test_cuda_graph_capture_and_replay():
    torch.manual_seed(7)
    block = Block()
    x, r = rand(128, 256), rand(128, 256)
    targets = torch.randint(0, 4000, (128,), device="cuda")
    params = list(block.parameters())
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up (allocator, workspace sizes) off the capture
        for _ in range(2):
            torch.autograd.grad(block(x, r, targets), params)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        loss = block(x, r, targets)
        captured = torch.autograd.grad(loss, params)
    for _ in range(2):
        x.copy_(rand(128, 256))
        graph.replay()
        torch.cuda.synchronize()
        expected = block(x, r, targets)
        assert torch.equal(loss, expected)
        assert all(torch.equal(a, b) for a, b in zip(captured, torch.autograd.grad(expected, params)))


def test_autocast_follows_torch():
    x, w = torch.randn(64, 128, device="cuda"), torch.randn(96, 128, device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        y = coda.linear(x, w)
    assert y.dtype == torch.bfloat16 and rel(y, x.double() @ w.double().t()) < 1e-2


def llama(seed):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(seed)
    config = transformers.LlamaConfig(hidden_size=256, intermediate_size=512, num_hidden_layers=3,
                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=2048,
                                      max_position_embeddings=512)
    return transformers.LlamaForCausalLM(config).cuda()


@pytest.mark.parametrize("keep_logits,layers,compiled", [(True, True, False), (False, True, False),
                                                          (True, False, False), (True, True, True)])
def test_patched_llama_matches_unpatched(keep_logits, layers, compiled):
    """fp32 model as the reference; the bf16 model unpatched and patched (MLPs, attention projections + RoPE, the
    layers chained through coda.layer or not, the loss with and without kept logits, eager or compiled with
    fullgraph=True) must both be within bf16 error of it, coda's no more than twice the unpatched model's (plus a
    floor). The gradients are the middle layer's (chained on both sides), the embedding's and the head's."""
    reference = llama(8)
    plain = llama(8).to(BF16)
    patched = coda.patch(llama(8).to(BF16), keep_logits=keep_logits, layers=layers)
    ids = torch.randint(0, 2048, (2, 128), device="cuda")
    labels = ids.clone()
    labels[:, :5] = -100

    def loss_and_grads(model, forward):
        model.zero_grad()
        loss = forward(input_ids=ids, labels=labels).loss
        loss.backward()
        layer = model.model.layers[1]
        mlp = layer.mlp
        if isinstance(mlp, coda.nn.SwiGLUMLP):
            gate, down = mlp.w_gate_up.grad[0::2], mlp.w_down.grad
        else:
            gate, down = mlp.gate_proj.weight.grad, mlp.down_proj.weight.grad
        attention = layer.self_attn
        if hasattr(attention, "w_qkv"):  # Q's rows interleaved: the unpatched gradient is permuted alike
            query = attention.w_qkv.grad[:attention.coda_rows[0]]
        else:
            query = coda.rotate_half_to_interleaved(attention.q_proj.weight.grad, attention.head_dim,
                                                    attention.q_proj.weight.shape[0] // attention.head_dim)
        return loss, [gate, down, query, attention.o_proj.weight.grad, layer.input_layernorm.weight.grad,
                      layer.post_attention_layernorm.weight.grad, model.model.embed_tokens.weight.grad,
                      model.lm_head.weight.grad]

    ref_loss, ref_grads = loss_and_grads(reference, reference)
    plain_loss, plain_grads = loss_and_grads(plain, plain)
    coda_loss, coda_grads = loss_and_grads(patched, torch.compile(patched, fullgraph=True) if compiled else patched)
    assert abs(coda_loss.item() - ref_loss.item()) <= 2 * abs(plain_loss.item() - ref_loss.item()) + 2e-3
    for ours, theirs, exact in zip(coda_grads, plain_grads, ref_grads, strict=True):
        assert rel(ours, exact) <= 2 * rel(theirs, exact) + 1e-2


def torch_route(x, w, k, mode, renormalize=False, bias=None, n_group=1, topk_group=1, scale=1.0):
    """The routing rules in fp64 torch (coda/reference/moe.hpp), on scores with no ties."""
    s = x.double() @ w.double().T
    if mode == "sigmoid_bias":
        p = torch.sigmoid(s)
        sel = p + (bias.double() if bias is not None else 0)
        if n_group > 1:
            g = sel.view(s.shape[0], n_group, -1).topk(2, dim=-1).values.sum(-1)
            kept = torch.zeros_like(g).scatter_(1, g.topk(topk_group, dim=-1).indices, 1.0)
            sel = sel.masked_fill(kept.repeat_interleave(s.shape[1] // n_group, dim=1) == 0, float("-inf"))
        ids = sel.topk(k, dim=-1).indices
        weights = p.gather(1, ids)
    elif mode == "topk_softmax":
        ids = s.topk(k, dim=-1).indices
        weights = torch.softmax(s, -1).gather(1, ids)
    else:
        ids = s.topk(k, dim=-1).indices
        weights = torch.softmax(s.gather(1, ids), -1)
    if renormalize:
        weights = weights / weights.sum(-1, keepdim=True)
    return weights * scale, ids


@pytest.mark.parametrize("m", [1, 16, 200])
@pytest.mark.parametrize("mode,experts,k,options", [
    ("topk_softmax", 8, 2, {}),
    ("topk_softmax", 128, 8, {"renormalize": True}),
    ("softmax_topk", 160, 6, {}),
    ("sigmoid_bias", 256, 8, {"renormalize": True, "n_group": 8, "topk_group": 4, "scale": 2.5}),
    ("sigmoid_bias", 384, 8, {"renormalize": True, "scale": 2.827}),
])
def test_route_against_torch(m, mode, experts, k, options):
    poison()
    x, w = rand(m, 512), rand(experts, 512, scale=0.1)
    bias = torch.rand(experts, device="cuda") * 0.1 if mode == "sigmoid_bias" else None
    want_w, want_ids = torch_route(x, w, k, mode, options.get("renormalize", False), bias, options.get("n_group", 1),
                                   options.get("topk_group", 1), options.get("scale", 1.0))
    weights, ids, tei, counts = coda.route(x, w, k, mode=mode, renormalize=options.get("renormalize", False),
                                           expert_bias=bias, n_group=options.get("n_group", 1),
                                           topk_group=options.get("topk_group", 1),
                                           routed_scaling_factor=options.get("scale", 1.0), dispatch=True)
    assert weights.dtype == torch.float32 and ids.dtype == torch.int32 and ids.shape == (m, k)
    # Random scores rarely come within fp32 rounding of each other: rows where they do may differ.
    same = (ids.long() == want_ids).all(-1)
    assert same.float().mean().item() > 0.95
    assert rel(weights[same], want_w[same]) < 1e-5
    rows = torch.arange(m, device="cuda").view(-1, 1)
    assert torch.equal(tei, (torch.arange(k, device="cuda").view(1, -1) * m + rows).int())
    assert torch.equal(counts, torch.bincount(ids.flatten().long(), minlength=experts).int())


def test_router_module_is_route():
    torch.manual_seed(12)
    x = rand(2, 9, 256)
    router = coda.nn.Router(256, 160, 6, mode="sigmoid_bias", n_group=8, topk_group=3, renormalize=True,
                            routed_scaling_factor=2.5, dtype=BF16, device="cuda")
    router.expert_bias.uniform_(-0.1, 0.1)
    weights, ids = router(x)
    want = coda.route(x, router.weight, 6, mode="sigmoid_bias", expert_bias=router.expert_bias, n_group=8,
                      topk_group=3, renormalize=True, routed_scaling_factor=2.5)
    assert weights.shape == (18, 6) and torch.equal(weights, want[0]) and torch.equal(ids, want[1])


def test_route_compiles_and_nan_rows_route_nowhere():
    x, w = rand(100, 256), rand(64, 256)
    x[3] = float("nan")
    weights, ids = torch.compile(lambda a, b: coda.route(a, b, 4), fullgraph=True)(x, w)
    assert torch.equal(ids[3], torch.arange(4, device="cuda", dtype=torch.int32))
    assert torch.equal(weights[3], torch.zeros(4, device="cuda"))
    assert not weights.isnan().any()

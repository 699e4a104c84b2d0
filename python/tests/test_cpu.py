"""Tests that need no GPU (CI runs them): the package imports and loads libcoda, every op's fake
implementation gives the right shapes forward and backward, torch.compile(fullgraph=True) traces the
ops with no graph break, torch.library.opcheck passes, every argument rule raises a clear error, and
libcoda's own errors reach Python as CodaError naming the C function and the argument."""
import pytest
import torch

import coda
from coda import _library as L
from coda.ops.matmul import gemm

BF16 = torch.bfloat16


def meta(*shape, dtype=BF16, grad=False):
    return torch.empty(*shape, dtype=dtype, device="meta", requires_grad=grad)


def test_import_and_version():
    assert coda.version() == coda.__version__
    assert L.lib.coda_device_count() >= 0


def test_linear_shapes_and_gradients():
    x, w = meta(3, 5, 64, grad=True), meta(32, 64, grad=True)
    y = coda.linear(x, w)
    assert y.shape == (3, 5, 32) and y.dtype == BF16
    y.sum().backward()
    assert x.grad.shape == x.shape and w.grad.shape == w.shape
    assert coda.mm(meta(7, 64), meta(64, 24)).shape == (7, 24)


def test_fused_op_shapes_and_gradients():
    x = meta(2, 5, 64, grad=True)
    wgu, wd = meta(96, 64, grad=True), meta(40, 48, grad=True)
    y = coda.swiglu_mlp(x, wgu, wd)
    assert y.shape == (2, 5, 40)
    y.sum().backward()
    assert wgu.grad.shape == wgu.shape and wd.grad.shape == wd.shape and x.grad.shape == x.shape
    assert coda.swiglu_linear(x, wgu).shape == (2, 5, 48)

    w, positions = meta(64, 64, grad=True), meta(2, 5, dtype=torch.int32)
    cos, sin = meta(32, 8, dtype=torch.float32), meta(32, 8, dtype=torch.float32)
    q = coda.rope_linear(x, w, positions, cos, sin, head_dim=16, rotated_heads=3)
    assert q.shape == (2, 5, 64)
    q.sum().backward()
    assert w.grad.shape == w.shape

    residual, g, w2 = meta(2, 5, 64, grad=True), meta(64, grad=True), meta(24, 64, grad=True)
    z, h = coda.residual_rmsnorm_linear(x, w, residual, g, w2)
    assert z.shape == (2, 5, 24) and h.shape == (2, 5, 64)
    (z.sum() + h.sum()).backward()
    assert residual.grad.shape == residual.shape and g.grad.shape == g.shape and w2.grad.shape == w2.shape


def test_layer_shapes_and_gradients():
    block = coda.nn.Layer(64, 48, heads=6, head_dim=16, rotated_heads=4, max_positions=32, device="meta")
    attn, residual = meta(9, 64, grad=True), meta(9, 64, grad=True)
    h2, qkv = block(attn, residual, meta(9, dtype=torch.int32))
    assert h2.shape == (9, 64) and qkv.shape == (9, 96)
    (h2.sum() + qkv.sum()).backward()
    assert attn.grad.shape == (9, 64) and residual.grad.shape == (9, 64) and block.w_gate_up.grad.shape == (96, 64)
    with pytest.raises(ValueError, match="coda.layer: w_down has shape"):
        coda.layer(attn, residual, meta(9, dtype=torch.int32), block.wo, block.norm1, block.w_gate_up,
                   meta(64, 40), block.norm2, block.w_qkv, block.cos, block.sin, 16, 4)
    with pytest.raises(ValueError, match="coda.layer: rotated_heads 7"):
        block.rotated_heads = 7
        block(attn, residual, meta(9, dtype=torch.int32))


@pytest.mark.parametrize("reduction,shape", [("mean", ()), ("sum", ()), ("none", (10,))])
def test_cross_entropy_shapes(reduction, shape):
    x, w = meta(10, 64, grad=True), meta(1000, 64, grad=True)
    loss = coda.linear_cross_entropy(x, w, meta(10, dtype=torch.int64), reduction=reduction)
    assert loss.shape == shape and loss.dtype == torch.float32
    loss.sum().backward()
    assert x.grad.shape == x.shape and w.grad.shape == w.shape


def test_cross_entropy_row_scale_and_logits_shapes():
    x, w, row_scale = meta(10, 64, grad=True), meta(1001, 64, grad=True), meta(10, dtype=torch.float32, grad=True)
    loss, logits = coda.linear_cross_entropy(x, w, meta(10, dtype=torch.int64), row_scale=row_scale,
                                             return_logits=True, reduction="none")
    assert loss.shape == (10,) and logits.shape == (10, 1001) and logits.dtype == BF16
    assert logits.stride() == (1008, 1), "rows padded to 16 bytes for the TMA store"
    assert not logits.requires_grad, "the logits carry no gradient"
    loss.sum().backward()
    assert x.grad.shape == x.shape and w.grad.shape == w.shape and row_scale.grad.shape == (10,)
    x.grad = None  # a row scale that needs no gradient: the backward skips its row sums
    coda.linear_cross_entropy(x, w, meta(10, dtype=torch.int64), row_scale=meta(10, dtype=torch.float32)).backward()
    assert x.grad.shape == x.shape


def test_cross_entropy_keep_logits_shapes():
    """keep_logits: the loss alone is returned; the backward (through the stored logits) gives every gradient."""
    x, w = meta(10, 64, grad=True), meta(1001, 64, grad=True)
    loss = coda.linear_cross_entropy(x, w, meta(10, dtype=torch.int64), keep_logits=True)
    assert isinstance(loss, torch.Tensor) and loss.shape == ()
    loss.backward()
    assert x.grad.shape == x.shape and w.grad.shape == w.shape


def test_compile_fullgraph_traces_a_training_step():
    """No graph break in forward or backward: fullgraph=True raises on one. Meta inputs, so nothing runs."""

    def step(x, residual, w_o, g, w_gu, w_down, w_head, targets):
        z, h = coda.residual_rmsnorm_linear(x, w_o, residual, g, w_gu)
        y = coda.swiglu_mlp(coda.linear(z, w_o), w_gu, w_down) + h
        return coda.linear_cross_entropy(y.reshape(-1, y.shape[-1]), w_head, targets)

    args = (meta(2, 8, 64, grad=True), meta(2, 8, 64), meta(64, 64, grad=True), meta(64, grad=True),
            meta(64, 64, grad=True), meta(64, 32, grad=True), meta(512, 64, grad=True),
            meta(16, dtype=torch.int32))
    loss = torch.compile(step, fullgraph=True, backend="aot_eager")(*args)
    loss.backward()
    assert loss.shape == () and args[4].grad.shape == (64, 64)


@pytest.mark.parametrize("op,args", [
    ("linear", lambda: (meta(16, 64, grad=True), meta(32, 64, grad=True))),
    ("swiglu_mlp", lambda: (meta(16, 64, grad=True), meta(64, 64, grad=True), meta(16, 32, grad=True))),
    ("linear_cross_entropy", lambda: (meta(16, 64, grad=True), meta(256, 64, grad=True), meta(16, dtype=torch.int32),
                                      -100, 0.0, 0.0, 0.0, "mean")),
    ("linear_cross_entropy", lambda: (meta(16, 64, grad=True), meta(250, 64, grad=True), meta(16, dtype=torch.int32),
                                      -100, 0.1, 1e-4, 30.0, "none", meta(16, dtype=torch.float32, grad=True), True)),
    ("route", lambda: (meta(16, 64), meta(60, 64), 8, "sigmoid_bias", True, meta(60, dtype=torch.float32), 6, 3, 2.5,
                       True)),
])
def test_opcheck_on_meta(op, args):
    torch.library.opcheck(getattr(torch.ops.coda, op), args(),
                          test_utils=("test_schema", "test_autograd_registration", "test_faketensor"))


@pytest.mark.parametrize("call,error,words", [
    (lambda: coda.linear(torch.ones(4, 64), torch.ones(8, 64)), ValueError, ["x", "cpu", "CUDA"]),
    (lambda: coda.linear(meta(4, 64, dtype=torch.float32), meta(8, 64, dtype=torch.float32)), TypeError,
     ["x", "float32", "bfloat16 or float16", "autocast"]),
    (lambda: coda.linear(meta(4, 64), meta(8, 64, dtype=torch.float16)), TypeError, ["weight", "float16", "same"]),
    (lambda: coda.linear(meta(4, 64), meta(8, 32)), ValueError, ["x", "(4, 64)", "(8, 32)", "K"]),
    (lambda: coda.linear(meta(4, 60), meta(8, 60)), ValueError, ["x", "60", "multiple of 8"]),
    (lambda: coda.linear(meta(4, 64), meta(12, 64)), ValueError, ["weight", "12", "multiple of 8"]),
    (lambda: coda.linear(meta(4, 64), "w"), RuntimeError, ["weight", "Tensor", "str"]),
    (lambda: coda.swiglu_mlp(meta(4, 64), meta(24, 64), meta(64, 8)), ValueError,
     ["w_gate_up", "24", "interleaved"]),
    (lambda: coda.swiglu_mlp(meta(4, 64), meta(32, 64), meta(64, 8)), ValueError, ["w_down", "(64, 8)", "F = 16"]),
    (lambda: coda.rope_linear(meta(4, 64), meta(64, 64), meta(4, dtype=torch.int32), meta(8, 8, dtype=torch.float32),
                              meta(8, 8, dtype=torch.float32), 16, 5), ValueError, ["rotated_heads", "5", "[0, 4]"]),
    (lambda: coda.rope_linear(meta(4, 64), meta(64, 64), meta(3, dtype=torch.int32), meta(8, 8, dtype=torch.float32),
                              meta(8, 8, dtype=torch.float32), 16, 2), ValueError, ["positions", "(3,)", "(4,)"]),
    (lambda: coda.rope_linear(meta(4, 64), meta(64, 64), meta(4, dtype=torch.int32), meta(8, 4, dtype=torch.float32),
                              meta(8, 4, dtype=torch.float32), 16, 2), ValueError, ["cos", "head_dim / 2 = 8"]),
    (lambda: coda.rope_linear(meta(4, 64), meta(64, 64), meta(4, dtype=torch.float32),
                              meta(8, 8, dtype=torch.float32), meta(8, 8, dtype=torch.float32), 16, 2), TypeError,
     ["positions", "int32"]),
    (lambda: coda.residual_rmsnorm_linear(meta(4, 64), meta(64, 64), meta(4, 32), meta(64), meta(8, 64)), ValueError,
     ["residual", "(4, 32)", "(4, 64)"]),
    (lambda: coda.residual_rmsnorm_linear(meta(4, 64), meta(64, 64), meta(4, 64), meta(32), meta(8, 64)), ValueError,
     ["norm_weight", "length 32", "64"]),
    (lambda: coda.residual_rmsnorm_linear(meta(4, 64), meta(64, 64), meta(4, 64), meta(64), meta(8, 64), eps=-1.0),
     ValueError, ["eps", ">= 0"]),
    (lambda: coda.linear_cross_entropy(meta(4, 64), meta(100, 64), meta(5, dtype=torch.int32)), ValueError,
     ["targets", "length 5", "4"]),
    (lambda: coda.linear_cross_entropy(meta(4, 64), meta(100, 64), meta(4, dtype=torch.int32), reduction="avg"),
     ValueError, ["reduction", "'avg'", "'mean'"]),
    (lambda: coda.linear_cross_entropy(meta(4, 64), meta(100, 64), meta(4, dtype=torch.int32), label_smoothing=1.0),
     ValueError, ["label_smoothing", "[0, 1)"]),
    (lambda: coda.linear_cross_entropy(meta(4, 64), meta(100, 64), meta(4, dtype=torch.int32), z_loss=-1.0),
     ValueError, ["z_loss", ">= 0"]),
    (lambda: coda.linear_cross_entropy(meta(4, 64), meta(100, 64), meta(4, dtype=torch.int32), skip_below=1.0),
     ValueError, ["skip_below", "[0, 1)"]),
    (lambda: coda.linear_cross_entropy(meta(4, 64), meta(100, 64), meta(4, dtype=torch.int32),
                                       skip_below=1 - 1e-9), ValueError, ["skip_below", "[0, 1)"]),  # 1.0 as an f32
    (lambda: coda.linear_cross_entropy(meta(4, 64), meta(100, 64), meta(4, dtype=torch.int32), skip_below=2 ** -12,
                                       keep_logits=True), ValueError, ["skip_below", "keep_logits"]),
    (lambda: coda.linear_cross_entropy(meta(4, 64), meta(100, 64), meta(4, dtype=torch.int32), row_scale=meta(4)),
     TypeError, ["row_scale", "bfloat16", "float32"]),
    (lambda: coda.linear_cross_entropy(meta(4, 64), meta(100, 64), meta(4, dtype=torch.int32),
                                       row_scale=meta(3, dtype=torch.float32)), ValueError,
     ["row_scale", "length 3", "4"]),
    (lambda: coda.interleave_gate_up(torch.ones(4, 8), torch.ones(4, 16)), ValueError, ["w_gate", "w_up"]),
    (lambda: coda.route(meta(4, 64), meta(600, 64), 8), ValueError, ["w", "600", "1 to 512"]),
    (lambda: coda.route(meta(4, 64), meta(16, 64), 17), ValueError, ["k", "17", "min(E, 32)"]),
    (lambda: coda.route(meta(4, 64), meta(16, 64), 2, mode="softmax"), ValueError, ["mode", "'softmax'"]),
    (lambda: coda.route(meta(4, 64), meta(16, 64), 2, n_group=4), ValueError, ["n_group", "sigmoid_bias"]),
    (lambda: coda.route(meta(4, 64), meta(16, 64), 2, mode="sigmoid_bias", n_group=3), ValueError,
     ["n_group", "3", "divide"]),
    (lambda: coda.route(meta(4, 64), meta(16, 64), 2, mode="sigmoid_bias", n_group=4, topk_group=5), ValueError,
     ["topk_group", "5", "[1, n_group = 4]"]),
    (lambda: coda.route(meta(4, 64), meta(16, 64), 5, mode="sigmoid_bias", n_group=4, topk_group=1), ValueError,
     ["k", "5", "hold only 4"]),
    (lambda: coda.route(meta(4, 64), meta(16, 64), 2, mode="sigmoid_bias", expert_bias=meta(15, dtype=torch.float32)),
     ValueError, ["expert_bias", "length 15", "16"]),
    (lambda: coda.route(meta(4, 64), meta(16, 64), 2, routed_scaling_factor=0.0), ValueError,
     ["routed_scaling_factor", "> 0"]),
])
def test_argument_errors_name_the_argument_and_rule(call, error, words):
    with pytest.raises(error) as info:
        call()
    message = str(info.value)
    assert message.startswith("coda"), message
    for word in words:
        assert word in message, (word, message)


def test_libcoda_errors_reach_python():
    """Past the Python checks, libcoda's own validation: a refused argument raises CodaArgumentError with
    the C function and the argument named; a valid call without a Hopper GPU raises CodaError
    (unsupported), never a crash."""
    a, b = torch.ones(16, 64, dtype=BF16), torch.ones(32, 64, dtype=BF16)
    with pytest.raises(L.CodaArgumentError, match=r"coda_gemm.*\bc\b"):
        gemm(a, b, torch.ones(16, 24, dtype=BF16))  # C must be M x N
    if not torch.cuda.is_available():
        with pytest.raises(L.CodaError, match="coda_gemm") as info:
            gemm(a, b, torch.empty(16, 32, dtype=BF16))
        assert "unsupported" in str(info.value)


def test_weight_layout_helpers():
    gate, up = torch.randn(6, 8), torch.randn(6, 8)
    both = coda.interleave_gate_up(gate, up)
    assert torch.equal(both[0::2], gate) and torch.equal(both[1::2], up)
    assert all(torch.equal(a, b) for a, b in zip(coda.split_gate_up(both), (gate, up)))
    w = torch.arange(3 * 8 * 2, dtype=torch.float32).view(3 * 8, 2)
    p = coda.rotate_half_to_interleaved(w, head_dim=8, rotated_heads=2)
    assert torch.equal(p[0], w[0]) and torch.equal(p[1], w[4]) and torch.equal(p[2], w[1]) and torch.equal(p[9], w[12])
    assert torch.equal(p[16:], w[16:])  # the third head passes through
    cos, sin = coda.rope_cache(16, 8)
    assert cos.shape == (16, 4) and cos.dtype == torch.float32
    assert torch.allclose(cos[3, 1] ** 2 + sin[3, 1] ** 2, torch.tensor(1.0))
    assert torch.allclose(torch.atan2(sin[5, 1], cos[5, 1]), torch.tensor(5 * 10000.0 ** (-2 / 8)))


def test_operand_layouts_read_in_place_only_without_overlap():
    from coda.ops.matmul import _layout
    assert _layout("x", torch.empty(16, 64)) == (L.K_MAJOR, True)
    assert _layout("x", torch.empty(64, 16).t()) == (L.MN_MAJOR, True)
    assert _layout("x", torch.empty(1, 64).expand(16, 64)) == (L.K_MAJOR, False)  # rows overlap: copied
    assert _layout("x", torch.empty(16, 1024)[:, 8:72]) == (L.K_MAJOR, True)  # a column slice, rows 1024 apart
    assert _layout("x", torch.empty(16, 68)[:, :60]) == (L.MN_MAJOR, False)  # K = 60: copied transposed


def test_from_linears_keeps_frozen_weights_frozen():
    gate, up, down = torch.nn.Linear(16, 8, bias=False), torch.nn.Linear(16, 8, bias=False), \
        torch.nn.Linear(8, 16, bias=False)
    for layer in (gate, up, down):
        layer.weight.requires_grad_(False)
    mlp = coda.nn.SwiGLUMLP.from_linears(gate, up, down)
    assert not mlp.w_gate_up.requires_grad and not mlp.w_down.requires_grad
    with pytest.raises(ValueError, match="rotated_heads 3 must be in"):
        coda.rotate_half_to_interleaved(torch.empty(32, 4), head_dim=16, rotated_heads=3)


def test_nn_modules_hold_op_layouts():
    mlp = coda.nn.SwiGLUMLP(64, 32, device="meta")
    assert mlp.w_gate_up.shape == (64, 64) and mlp(meta(3, 64)).shape == (3, 64)
    for keep_logits, skip_below in ((False, 0.0), (True, 0.0), (False, 2 ** -12)):
        head = coda.nn.LinearCrossEntropy(64, 500, keep_logits=keep_logits, skip_below=skip_below, device="meta")
        loss = head(meta(4, 64, grad=True), meta(4, dtype=torch.int64))
        assert loss.shape == ()
        loss.backward()  # the backward's fake, with the module's options
        assert head.weight.grad.shape == (500, 64)
    pair = coda.nn.ResidualRMSNormLinear(64, 64, 16, device="meta")
    z, h = pair(meta(4, 64), meta(4, 64))
    assert z.shape == (4, 16) and h.shape == (4, 64)
    rope = coda.nn.RoPELinear(64, heads=4, head_dim=16, rotated_heads=3, max_positions=32, device="meta")
    assert rope(meta(4, 64), meta(4, dtype=torch.int32)).shape == (4, 64)


def test_every_op_glue_runs_forward_and_backward(stub_libcoda):
    """Each op's real implementation, forward and backward, on CPU tensors against the stub: every libcoda call
    gets the argument count of its signature, and the outputs have the fake implementation's shapes."""
    def cpu(*shape, dtype=BF16, grad=True):
        return torch.randn(*shape).to(dtype).requires_grad_(grad and dtype.is_floating_point)

    x = cpu(3, 5, 64)
    checks = []
    y = coda.linear(x, cpu(32, 64))
    checks.append((y, (3, 5, 32)))
    y = coda.linear(cpu(64, 9).t(), cpu(64, 32).t())  # both operands MN-major
    checks.append((y, (9, 32)))
    checks.append((coda.swiglu_mlp(x, cpu(96, 64), cpu(40, 48)), (3, 5, 40)))
    checks.append((coda.swiglu_linear(x, cpu(96, 64)), (3, 5, 48)))
    cos, sin = coda.rope_cache(32, 16)
    checks.append((coda.rope_linear(x, cpu(64, 64), torch.zeros(3, 5, dtype=torch.int64), cos, sin, 16, 3),
                   (3, 5, 64)))
    z, h = coda.residual_rmsnorm_linear(x, cpu(64, 64), cpu(3, 5, 64), cpu(64), cpu(24, 64))
    checks += [(z, (3, 5, 24)), (h, (3, 5, 64))]
    for reduction, shape in (("mean", ()), ("none", (15,))):
        loss = coda.linear_cross_entropy(x, cpu(100, 64), torch.zeros(15, dtype=torch.int64), reduction=reduction,
                                         label_smoothing=0.1)
        checks.append((loss, shape))
    row_scale = cpu(15, dtype=torch.float32)
    loss, logits = coda.linear_cross_entropy(x, cpu(100, 64), torch.zeros(15, dtype=torch.int64), row_scale=row_scale,
                                             return_logits=True)
    checks += [(loss, ())]
    assert logits.shape == (15, 100) and not logits.requires_grad
    checks.append((coda.linear_cross_entropy(x, cpu(100, 64), torch.zeros(15, dtype=torch.int64), keep_logits=True),
                   ()))
    checks.append((coda.linear_cross_entropy(x, cpu(100, 64), torch.zeros(15, dtype=torch.int64), skip_below=2 ** -12),
                   ()))
    weights, ids, tei, counts = coda.route(x.detach(), cpu(60, 64, grad=False), 8, mode="sigmoid_bias",
                                           expert_bias=torch.zeros(60), n_group=6, topk_group=3, dispatch=True)
    assert (weights.shape, ids.shape, tei.shape, counts.shape) == ((15, 8), (15, 8), (15, 8), (60,))
    assert len(coda.route(x.detach(), cpu(60, 64, grad=False), 2)) == 2
    router = coda.nn.Router(64, 60, 8, mode="sigmoid_bias", n_group=6, topk_group=3, dispatch=True).bfloat16()
    routed = router(x)  # the bias cast by .bfloat16() is read in f32; x requires grad, the routing gives none
    assert [t.shape for t in routed] == [(15, 8)] * 3 + [(60,)] and not any(t.requires_grad for t in routed)
    gate = torch.nn.Linear(64, 60, bias=False).to(BF16)
    assert torch.equal(coda.nn.Router.from_linear(gate, 2).weight, gate.weight)
    with pytest.raises(ValueError, match="no bias"):
        coda.nn.Router.from_linear(torch.nn.Linear(64, 60), 2)
    block = coda.nn.Layer(64, 48, heads=6, head_dim=16, rotated_heads=4, max_positions=32)
    h2, qkv = block(cpu(15, 64), cpu(15, 64), torch.zeros(15, dtype=torch.int64))
    checks += [(h2, (15, 64)), (qkv, (15, 96))]
    for out, shape in checks:
        assert out.shape == shape
    sum(out.float().sum() for out, _ in checks).backward()
    assert block.norm1.grad.shape == (64,) and block.w_qkv.grad.shape == (96, 64)
    assert x.grad is not None and x.grad.shape == x.shape and row_scale.grad.shape == (15,)
    called = set(stub_libcoda.calls)
    assert {"coda_gemm", "coda_gemm_swiglu", "coda_gemm_swiglu_backward", "coda_gemm_rope", "coda_rope_backward",
            "coda_gemm_residual_rmsnorm", "coda_gemm_row_scale", "coda_row_scale_backward",
            "coda_gemm_residual_rmsnorm_backward", "coda_gemm_rmsnorm_weight_gradients", "coda_gemm_cross_entropy",
            "coda_gemm_cross_entropy_backward", "coda_gemm_cross_entropy_backward_from_logits",
            "coda_cross_entropy_backward_from_logits_workspace_bytes", "coda_gemm_cross_entropy_backward_skipping",
            "coda_cross_entropy_backward_skipping_workspace_bytes", "coda_layer_forward", "coda_layer_backward",
            "coda_router_workspace_bytes", "coda_gemm_router"} <= called


def test_eager_grad_path_takes_the_c_apply(stub_libcoda, monkeypatch):
    """With gradients the eager path records coda.linear's formula through torch.autograd.Function's C apply,
    skipping the Python wrapper that torch versions before its move to C have: the same node, the same backward."""
    from coda.ops import matmul
    monkeypatch.setattr(torch._C, "_cuda_getDevice", lambda: -1)  # a CPU tensor's get_device()
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda device: 0)
    monkeypatch.setattr(matmul._plans, "by_key", {})
    monkeypatch.setattr(matmul, "_PYTHON_APPLY", True)
    x, w = torch.randn(16, 64).to(BF16), torch.randn(32, 64).to(BF16).requires_grad_(True)
    y = matmul._linear_function(x, w)
    assert type(y.grad_fn).__name__ == "_LinearFunctionBackward" and y.shape == (16, 32)
    assert stub_libcoda.calls[-1] == "coda_gemm_prepared_run"
    y.float().sum().backward()
    assert w.grad.shape == (32, 64) and stub_libcoda.calls[-1] == "coda_gemm"  # dW only: x needs no gradient


def test_eager_plan_cache_against_the_stub(stub_libcoda, monkeypatch):
    """coda.linear's eager path (no dispatcher, plans prepared in libcoda once per shape) on CPU tensors with
    libcoda stubbed: a plan is kept only for operands read in place, and a call passes their addresses;
    overlapping or misaligned ones take the copying path. coda.mm's path reads the (K, N) weight in place."""
    from coda.ops import matmul
    monkeypatch.setattr(torch._C, "_cuda_getDevice", lambda: -1)  # a CPU tensor's get_device()
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda device: 0)
    monkeypatch.setattr(matmul._plans, "by_key", {})
    x, w = torch.randn(16, 64).to(BF16), torch.randn(32, 64).to(BF16)
    for _ in range(2):
        assert matmul._linear_eager(x, w).shape == (16, 32)
    assert [bool(plan) and plan.in_place for plan in matmul._plans.by_key.values()] == [True]
    assert stub_libcoda.calls.count("coda_gemm_prepare") == 1
    assert stub_libcoda.calls[-1] == "coda_gemm_prepared_run"
    assert stub_libcoda.arguments[-1][1:3] == (x.data_ptr(), w.data_ptr())
    overlapping = torch.randn(1, 64).to(BF16).expand(16, 64)
    assert matmul._linear_eager(overlapping, w).shape == (16, 32)
    assert matmul._plans.by_key[(overlapping.shape, overlapping.stride(), w.shape, w.stride(), BF16, BF16, -1,
                                 -1, False)] is False
    assert matmul._linear_eager(x.t().contiguous().t(), w.t().contiguous().t()).shape == (16, 32)  # MN-major, cached
    w_kn = w.t().contiguous()  # coda.mm's (K, N) operand
    assert matmul._linear_eager(x, w_kn, transposed=True).shape == (16, 32)
    assert stub_libcoda.arguments[-1][1:3] == (x.data_ptr(), w_kn.data_ptr())
    assert matmul._plans.by_key[(x.shape, x.stride(), w_kn.shape, w_kn.stride(), BF16, BF16, -1, -1, True)].in_place
    assert stub_libcoda.calls.count("coda_gemm") == 1
    assert stub_libcoda.calls.count("coda_gemm_prepared_run") == 4

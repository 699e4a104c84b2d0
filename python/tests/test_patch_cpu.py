"""coda.patch without a GPU (CI runs these): Hugging Face LLaMA models patched in place, the patched glue checked
against Hugging Face's own forward in fp32 with torch's math standing in for coda's ops, and a patched model's
training step, eager and compiled with fullgraph=True, against the stubbed libcoda (conftest.py)."""
import copy

import pytest
import torch

import coda
from coda.bench import torch_layer, torch_rope_linear, torch_swiglu_mlp

BF16 = torch.bfloat16


def test_patch_replaces_llama_mlps_keeping_weights():
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=256)
    model = transformers.LlamaForCausalLM(config)
    gate = model.model.layers[1].mlp.gate_proj.weight.detach().clone()
    coda.patch(model)
    mlp = model.model.layers[1].mlp
    assert isinstance(mlp, coda.nn.SwiGLUMLP) and torch.equal(mlp.w_gate_up[0::2], gate)
    with pytest.raises(ValueError, match="no LLaMA-style MLP"):
        coda.patch(torch.nn.Sequential(torch.nn.Linear(4, 4)))


def test_patch_fuses_llama_attention_projections():
    """q_proj, k_proj, v_proj become one w_qkv (Q and K rows interleaved per head); attention=False keeps them."""
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=256)
    model = transformers.LlamaForCausalLM(config)
    attention = model.model.layers[1].self_attn
    q, k, v = (getattr(attention, n).weight.detach().clone() for n in ("q_proj", "k_proj", "v_proj"))
    coda.patch(model)
    assert not hasattr(attention, "q_proj") and attention.w_qkv.shape == (128, 64)
    assert torch.equal(attention.w_qkv, coda.rotate_half_to_interleaved(torch.cat([q, k, v]), 16, 6))
    kept = coda.patch(transformers.LlamaForCausalLM(config), attention=False)
    assert isinstance(kept.model.layers[0].self_attn.q_proj, torch.nn.Linear)
    with pytest.raises(ValueError, match="layers=True needs attention=True"):
        coda.patch(transformers.LlamaForCausalLM(config), attention=False, layers=True)
    config.num_hidden_layers = 1
    single = transformers.LlamaForCausalLM(config)
    with pytest.raises(ValueError, match="two consecutive LlamaDecoderLayers.*unchanged"):
        coda.patch(single, layers=True)
    assert hasattr(single.model.layers[0].mlp, "gate_proj") and hasattr(single.model.layers[0].self_attn, "q_proj")


def _rows(function):
    """A 2-D torch reference applied to (..., K) inputs."""
    def call(x, *args):
        flat = [a.reshape(-1) if isinstance(a, torch.Tensor) and a.dtype == torch.int32 else a for a in args]
        return function(x.reshape(-1, x.shape[-1]), *flat).view(*x.shape[:-1], -1)
    return call


@pytest.mark.parametrize("layers", [True, False])
def test_patched_attention_matches_hugging_face_on_cpu(monkeypatch, layers):
    """The patched model's glue (stacked, permuted weights; the model's own cos/sin as per-token tables; the split
    into heads; the KV cache; with layers, the chain of coda.layer calls that carries each layer's Q, K, V from the
    layer before) with coda's rope_linear, swiglu_mlp and layer replaced by torch's math: the patched fp32 model
    gives the unpatched model's logits and hidden states, over a prompt and then one cached decoding step, with
    llama3 rope scaling."""
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=3,
                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=256,
                                      rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                    "high_freq_factor": 4.0, "original_max_position_embeddings": 8})
    torch.manual_seed(0)
    plain = transformers.LlamaForCausalLM(config).eval()
    patched = coda.patch(copy.deepcopy(plain), layers=layers)
    rope = _rows(lambda x, w, positions, cos, sin, d, r: torch_rope_linear(x, w, positions.long(), cos, sin, d, r))
    layer_calls = []
    monkeypatch.setattr(coda.ops, "rope_linear", rope)
    monkeypatch.setattr(coda.ops, "swiglu_mlp", _rows(torch_swiglu_mlp))
    monkeypatch.setattr(coda.ops, "layer", lambda *args: layer_calls.append(args[0].shape) or torch_layer(*args))
    ids = torch.randint(0, 256, (2, 12))
    with torch.no_grad():
        want = plain(input_ids=ids[:, :11], use_cache=True, output_hidden_states=True)
        got = patched(input_ids=ids[:, :11], use_cache=True, output_hidden_states=True)
        assert torch.allclose(got.logits, want.logits, atol=1e-5, rtol=1e-4)
        for ours, theirs in zip(got.hidden_states, want.hidden_states, strict=True):
            assert torch.allclose(ours, theirs, atol=1e-5, rtol=1e-4)
        assert layer_calls == ([(22, 64)] * 2 if layers else [])  # layers 0 -> 1 and 1 -> 2
        want = plain(input_ids=ids[:, 11:], past_key_values=want.past_key_values).logits
        got = patched(input_ids=ids[:, 11:], past_key_values=got.past_key_values).logits
        assert torch.allclose(got, want, atol=1e-5, rtol=1e-4)
        assert layer_calls[2:] == ([(2, 64)] * 2 if layers else [])
        # a layer called on its own (not after the layer before in one forward) projects its own Q, K, V
        hidden = torch.randn(2, 11, 64)
        embeddings = plain.model.rotary_emb(hidden, torch.arange(11)[None])
        ours = patched.model.layers[1](hidden, position_embeddings=embeddings)
        theirs = plain.model.layers[1](hidden, position_embeddings=embeddings)
        assert torch.allclose(ours, theirs, atol=1e-5, rtol=1e-4)
        if not layers:
            return
        # a hook on a module coda.layer replaces: that layer takes the separate steps, and the hook fires
        seen = []
        handle = patched.model.layers[0].mlp.register_forward_hook(lambda *_: seen.append(1))
        layer_calls.clear()
        got = patched(input_ids=ids[:, :11]).logits
        assert seen == [1] and layer_calls == [(22, 64)]  # only layers 1 -> 2
        # Q, K, V handed to a layer the forward then leaves out are dropped when the model's forward returns
        patched.config.num_hidden_layers = 2  # Hugging Face runs layers[:num_hidden_layers]
        patched.model(input_ids=ids[:, :11])
        assert layer_calls[-1] == (22, 64) and patched.model.layers[0].coda_chain.pending is None
        patched.config.num_hidden_layers = 3
        assert torch.allclose(got, plain(input_ids=ids[:, :11]).logits, atol=1e-5, rtol=1e-4)
        handle.remove()
        # layers removed after patching: Q, K, V made for a layer that no longer follows are not taken
        for model in (plain, patched):
            model.model.layers = torch.nn.ModuleList([model.model.layers[0], model.model.layers[2]])
        got = patched(input_ids=ids[:, :11]).logits
        assert torch.allclose(got, plain(input_ids=ids[:, :11]).logits, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("layers", [False, True])
def test_patched_llama_trains_and_compiles_fullgraph_against_the_stub(stub_libcoda, layers):
    """A patched Hugging Face LLaMA's training step: eager, then torch.compile(fullgraph=True) (which raises on a
    graph break), on CPU tensors with libcoda stubbed (shapes and glue, not values)."""
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=256)
    model = coda.patch(transformers.LlamaForCausalLM(config).to(BF16), layers=layers)
    ids = torch.randint(0, 256, (2, 16))
    for step in (model, torch.compile(model, fullgraph=True, backend="aot_eager")):
        model.zero_grad()
        stub_libcoda.calls.clear()
        out = step(input_ids=ids, labels=ids)
        assert out.loss.shape == () and out.logits is None
        # with layers, the chain: layer 0 projects its Q, K, V; coda.layer gives layer 1 its own
        rope_calls = 1 if layers else 2
        assert stub_libcoda.calls.count("coda_gemm_rope") == rope_calls
        assert stub_libcoda.calls.count("coda_layer_forward") == (1 if layers else 0)
        assert not layers or model.model.layers[0].coda_chain.pending is None
        out.loss.backward()
        assert stub_libcoda.calls.count("coda_layer_backward") == (1 if layers else 0)
        assert stub_libcoda.calls.count("coda_rope_backward") == rope_calls
        assert model.model.layers[1].input_layernorm.weight.grad.shape == (64,)
        assert model.model.layers[0].mlp.w_gate_up.grad.shape == (256, 64)
        assert model.lm_head.weight.grad is not None
    assert model(input_ids=ids).logits.shape == (2, 16, 256)  # without labels: Hugging Face's own forward
    # the original signature (Trainer filters dataset columns by it), positional arguments, return_dict=False
    import inspect
    assert "attention_mask" in inspect.signature(model.forward).parameters
    mask = torch.ones_like(ids)
    out = model(ids, mask, labels=ids, return_dict=False)
    assert isinstance(out, tuple) and out[0].shape == ()

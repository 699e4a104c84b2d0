"""The MoE router: scores = x @ w.T reduced to k (weight, expert id) pairs per token, selected on the
GEMM's fp32 accumulators (at M <= 16 in one kernel; docs/kernels.md, "MoE routing").

    weights, ids = coda.route(h, gate.weight, 8, mode="topk_softmax", renormalize=True)      # Mixtral
    weights, ids = coda.route(h, gate.weight, 8, mode="sigmoid_bias", expert_bias=bias, n_group=8,
                              topk_group=4, renormalize=True, routed_scaling_factor=2.5)    # DeepSeek-V3
    weights, ids, token_expert_indices, counts = coda.route(h, w, 2, dispatch=True)

Modes: "softmax_topk" (the k best scores, softmax over them), "topk_softmax" (softmax over all E,
the k best), "sigmoid_bias" (sigmoid scores ranked with a per-expert bias, optionally grouped). Slots
are ordered by weight rank, ties to the lower id; NaN scores are never selected, and slots nothing
selectable fills take the lowest unchosen ids at weight 0 (ids are always distinct and in [0, E)).
No gradient (routing weights that need one: compute the softmax in torch from the returned ids).
"""
import torch

from .. import _checks as checks
from .. import _library as L

_lib = torch.library.Library("coda", "FRAGMENT")
_lib.define("route(Tensor x, Tensor w, int k, str mode, bool renormalize, Tensor? expert_bias, int n_group, "
            "int topk_group, float routed_scaling_factor, bool dispatch) -> (Tensor, Tensor, Tensor, Tensor)")
_OP = "route"


def _check(x, w, k, mode, expert_bias, n_group, topk_group, routed_scaling_factor):
    checks.tensor(_OP, "x", x, checks.FLOATS, rank=2)
    checks.tensor(_OP, "w", w, checks.FLOATS, rank=2)
    checks.same_dtype(_OP, "w", w, "x", x)
    if expert_bias is not None:
        checks.tensor(_OP, "expert_bias", expert_bias, (torch.float32,), rank=1)
    checks.same_device(_OP, (("x", x), ("w", w), ("expert_bias", expert_bias)))
    if x.shape[1] != w.shape[1]:
        raise ValueError(f"coda.{_OP}: x has shape {tuple(x.shape)} and w {tuple(w.shape)}; "
                         "x's columns must be w's (K)")
    checks.multiple_of_8(_OP, "x", x.shape[1], "K (columns)")
    experts = w.shape[0]
    if not 1 <= experts <= 512:
        raise ValueError(f"coda.{_OP}: w holds {experts} experts (rows); the router takes 1 to 512")
    if not 1 <= k <= min(experts, 32):
        raise ValueError(f"coda.{_OP}: k is {k} but must lie in [1, min(E, 32)] with E = {experts}")
    if mode not in L.ROUTING_MODES:
        raise ValueError(f"coda.{_OP}: mode {mode!r} must be 'softmax_topk', 'topk_softmax' or 'sigmoid_bias'")
    if mode != "sigmoid_bias" and (expert_bias is not None or n_group != 1):
        raise ValueError(f"coda.{_OP}: expert_bias and n_group are used only by mode 'sigmoid_bias'")
    if expert_bias is not None:
        checks.size(_OP, "expert_bias", expert_bias.shape[0], experts, "length")
    if n_group < 1 or experts % n_group or (n_group > 1 and experts // n_group < 2):
        raise ValueError(f"coda.{_OP}: n_group {n_group} must divide E = {experts} into groups of at least two experts")
    if not 1 <= topk_group <= n_group:
        raise ValueError(f"coda.{_OP}: topk_group {topk_group} must lie in [1, n_group = {n_group}]")
    if k > topk_group * (experts // n_group):
        raise ValueError(f"coda.{_OP}: k is {k} but the {topk_group} kept group(s) hold only "
                         f"{topk_group * (experts // n_group)} experts")
    if not routed_scaling_factor > 0 or routed_scaling_factor == float("inf"):
        raise ValueError(f"coda.{_OP}: routed_scaling_factor {routed_scaling_factor} must be finite and > 0")


def _outputs(x, w, k, dispatch, empty):
    m, experts = x.shape[0], w.shape[0]
    return (empty((m, k), dtype=torch.float32), empty((m, k), dtype=torch.int32),
            empty((m, k) if dispatch else (0,), dtype=torch.int32), empty((experts,) if dispatch else (0,),
                                                                          dtype=torch.int32))


@torch.library.register_fake("coda::route")
def _fake(x, w, k, mode, renormalize, expert_bias, n_group, topk_group, routed_scaling_factor, dispatch):
    _check(x, w, k, mode, expert_bias, n_group, topk_group, routed_scaling_factor)
    return _outputs(x, w, k, dispatch, x.new_empty)


@L.kernel(_lib, "route")
def _route(x, w, k, mode, renormalize, expert_bias, n_group, topk_group, routed_scaling_factor, dispatch):
    _check(x, w, k, mode, expert_bias, n_group, topk_group, routed_scaling_factor)
    x, w = checks.rows(x), checks.rows(w)
    if expert_bias is not None:
        expert_bias = checks.vector(expert_bias)
    weights, ids, token_expert_indices, counts = _outputs(x, w, k, dispatch, x.new_empty)
    bias = L.struct(expert_bias) if expert_bias is not None else None  # alive until the call returns
    options = L.RouterOptions(L.ROUTING_MODES[mode], k, int(renormalize),
                              L.ctypes.addressof(bias) if bias is not None else None, n_group, topk_group,
                              routed_scaling_factor, 0)
    xv, wv = L.view("x", x), L.view("w", w)
    bytes_ = L.cached_size(("route", x.shape, w.shape, k, mode, bool(renormalize), n_group),
                           L.lib.coda_router_workspace_bytes, xv, wv, L.ctypes.byref(options), None)
    with L.on_device(x.device):
        ws = L.workspace(bytes_, x.device)
        L.call(L.lib.coda_gemm_router, xv, wv, L.view("weights", weights), L.view("ids", ids),
               L.ctypes.byref(options), L.view("tei", token_expert_indices) if dispatch else None,
               L.view("counts", counts) if dispatch else None, None, ws.data_ptr(), bytes_, L.stream(x.device))
    return weights, ids, token_expert_indices, counts


def route(x, w, k, mode="topk_softmax", renormalize=False, expert_bias=None, n_group=1, topk_group=1,
          routed_scaling_factor=1.0, dispatch=False):
    """MoE routing of x (M, K) or (..., K) by the router weight w (E, K), 1 <= E <= 512: returns (weights f32
    (M, k), ids int32 (M, k)), and with dispatch=True also token_expert_indices (M, k; slot j of token m holds
    j * M + m, vLLM's layout) and the tokens routed to each expert (E,), both int32.

        weights, ids = coda.route(hidden, router.weight, 8, mode="topk_softmax", renormalize=True)
    """
    # the selection has no gradient: detached inputs, so that no output requires one
    x, w, expert_bias = (t.detach() if isinstance(t, torch.Tensor) else t for t in (x, w, expert_bias))
    x, w = L.autocast(x, w)
    if x.dim() != 2:
        x = x.reshape(-1, x.shape[-1])
    weights, ids, token_expert_indices, counts = torch.ops.coda.route(
        x, w, int(k), mode, bool(renormalize), expert_bias, int(n_group), int(topk_group),
        float(routed_scaling_factor), bool(dispatch))
    return (weights, ids, token_expert_indices, counts) if dispatch else (weights, ids)

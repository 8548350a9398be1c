"""moejit.fused_moe with NumPy arrays on the host backend, against the fp64 reference computed
from the same quantized weights: every checkpoint source, both activations, expert maps, router
weights on the input, output dtypes and token counts."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import moejit
import reference as ref

E, H, I, TOPK = 8, 128, 64, 2

# (format, export, group size, scale dtype): one per source layout a checkpoint holds.
SOURCES = {
    "vllm_mxfp4": ("mxfp4", ref.to_vllm_mxfp4, 32, None),
    "plain_mxfp4": ("mxfp4", ref.to_plain, 32, None),
    "plain_int4_sym": ("int4_sym", ref.to_plain, 32, "bf16"),
    "gptq_v1": ("int4_asym", lambda qw: ref.to_gptq(qw, 1), 64, "f16"),
    "gptq_v2_per_channel": ("int4_asym", lambda qw: ref.to_gptq(qw, 2), 0, "bf16"),
    "gptq_v1_sym": ("int4_sym", lambda qw: ref.to_gptq(qw, 1), 32, "f16"),
    "awq": ("int4_asym", ref.to_awq, 32, "bf16"),
}


def make_layer(rng, ctx, source, *, activation="silu", rows="concatenated", bias=False, experts=E):
    fmt, export, group, scale_dtype = SOURCES[source]
    w13 = ref.random_quant_weights(rng, fmt, experts, 2 * I, H, group, scale_dtype or "bf16", with_bias=bias)
    w2 = ref.random_quant_weights(rng, fmt, experts, H, I, group, scale_dtype or "bf16", with_bias=bias)
    packed13 = moejit.pack_weights(ctx, format=fmt, rows=rows, **export(ref.reorder_rows(w13, rows)))
    packed2 = moejit.pack_weights(ctx, format=fmt, **export(w2))
    return w13, w2, packed13, packed2


def bf16_hidden(rng, tokens):
    return rng.standard_normal((tokens, H)).astype(ml_dtypes.bfloat16)


def poisoned(shape, dtype):
    out = np.empty(shape, dtype=dtype)
    out[...] = np.nan
    return out


def check_layer(actual, expected, what):
    actual = np.asarray(actual, dtype=np.float64)
    assert np.isfinite(actual).all(), f"{what}: output not fully written (NaN poison left)"
    error = np.linalg.norm(actual - expected) / np.linalg.norm(expected)
    assert error < 1e-2, f"{what}: relative Frobenius error {error:.2e}"
    ref.assert_close(actual, expected, rtol=3e-2, atol=3e-2, what=what)


@pytest.mark.parametrize("source", SOURCES)
def test_every_source_silu(host_ctx, rng, source):
    w13, w2, p13, p2 = make_layer(rng, host_ctx, source)
    hidden = bf16_hidden(rng, 5)
    ids, weights = ref.random_routing(rng, 5, TOPK, E)
    out = moejit.fused_moe(host_ctx, hidden, p13, p2, weights, ids, output=poisoned((5, H), ml_dtypes.bfloat16))
    expected = ref.fused_moe_reference(hidden.astype(np.float64), w13, w2, ids, weights, "silu")
    check_layer(out, expected, source)


@pytest.mark.parametrize("source", ["vllm_mxfp4", "gptq_v2_per_channel"])
def test_swiglu_oai_interleaved_with_bias(host_ctx, rng, source):
    """gpt-oss: gate and up interleaved, biases on both GEMMs, the clamped SwiGLU."""
    w13, w2, p13, p2 = make_layer(rng, host_ctx, source, activation="swiglu_oai", rows="interleaved", bias=True)
    assert p13.bias is not None and p2.bias is not None
    hidden = bf16_hidden(rng, 4) * ml_dtypes.bfloat16(4)  # large enough to reach the clamps
    ids, weights = ref.random_routing(rng, 4, TOPK, E)
    out = moejit.fused_moe(host_ctx, hidden, p13, p2, weights, ids, activation="swiglu_oai",
                           output=poisoned((4, H), ml_dtypes.bfloat16))
    expected = ref.fused_moe_reference(hidden.astype(np.float64), w13, w2, ids, weights, "swiglu_oai")
    check_layer(out, expected, f"swiglu_oai {source}")


def test_expert_map_random_subset(host_ctx, rng):
    """Expert parallelism: 6 local experts that are a random subset of 16 global ids (the highest
    included), and the sum over two ranks that split the experts equals the whole layer."""
    global_experts, tokens = 16, 7
    fmt = "mxfp4"
    w13 = ref.random_quant_weights(rng, fmt, global_experts, 2 * I, H)
    w2 = ref.random_quant_weights(rng, fmt, global_experts, H, I)
    hidden = bf16_hidden(rng, tokens)
    ids, weights = ref.random_routing(rng, tokens, TOPK, global_experts)
    order = rng.permutation(global_experts)
    total = np.zeros((tokens, H))
    for rank_globals in (order[:6], order[6:]):
        expert_map = np.full(global_experts, -1, dtype=np.int32)
        expert_map[rank_globals] = np.arange(len(rank_globals), dtype=np.int32)
        l13, l2 = ref.take_experts(w13, rank_globals), ref.take_experts(w2, rank_globals)
        p13 = moejit.pack_weights(host_ctx, rows="concatenated", **ref.to_vllm_mxfp4(l13))
        p2 = moejit.pack_weights(host_ctx, **ref.to_vllm_mxfp4(l2))
        out = moejit.fused_moe(host_ctx, hidden, p13, p2, weights, ids, expert_map=expert_map,
                               output=poisoned((tokens, H), np.float32))
        expected = ref.fused_moe_reference(hidden.astype(np.float64), l13, l2, ids, weights, "silu",
                                           expert_map=expert_map)
        check_layer(out, expected, f"rank with globals {sorted(rank_globals.tolist())}")
        total += out
    whole = ref.fused_moe_reference(hidden.astype(np.float64), w13, w2, ids, weights, "silu")
    check_layer(total, whole, "sum over ranks")


def test_router_weight_on_input(host_ctx, rng):
    """vLLM's apply_router_weight_on_input (topk 1): the weight scales the input row."""
    w13, w2, p13, p2 = make_layer(rng, host_ctx, "vllm_mxfp4")
    tokens = 3
    hidden = bf16_hidden(rng, tokens)
    ids, weights = ref.random_routing(rng, tokens, 1, E)
    out = moejit.fused_moe(host_ctx, hidden, p13, p2, weights, ids, apply_router_weight_on_input=True,
                           output=poisoned((tokens, H), ml_dtypes.bfloat16))
    scaled = ref.round_to(hidden.astype(np.float64) * weights.astype(np.float64), "bf16")
    expected = ref.fused_moe_reference(scaled, w13, w2, ids, np.ones_like(weights), "silu")
    check_layer(out, expected, "router weight on input")
    with pytest.raises(moejit.InvalidArgumentError, match="topk = 1"):
        ids2, weights2 = ref.random_routing(rng, tokens, 2, E)
        moejit.fused_moe(host_ctx, hidden, p13, p2, weights2, ids2, apply_router_weight_on_input=True)


@pytest.mark.parametrize("tokens", [1, 9])
def test_f16_activations_and_token_counts(host_ctx, rng, tokens):
    w13, w2, p13, p2 = make_layer(rng, host_ctx, "plain_int4_sym")
    hidden = rng.standard_normal((tokens, H)).astype(np.float16)
    ids, weights = ref.random_routing(rng, tokens, TOPK, E)
    out = moejit.fused_moe(host_ctx, hidden, p13, p2, weights, ids)  # output allocated: f16 like hidden
    assert out.dtype == np.float16 and out.shape == (tokens, H)
    expected = ref.fused_moe_reference(hidden.astype(np.float64), w13, w2, ids, weights, "silu", act_dtype="f16")
    check_layer(out, expected, f"f16, T = {tokens}")


def test_mxfp4_packed_for_f16_activations(host_ctx, rng):
    """MXFP4 weights have a packing per 16-bit type (the E2M1 bits where each wants them); INT4
    weights, tested above, one for both."""
    fmt, export, group, _ = SOURCES["vllm_mxfp4"]
    w13 = ref.random_quant_weights(rng, fmt, E, 2 * I, H, group, "bf16")
    w2 = ref.random_quant_weights(rng, fmt, E, H, I, group, "bf16")
    p13 = moejit.pack_weights(host_ctx, format=fmt, rows="concatenated", act_dtype="f16",
                              **export(ref.reorder_rows(w13, "concatenated")))
    p2 = moejit.pack_weights(host_ctx, format=fmt, act_dtype="f16", **export(w2))
    assert p13.act_dtype == "f16" and p2.act_dtype == "f16"
    tokens = 7
    hidden = rng.standard_normal((tokens, H)).astype(np.float16)
    ids, weights = ref.random_routing(rng, tokens, TOPK, E)
    out = moejit.fused_moe(host_ctx, hidden, p13, p2, weights, ids)
    assert out.dtype == np.float16
    expected = ref.fused_moe_reference(hidden.astype(np.float64), w13, w2, ids, weights, "silu", act_dtype="f16")
    check_layer(out, expected, "mxfp4 packed for f16")
    with pytest.raises(moejit.InvalidArgumentError, match="packed for f16 activations"):
        moejit.fused_moe(host_ctx, hidden.astype(ml_dtypes.bfloat16), p13, p2, weights, ids)
    b13 = moejit.pack_weights(host_ctx, format=fmt, rows="concatenated", **export(ref.reorder_rows(w13, "concatenated")))
    b2 = moejit.pack_weights(host_ctx, format=fmt, **export(w2))
    assert b13.act_dtype == "bf16"
    with pytest.raises(moejit.InvalidArgumentError, match="packed for bf16 activations; expected weights packed with "
                                                          "act_dtype f16"):
        moejit.fused_moe(host_ctx, hidden, b13, b2, weights, ids)


def test_zero_tokens_writes_nothing(host_ctx, rng):
    _, _, p13, p2 = make_layer(rng, host_ctx, "vllm_mxfp4")
    out = moejit.fused_moe(host_ctx, bf16_hidden(rng, 0), p13, p2, np.zeros((0, TOPK), np.float32),
                           np.zeros((0, TOPK), np.int32))
    assert out.shape == (0, H)


def test_caller_workspace_full_of_garbage(host_ctx, rng):
    """The workspace may hold anything: a second call over a garbage-filled one gives the same bytes."""
    w13, w2, p13, p2 = make_layer(rng, host_ctx, "vllm_mxfp4")
    tokens = 6
    hidden = bf16_hidden(rng, tokens)
    ids, weights = ref.random_routing(rng, tokens, TOPK, E)
    nbytes = moejit.fused_moe_workspace_size(host_ctx, p13, p2, tokens, TOPK, max_tokens=16)
    raw = np.empty(nbytes + 256, np.uint8)
    workspace = raw[(-raw.ctypes.data) % 256:][:nbytes]
    workspace[:] = rng.integers(0, 256, nbytes, dtype=np.uint8)
    first = moejit.fused_moe(host_ctx, hidden, p13, p2, weights, ids, workspace=workspace, max_tokens=16)
    workspace[:] = 0xFF
    second = moejit.fused_moe(host_ctx, hidden, p13, p2, weights, ids, workspace=workspace, max_tokens=16)
    assert first.view(np.uint16).tobytes() == second.view(np.uint16).tobytes()
    check_layer(first, ref.fused_moe_reference(hidden.astype(np.float64), w13, w2, ids, weights, "silu"), "garbage ws")


def test_workspace_sized_before_weights_exist(host_ctx, rng):
    """Engines size workspaces at start-up: shapes and formats alone give the same size, and a
    launch with such a description fails naming the missing buffer."""
    _, _, p13, p2 = make_layer(rng, host_ctx, "gptq_v1")
    shapes = [moejit.PackedWeights.describe(host_ctx, format=w.format, group_size=w.group_size,
                                            scale_dtype=w.scale_dtype, experts=w.experts, n=w.n, k=w.k,
                                            act_and_mul=w.act_and_mul) for w in (p13, p2)]
    for tokens, max_tokens in ((1, 0), (7, 64)):
        real = moejit.fused_moe_workspace_size(host_ctx, p13, p2, tokens, TOPK, max_tokens=max_tokens)
        assert moejit.fused_moe_workspace_size(host_ctx, *shapes, tokens, TOPK, max_tokens=max_tokens) == real > 0
    hidden = bf16_hidden(rng, 2)
    ids, weights = ref.random_routing(rng, 2, TOPK, E)
    with pytest.raises(moejit.InvalidArgumentError, match="qweight"):
        moejit.fused_moe(host_ctx, hidden, *shapes, weights, ids)

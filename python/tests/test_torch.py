"""moejit.torch on CPU tensors (the host backend): torch.ops.moejit.fused_moe and grouped_gemm,
their wrappers and FusedMoE against the fp64 reference; torch.compile and torch.library.opcheck
over the ops; the errors bad input raises."""

from __future__ import annotations

import io

import ml_dtypes
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="moejit.torch needs PyTorch (pip install moejit[torch])")

import moejit  # noqa: E402
import moejit.torch as mt  # noqa: E402
import reference as ref  # noqa: E402

E, H, I, TOPK = 8, 128, 64, 2

# (format, exporter, group size, scale dtype) of each checkpoint layout.
SOURCES = {
    "vllm_mxfp4": ("mxfp4", ref.to_vllm_mxfp4, 32, "bf16"),
    "gptq_v1": ("int4_asym", lambda qw: ref.to_gptq(qw, 1), 64, "f16"),  # zero points 0 and 15 included
    "gptq_v2": ("int4_asym", lambda qw: ref.to_gptq(qw, 2), 0, "bf16"),  # per-channel
    "awq": ("int4_asym", ref.to_awq, 32, "bf16"),
    "plain": ("int4_sym", ref.to_plain, 32, "f16"),
}


def tensor(x):
    """A CPU tensor over a NumPy array (bfloat16 through its bits)."""
    if x is None:
        return None
    if x.dtype == np.dtype(ml_dtypes.bfloat16):
        return torch.from_numpy(np.ascontiguousarray(x).view(np.uint16)).view(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(x))


def checkpoint(qw: ref.QuantWeights, source: str, rows: str = "plain") -> dict:
    """``qw`` exported to ``source``'s layout (gate/up rows in ``rows`` order), as tensors."""
    exported = SOURCES[source][1](qw if rows == "plain" else ref.reorder_rows(qw, rows))
    return {key: (value if key == "source" else tensor(value)) for key, value in exported.items()}


def make_layer(rng, ctx, source, *, rows="concatenated", bias=False, experts=E):
    fmt, _, group, scale_dtype = SOURCES[source]
    w13 = ref.random_quant_weights(rng, fmt, experts, 2 * I, H, group, scale_dtype, with_bias=bias)
    w2 = ref.random_quant_weights(rng, fmt, experts, H, I, group, scale_dtype, with_bias=bias)
    p13 = moejit.pack_weights(ctx, format=fmt, rows=rows, **checkpoint(w13, source, rows))
    p2 = moejit.pack_weights(ctx, format=fmt, **checkpoint(w2, source))
    return w13, w2, p13, p2


def bf16_hidden(rng, tokens, scale=1.0):
    return torch.from_numpy(rng.standard_normal((tokens, H)) * scale).to(torch.bfloat16)


def routing(rng, tokens, topk=TOPK, experts=E):
    ids, weights = ref.random_routing(rng, tokens, topk, experts)
    return torch.from_numpy(ids), torch.from_numpy(weights)


def poisoned(shape, dtype=torch.bfloat16):
    return torch.full(shape, float("nan"), dtype=dtype)


def garbage_workspace(rng, nbytes):
    """A workspace full of random bytes: moejit must not depend on its contents."""
    return torch.from_numpy(rng.integers(0, 256, nbytes, dtype=np.uint8))


def check_layer(actual, expected, what):
    actual = actual.double().numpy()
    assert np.isfinite(actual).all(), f"{what}: output not fully written (NaN poison left)"
    error = np.linalg.norm(actual - expected) / np.linalg.norm(expected)
    assert error < 1e-2, f"{what}: relative Frobenius error {error:.2e}"
    ref.assert_close(actual, expected, rtol=3e-2, atol=3e-2, what=what)


def expected_layer(hidden, w13, w2, ids, weights, activation="silu", expert_map=None):
    return ref.fused_moe_reference(hidden.double().numpy(), w13, w2, ids.numpy(), weights.numpy(), activation,
                                   expert_map=expert_map)


def op_args(ctx, p13, p2):
    """The raw op's weight and shape arguments for a layer packed by moejit.pack_weights."""
    return dict(w13_qweight=p13.qweight, w13_scales=p13.scales, w13_zeros=p13.zeros, w13_bias=p13.bias,
                w2_qweight=p2.qweight, w2_scales=p2.scales, w2_zeros=p2.zeros, w2_bias=p2.bias,
                context=mt.register_context(ctx), w13_format=p13.format, w13_group_size=p13.group_size,
                w13_scale_dtype=p13.scale_dtype, w2_format=p2.format, w2_group_size=p2.group_size,
                w2_scale_dtype=p2.scale_dtype, experts=p13.experts, hidden_size=p13.k, intermediate_size=p2.k)


# ---- The fused op ------------------------------------------------------------------------------

@pytest.mark.parametrize("source", SOURCES)
def test_fused_op_every_source(host_ctx, rng, source):
    w13, w2, p13, p2 = make_layer(rng, host_ctx, source)
    tokens = 5
    hidden = bf16_hidden(rng, tokens)
    ids, weights = routing(rng, tokens)
    output = poisoned((tokens, H))
    workspace = garbage_workspace(rng, mt.fused_moe_workspace_bytes(p13, p2, tokens, TOPK))
    torch.ops.moejit.fused_moe(output, hidden, topk_weights=weights, topk_ids=ids, expert_map=None,
                               workspace=workspace, **op_args(host_ctx, p13, p2))
    check_layer(output, expected_layer(hidden, w13, w2, ids, weights), source)


def test_swiglu_oai_interleaved_with_bias(host_ctx, rng):
    """gpt-oss: gate and up rows interleaved, biases on both GEMMs, the clamped SwiGLU."""
    w13, w2, p13, p2 = make_layer(rng, host_ctx, "vllm_mxfp4", rows="interleaved", bias=True)
    hidden = bf16_hidden(rng, 4, scale=4.0)  # large enough to reach the clamps
    ids, weights = routing(rng, 4)
    out = mt.fused_moe(hidden, p13, p2, weights, ids, activation="swiglu_oai", output=poisoned((4, H)))
    check_layer(out, expected_layer(hidden, w13, w2, ids, weights, "swiglu_oai"), "swiglu_oai")


def test_router_weight_on_input(host_ctx, rng):
    """vLLM's apply_router_weight_on_input (topk 1): the weight scales the input row."""
    w13, w2, p13, p2 = make_layer(rng, host_ctx, "vllm_mxfp4")
    hidden = bf16_hidden(rng, 3)
    ids, weights = routing(rng, 3, topk=1)
    out = mt.fused_moe(hidden, p13, p2, weights, ids, apply_router_weight_on_input=True, output=poisoned((3, H)))
    scaled = ref.round_to(hidden.double().numpy() * weights.double().numpy(), "bf16")
    expected = ref.fused_moe_reference(scaled, w13, w2, ids.numpy(), np.ones_like(weights.numpy()), "silu")
    check_layer(out, expected, "router weight on input")


def test_expert_map_and_int64_ids(host_ctx, rng):
    """Expert parallelism: this rank's E experts are a random subset of 16 global ids; the
    wrapper takes int64 ids as engines hold them."""
    global_experts, tokens = 16, 7
    expert_map = ref.random_expert_map(rng, global_experts, E)
    local = ref.local_experts_of(expert_map)
    whole13 = ref.random_quant_weights(rng, "mxfp4", global_experts, 2 * I, H)
    whole2 = ref.random_quant_weights(rng, "mxfp4", global_experts, H, I)
    w13, w2 = ref.take_experts(whole13, local), ref.take_experts(whole2, local)
    p13 = moejit.pack_weights(host_ctx, rows="concatenated", **checkpoint(w13, "vllm_mxfp4", "concatenated"))
    p2 = moejit.pack_weights(host_ctx, **checkpoint(w2, "vllm_mxfp4"))
    hidden = bf16_hidden(rng, tokens)
    ids, weights = routing(rng, tokens, experts=global_experts)
    out = mt.fused_moe(hidden, p13, p2, weights, ids.long(), expert_map=torch.from_numpy(expert_map),
                       output=poisoned((tokens, H), torch.float32))
    check_layer(out, expected_layer(hidden, w13, w2, ids, weights, expert_map=expert_map), "expert map")


def test_default_context_of_the_tensors_device(rng, store_dir, monkeypatch):
    """context 0: the process's default context for the tensors' device (here the host backend,
    over this session's store)."""
    monkeypatch.setenv("MOEJIT_CACHE_DIR", str(store_dir))
    ctx = mt.default_context("cpu")
    assert ctx is mt.default_context(torch.device("cpu")) and ctx.backend == "host"
    w13, w2, p13, p2 = make_layer(rng, ctx, "vllm_mxfp4")
    hidden = bf16_hidden(rng, 2)
    ids, weights = routing(rng, 2)
    output = poisoned((2, H))
    args = {**op_args(ctx, p13, p2), "context": 0}
    torch.ops.moejit.fused_moe(output, hidden, topk_weights=weights, topk_ids=ids, expert_map=None,
                               workspace=torch.empty(mt.fused_moe_workspace_bytes(p13, p2, 2, TOPK), dtype=torch.uint8),
                               **args)
    check_layer(output, expected_layer(hidden, w13, w2, ids, weights), "default context")


# ---- The grouped GEMM op -----------------------------------------------------------------------

def test_grouped_gemm_contiguous(host_ctx, rng):
    qw = ref.random_quant_weights(rng, "int4_asym", 4, 128, 128, 32, "bf16")
    packed = moejit.pack_weights(host_ctx, format="int4_asym", **checkpoint(qw, "awq"))
    counts = np.array([3, 0, 5, 1])  # an expert with no rows
    offsets = torch.from_numpy(ref.contiguous_offsets(counts))
    a = torch.from_numpy(rng.standard_normal((int(counts.sum()), 128))).to(torch.bfloat16)
    c = poisoned((a.shape[0], 128), torch.float32)
    nbytes = mt.grouped_gemm_workspace_bytes(packed, a, layout="contiguous", out_dtype=torch.float32)
    workspace = torch.zeros(nbytes, dtype=torch.uint8) if nbytes else None
    torch.ops.moejit.grouped_gemm(
        c, a, packed.qweight, packed.scales, packed.zeros, packed.bias, offsets, None, None, None, None, None,
        workspace, mt.register_context(host_ctx), packed.format, packed.group_size, packed.scale_dtype,
        packed.experts, packed.n, packed.k, packed.act_and_mul, "contiguous")
    expected = ref.grouped_gemm_reference(a.double().numpy(), qw, np.repeat(np.arange(4), counts))
    assert torch.isfinite(c).all(), "output not fully written"
    ref.assert_close(c.numpy(), expected, rtol=2e-2, atol=2e-2, what="contiguous op")
    # The wrapper allocates c and the workspace itself and gives the same bits.
    assert torch.equal(mt.grouped_gemm(a, packed, layout="contiguous", expert_offsets=offsets,
                                       out_dtype=torch.float32), c)


# ---- FusedMoE ----------------------------------------------------------------------------------

def test_module_from_checkpoint_and_state_dict(host_ctx, rng):
    fmt, _, group, scale_dtype = SOURCES["gptq_v2"]
    w13 = ref.random_quant_weights(rng, fmt, E, 2 * I, H, group, scale_dtype, with_bias=True)
    w2 = ref.random_quant_weights(rng, fmt, E, H, I, group, scale_dtype, with_bias=True)
    c13, c2 = checkpoint(w13, "gptq_v2", "interleaved"), checkpoint(w2, "gptq_v2")
    layer = mt.FusedMoE.from_checkpoint(
        "gptq_v2", c13["qweight"], c13["scales"], c2["qweight"], c2["scales"], w13_zeros=c13["zeros"],
        w13_bias=c13["bias"], w2_zeros=c2["zeros"], w2_bias=c2["bias"], rows="interleaved",
        activation="swiglu_oai", context=host_ctx)
    hidden = bf16_hidden(rng, 6, scale=4.0)  # large enough to reach the clamps
    ids, weights = routing(rng, 6)
    out = layer(hidden, weights, ids, output=poisoned((6, H)))
    check_layer(out, expected_layer(hidden, w13, w2, ids, weights, "swiglu_oai"), "FusedMoE")

    saved = io.BytesIO()
    torch.save(layer.state_dict(), saved)
    saved.seek(0)
    state = torch.load(saved, weights_only=True)
    assert {"w13_qweight", "w13_zeros", "w13_bias", "w2_scales", "_extra_state"} <= set(state)
    assert "workspace" not in state  # scratch, not state
    rebuilt = mt.FusedMoE.from_state_dict(state, context=host_ctx)
    assert torch.equal(rebuilt(hidden, weights, ids), out)

    # load_state_dict copies into a module of the same shape, and refuses another layer's.
    other = make_layer(rng, host_ctx, "gptq_v2", rows="interleaved", bias=True)
    twin = mt.FusedMoE(other[2], other[3], activation="swiglu_oai")
    twin.load_state_dict(state)
    assert torch.equal(twin(hidden, weights, ids), out)
    mismatched = mt.FusedMoE(other[2], other[3], activation="silu")
    with pytest.raises(moejit.InvalidArgumentError, match="state_dict"):
        mismatched.load_state_dict(state)


def test_module_cast_to_bf16_keeps_its_f32_bias(host_ctx, rng):
    """model.to(torch.bfloat16) (or .half()) casts every floating buffer; the packed bias stays
    float32, as moejit reads it, and the layer computes what it did."""
    w13, w2, p13, p2 = make_layer(rng, host_ctx, "vllm_mxfp4", rows="interleaved", bias=True)
    layer = mt.FusedMoE(p13, p2, activation="swiglu_oai")
    hidden = bf16_hidden(rng, 4, scale=4.0)
    ids, weights = routing(rng, 4)
    before = layer(hidden, weights, ids)
    check_layer(before, expected_layer(hidden, w13, w2, ids, weights, "swiglu_oai"), "FusedMoE with bias")
    for cast in (lambda m: m.to(torch.bfloat16), lambda m: m.half(), lambda m: m.float()):
        cast(layer)
        assert layer.w13_bias.dtype == torch.float32 and layer.w2_bias.dtype == torch.float32
        assert torch.equal(layer(hidden, weights, ids), before)


def test_compile_with_dynamic_batch(rng, small_layer):
    """vLLM compiles with the batch dimension dynamic: the workspace has no size while tracing
    then, and the op allocates it once T is known."""
    w13, w2, p13, p2 = small_layer

    def layer(hidden, weights, ids):
        return mt.fused_moe(hidden, p13, p2, weights, ids)

    module = mt.FusedMoE(p13, p2)
    compiled = [torch.compile(layer, fullgraph=True, backend="aot_eager", dynamic=True),
                torch.compile(module, fullgraph=True, backend="aot_eager", dynamic=True)]
    for tokens in (3, 5, 9):
        hidden = bf16_hidden(rng, tokens)
        ids, weights = routing(rng, tokens)
        eager = mt.fused_moe(hidden, p13, p2, weights, ids)
        check_layer(eager, expected_layer(hidden, w13, w2, ids, weights), f"eager T={tokens}")
        for fn in compiled:
            assert torch.equal(fn(hidden, weights, ids), eager), f"compiled T={tokens}"


def test_compile_grouped_gemm_with_dynamic_rows(host_ctx, rng):
    w = ref.random_quant_weights(rng, "mxfp4", E, H, I, 32, "bf16")
    packed = moejit.pack_weights(host_ctx, **ref.to_vllm_mxfp4(w))

    def gemm(a, offsets):
        return mt.grouped_gemm(a, packed, layout="contiguous", expert_offsets=offsets, out_dtype=torch.float32)

    compiled = torch.compile(gemm, fullgraph=True, backend="aot_eager", dynamic=True)
    for rows in (4, 7, 12):
        a = torch.from_numpy(rng.standard_normal((rows, I))).to(torch.bfloat16)
        counts = np.zeros(E, np.int64)
        np.add.at(counts, rng.integers(0, E, rows), 1)
        offsets = torch.from_numpy(ref.contiguous_offsets(counts).astype(np.int32))
        eager = gemm(a, offsets)  # also shows moejit.torch the weights, which tracing needs
        assert torch.equal(compiled(a, offsets), eager), f"rows={rows}"


def test_module_reserved_workspace(host_ctx, rng):
    """A workspace reserved for up to 8 tokens serves smaller calls, as graph capture uses it."""
    w13, w2, p13, p2 = make_layer(rng, host_ctx, "vllm_mxfp4")
    layer = mt.FusedMoE(p13, p2)
    layer.reserve_workspace(max_tokens=8, topk=TOPK)
    assert layer.workspace.numel() == mt.fused_moe_workspace_bytes(p13, p2, 8, TOPK, max_tokens=8)
    for tokens in (3, 8):
        hidden = bf16_hidden(rng, tokens)
        ids, weights = routing(rng, tokens)
        check_layer(layer(hidden, weights, ids, output=poisoned((tokens, H))),
                    expected_layer(hidden, w13, w2, ids, weights), f"reserved workspace, {tokens} tokens")


def test_module_mxfp4_packed_for_f16_and_mixed_formats(host_ctx, rng):
    """MXFP4 weights packed for f16: the module reserves an f16 workspace by default, survives a
    state_dict round trip, and an INT4 gate/up with an MXFP4 down (each packed for f16) runs."""
    fmt, _, group, scale_dtype = SOURCES["vllm_mxfp4"]
    w13 = ref.random_quant_weights(rng, fmt, E, 2 * I, H, group, scale_dtype)
    w2 = ref.random_quant_weights(rng, fmt, E, H, I, group, scale_dtype)
    p13 = moejit.pack_weights(host_ctx, format=fmt, rows="concatenated", act_dtype="f16",
                              **checkpoint(w13, "vllm_mxfp4", "concatenated"))
    p2 = moejit.pack_weights(host_ctx, format=fmt, act_dtype="f16", **checkpoint(w2, "vllm_mxfp4"))
    layer = mt.FusedMoE(p13, p2)
    assert "act_dtype='f16'" in layer.extra_repr()
    layer.reserve_workspace(max_tokens=8, topk=TOPK)
    hidden = bf16_hidden(rng, 5).to(torch.float16)
    ids, weights = routing(rng, 5)
    out = layer(hidden, weights, ids, output=poisoned((5, H), torch.float16))
    check_layer(out, expected_layer(hidden, w13, w2, ids, weights), "MXFP4 packed for f16")
    saved = io.BytesIO()
    torch.save(layer.state_dict(), saved)
    saved.seek(0)
    rebuilt = mt.FusedMoE.from_state_dict(torch.load(saved, weights_only=True), context=host_ctx)
    assert torch.equal(rebuilt(hidden, weights, ids), out)

    i13 = ref.random_quant_weights(rng, "int4_sym", E, 2 * I, H, 32, "f16")
    q13 = moejit.pack_weights(host_ctx, format="int4_sym", rows="concatenated", act_dtype="f16",
                              **checkpoint(i13, "plain", "concatenated"))
    mixed = mt.FusedMoE(q13, p2)
    check_layer(mixed(hidden, weights, ids), expected_layer(hidden, i13, w2, ids, weights), "INT4 w13, MXFP4 w2")


# ---- torch.compile and opcheck -----------------------------------------------------------------

@pytest.fixture(scope="module")
def small_layer(host_ctx):
    rng = np.random.default_rng()
    return make_layer(rng, host_ctx, "vllm_mxfp4")


def test_compile_the_op_fullgraph(host_ctx, rng, small_layer):
    w13, w2, p13, p2 = small_layer
    args = op_args(host_ctx, p13, p2)
    workspace = torch.empty(mt.fused_moe_workspace_bytes(p13, p2, 4, TOPK), dtype=torch.uint8)

    def layer(hidden, weights, ids):
        output = torch.empty(hidden.shape, dtype=hidden.dtype)
        torch.ops.moejit.fused_moe(output, hidden, topk_weights=weights, topk_ids=ids, expert_map=None,
                                   workspace=workspace, **args)
        return output

    hidden = bf16_hidden(rng, 4)
    ids, weights = routing(rng, 4)
    eager = poisoned((4, H))
    torch.ops.moejit.fused_moe(eager, hidden, topk_weights=weights, topk_ids=ids, expert_map=None,
                               workspace=workspace, **args)
    check_layer(eager, expected_layer(hidden, w13, w2, ids, weights), "eager op")
    compiled = torch.compile(layer, fullgraph=True, backend="aot_eager")
    assert torch.equal(compiled(hidden, weights, ids), eager)


def test_compile_the_wrapper_and_module_fullgraph(rng, small_layer):
    """Both allocate output and workspace inside the compiled function."""
    w13, w2, p13, p2 = small_layer
    hidden = bf16_hidden(rng, 3)
    ids, weights = routing(rng, 3)
    eager = mt.fused_moe(hidden, p13, p2, weights, ids, output=poisoned((3, H)))
    check_layer(eager, expected_layer(hidden, w13, w2, ids, weights), "eager wrapper")

    def layer(hidden, weights, ids):
        return mt.fused_moe(hidden, p13, p2, weights, ids)

    assert torch.equal(torch.compile(layer, fullgraph=True, backend="aot_eager")(hidden, weights, ids), eager)
    module = mt.FusedMoE(p13, p2)
    assert torch.equal(torch.compile(module, fullgraph=True, backend="aot_eager")(hidden, weights, ids), eager)


def test_opcheck_fused_moe(host_ctx, rng, small_layer):
    _, _, p13, p2 = small_layer
    hidden = bf16_hidden(rng, 3)
    ids, weights = routing(rng, 3)
    workspace = garbage_workspace(rng, mt.fused_moe_workspace_bytes(p13, p2, 3, TOPK))
    kwargs = {"topk_weights": weights, "topk_ids": ids, "expert_map": None, "workspace": workspace,
              **op_args(host_ctx, p13, p2)}
    torch.library.opcheck(torch.ops.moejit.fused_moe.default, (poisoned((3, H)), hidden), kwargs)


def test_opcheck_grouped_gemm(host_ctx, rng, small_layer):
    _, _, p13, _ = small_layer
    a = bf16_hidden(rng, 4)
    offsets = torch.tensor([0, 1, 1, 3, 3, 3, 3, 4, 4], dtype=torch.int32)
    kwargs = {"qweight": p13.qweight, "scales": p13.scales, "zeros": None, "bias": None, "expert_offsets": offsets,
              "expert_counts": None, "sorted_token_ids": None, "expert_ids": None, "num_tokens_post_pad": None,
              "topk_weights": None, "workspace": None, "context": mt.register_context(host_ctx),
              "format": p13.format, "group_size": p13.group_size, "scale_dtype": p13.scale_dtype,
              "experts": p13.experts, "n": p13.n, "k": p13.k, "act_and_mul": True, "layout": "contiguous",
              "epilogue": "silu"}
    torch.library.opcheck(torch.ops.moejit.grouped_gemm.default, (poisoned((4, I)), a), kwargs)


# ---- Errors ------------------------------------------------------------------------------------

@pytest.mark.parametrize("case, pattern", [
    ("hidden_f32", r"argument 'hidden' has dtype f32: expected bf16 or f16"),
    ("hidden_not_contiguous", r"argument 'hidden' is not contiguous"),
    ("ids_int64", r"argument 'topk_ids' has dtype i64: expected i32"),
    ("weights_shape", r"argument 'topk_weights' has shape \[3, 3\]: expected \[3, 2\]"),
    ("output_shape", r"argument 'output' has shape \[3, 64\]: expected \[3, 128\]"),
    ("unknown_context", r"argument 'context' = 999: expected 0 .* or an id from moejit.torch.register_context"),
    ("activation", r"argument 'activation' = 'gelu'"),
])
def test_the_op_rejects(host_ctx, rng, small_layer, case, pattern):
    _, _, p13, p2 = small_layer
    hidden = bf16_hidden(rng, 3)
    ids, weights = routing(rng, 3)
    output = poisoned((3, H))
    args = op_args(host_ctx, p13, p2)
    if case == "hidden_f32":
        hidden = hidden.float()
    elif case == "hidden_not_contiguous":
        hidden = hidden.t().contiguous().t()
    elif case == "ids_int64":
        ids = ids.long()
    elif case == "weights_shape":
        weights = torch.rand(3, 3)
    elif case == "output_shape":
        output = poisoned((3, 64))
    elif case == "unknown_context":
        args["context"] = 999
    elif case == "activation":
        args["activation"] = "gelu"
    workspace = torch.empty(mt.fused_moe_workspace_bytes(p13, p2, 3, TOPK), dtype=torch.uint8)
    with pytest.raises(moejit.InvalidArgumentError, match=pattern):
        torch.ops.moejit.fused_moe(output, hidden, topk_weights=weights, topk_ids=ids, expert_map=None,
                                   workspace=workspace, **args)


def test_the_wrapper_rejects(host_ctx, rng, small_layer):
    w13, w2, p13, p2 = small_layer
    hidden = bf16_hidden(rng, 3)
    ids, weights = routing(rng, 3)
    with pytest.raises(moejit.InvalidArgumentError, match=r"argument 'w13' is a Tensor: expected moejit.PackedWeights"):
        mt.fused_moe(hidden, p13.qweight, p2, weights, ids)
    with pytest.raises(moejit.InvalidArgumentError, match=r"argument 'w13' was packed with rows='plain'"):
        mt.fused_moe(hidden, p2, p2, weights, ids)
    with pytest.raises(moejit.InvalidArgumentError, match=r"argument 'hidden' has dtype torch.float32"):
        mt.fused_moe(hidden.float(), p13, p2, weights, ids)
    with pytest.raises(moejit.InvalidArgumentError, match=r"argument 'workspace_bytes' = \d+: expected at least"):
        mt.fused_moe(hidden, p13, p2, weights, ids, workspace=torch.empty(1024, dtype=torch.uint8))
    with pytest.raises(moejit.InvalidArgumentError, match=r"argument 'activation' = 'relu'"):
        mt.FusedMoE(p13, p2, activation="relu")


def test_readme_schemas_are_the_registered_ones():
    """python/README.md prints the ops' schemas "as registered": they must not drift apart."""
    from pathlib import Path
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    block = readme.split("The ops (`torch.ops.moejit.*`, schemas as registered):", 1)[1].split("```")[1]
    documented = [" ".join(schema.split()) for schema in block.strip().split("\n\n")]
    registered = [str(torch.ops.moejit.fused_moe.default._schema), str(torch.ops.moejit.grouped_gemm.default._schema)]
    # The README wraps lines; a break after "(" or before ")" leaves no space there.
    assert [s.replace("( ", "(") for s in documented] == registered

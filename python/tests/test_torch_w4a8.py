"""W4A8 through moejit.torch on CPU tensors (the host backend): the ops, their wrappers and
FusedMoE over weights packed for e4m3, against moejit's NumPy-level calls on the same data
(identical bytes) and the fp64 reference; float8_e4m3fn hidden states quantized here with the
recipe moejit.h documents; state_dict round trips (and states saved before W4A8 existed);
torch.compile and opcheck; the mix-ups."""

from __future__ import annotations

import io

import ml_dtypes
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="moejit.torch needs PyTorch (pip install moejit[torch])")

import moejit  # noqa: E402
import moejit.torch as mt  # noqa: E402
import reference as ref  # noqa: E402
from test_torch import checkpoint, poisoned  # noqa: E402

E, H, I, TOPK, T = 4, 256, 128, 2, 5  # H and I multiples of 128, as block128 scales need


def bf16_hidden(rng, tokens, scale=1.0):
    return torch.from_numpy(rng.standard_normal((tokens, H)) * scale).to(torch.bfloat16)


def routing(rng, tokens):
    ids, weights = ref.random_routing(rng, tokens, TOPK, E)
    return torch.from_numpy(ids), torch.from_numpy(weights)


def packed_layer(rng, ctx, act_dtype="e4m3", rows="concatenated"):
    w13 = ref.random_quant_weights(rng, "mxfp4", E, 2 * I, H, 32, "bf16")
    w2 = ref.random_quant_weights(rng, "mxfp4", E, H, I, 32, "bf16")
    p13 = moejit.pack_weights(ctx, format="mxfp4", rows=rows, act_dtype=act_dtype,
                              **checkpoint(w13, "vllm_mxfp4", rows))
    p2 = moejit.pack_weights(ctx, format="mxfp4", act_dtype=act_dtype, **checkpoint(w2, "vllm_mxfp4"))
    return w13, w2, p13, p2


def quantize_e4m3(x: torch.Tensor, block: bool):
    """The documented recipe in torch: amax / 448 per row (or per 128 columns), 1 for a zero
    group, then x / scale to float8_e4m3fn (round to nearest even; the quotient is at most 448
    plus an ulp, which rounds to 448)."""
    x = x.float()
    groups = x.reshape(x.shape[0], -1, 128) if block else x.reshape(x.shape[0], 1, -1)
    amax = groups.abs().amax(dim=2)
    scales = torch.where(amax > 0, amax / 448.0, torch.ones_like(amax))
    q = (groups / scales[:, :, None]).to(torch.float8_e4m3fn).reshape(x.shape)
    return q, (scales if block else scales[:, 0]).contiguous()


def bits(t: torch.Tensor) -> np.ndarray:
    return t.view(torch.uint8).numpy() if t.dtype == torch.float8_e4m3fn else t.view(torch.int16).numpy()


@pytest.mark.parametrize("act_scale", ["token", "block128"])
def test_fused_w4a8_wrapper_matches_the_numpy_call_and_the_caller_quantization(host_ctx, rng, act_scale):
    w13, w2, p13, p2 = packed_layer(rng, host_ctx)
    hidden = bf16_hidden(rng, T)
    ids, weights = routing(rng, T)
    own = mt.fused_moe(hidden, p13, p2, weights, ids, act_scale=act_scale)
    assert own.dtype == torch.bfloat16 and torch.isfinite(own).all()
    numpy_hidden = hidden.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    direct = moejit.fused_moe(host_ctx, numpy_hidden, p13, p2, weights.numpy(), ids.numpy(), act_scale=act_scale)
    assert np.array_equal(bits(own), direct.view(np.int16))
    # float8_e4m3fn hidden states the caller quantized with the same recipe: the same bytes out.
    q, scales = quantize_e4m3(hidden, act_scale == "block128")
    given = mt.fused_moe(q, p13, p2, weights, ids, act_scale=act_scale, hidden_scales=scales,
                         output=poisoned((T, H)))
    assert torch.equal(given, own)
    expected = ref.fused_moe_reference(hidden.double().numpy(), w13, w2, ids.numpy(), weights.numpy(), "silu")
    error = np.linalg.norm(own.double().numpy() - expected) / np.linalg.norm(expected)
    assert error < 0.1, f"W4A8 end-to-end relative error {error:.3f}"


def test_fused_w4a8_column_major_scales_as_deepep_gives_them(host_ctx, rng):
    """DeepEP's dispatch returns per-128 scales as a [T, H/128] view of column-major storage
    (stride (1, T')): the op reads them in place and gives what contiguous scales give."""
    _, _, p13, p2 = packed_layer(rng, host_ctx)
    ids, weights = routing(rng, T)
    q, scales = quantize_e4m3(bf16_hidden(rng, T), True)
    storage = torch.full((H // 128, T + 4), float("nan"))
    storage[:, :T] = scales.t()
    view = storage[:, :T].t()
    assert view.stride() == (1, T + 4)
    rows = mt.fused_moe(q, p13, p2, weights, ids, act_scale="block128", hidden_scales=scales)
    columns = mt.fused_moe(q, p13, p2, weights, ids, act_scale="block128", hidden_scales=view,
                           output=poisoned((T, H)))
    assert torch.equal(rows, columns)


def test_fused_w4a8_op_with_its_own_workspace_size(host_ctx, rng):
    _, _, p13, p2 = packed_layer(rng, host_ctx)
    hidden = bf16_hidden(rng, T)
    ids, weights = routing(rng, T)
    q, scales = quantize_e4m3(hidden, True)
    nbytes = mt.fused_moe_workspace_bytes(p13, p2, T, TOPK, dtype=torch.float8_e4m3fn, act_scale="block128")
    workspace = torch.from_numpy(rng.integers(0, 256, nbytes, dtype=np.uint8))  # garbage
    output = poisoned((T, H), torch.float32)
    torch.ops.moejit.fused_moe(
        output, q, p13.qweight, p13.scales, None, None, p2.qweight, p2.scales, None, None, weights, ids, None,
        workspace, mt.register_context(host_ctx), "mxfp4", 32, p13.scale_dtype, "mxfp4", 32, p2.scale_dtype, E, H, I,
        act_dtype="e4m3", act_scale="block128", hidden_scales=scales)
    expected = mt.fused_moe(q, p13, p2, weights, ids, act_scale="block128", hidden_scales=scales,
                            out_dtype=torch.float32)
    assert torch.equal(output, expected)


def test_grouped_gemm_op_on_e4m3_rows(host_ctx, rng):
    w = ref.random_quant_weights(rng, "mxfp4", 4, 64, H, 32, "bf16")
    packed = moejit.pack_weights(host_ctx, format="mxfp4", act_dtype="e4m3", **checkpoint(w, "vllm_mxfp4"))
    counts = np.array([2, 0, 3, 1])
    offsets = torch.from_numpy(ref.contiguous_offsets(counts))
    q, scales = quantize_e4m3(torch.from_numpy(rng.standard_normal((int(counts.sum()), H)).astype(np.float32)), False)
    c = mt.grouped_gemm(q, packed, layout="contiguous", expert_offsets=offsets, act_scale="token", a_scales=scales,
                        out_dtype=torch.float32)
    direct = moejit.grouped_gemm(host_ctx, q.view(torch.uint8).numpy().view(ml_dtypes.float8_e4m3fn), packed,
                                 layout="contiguous", expert_offsets=offsets.numpy(), out_dtype="f32",
                                 act_scale="token", a_scales=scales.numpy())
    assert np.array_equal(c.numpy(), direct)
    a = q.double().numpy() * scales.double().numpy()[:, None]
    dense = ref.dequantize(w)
    expected = np.concatenate([a[r:r + 1] @ dense[e].T for r, e in enumerate(np.repeat(np.arange(4), counts))])
    assert np.linalg.norm(c.numpy() - expected) / np.linalg.norm(expected) < 1e-5
    assert mt.grouped_gemm(q, packed, layout="contiguous", expert_offsets=offsets, a_scales=scales).dtype == \
        torch.bfloat16  # e4m3 rows default to a bf16 output


def test_w4a8_module_state_dict_round_trip(host_ctx, rng):
    w13 = ref.random_quant_weights(rng, "mxfp4", E, 2 * I, H, 32, "bf16")
    w2 = ref.random_quant_weights(rng, "mxfp4", E, H, I, 32, "bf16")
    c13, c2 = checkpoint(w13, "vllm_mxfp4", "interleaved"), checkpoint(w2, "vllm_mxfp4")
    layer = mt.FusedMoE.from_checkpoint("vllm_mxfp4", c13["qweight"], c13["scales"], c2["qweight"], c2["scales"],
                                        rows="interleaved", activation="swiglu_oai", context=host_ctx,
                                        act_dtype="e4m3", act_scale="block128")
    assert "act_scale='block128'" in repr(layer)
    hidden = bf16_hidden(rng, T, scale=4.0)
    ids, weights = routing(rng, T)
    out = layer(hidden, weights, ids)
    q, scales = quantize_e4m3(hidden, True)
    assert torch.equal(layer(q, weights, ids, hidden_scales=scales), out)

    saved = io.BytesIO()
    torch.save(layer.state_dict(), saved)
    saved.seek(0)
    state = torch.load(saved, weights_only=True)
    assert state["_extra_state"]["w13"]["act_dtype"] == "e4m3" and state["_extra_state"]["act_scale"] == "block128"
    rebuilt = mt.FusedMoE.from_state_dict(state, context=host_ctx)
    assert torch.equal(rebuilt(hidden, weights, ids), out)
    # The same layer packed for 16-bit activations is another layer.
    other = packed_layer(rng, host_ctx, act_dtype="bf16", rows="interleaved")
    with pytest.raises(moejit.InvalidArgumentError, match="state_dict"):
        mt.FusedMoE(other[2], other[3], activation="swiglu_oai").load_state_dict(state)


def test_state_saved_before_w4a8_still_loads(host_ctx, rng):
    """An extra state without act_dtype / act_scale (saved by an earlier moejit) means 16-bit
    activations."""
    _, _, p13, p2 = packed_layer(rng, host_ctx, act_dtype="bf16")
    layer = mt.FusedMoE(p13, p2)
    state = layer.state_dict()
    old = dict(state["_extra_state"])
    old.pop("act_scale")
    old["w13"] = {k: v for k, v in old["w13"].items() if k != "act_dtype"}
    old["w2"] = {k: v for k, v in old["w2"].items() if k != "act_dtype"}
    state["_extra_state"] = old
    hidden = bf16_hidden(rng, 3)
    ids, weights = routing(rng, 3)
    rebuilt = mt.FusedMoE.from_state_dict(state, context=host_ctx)
    assert torch.equal(rebuilt(hidden, weights, ids), layer(hidden, weights, ids))
    layer.load_state_dict(state)


def test_compile_and_opcheck_w4a8(host_ctx, rng):
    _, _, p13, p2 = packed_layer(rng, host_ctx)
    hidden = bf16_hidden(rng, 3)
    ids, weights = routing(rng, 3)
    q, scales = quantize_e4m3(hidden, False)
    eager = mt.fused_moe(q, p13, p2, weights, ids, hidden_scales=scales)

    def layer(q, scales, weights, ids):
        return mt.fused_moe(q, p13, p2, weights, ids, hidden_scales=scales)

    compiled = torch.compile(layer, fullgraph=True, backend="aot_eager")
    assert torch.equal(compiled(q, scales, weights, ids), eager)
    # opcheck on bf16 hidden states the layer quantizes: its schema test compares float8 inputs with
    # an op torch has no CPU kernel for ("mul_cpu_reduced_float" for Float8_e4m3fn).
    workspace = torch.empty(mt.fused_moe_workspace_bytes(p13, p2, 3, TOPK, act_scale="block128"), dtype=torch.uint8)
    kwargs = dict(topk_weights=weights, topk_ids=ids, expert_map=None, workspace=workspace,
                  w13_qweight=p13.qweight, w13_scales=p13.scales, w13_zeros=None, w13_bias=None,
                  w2_qweight=p2.qweight, w2_scales=p2.scales, w2_zeros=None, w2_bias=None,
                  context=mt.register_context(host_ctx), w13_format="mxfp4", w13_group_size=32,
                  w13_scale_dtype=p13.scale_dtype, w2_format="mxfp4", w2_group_size=32,
                  w2_scale_dtype=p2.scale_dtype, experts=E, hidden_size=H, intermediate_size=I, act_dtype="e4m3",
                  act_scale="block128")
    torch.library.opcheck(torch.ops.moejit.fused_moe.default, (poisoned((3, H)), hidden), kwargs)


def test_w4a8_mix_ups_name_the_argument(host_ctx, rng):
    _, _, p13, p2 = packed_layer(rng, host_ctx)
    _, _, b13, b2 = packed_layer(rng, host_ctx, act_dtype="bf16")
    hidden = bf16_hidden(rng, 3)
    ids, weights = routing(rng, 3)
    q, scales = quantize_e4m3(hidden, False)
    with pytest.raises(moejit.InvalidArgumentError, match=r"argument 'w2' was packed for bf16 activations"):
        mt.fused_moe(hidden, p13, b2, weights, ids)
    with pytest.raises(moejit.InvalidArgumentError, match="hidden_scales"):
        mt.fused_moe(q, p13, p2, weights, ids)
    with pytest.raises(moejit.InvalidArgumentError, match="packed for 16-bit activations"):
        mt.fused_moe(q, b13, b2, weights, ids, hidden_scales=scales)
    with pytest.raises(moejit.InvalidArgumentError, match=r"argument 'act_scale' = 'token': expected None"):
        mt.FusedMoE(b13, b2, act_scale="token")
    with pytest.raises(moejit.InvalidArgumentError, match=r"argument 'act_scale' = 'tensor'"):
        mt.FusedMoE(p13, p2, act_scale="tensor")

"""W4A8 from Python on the host backend: weights packed for e4m3 activations, the fused layer on
bf16 hidden states it quantizes itself and on float8_e4m3fn ones quantized here with the recipe
moejit.h documents (identical output), the grouped GEMM on e4m3 rows, and the mix-ups."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import moejit
import reference as ref
from packed_layers import mxfp4_layer

E, H, I, TOPK, T = 4, 256, 128, 2, 5


def quantize_e4m3(x: np.ndarray, block: bool):
    """amax / 448 per row (or per 128 columns), then e4m3 of x / scale, round to nearest even."""
    x = np.asarray(x, dtype=np.float32)
    groups = x.reshape(x.shape[0], -1, 128) if block else x.reshape(x.shape[0], 1, -1)
    amax = np.nanmax(np.abs(groups), axis=2)
    scales = np.where(amax > 0, amax / np.float32(448), np.float32(1)).astype(np.float32)
    q = (groups / scales[:, :, None]).astype(ml_dtypes.float8_e4m3fn).reshape(x.shape)
    return q, (scales if block else scales[:, 0])


def layer(rng, ctx, act_dtype):
    return mxfp4_layer(rng, ctx, act_dtype, E, H, I)


@pytest.mark.parametrize("act_scale", ["token", "block128"])
def test_fused_w4a8_own_and_caller_quantization_agree(host_ctx, rng, act_scale):
    w13, w2, p13, p2 = layer(rng, host_ctx, "e4m3")
    assert p13.act_dtype == "e4m3" and p2.act_dtype == "e4m3"
    hidden = rng.standard_normal((T, H)).astype(ml_dtypes.bfloat16)
    ids, weights = ref.random_routing(rng, T, TOPK, E)
    own = moejit.fused_moe(host_ctx, hidden, p13, p2, weights, ids, act_scale=act_scale)
    assert own.dtype == ml_dtypes.bfloat16
    q, scales = quantize_e4m3(hidden, act_scale == "block128")
    given = moejit.fused_moe(host_ctx, q, p13, p2, weights, ids, act_scale=act_scale, hidden_scales=scales)
    assert np.array_equal(own.view(np.uint16), given.view(np.uint16))
    expected = ref.fused_moe_reference(hidden.astype(np.float64), w13, w2, ids, weights, "silu")
    error = np.linalg.norm(own.astype(np.float64) - expected) / np.linalg.norm(expected)
    assert error < 0.1, f"W4A8 end-to-end relative error {error:.3f}"


def test_grouped_gemm_e4m3_rows(host_ctx, rng):
    w = ref.random_quant_weights(rng, "mxfp4", E, 64, H, 32, "bf16")
    packed = moejit.pack_weights(host_ctx, format="mxfp4", act_dtype="e4m3", **ref.to_vllm_mxfp4(w))
    counts = np.array([3, 0, 4, 2], dtype=np.int32)
    rows = int(counts.sum())
    x = rng.standard_normal((rows, H)).astype(np.float32)
    q, scales = quantize_e4m3(x, True)
    c = moejit.grouped_gemm(host_ctx, q, packed, layout="contiguous", expert_offsets=ref.contiguous_offsets(counts),
                            out_dtype="f32", act_scale="block128", a_scales=scales)
    # The reference takes the quantized rows' exact values (fp64: e4m3 x f32 scale need not fit f32).
    a = q.astype(np.float64) * np.repeat(scales, 128, axis=1)
    weights = ref.dequantize(w)
    expected = np.concatenate([a[row:row + 1] @ weights[e].T for row, e in enumerate(np.repeat(np.arange(E), counts))])
    error = np.linalg.norm(c - expected) / np.linalg.norm(expected)
    assert error < 1e-5, f"grouped GEMM on e4m3 rows: relative error {error:.2e}"


def test_w4a8_mix_ups_name_the_argument(host_ctx, rng):
    _, _, p13, p2 = layer(rng, host_ctx, "e4m3")
    _, _, b13, b2 = layer(rng, host_ctx, "bf16")
    hidden = rng.standard_normal((T, H)).astype(ml_dtypes.bfloat16)
    ids, weights = ref.random_routing(rng, T, TOPK, E)
    q, scales = quantize_e4m3(hidden, False)
    with pytest.raises(moejit.InvalidArgumentError, match="hidden_scales"):
        moejit.fused_moe(host_ctx, q, p13, p2, weights, ids)
    with pytest.raises(moejit.InvalidArgumentError, match="packed for 16-bit activations"):
        moejit.fused_moe(host_ctx, q, b13, b2, weights, ids, hidden_scales=scales)
    with pytest.raises(moejit.InvalidArgumentError, match="act_scale"):
        moejit.fused_moe(host_ctx, hidden, p13, p2, weights, ids, act_scale="tensor")
    with pytest.raises(moejit.InvalidArgumentError, match="'hidden_scales' has shape"):
        moejit.fused_moe(host_ctx, q, p13, p2, weights, ids, act_scale="block128", hidden_scales=scales)
    with pytest.raises(moejit.InvalidArgumentError, match="act_dtype"):
        moejit.pack_weights(host_ctx, format="mxfp4", act_dtype="e5m2",
                            **ref.to_vllm_mxfp4(ref.random_quant_weights(rng, "mxfp4", E, 64, H, 32, "bf16")))


def column_major(x: np.ndarray, pad: int) -> np.ndarray:
    """x's values in a column-major view whose columns are ``pad`` elements longer (NaN there), as
    DeepEP's dispatch gives per-128 scales: strides (1, rows + pad)."""
    rows, cols = x.shape
    storage = np.full((cols, rows + pad), np.nan, dtype=x.dtype)
    storage[:, :rows] = x.T
    view = storage[:, :rows].T
    assert view.strides == (x.itemsize, (rows + pad) * x.itemsize)
    return view


def test_fused_w4a8_column_major_hidden_scales_read_in_place(host_ctx, rng):
    _, _, p13, p2 = layer(rng, host_ctx, "e4m3")
    hidden = rng.standard_normal((T, H)).astype(ml_dtypes.bfloat16)
    ids, weights = ref.random_routing(rng, T, TOPK, E)
    q, scales = quantize_e4m3(hidden, True)
    rows = moejit.fused_moe(host_ctx, q, p13, p2, weights, ids, act_scale="block128", hidden_scales=scales)
    columns = moejit.fused_moe(host_ctx, q, p13, p2, weights, ids, act_scale="block128",
                               hidden_scales=column_major(scales, 3))
    assert np.array_equal(rows.view(np.uint16), columns.view(np.uint16))


def test_grouped_gemm_masked_deepep_scale_slabs(host_ctx, rng):
    """DeepEP's low-latency dispatch: per expert m rows of e4m3 and a column-major [K/128, m] slab
    of scales, given as an [E, m, K/128] view: the same output as row-major scales."""
    w = ref.random_quant_weights(rng, "mxfp4", E, 64, H, 32, "bf16")
    packed = moejit.pack_weights(host_ctx, format="mxfp4", act_dtype="e4m3", **ref.to_vllm_mxfp4(w))
    m = 6
    counts = np.array([m, 0, 4, 1], dtype=np.int32)
    x = rng.standard_normal((E * m, H)).astype(np.float32)
    q, scales = quantize_e4m3(x, True)
    a = q.reshape(E, m, H)
    flat = moejit.grouped_gemm(host_ctx, a, packed, layout="masked", expert_counts=counts, out_dtype="f32",
                               act_scale="block128", a_scales=scales)
    slabs = np.full((E, H // 128, m + 2), np.nan, dtype=np.float32)
    slabs[:, :, :m] = scales.reshape(E, m, H // 128).transpose(0, 2, 1)
    view = slabs[:, :, :m].transpose(0, 2, 1)  # [E, m, K/128], strides (K/128 (m + 2), 1, m + 2)
    in_place = moejit.grouped_gemm(host_ctx, a, packed, layout="masked", expert_counts=counts, out_dtype="f32",
                                   act_scale="block128", a_scales=view)
    for e, count in enumerate(counts):
        assert np.array_equal(flat[e, :count], in_place[e, :count]), f"expert {e}"
        assert np.isfinite(in_place[e, :count]).all()


@pytest.mark.parametrize("act_scale", ["token", "block128"])
def test_broadcast_scales_are_refused(host_ctx, rng, act_scale):
    """A per-tensor scale broadcast over the rows (numpy.broadcast_to, Tensor.expand) has one
    value in memory where C reads one per row: refused, not read past its end."""
    _, _, p13, p2 = layer(rng, host_ctx, "e4m3")
    hidden = rng.standard_normal((T, H)).astype(np.float32)
    ids, weights = ref.random_routing(rng, T, TOPK, E)
    q, scales = quantize_e4m3(hidden, act_scale == "block128")
    one = scales[:1]  # the first row's scales, repeated over every row
    broadcast = np.broadcast_to(one, scales.shape)
    assert broadcast.strides[0] == 0
    with pytest.raises(moejit.InvalidArgumentError, match=r"'hidden_scales' is broadcast \(stride 0\)"):
        moejit.fused_moe(host_ctx, q, p13, p2, weights, ids, act_scale=act_scale, hidden_scales=broadcast)
    # The same values laid out one per row are taken.
    moejit.fused_moe(host_ctx, q, p13, p2, weights, ids, act_scale=act_scale,
                     hidden_scales=np.ascontiguousarray(broadcast))

"""Checkpoints as llm-compressor writes them: compressed-tensors' own compressor quantizes and
packs each expert (pack-quantized INT4, symmetric and asymmetric, grouped and per-channel), and
moejit's "compressed_tensors" source must give what compressed-tensors' own unpacking means,
through the host backend's GEMM against an fp64 reference. The vLLM / SGLang view of the same
tensors (transposed on load) must pack to the same bytes as source "gptq_v2"."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import torch
from compressed_tensors.compressors import PackedQuantizationCompressor
from compressed_tensors.compressors.pack_quantized.helpers import unpack_from_int32
from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme
from compressed_tensors.quantization.utils import calculate_qparams

import moejit
import reference as ref

E, N, K = 3, 96, 256


def export_experts(rng, symmetric: bool, group_size: int | None, scale_dtype: torch.dtype):
    """One layer's experts as the checkpoint holds them, stacked over E, plus the fp64 weights
    that compressed-tensors' own unpacking gives: (q - zero_point) * scale."""
    strategy = "group" if group_size else "channel"
    args = QuantizationArgs(num_bits=4, type="int", symmetric=symmetric, strategy=strategy, group_size=group_size)
    scheme = QuantizationScheme(targets=["Linear"], weights=args)
    g = group_size or K
    tensors = {"weight_packed": [], "weight_scale": [], "weight_zero_point": []}
    dequantized = np.empty((E, N, K))
    for e in range(E):
        # Rows of different magnitudes and an offset, so asymmetric zero points spread.
        w = rng.standard_normal((N, K)) * rng.uniform(0.01, 0.1, (N, 1)) + rng.uniform(-0.05, 0.05, (N, 1))
        weight = torch.from_numpy(w).to(scale_dtype)
        groups = weight.float().reshape(N, K // g, g)
        scale, zero_point = calculate_qparams(groups.amin(-1), groups.amax(-1), args)
        state = {"weight": weight, "weight_scale": scale.to(scale_dtype), "weight_zero_point": zero_point.to(torch.int8)}
        out = PackedQuantizationCompressor.compress(state, scheme)
        assert ("weight_zero_point" in out) == (not symmetric)
        q = unpack_from_int32(out["weight_packed"], 4, torch.Size((N, K))).numpy().astype(np.float64)
        zp = np.zeros((N, K // g))
        if not symmetric:
            zp = unpack_from_int32(out["weight_zero_point"], 4, torch.Size((N, K // g)), packed_dim=0).numpy()
        s = out["weight_scale"].float().numpy().astype(np.float64)
        dequantized[e] = (q - np.repeat(zp, g, axis=1)) * np.repeat(s, g, axis=1)
        for name in tensors:
            if name in out:
                tensors[name].append(out[name])
    # NumPy has no bfloat16: the scales cross as their bits.
    stacked = {name: torch.stack(ts).view(torch.int16 if ts[0].dtype.itemsize == 2 else ts[0].dtype).numpy()
               for name, ts in tensors.items() if ts}
    scales = stacked["weight_scale"].view(ml_dtypes.bfloat16 if scale_dtype == torch.bfloat16 else np.float16)
    return stacked["weight_packed"], scales, stacked.get("weight_zero_point"), dequantized


@pytest.mark.parametrize("symmetric,group_size,scale_dtype", [
    (True, 32, torch.bfloat16),    # Kimi-K2's experts: symmetric, group 32, bf16 scales
    (False, 128, torch.bfloat16),
    (False, 64, torch.float16),
    (True, None, torch.float16),   # strategy "channel": one scale per row
    (False, None, torch.bfloat16),
])
def test_exported_checkpoint_through_the_gemm(host_ctx, rng, symmetric, group_size, scale_dtype):
    weight_packed, weight_scale, weight_zero_point, dequantized = export_experts(rng, symmetric, group_size,
                                                                                 scale_dtype)
    assert weight_packed.shape == (E, N, K // 8) and weight_packed.dtype == np.int32
    if not symmetric:
        assert weight_zero_point.shape == (E, N // 8, K // (group_size or K))
    packed = moejit.pack_weights(host_ctx, "compressed_tensors", weight_packed, weight_scale, weight_zero_point)
    assert packed.format == ("int4_sym" if symmetric else "int4_asym")
    assert packed.group_size == (group_size or K)

    counts = np.array([4, 0, 3])
    a = rng.standard_normal((int(counts.sum()), K)).astype(ml_dtypes.bfloat16)
    out = np.full((a.shape[0], N), np.nan, dtype=np.float32)
    moejit.grouped_gemm(host_ctx, a, packed, layout="contiguous", expert_offsets=ref.contiguous_offsets(counts), c=out)
    expert_of_row = np.repeat(np.arange(E), counts)
    expected = np.einsum("mk,mnk->mn", a.astype(np.float64), dequantized[expert_of_row])
    assert np.isfinite(out).all(), "output not fully written"
    ref.assert_close(out, expected, rtol=2e-2, atol=2e-2, what=f"compressed-tensors sym={symmetric} g={group_size}")


@pytest.mark.parametrize("symmetric", [True, False])
def test_vllm_transposed_view_is_gptq_v2(host_ctx, rng, symmetric):
    """vLLM's and SGLang's compressed-tensors MoE loaders store each tensor transposed (their
    `is_transposed` parameters): [E, K/8, N], [E, K/G, N] and [E, K/G, N/8], which is GPTQ v2."""
    weight_packed, weight_scale, weight_zero_point, _ = export_experts(rng, symmetric, 32, torch.bfloat16)
    direct = moejit.pack_weights(host_ctx, "compressed_tensors", weight_packed, weight_scale, weight_zero_point,
                                 rows="concatenated")

    def t(x):
        return None if x is None else np.ascontiguousarray(x.transpose(0, 2, 1))

    held = moejit.pack_weights(host_ctx, "gptq_v2", t(weight_packed), t(weight_scale), t(weight_zero_point),
                               format="int4_sym" if symmetric else "int4_asym", rows="concatenated")
    for name in ("qweight", "scales", "zeros"):
        a, b = getattr(direct, name), getattr(held, name)
        assert (a is None) == (b is None), name
        if a is not None:
            np.testing.assert_array_equal(a, b, err_msg=name)


def test_refusals_name_the_argument(host_ctx, rng):
    weight_packed, weight_scale, weight_zero_point, _ = export_experts(rng, False, 32, torch.bfloat16)
    # The GPTQ-shaped (transposed) weights: N and K read from them disagree with the scales.
    with pytest.raises(moejit.InvalidArgumentError, match=r"'scales' has shape \[3, 96, 8\]: expected \[3, 32, 8\]"):
        moejit.pack_weights(host_ctx, "compressed_tensors", weight_packed.transpose(0, 2, 1).copy(), weight_scale,
                            weight_zero_point)
    with pytest.raises(moejit.InvalidArgumentError, match="zeros"):  # the [E, K/G, N/8] GPTQ spelling of the zero points
        moejit.pack_weights(host_ctx, "compressed_tensors", weight_packed, weight_scale,
                            np.ascontiguousarray(weight_zero_point.transpose(0, 2, 1)))
    with pytest.raises(moejit.InvalidArgumentError, match="zeros"):  # symmetric weights have none
        moejit.pack_weights(host_ctx, "compressed_tensors", weight_packed, weight_scale, weight_zero_point,
                            format="int4_sym")

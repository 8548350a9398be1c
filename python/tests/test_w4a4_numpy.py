"""W4A4 from Python on the host backend running the sm_120a kernels (Context(host_arch=...)):
MXFP4 weights packed for e2m1 activations, the fused layer on bf16 and f16 hidden states it
quantizes to MXFP4 itself, against fp64 of the unquantized layer; and the mix-ups, each an error
that names the argument."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import moejit
import reference as ref
from packed_layers import mxfp4_layer

E, H, I, TOPK, T = 4, 256, 128, 2, 5


@pytest.fixture(scope="module")
def blackwell_ctx(store_dir):
    with moejit.Context("host", cache_dir=store_dir, host_arch="sm_120a") as ctx:
        yield ctx


def layer(rng, ctx, act_dtype):
    return mxfp4_layer(rng, ctx, act_dtype, E, H, I)


@pytest.mark.parametrize("hidden_dtype", [ml_dtypes.bfloat16, np.float16])
def test_fused_w4a4_on_16_bit_hidden_states(blackwell_ctx, rng, hidden_dtype):
    assert blackwell_ctx.backend == "host"
    w13, w2, p13, p2 = layer(rng, blackwell_ctx, "e2m1")
    assert p13.act_dtype == "e2m1" and p2.act_dtype == "e2m1"
    hidden = rng.standard_normal((T, H)).astype(hidden_dtype)
    ids, weights = ref.random_routing(rng, T, TOPK, E)
    out = moejit.fused_moe(blackwell_ctx, hidden, p13, p2, weights, ids)
    assert out.dtype == hidden.dtype  # the hidden states' dtype by default
    again = moejit.fused_moe(blackwell_ctx, hidden, p13, p2, weights, ids, act_scale="block32")
    assert np.array_equal(out.view(np.uint16), again.view(np.uint16))  # deterministic
    expected = ref.fused_moe_reference(hidden.astype(np.float64), w13, w2, ids, weights, "silu",
                                       act_dtype="bf16" if hidden_dtype == ml_dtypes.bfloat16 else "f16",
                                       round_intermediates=False)
    error = np.linalg.norm(out.astype(np.float64) - expected) / np.linalg.norm(expected)
    # MXFP4 activations keep one mantissa bit: about 0.2 end to end (W4A8 about 0.05).
    assert error < 0.3, f"W4A4 end-to-end relative error {error:.3f}"


def quantize_mxfp4(x: np.ndarray, scale_columns: int):
    """moejit.h's recipe, written from its words: per 32 columns amax = max |x|, scale = 2^e for the
    smallest e >= -127 with 6 * 2^e >= amax (1 for amax 0; E8M0 0xFF where the block holds NaN or
    inf), q = e2m1(x / scale) to nearest even; two codes per byte, the even column in the low
    nibble. Returns the packed codes [T, H/2] and the E8M0 bytes [T, scale_columns] (the rest 0)."""
    x = np.asarray(x, dtype=np.float32)
    rows, cols = x.shape
    blocks = x.reshape(rows, cols // 32, 32)
    scales = np.zeros((rows, scale_columns), dtype=np.uint8)
    codes = np.zeros((rows, cols), dtype=np.uint8)
    for r in range(rows):
        for b in range(cols // 32):
            block = blocks[r, b]
            if not np.isfinite(block).all():
                scales[r, b] = 0xFF
                continue
            amax = float(np.abs(block).max())
            e = 0
            if amax > 0:
                e = max(-127, int(np.ceil(np.log2(amax / 6.0))) - 1)
                while 6.0 * 2.0 ** e < amax:
                    e += 1
            scales[r, b] = e + 127
            q = (block / np.float32(2.0 ** e)).astype(ml_dtypes.float4_e2m1fn)
            codes[r, 32 * b:32 * b + 32] = q.view(np.uint8)
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)
    return packed, scales


def test_fused_w4a4_on_the_callers_mxfp4_hidden_states(blackwell_ctx, rng):
    """Hidden states the caller quantized with moejit.h's recipe: the same output, bit for bit, as
    the layer's own quantization of the bf16 values; scales as a [:, :H/32] view of 16-byte rows."""
    _, _, p13, p2 = layer(rng, blackwell_ctx, "e2m1")
    hidden = (rng.standard_normal((T, H)) * np.exp2(rng.integers(-6, 6, (T, 1)))).astype(ml_dtypes.bfloat16)
    ids, weights = ref.random_routing(rng, T, TOPK, E)
    own = moejit.fused_moe(blackwell_ctx, hidden, p13, p2, weights, ids)
    codes, padded = quantize_mxfp4(hidden.astype(np.float32), 16)
    scales = padded[:, :H // 32]
    assert scales.strides[0] == 16
    given = moejit.fused_moe(blackwell_ctx, codes, p13, p2, weights, ids, act_scale="block32", hidden_scales=scales)
    assert given.dtype == ml_dtypes.bfloat16
    assert np.array_equal(own.view(np.uint16), given.view(np.uint16))
    torch = pytest.importorskip("torch", reason="torch.float4_e2m1fn_x2 hidden states need torch")
    if hasattr(torch, "float4_e2m1fn_x2"):
        t_codes = torch.from_numpy(codes).view(torch.float4_e2m1fn_x2)
        again = moejit.fused_moe(blackwell_ctx, t_codes, p13, p2, torch.from_numpy(weights), torch.from_numpy(ids),
                                 hidden_scales=torch.from_numpy(padded)[:, :H // 32])
        assert np.array_equal(own.view(np.int16), again.view(torch.int16).numpy())
    # Mix-ups: no scales, rows not 16 bytes apart, short rows, codes for the wrong weights.
    with pytest.raises(moejit.InvalidArgumentError, match="'hidden_scales' is None"):
        moejit.fused_moe(blackwell_ctx, codes, p13, p2, weights, ids)
    with pytest.raises(moejit.InvalidArgumentError, match="rows 8 bytes apart: expected a multiple of 16"):
        moejit.fused_moe(blackwell_ctx, codes, p13, p2, weights, ids, hidden_scales=np.ascontiguousarray(scales))
    with pytest.raises(moejit.InvalidArgumentError, match=r"expected \[5, >= 8\]"):
        moejit.fused_moe(blackwell_ctx, codes, p13, p2, weights, ids, hidden_scales=padded[:, :4])
    _, _, e13, e2 = layer(rng, blackwell_ctx, "e4m3")
    with pytest.raises(moejit.InvalidArgumentError, match="'hidden' has dtype u8"):
        moejit.fused_moe(blackwell_ctx, codes, e13, e2, weights, ids, hidden_scales=scales)


def test_w4a4_mix_ups_name_the_argument(blackwell_ctx, host_ctx, rng):
    w13, _, p13, p2 = layer(rng, blackwell_ctx, "e2m1")
    hidden = rng.standard_normal((T, H)).astype(ml_dtypes.bfloat16)
    ids, weights = ref.random_routing(rng, T, TOPK, E)
    with pytest.raises(moejit.InvalidArgumentError, match="packed for e2m1 activations .W4A4.; expected 'block32'"):
        moejit.fused_moe(blackwell_ctx, hidden, p13, p2, weights, ids, act_scale="token")
    with pytest.raises(moejit.InvalidArgumentError, match="grouped_gemm takes from the C ABI"):
        moejit.grouped_gemm(blackwell_ctx, rng.standard_normal((T, I)).astype(ml_dtypes.bfloat16), p2, layout="contiguous",
                            expert_offsets=ref.contiguous_offsets(np.array([T, 0, 0, 0], dtype=np.int32)))
    _, _, b13, b2 = layer(rng, blackwell_ctx, "bf16")
    with pytest.raises(moejit.InvalidArgumentError, match="block32 scales go with weights packed for e2m1"):
        moejit.fused_moe(blackwell_ctx, hidden, b13, b2, weights, ids, act_scale="block32")
    with pytest.raises(moejit.InvalidArgumentError, match="act_dtype"):
        moejit.pack_weights(blackwell_ctx, format="mxfp4", act_dtype="e3m2", **ref.to_vllm_mxfp4(w13))
    # INT4 weights have no e2m1 x e2m1 mma.
    w4 = ref.random_quant_weights(rng, "int4_sym", E, 64, H, 128, "bf16")
    with pytest.raises(moejit.InvalidArgumentError, match="expected mxfp4"):
        moejit.pack_weights(blackwell_ctx, format="int4_sym", act_dtype="e2m1", **ref.to_plain(w4))
    # The default host context runs sm_90a kernels, which have no block-scaled mma.
    _, _, h13, h2 = layer(rng, host_ctx, "e2m1")
    with pytest.raises(moejit.UnsupportedError, match="need the block-scaled mma of sm_120a or sm_121a; this target is sm_90a"):
        moejit.fused_moe(host_ctx, hidden, h13, h2, weights, ids)
    with pytest.raises(moejit.InvalidArgumentError, match="host_arch"):
        moejit.Context("host", host_arch="sm_75")


def test_torch_ops_refuse_w4a4_weights_by_name(blackwell_ctx, rng):
    torch = pytest.importorskip("torch", reason="moejit.torch needs torch")
    import moejit.torch as mt
    _, _, p13, p2 = layer(rng, blackwell_ctx, "e2m1")
    hidden = torch.randn(T, H, dtype=torch.bfloat16)
    ids, weights = ref.random_routing(rng, T, TOPK, E)
    with pytest.raises(moejit.InvalidArgumentError, match="argument 'w13' was packed for e2m1 activations"):
        mt.fused_moe(hidden, p13, p2, torch.from_numpy(weights), torch.from_numpy(ids))

"""moejit.grouped_gemm with NumPy arrays on the host backend: the contiguous and masked layouts
(the indexed one through fused_moe), with empty experts, against the fp64 reference."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import moejit
import reference as ref

E, N, K = 4, 128, 128


def poisoned(shape, dtype):
    out = np.empty(shape, dtype=dtype)
    out[...] = np.nan
    return out


@pytest.mark.parametrize("epilogue", ["none", "silu"])
def test_contiguous_with_an_empty_expert(host_ctx, rng, epilogue):
    qw = ref.random_quant_weights(rng, "int4_asym", E, N, K, 32, "bf16")
    rows = "concatenated" if epilogue != "none" else "plain"
    packed = moejit.pack_weights(host_ctx, format="int4_asym", rows=rows, **ref.to_awq(qw))
    counts = np.array([3, 0, 5, 1])
    offsets = ref.contiguous_offsets(counts)
    a = rng.standard_normal((int(counts.sum()), K)).astype(ml_dtypes.bfloat16)
    columns = N if epilogue == "none" else N // 2
    c = moejit.grouped_gemm(host_ctx, a, packed, layout="contiguous", epilogue=epilogue, expert_offsets=offsets,
                            c=poisoned((a.shape[0], columns), np.float32))
    expected = ref.grouped_gemm_reference(a.astype(np.float64), qw, np.repeat(np.arange(E), counts), epilogue)
    assert np.isfinite(c).all(), "output not fully written"
    ref.assert_close(c, expected, rtol=2e-2, atol=2e-2, what=f"contiguous {epilogue}")


def test_masked_rows_past_the_count_are_untouched(host_ctx, rng):
    qw = ref.random_quant_weights(rng, "mxfp4", E, N, K)
    packed = moejit.pack_weights(host_ctx, **ref.to_vllm_mxfp4(qw))
    max_m = 6
    counts = np.array([6, 0, 2, 5], dtype=np.int32)
    a = rng.standard_normal((E, max_m, K)).astype(ml_dtypes.bfloat16)
    c = poisoned((E, max_m, N), ml_dtypes.bfloat16)
    moejit.grouped_gemm(host_ctx, a, packed, layout="masked", expert_counts=counts, c=c)
    c64 = c.astype(np.float64)
    for e in range(E):
        live = c64[e, :counts[e]]
        expected = ref.grouped_gemm_reference(a[e, :counts[e]].astype(np.float64), qw, np.full(counts[e], e))
        ref.assert_close(live, expected, rtol=2e-2, atol=2e-2, what=f"masked expert {e}")
        assert np.isnan(c64[e, counts[e]:]).all(), f"expert {e}: rows past its count were written"

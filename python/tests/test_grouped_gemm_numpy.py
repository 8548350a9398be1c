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


def moe_align(topk_ids, experts, block_size):
    """vLLM's moe_align_block_size, written from its documented output: pair ids (t * topk + k)
    grouped by expert in pair order, each expert's run padded to a whole block with the
    sentinel `pairs`; one expert id per block; the padded total."""
    flat = topk_ids.reshape(-1)
    pairs = flat.size
    sorted_ids, block_experts = [], []
    for e in range(experts):
        members = np.flatnonzero(flat == e)
        if members.size == 0:
            continue
        padded = -(-members.size // block_size) * block_size
        sorted_ids.extend(members.tolist() + [pairs] * (padded - members.size))
        block_experts.extend([e] * (padded // block_size))
    capacity = pairs + min(pairs, experts) * (block_size - 1)
    total = len(sorted_ids)
    # Past the padded total the buffers hold garbage, as an engine's reused buffers would.
    rng = np.random.default_rng(total)
    ids = rng.integers(-5, 2**30, capacity).astype(np.int32)
    ids[:total] = sorted_ids
    blocks = rng.integers(-5, 2**30, -(-capacity // block_size)).astype(np.int32)
    blocks[:len(block_experts)] = block_experts
    return ids, blocks, np.array([total], dtype=np.int32)


def test_indexed_gather_and_topk_weight(host_ctx, rng):
    """The indexed layout as vLLM drives it: A holds tokens (a_row_divisor = topk), C one row per
    pair, scaled by the pair's routing weight."""
    qw = ref.random_quant_weights(rng, "int4_sym", E, N, K, 64, "f16")
    packed = moejit.pack_weights(host_ctx, format="int4_sym", **ref.to_gptq(qw, 2))
    tokens, topk, block = 5, 2, 16
    ids, weights = ref.random_routing(rng, tokens, topk, E)
    sorted_ids, block_experts, total = moe_align(ids, E, block)
    a = rng.standard_normal((tokens, K)).astype(ml_dtypes.bfloat16)
    pairs = tokens * topk
    c = moejit.grouped_gemm(host_ctx, a, packed, layout="indexed", epilogue="topk_weight", m=pairs,
                            sorted_token_ids=sorted_ids, expert_ids=block_experts, num_tokens_post_pad=total,
                            block_size=block, a_row_divisor=topk, topk_weights=weights.reshape(-1),
                            c=poisoned((pairs, N), np.float32))
    expected = ref.grouped_gemm_reference(np.repeat(a.astype(np.float64), topk, axis=0), qw, ids.reshape(-1))
    expected *= weights.reshape(-1, 1).astype(np.float64)
    assert np.isfinite(c).all(), "a pair row was not written"
    ref.assert_close(c, expected, rtol=2e-2, atol=2e-2, what="indexed topk_weight")


def test_m_must_describe_a(host_ctx, rng):
    """m is where expert e's rows start in the masked layout (e * m) and how far the contiguous
    offsets reach: one that disagrees with a's shape would read and write past a and c."""
    qw = ref.random_quant_weights(rng, "mxfp4", E, N, K)
    packed = moejit.pack_weights(host_ctx, **ref.to_vllm_mxfp4(qw))
    a = rng.standard_normal((E, 4, K)).astype(ml_dtypes.bfloat16)
    counts = np.array([4, 1, 0, 2], dtype=np.int32)
    for m in (2, 8):
        with pytest.raises(moejit.InvalidArgumentError, match=rf"argument 'm' = {m} with the masked layout: "
                                                              r"expected a.shape\[1\] = 4"):
            moejit.grouped_gemm(host_ctx, a, packed, layout="masked", expert_counts=counts, m=m)
    rows = a.reshape(-1, K)[:7]
    offsets = ref.contiguous_offsets(counts)
    with pytest.raises(moejit.InvalidArgumentError, match=r"argument 'm' = 8 with the contiguous layout: "
                                                          r"expected 0 to a.shape\[0\] = 7"):
        moejit.grouped_gemm(host_ctx, rows, packed, layout="contiguous", expert_offsets=offsets, m=8)
    # m given as what a holds is the same call as m left out.
    c = moejit.grouped_gemm(host_ctx, a, packed, layout="masked", expert_counts=counts, m=4, out_dtype="f32")
    same = moejit.grouped_gemm(host_ctx, a, packed, layout="masked", expert_counts=counts, out_dtype="f32")
    for e in range(E):
        assert np.array_equal(c[e, :counts[e]], same[e, :counts[e]])


def test_empty_masked_batch(host_ctx, rng):
    """No rows at all: NumPy gives (E, 0, K) strides that are not C-contiguous in form; nothing is
    read or written, and the call returns c of shape (E, 0, N)."""
    qw = ref.random_quant_weights(rng, "mxfp4", E, N, K)
    packed = moejit.pack_weights(host_ctx, **ref.to_vllm_mxfp4(qw))
    a = np.empty((E, 0, K), dtype=ml_dtypes.bfloat16)
    c = moejit.grouped_gemm(host_ctx, a, packed, layout="masked", expert_counts=np.zeros(E, np.int32))
    assert c.shape == (E, 0, N)


@pytest.mark.parametrize("argument, value", [("block_size", 1 << 31), ("rows_per_expert_hint", -1),
                                             ("a_row_divisor", 1 << 31), ("m", 1 << 40), ("stream", -1)])
def test_integers_out_of_the_c_range_name_the_argument(host_ctx, rng, argument, value):
    qw = ref.random_quant_weights(rng, "mxfp4", E, N, K)
    packed = moejit.pack_weights(host_ctx, **ref.to_vllm_mxfp4(qw))
    a = rng.standard_normal((3, K)).astype(ml_dtypes.bfloat16)
    with pytest.raises(moejit.InvalidArgumentError, match=rf"argument '{argument}' = {value}: expected"):
        moejit.grouped_gemm(host_ctx, a, packed, layout="contiguous",
                            expert_offsets=np.array([0, 1, 2, 3, 3], np.int32), **{argument: value})

"""Self-tests of reference.py: the formats against the OCP MX specification and hand-worked
values, every checkpoint writer against known words and its reader, and the fused MoE
reference against a slow per-token loop written independently of it."""

import math

import ml_dtypes
import numpy as np
import pytest

import reference as ref


def scale_array(values, dtype):
    return np.array(values, dtype=ml_dtypes.bfloat16 if dtype == "bf16" else np.float16)


def assert_same_weights(actual: ref.QuantWeights, expected: ref.QuantWeights):
    assert actual.format == expected.format
    assert actual.group_size == expected.group_size
    np.testing.assert_array_equal(actual.codes, expected.codes)
    assert actual.scales.dtype == expected.scales.dtype
    # Bit equality: a scale that changed by one ulp must fail.
    np.testing.assert_array_equal(actual.scales.view(np.uint8), expected.scales.view(np.uint8))
    if expected.zeros is None:
        assert actual.zeros is None
    else:
        np.testing.assert_array_equal(actual.zeros, expected.zeros)


# ---- Number formats ---------------------------------------------------------------------------

def test_e2m1_values_are_the_ocp_mx_table():
    magnitudes = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    np.testing.assert_array_equal(ref.E2M1_VALUES[:8], magnitudes)
    np.testing.assert_array_equal(ref.E2M1_VALUES[8:], [-m for m in magnitudes])
    assert math.copysign(1.0, ref.E2M1_VALUES[8]) == -1.0  # code 8 is -0


def test_e8m0_is_a_power_of_two_with_0xff_nan():
    values = ref.e8m0_to_float(np.array([127, 0, 128, 126, 254, 255], dtype=np.uint8))
    np.testing.assert_array_equal(values[:5], [1.0, 2.0 ** -127, 2.0, 0.5, 2.0 ** 127])
    assert np.isnan(values[5])
    with pytest.raises(TypeError):
        ref.e8m0_to_float(np.array([127], dtype=np.int32))


def test_round_to_is_one_nearest_even_rounding_from_float64():
    ulp_bf16 = 2.0 ** -7
    x = np.array([1 + ulp_bf16 / 2, 1 + 3 * ulp_bf16 / 2, 1 + ulp_bf16 / 2 + 2.0 ** -40, -1.0])
    # Ties go to the even significand; a value just above a tie rounds up even though rounding
    # through f32 first would have made it a tie.
    np.testing.assert_array_equal(ref.round_to(x, "bf16"), [1.0, 1 + 2 * ulp_bf16, 1 + ulp_bf16, -1.0])
    np.testing.assert_array_equal(ref.round_to([1 + 2.0 ** -11, 65520.0], "f16"), [1.0, np.inf])
    assert ref.round_to(1 + 2.0 ** -30, "f32") == 1.0
    assert ref.round_to(1 + 2.0 ** -30, "f32").dtype == np.float64


# ---- Dequantization ---------------------------------------------------------------------------

def test_dequantize_mxfp4_by_hand():
    codes = np.zeros((1, 2, 64), dtype=np.uint8)
    codes[0, 0, :4] = [1, 7, 8, 15]   # 0.5, 6, -0, -6
    codes[0, 0, 32] = 5               # 3
    codes[0, 1, :32] = 2              # 1
    codes[0, 1, 32] = 12              # -2
    scales = np.array([[[126, 255], [0, 129]]], dtype=np.uint8)  # 0.5, NaN / 2^-127, 4
    w = ref.dequantize(ref.QuantWeights("mxfp4", 32, codes, scales))
    np.testing.assert_array_equal(w[0, 0, :5], [0.25, 3.0, -0.0, -3.0, 0.0])
    assert np.isnan(w[0, 0, 32:]).all()  # a NaN scale makes its whole block NaN, zeros included
    np.testing.assert_array_equal(w[0, 1, :32], 2.0 ** -127)
    assert w[0, 1, 32] == -8.0 and w[0, 1, 33] == 0.0


def test_dequantize_int4_by_hand():
    codes = np.zeros((1, 1, 64), dtype=np.uint8)
    codes[0, 0, :3] = [0, 3, 15]
    codes[0, 0, 32:34] = [15, 0]
    asym = ref.QuantWeights("int4_asym", 32, codes, scale_array([[[0.5, 0.25]]], "bf16"),
                            zeros=np.array([[[3, 15]]], dtype=np.uint8))
    w = ref.dequantize(asym)
    np.testing.assert_array_equal(w[0, 0, :3], [-1.5, 0.0, 6.0])           # (q - 3) * 0.5
    np.testing.assert_array_equal(w[0, 0, 32:35], [0.0, -3.75, -3.75])     # (q - 15) * 0.25
    per_channel = ref.QuantWeights("int4_sym", 64, codes, scale_array([[[0.125]]], "f16"))
    np.testing.assert_array_equal(ref.dequantize(per_channel)[0, 0, :4], [-1.0, -0.625, 0.875, -1.0])


def test_quant_weights_refuse_inconsistent_fields():
    codes = np.zeros((1, 8, 32), dtype=np.uint8)
    scales = scale_array(np.ones((1, 8, 1)), "bf16")
    with pytest.raises(ValueError, match="zeros"):
        ref.QuantWeights("int4_asym", 32, codes, scales)
    with pytest.raises(ValueError, match="no zero points"):
        ref.QuantWeights("int4_sym", 32, codes, scales, zeros=np.zeros((1, 8, 1), np.uint8))
    with pytest.raises(ValueError, match="group_size"):
        ref.QuantWeights("int4_sym", 16, codes, scale_array(np.ones((1, 8, 2)), "bf16"))
    with pytest.raises(ValueError, match="E8M0"):
        ref.QuantWeights("mxfp4", 32, codes, scales)
    with pytest.raises(ValueError, match="0..15"):
        ref.QuantWeights("int4_sym", 32, codes + 16, scales)


# ---- Random weights ---------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ref.FORMATS)
@pytest.mark.parametrize("k", [256, 1024])
def test_random_weights_give_order_one_outputs(fmt, k):
    rng = np.random.default_rng(k)
    qw = ref.random_quant_weights(rng, fmt, 2, 64, k, group_size=128, scale_dtype="f16", with_bias=True)
    x = rng.standard_normal((32, k))
    rms = np.sqrt(np.mean((x @ ref.dequantize(qw)[1].T) ** 2))
    assert 0.4 < rms < 2.5
    assert qw.bias.dtype == np.float32 and qw.bias.shape == (2, 64)
    assert qw.codes.any()
    if fmt == "mxfp4":
        assert qw.group_size == 32 and qw.scales.dtype == np.uint8 and (qw.scales != 0xFF).all()
    else:
        assert qw.scales.dtype == np.float16
    if fmt == "int4_asym":
        assert 0 in qw.zeros and 15 in qw.zeros


def test_random_weights_per_channel():
    qw = ref.random_quant_weights(np.random.default_rng(1), "int4_sym", 1, 32, 256, group_size=0)
    assert qw.group_size == 256 and qw.scales.shape == (1, 32, 1)
    assert qw.scales.dtype == np.dtype(ml_dtypes.bfloat16)


# ---- Row orders and layouts -------------------------------------------------------------------

def test_interleaved_rows_alternate_gate_and_up():
    canonical = np.arange(8)  # gate 0..3, up 4..7
    np.testing.assert_array_equal(ref.to_row_order(canonical, "interleaved", 0), [0, 4, 1, 5, 2, 6, 3, 7])
    np.testing.assert_array_equal(ref.to_row_order(canonical, "concatenated", 0), canonical)
    qw = ref.random_quant_weights(np.random.default_rng(2), "int4_asym", 2, 64, 64, with_bias=True)
    interleaved = ref.reorder_rows(qw, "interleaved")
    for arrays in ("codes", "scales", "zeros", "bias"):
        moved, original = getattr(interleaved, arrays), getattr(qw, arrays)
        np.testing.assert_array_equal(moved[:, 2 * 5 + 1], original[:, 32 + 5])
        np.testing.assert_array_equal(moved[:, 2 * 5], original[:, 5])


def tiny_int4(zero_points):
    """One expert, 8 output rows, K = 32: codes k = 0..7 of row 0 are 1..8, row j's first code is j."""
    codes = np.zeros((1, 8, 32), dtype=np.uint8)
    codes[0, 0, :8] = np.arange(1, 9)
    codes[0, 1:, 0] = np.arange(1, 8)
    return ref.QuantWeights("int4_asym", 32, codes, scale_array(np.full((1, 8, 1), 0.5), "f16"),
                            zeros=np.array(zero_points, dtype=np.uint8).reshape(1, 8, 1))


def gptq_zero_word(zero_points, version):
    return int(ref.to_gptq(tiny_int4(zero_points), version)["zeros"][0, 0, 0]) & 0xFFFFFFFF


def test_gptq_words_by_hand():
    exported = ref.to_gptq(tiny_int4([8] * 8), 2)
    assert exported["qweight"].dtype == np.int32 and exported["qweight"].shape == (1, 4, 8)
    assert int(exported["qweight"][0, 0, 0]) & 0xFFFFFFFF == 0x87654321  # k nibbles low first
    assert exported["zeros"].shape == (1, 1, 1) and exported["scales"].shape == (1, 1, 8)
    assert gptq_zero_word([8] * 8, 2) == 0x88888888
    assert gptq_zero_word([8] * 8, 1) == 0x77777777
    assert gptq_zero_word([15] * 8, 1) == 0xEEEEEEEE
    # A zero point of 0 borrows from the nibble above: 0x11111110 - 0x11111111 wraps to -1.
    assert gptq_zero_word([0] + [1] * 7, 1) == 0xFFFFFFFF
    # In the top nibble, the borrow leaves the word.
    assert gptq_zero_word([1] * 7 + [0], 1) == 0xF0000000
    assert gptq_zero_word([1, 0, 15, 8, 0, 0, 7, 3], 2) == 0x37008F01


@pytest.mark.parametrize("zero_points", [[0] + [1] * 7, [1] * 7 + [0], [0] * 8, [15] * 8, [0, 15] * 4])
def test_gptq_v1_borrowing_words_read_back(zero_points):
    qw = tiny_int4(zero_points)
    t = ref.to_gptq(qw, 1)
    assert_same_weights(ref.from_gptq(t["qweight"], t["zeros"], t["scales"], version=1, symmetric=False), qw)


def test_symmetric_gptq_writes_zero_point_8_and_checks_it():
    qw = ref.random_quant_weights(np.random.default_rng(3), "int4_sym", 1, 16, 64)
    for version, word in ((1, 0x77777777), (2, 0x88888888)):
        t = ref.to_gptq(qw, version)
        assert ((t["zeros"].view(np.uint32)) == word).all()
        assert_same_weights(ref.from_gptq(t["qweight"], t["zeros"], t["scales"], version, symmetric=True), qw)
        assert_same_weights(ref.from_gptq(t["qweight"], None, t["scales"], version, symmetric=True), qw)
    t = ref.to_gptq(qw, 2)
    t["zeros"].view(np.uint32)[0, 1, 1] = 0x88888887
    with pytest.raises(ValueError, match="expected 8"):
        ref.from_gptq(t["qweight"], t["zeros"], t["scales"], 2, symmetric=True)


def test_awq_words_by_hand():
    codes = np.zeros((1, 8, 32), dtype=np.uint8)
    codes[0, :, 0] = np.arange(8)  # column j holds j
    zeros = np.arange(8, dtype=np.uint8).reshape(1, 8, 1) + 8
    qw = ref.QuantWeights("int4_asym", 32, codes, scale_array(np.ones((1, 8, 1)), "bf16"), zeros)
    t = ref.to_awq(qw)
    assert t["qweight"].shape == (1, 32, 1) and t["zeros"].shape == (1, 1, 1) and t["scales"].shape == (1, 1, 8)
    # Nibble i holds column AWQ_ORDER[i] = 0, 2, 4, 6, 1, 3, 5, 7.
    assert int(t["qweight"][0, 0, 0]) & 0xFFFFFFFF == 0x75316420
    assert int(t["zeros"][0, 0, 0]) & 0xFFFFFFFF == 0xFDB9ECA8  # real zero points, no offset
    with pytest.raises(ValueError):
        ref.to_awq(ref.random_quant_weights(np.random.default_rng(4), "int4_sym", 1, 8, 32))


def test_vllm_mxfp4_bytes_by_hand():
    codes = np.zeros((1, 1, 32), dtype=np.uint8)
    codes[0, 0, :4] = [1, 2, 15, 0]
    t = ref.to_vllm_mxfp4(ref.QuantWeights("mxfp4", 32, codes, np.full((1, 1, 1), 127, np.uint8)))
    assert t["qweight"].dtype == np.uint8 and t["qweight"].shape == (1, 1, 16)
    np.testing.assert_array_equal(t["qweight"][0, 0, :2], [0x21, 0x0F])  # even k low
    assert t["zeros"] is None


ROUND_TRIP_CASES = [("mxfp4", 32, "bf16")] + [
    (fmt, group, dtype) for fmt in ("int4_sym", "int4_asym") for group in (32, 128, 0) for dtype in ("bf16", "f16")]


@pytest.mark.parametrize("fmt, group, scale_dtype", ROUND_TRIP_CASES)
def test_every_layout_reads_back(fmt, group, scale_dtype):
    rng = np.random.default_rng(5)
    canonical = ref.random_quant_weights(rng, fmt, 3, 64, 256, group, scale_dtype, with_bias=True)
    for order in ref.ROW_ORDERS:
        qw = ref.reorder_rows(canonical, order)
        plain = ref.to_plain(qw)
        assert plain["source"] == "plain"
        assert_same_weights(ref.QuantWeights(fmt, qw.group_size, plain["qweight"], plain["scales"], plain["zeros"]),
                            qw)
        np.testing.assert_array_equal(plain["bias"], qw.bias)
        if fmt == "mxfp4":
            t = ref.to_vllm_mxfp4(qw)
            assert t["source"] == "vllm_mxfp4"
            assert_same_weights(ref.from_vllm_mxfp4(t["qweight"], t["scales"]), qw)
            continue
        for version in (1, 2):
            t = ref.to_gptq(qw, version)
            assert t["source"] == f"gptq_v{version}"
            assert t["scales"].shape == (3, 256 // qw.group_size, 64) and t["scales"].dtype == qw.scales.dtype
            back = ref.from_gptq(t["qweight"], t["zeros"], t["scales"], version, symmetric=fmt == "int4_sym",
                                 bias=t["bias"])
            assert_same_weights(back, qw)
            np.testing.assert_array_equal(back.bias, qw.bias)
        if fmt == "int4_asym":
            t = ref.to_awq(qw)
            assert t["source"] == "awq" and t["qweight"].shape == (3, 256, 8)
            assert_same_weights(ref.from_awq(t["qweight"], t["zeros"], t["scales"]), qw)


# ---- Activations ------------------------------------------------------------------------------

def test_silu_and_mul_by_hand():
    # silu(1) * 2 = 2 / (1 + e^-1); silu(-1) * 0.5 = -0.5 / (1 + e).
    np.testing.assert_allclose(ref.silu_and_mul([1.0, -1.0], [2.0, 0.5]),
                               [1.4621171572600098, -0.13447071068499755], rtol=1e-15)
    assert ref.silu_and_mul(-1000.0, 1.0) == 0.0


def test_swiglu_oai_by_hand():
    gate = np.array([1.0, 10.0, 2.0, 2.0, -10.0])
    up = np.array([2.0, 2.0, 10.0, -10.0, 1.0])
    expected = [
        2.537387297798464,       # sigmoid(1.702) * (2 + 1)
        20.999859384909954,      # gate clamps to 7: 7 sigmoid(11.914) * 3
        15.485268985153667,      # up clamps to 7: 2 sigmoid(3.404) * 8
        -11.61395173886525,      # up clamps to -7: 2 sigmoid(3.404) * -6
        -8.115922589710624e-07,  # no lower clamp on the gate: -10 sigmoid(-17.02) * 2
    ]
    np.testing.assert_allclose(ref.swiglu_oai(gate, up), expected, rtol=1e-14)
    assert np.isnan(ref.swiglu_oai(np.nan, 1.0)) and np.isnan(ref.swiglu_oai(1.0, np.nan))


# ---- GEMM and fused layer ---------------------------------------------------------------------

def bf16_inputs(rng, shape):
    return ref.round_to(rng.standard_normal(shape), "bf16")


@pytest.mark.parametrize("epilogue", ref.EPILOGUES)
def test_contiguous_grouped_gemm_row_by_row(epilogue):
    rng = np.random.default_rng(6)
    qw = ref.random_quant_weights(rng, "int4_asym", 3, 64, 128, with_bias=True)
    counts = [3, 0, 2]
    np.testing.assert_array_equal(ref.contiguous_offsets(counts), [0, 3, 3, 5])
    expert_of_row = np.repeat(np.arange(3), counts)
    a = bf16_inputs(rng, (5, 128))
    got = ref.grouped_gemm_reference(a, qw, expert_of_row, epilogue, "bf16")
    w = ref.dequantize(qw)
    for row, expert in enumerate(expert_of_row):
        acc = w[expert] @ a[row] + qw.bias[expert]
        want = {"none": acc,
                "silu": acc[:32] / (1 + np.exp(-acc[:32])) * acc[32:],
                "swiglu_oai": ref.swiglu_oai(acc[:32], acc[32:])}[epilogue]
        ref.assert_close(got[row], want, 1e-13, 1e-13, f"row {row}")


def round_significand(x, bits):
    """x rounded to `bits` significant bits, half to even (Python's round), for normal values."""
    if x == 0.0 or not math.isfinite(x):
        return x
    mantissa, exponent = math.frexp(x)
    return math.ldexp(round(mantissa * 2 ** bits), exponent - bits)


def slow_fused_moe(hidden, w13_interleaved, w2, ids, weights, expert_map, activation, significand_bits):
    """The layer token by token, pair by pair, reading gpt-oss's interleaved gate/up rows."""
    g13, g2 = ref.dequantize(w13_interleaved).tolist(), ref.dequantize(w2).tolist()
    b13, b2 = w13_interleaved.bias.tolist(), w2.bias.tolist()
    tokens, hidden_size = hidden.shape
    inter = w2.k
    store = (lambda v: round_significand(v, significand_bits)) if significand_bits else (lambda v: v)
    out = [[0.0] * hidden_size for _ in range(tokens)]
    for t in range(tokens):
        x = hidden[t].tolist()
        for slot in range(ids.shape[1]):
            e = int(expert_map[ids[t, slot]])
            if e == -1:
                continue
            act = []
            for i in range(inter):
                gate, up = b13[e][2 * i], b13[e][2 * i + 1]
                for h in range(hidden_size):
                    gate += x[h] * g13[e][2 * i][h]
                    up += x[h] * g13[e][2 * i + 1][h]
                if activation == "silu":
                    value = gate / (1.0 + math.exp(-gate)) * up
                else:
                    g, u = min(gate, 7.0), max(-7.0, min(up, 7.0))
                    value = g / (1.0 + math.exp(-1.702 * g)) * (u + 1.0)
                act.append(store(value))
            for h in range(hidden_size):
                s = b2[e][h]
                for i in range(inter):
                    s += act[i] * g2[e][h][i]
                out[t][h] += store(float(weights[t, slot]) * s)
    return np.array(out)


@pytest.mark.parametrize("fmt", ref.FORMATS)
@pytest.mark.parametrize("activation", ["silu", "swiglu_oai"])
def test_fused_moe_matches_a_slow_loop(fmt, activation):
    rng = np.random.default_rng(7)
    hidden_size, inter, global_experts, local_experts, tokens, topk = 64, 32, 5, 3, 4, 2
    # Large outputs so that swiglu_oai's clamps are reached.
    w13 = ref.random_quant_weights(rng, fmt, local_experts, 2 * inter, hidden_size, scale_dtype="f16",
                                   with_bias=True, output_rms=4.0)
    w2 = ref.random_quant_weights(rng, fmt, local_experts, hidden_size, inter, with_bias=True)
    expert_map = ref.random_expert_map(rng, global_experts, local_experts)
    ids, weights = ref.random_routing(rng, tokens, topk, global_experts)
    ids[0] = [np.flatnonzero(expert_map >= 0)[0], np.flatnonzero(expert_map < 0)[0]]  # a remote pair
    hidden = bf16_inputs(rng, (tokens, hidden_size))
    interleaved = ref.reorder_rows(w13, "interleaved")
    for act_dtype, bits in (("bf16", 8), ("f16", 11)):
        want = slow_fused_moe(hidden, interleaved, w2, ids, weights, expert_map, activation, bits)
        got = ref.fused_moe_reference(hidden, w13, w2, ids, weights, activation, expert_map, act_dtype)
        # Only the float64 summation order differs; a rounding in a different place would not
        # stay within this.
        ref.assert_close(got, want, 1e-9, 1e-9, f"{act_dtype} fused layer")
    unrounded = ref.fused_moe_reference(hidden, w13, w2, ids, weights, activation, expert_map,
                                        round_intermediates=False)
    ref.assert_close(unrounded, slow_fused_moe(hidden, interleaved, w2, ids, weights, expert_map, activation, 0),
                     1e-9, 1e-9, "unrounded fused layer")
    bf16_rounded = ref.fused_moe_reference(hidden, w13, w2, ids, weights, activation, expert_map, "bf16")
    assert not np.array_equal(unrounded, bf16_rounded)
    # The C++ tests' bound for a bf16 layer against an unrounded fp64 one.
    assert np.linalg.norm(bf16_rounded - unrounded) / np.linalg.norm(unrounded) < 1e-2


def test_expert_map_keeps_only_local_pairs():
    rng = np.random.default_rng(8)
    global_experts, local_experts = 8, 3
    w13 = ref.random_quant_weights(rng, "mxfp4", global_experts, 64, 64, with_bias=True)
    w2 = ref.random_quant_weights(rng, "mxfp4", global_experts, 64, 32, with_bias=True)
    expert_map = ref.random_expert_map(rng, global_experts, local_experts)
    local = ref.local_experts_of(expert_map)
    ids, weights = ref.random_routing(rng, 6, 4, global_experts)
    hidden = bf16_inputs(rng, (6, 64))
    got = ref.fused_moe_reference(hidden, ref.take_experts(w13, local), ref.take_experts(w2, local), ids, weights,
                                  "swiglu_oai", expert_map)
    remote_dropped = np.where(expert_map[ids] >= 0, weights, np.float32(0))
    want = ref.fused_moe_reference(hidden, w13, w2, ids, remote_dropped, "swiglu_oai")
    ref.assert_close(got, want, 0.0, 0.0, "expert-parallel layer")


def test_inputs_must_hold_act_dtype_values():
    rng = np.random.default_rng(9)
    w13 = ref.random_quant_weights(rng, "mxfp4", 2, 64, 64)
    w2 = ref.random_quant_weights(rng, "mxfp4", 2, 64, 32)
    ids, weights = ref.random_routing(rng, 2, 1, 2)
    hidden = bf16_inputs(rng, (2, 64))
    hidden[1, 3] += 2.0 ** -20
    with pytest.raises(ValueError, match=r"hidden\[1, 3\]"):
        ref.fused_moe_reference(hidden, w13, w2, ids, weights, "silu")
    with pytest.raises(ValueError, match="topk_ids"):
        ref.fused_moe_reference(ref.round_to(hidden, "bf16"), w13, w2, ids + 2, weights, "silu")


# ---- Routing and comparison -------------------------------------------------------------------

def test_random_routing_picks_distinct_experts():
    ids, weights = ref.random_routing(np.random.default_rng(10), 50, 4, 6)
    assert ids.dtype == np.int32 and ids.shape == (50, 4) and weights.dtype == np.float32
    assert all(len(set(row)) == 4 for row in ids.tolist())
    assert ids.min() >= 0 and ids.max() <= 5 and len(np.unique(ids)) == 6
    assert (weights >= 0.1).all() and (weights <= 1.0).all()


def test_random_expert_map_is_a_random_placement():
    rng = np.random.default_rng(11)
    placements = set()
    for _ in range(20):
        expert_map = ref.random_expert_map(rng, 8, 3)
        assert expert_map.dtype == np.int32
        assert sorted(expert_map[expert_map >= 0].tolist()) == [0, 1, 2]
        assert (expert_map[expert_map < 0] == -1).all() and expert_map[7] >= 0
        np.testing.assert_array_equal(expert_map[ref.local_experts_of(expert_map)], [0, 1, 2])
        placements.add(tuple(ref.local_experts_of(expert_map).tolist()))
    assert len(placements) > 10
    assert sorted(ref.random_expert_map(rng, 4, 4).tolist()) == [0, 1, 2, 3]


def test_assert_close_names_the_worst_element():
    expected = np.zeros((2, 3))
    expected[0, 2] = np.nan
    actual = expected.copy()
    ref.assert_close(actual, expected, 0.0, 0.0, "equal")
    actual[1, 0] = 1e-3
    actual[1, 2] = 5e-2
    with pytest.raises(AssertionError, match=r"output: 2 of 6 .*worst at \[1, 2\]: actual 0\.05, expected 0\.0"):
        ref.assert_close(actual, expected, 0.0, 1e-4, "output")
    with pytest.raises(AssertionError, match="shape"):
        ref.assert_close(actual[0], expected, 0.0, 1.0, "output")
    actual[0, 2] = 1.0
    with pytest.raises(AssertionError, match=r"worst at \[0, 2\]"):
        ref.assert_close(actual, expected, 0.0, 1.0, "output")

"""Bad input raises a moejit.Error subclass whose message names the argument and what was
expected, before any pointer reaches C (or, for what only C knows, with C's message)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import moejit
import reference as ref

E, H, I, TOPK, T = 4, 128, 64, 2, 3


@pytest.fixture(scope="module")
def layer(host_ctx):
    rng = np.random.default_rng(7)
    w13 = ref.random_quant_weights(rng, "mxfp4", E, 2 * I, H)
    w2 = ref.random_quant_weights(rng, "mxfp4", E, H, I)
    return (moejit.pack_weights(host_ctx, rows="concatenated", **ref.to_vllm_mxfp4(w13)),
            moejit.pack_weights(host_ctx, **ref.to_vllm_mxfp4(w2)))


@pytest.fixture
def inputs(rng):
    hidden = rng.standard_normal((T, H)).astype(ml_dtypes.bfloat16)
    ids, weights = ref.random_routing(rng, T, TOPK, E)
    return hidden, ids, weights


def test_error_classes_carry_the_status():
    assert issubclass(moejit.InvalidArgumentError, moejit.Error)
    assert issubclass(moejit.InvalidArgumentError, ValueError)
    with pytest.raises(moejit.InvalidArgumentError) as info:
        moejit.Context("gpu")
    assert info.value.status == 1 and info.value.status_name == "invalid_argument"
    assert "backend" in str(info.value) and "'host'" in str(info.value)


@pytest.mark.parametrize("case, pattern", [
    ("hidden_f32", r"argument 'hidden' has dtype f32: expected bf16 or f16"),
    ("hidden_wrong_width", r"argument 'hidden' has shape \[3, 64\]: expected \[\*, 128\]"),
    ("ids_int64", r"argument 'topk_ids' has dtype i64: expected i32"),
    ("weights_shape", r"argument 'topk_weights' has shape \[3, 3\]: expected \[3, 2\]"),
    ("hidden_not_contiguous", r"argument 'hidden' is not contiguous"),
    ("output_dtype", r"argument 'output' has dtype f64"),
    ("list_hidden", r"argument 'hidden' is a list: expected a numpy.ndarray"),
    ("activation", r"argument 'activation' = 'gelu'"),
    ("expert_map_length", r"argument 'expert_map' has shape \[5\]: expected \[4\]"),
])
def test_fused_moe_rejects(host_ctx, layer, inputs, case, pattern):
    hidden, ids, weights = inputs
    kwargs = {}
    if case == "hidden_f32":
        hidden = hidden.astype(np.float32)
    elif case == "hidden_wrong_width":
        hidden = hidden[:, :64].copy()
    elif case == "ids_int64":
        ids = ids.astype(np.int64)
    elif case == "weights_shape":
        weights = np.ones((T, 3), np.float32)
    elif case == "hidden_not_contiguous":
        hidden = np.asfortranarray(hidden)
    elif case == "output_dtype":
        kwargs["output"] = np.zeros((T, H), np.float64)
    elif case == "list_hidden":
        hidden = hidden.astype(np.float32).tolist()
    elif case == "activation":
        kwargs["activation"] = "gelu"
    elif case == "expert_map_length":
        kwargs["expert_map"] = np.arange(5, dtype=np.int32)
        kwargs["global_experts"] = 4
    with pytest.raises(moejit.InvalidArgumentError, match=pattern):
        moejit.fused_moe(host_ctx, hidden, *layer, weights, ids, **kwargs)


def test_out_of_range_expert_id_is_reported_by_c(host_ctx, layer, inputs):
    hidden, ids, weights = inputs
    ids = ids.copy()
    ids[1, 0] = E  # one past the last expert
    with pytest.raises(moejit.InvalidArgumentError, match="topk_ids"):
        moejit.fused_moe(host_ctx, hidden, *layer, weights, ids)


def test_misaligned_workspace_is_reported_by_c(host_ctx, layer, inputs):
    hidden, ids, weights = inputs
    nbytes = moejit.fused_moe_workspace_size(host_ctx, *layer, T, TOPK)
    raw = np.zeros(nbytes + 512, np.uint8)
    start = (-raw.ctypes.data) % 256 + 8
    with pytest.raises(moejit.InvalidArgumentError, match="workspace"):
        moejit.fused_moe(host_ctx, hidden, *layer, weights, ids, workspace=raw[start:start + nbytes])


def test_host_arrays_to_a_device_context(store_dir, inputs):
    """A device context (no GPU needed to create one) takes CUDA memory only."""
    hidden, ids, weights = inputs
    ctx = moejit.Context("device", cache_dir=store_dir)
    qw = ref.random_quant_weights(np.random.default_rng(1), "mxfp4", E, H, I)
    with pytest.raises(moejit.Error):
        # Packing on a device context copies into device memory: without a GPU (or torch to
        # allocate it) this fails with a message instead of touching host pointers as device ones.
        moejit.pack_weights(ctx, **ref.to_vllm_mxfp4(qw))
    ctx.close()


def test_closed_context(store_dir, layer, inputs):
    ctx = moejit.Context("host", cache_dir=store_dir)
    ctx.close()
    ctx.close()  # closing twice is harmless
    hidden, ids, weights = inputs
    with pytest.raises(moejit.InvalidArgumentError, match="closed"):
        ctx.stats()


def test_weights_packed_for_another_memory(store_dir, layer, inputs):
    hidden, ids, weights = inputs
    device_ctx = moejit.Context("device", cache_dir=store_dir)
    with pytest.raises(moejit.InvalidArgumentError, match="w13"):
        moejit.fused_moe(device_ctx, hidden, *layer, weights, ids, output=np.zeros((T, H), np.float32),
                         workspace=np.zeros(1 << 20, np.uint8))
    device_ctx.close()


def test_pack_weights_rejects(host_ctx):
    rng = np.random.default_rng(3)
    qw = ref.random_quant_weights(rng, "int4_asym", E, H, I, 32, "bf16")
    awq = ref.to_awq(qw)
    with pytest.raises(moejit.InvalidArgumentError, match="argument 'source' = 'exl2'"):
        moejit.pack_weights(host_ctx, **{**awq, "source": "exl2"})
    with pytest.raises(moejit.InvalidArgumentError, match=r"argument 'qweight' has dtype u8: expected i32"):
        moejit.pack_weights(host_ctx, **{**awq, "qweight": awq["qweight"].view(np.uint8)[..., ::4].copy()})
    with pytest.raises(moejit.InvalidArgumentError, match=r"argument 'scales' has dtype f32: expected bf16 or f16"):
        moejit.pack_weights(host_ctx, **{**awq, "scales": awq["scales"].astype(np.float32)})
    # GPTQ v1 symmetric: every stored zero point must mean 8 (what C checks).
    sym = ref.to_gptq(ref.random_quant_weights(rng, "int4_asym", E, H, I, 32, "f16"), 1)
    with pytest.raises(moejit.InvalidArgumentError):
        moejit.pack_weights(host_ctx, format="int4_sym", **sym)

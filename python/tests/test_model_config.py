"""moejit.Model.from_hf_config: the layer and the checkpoint's formats from a model config as
engines hold it (a path, its text, a dict, a transformers PretrainedConfig), then warmed."""

from __future__ import annotations

import json

import pytest

import moejit

KIMI_LIKE = {
    "model_type": "kimi_k2", "hidden_size": 256, "moe_intermediate_size": 128, "n_routed_experts": 16,
    "num_experts_per_tok": 4, "torch_dtype": "bfloat16",
    "quantization_config": {
        "quant_method": "compressed-tensors", "format": "pack-quantized",
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
            "num_bits": 4, "type": "int", "symmetric": True, "strategy": "group", "group_size": 32}}}},
}


def test_every_spelling_of_a_config_gives_the_same_model(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(KIMI_LIKE))
    want = moejit.Model(hidden=256, intermediate=128, experts=16, topk=4, format="int4_sym", group_size=32,
                        scale_dtype="bf16")
    assert moejit.Model.from_hf_config(path) == want
    assert moejit.Model.from_hf_config(str(path)) == want
    assert moejit.Model.from_hf_config(json.dumps(KIMI_LIKE)) == want
    assert moejit.Model.from_hf_config(KIMI_LIKE) == want
    # The deployment's own fields, and a replaced one.
    model = moejit.Model.from_hf_config(KIMI_LIKE, tensor_parallel=4, max_tokens=64, out_dtype="f32")
    assert (model.tensor_parallel, model.max_tokens, model.out_dtype, model.format) == (4, 64, "f32", "int4_sym")


def test_transformers_configs_and_fp8_activations():
    transformers = pytest.importorskip("transformers", reason="transformers (installed with compressed-tensors) "
                                       "gives the PretrainedConfig engines hold")
    w4afp8 = json.loads(json.dumps(KIMI_LIKE))
    w4afp8["quantization_config"]["config_groups"]["group_0"]["input_activations"] = {
        "num_bits": 8, "type": "float", "strategy": "token", "dynamic": True}
    config = transformers.PretrainedConfig(**w4afp8)
    model = moejit.Model.from_hf_config(config)
    assert (model.format, model.group_size, model.act_dtype, model.act_scale) == ("int4_sym", 32, "e4m3", "token")


def test_gpt_oss_and_unquantized_configs():
    gpt_oss = {"model_type": "gpt_oss", "hidden_size": 2880, "intermediate_size": 2880, "num_local_experts": 128,
               "num_experts_per_tok": 4, "quantization_config": {"quant_method": "mxfp4"}}
    model = moejit.Model.from_hf_config(gpt_oss)
    assert (model.format, model.scale_dtype, model.activation) == ("mxfp4", "e8m0", "swiglu_oai")
    plain = {k: v for k, v in KIMI_LIKE.items() if k != "quantization_config"}
    assert moejit.Model.from_hf_config(plain).format == "mxfp4"
    assert moejit.Model.from_hf_config(plain, format="int4_asym", group_size=64, scale_dtype="f16").format == "int4_asym"


def test_refusals_say_why(tmp_path):
    fp8 = {**KIMI_LIKE, "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}
    with pytest.raises(moejit.UnsupportedError, match="FP8 weights"):
        moejit.Model.from_hf_config(fp8)
    with pytest.raises(moejit.InvalidArgumentError, match="expert count"):
        moejit.Model.from_hf_config({"hidden_size": 4096, "intermediate_size": 11008})
    with pytest.raises(moejit.InvalidArgumentError, match="cannot read it"):
        moejit.Model.from_hf_config(tmp_path / "absent.json")
    with pytest.raises(moejit.InvalidArgumentError, match="has type int"):
        moejit.Model.from_hf_config(7)
    with pytest.raises(moejit.InvalidArgumentError, match="'tensor_paralel'"):
        moejit.Model.from_hf_config(KIMI_LIKE, tensor_paralel=2)


def test_warmup_from_a_config(store_dir):
    model = moejit.Model.from_hf_config(KIMI_LIKE, max_tokens=1)
    with moejit.Context("host", cache_dir=store_dir) as ctx:
        moejit.warmup(ctx, model)
        stats = ctx.stats()
        assert stats["compiles"] + stats["disk_hits"] + stats["memory_hits"] >= 4

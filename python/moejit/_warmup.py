"""Warm-up: compiling a model's kernels into the store ahead of time (any architecture, no GPU
needed), and prepare: loading them on this context's device before CUDA graph capture."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from dataclasses import fields as dataclass_fields
from typing import Any, Callable, Optional, Sequence

from . import _core
from ._context import Context
from ._enums import DTYPES, EPILOGUES, FORMATS, lookup, name_of
from ._errors import invalid

Progress = Callable[[int, int, str], None]  # (done, total, what the last kernel was)


@dataclass
class Model:
    """One MoE layer's shape and formats (moejit_model_desc_t), as a serving deployment runs it."""

    hidden: int
    intermediate: int
    experts: int
    topk: int
    format: str = "mxfp4"          # "mxfp4", "int4_sym", "int4_asym"
    group_size: int = 32           # 32 for MXFP4; 32, 64, 128 or 0 (per-channel) for INT4
    scale_dtype: str = "e8m0"      # "e8m0" for MXFP4; "bf16" or "f16" for INT4
    act_dtype: str = "bf16"        # or "e4m3": W4A8; "e2m1": W4A4, sm_120a / sm_121a (act_scale below)
    out_dtype: str = "bf16"
    activation: str = "silu"       # or "swiglu_oai" (gpt-oss)
    tensor_parallel: int = 1
    expert_parallel: int = 1
    max_tokens: int = 8192
    # W4A8: "token" (the default with act_dtype "e4m3") or "block128"; W4A4: "block32" (the default)
    act_scale: Optional[str] = None

    @classmethod
    def from_hf_config(cls, config: Any, **overrides) -> "Model":
        """The MoE layer of a Hugging Face model config, with the formats of its checkpoint.

        ``config``: a config.json path, its JSON text, a dict, or a transformers
        ``PretrainedConfig``. The shape (hidden, intermediate, experts, topk; the clamped SwiGLU
        for gpt-oss) and, from its ``quantization_config``, the weights (gpt-oss MXFP4, GPTQ,
        AutoAWQ, compressed-tensors pack-quantized INT4) and, for compressed-tensors W4AFP8
        exports, the FP8 activations; MXFP4 without a quantization_config. ``overrides`` set the
        other fields (tensor_parallel, expert_parallel, max_tokens, out_dtype) or replace one read.
        A checkpoint moejit cannot run raises UnsupportedError saying why.
        """
        fields = _core.model_desc_from_hf_config(_config_text(config))
        read = {
            "hidden": fields["hidden"], "intermediate": fields["intermediate"], "experts": fields["experts"],
            "topk": fields["topk"], "format": name_of(FORMATS, fields["format"]), "group_size": fields["group_size"],
            "scale_dtype": name_of(DTYPES, fields["scale_dtype"]), "act_dtype": name_of(DTYPES, fields["act_dtype"]),
            "activation": "swiglu_oai" if fields["activation"] == EPILOGUES["swiglu_oai"] else "silu",
            "act_scale": _ACT_SCALE_NAMES.get(fields["act_scale"]),
        }
        unknown = sorted(set(overrides) - {f.name for f in dataclass_fields(cls)})
        if unknown:
            raise invalid(f"argument {unknown[0]!r}: expected a Model field ({', '.join(f.name for f in dataclass_fields(cls))})")
        return cls(**{**read, **overrides})

    def _desc(self) -> dict:
        d = asdict(self)
        d["format"] = lookup(FORMATS, self.format, "format")
        d["group_size"] = self.group_size & 0xFFFFFFFF  # GPTQ configs write -1 for per-channel
        for key in ("scale_dtype", "act_dtype", "out_dtype"):
            d[key] = lookup(DTYPES, d[key], key)
        d["activation"] = lookup(EPILOGUES, self.activation, "activation")
        scale = self.act_scale or {"e4m3": "token", "e2m1": "block32"}.get(self.act_dtype)
        d["act_scale"] = 0 if scale is None else lookup({"token": 1, "block128": 2, "block32": 3}, scale, "act_scale")
        return d


_ACT_SCALE_NAMES = {1: "token", 2: "block128", 3: "block32"}


def _config_text(config: Any) -> str:
    """A model config's JSON text, from a path, the text itself, a dict or a PretrainedConfig."""
    if isinstance(config, os.PathLike) or (isinstance(config, str) and not config.lstrip().startswith("{")):
        try:
            with open(config, encoding="utf-8") as f:
                return f.read()
        except OSError as e:
            raise invalid(f"argument 'config' = {str(config)!r}: cannot read it ({e.strerror}); expected a "
                          "config.json path, its text, a dict or a PretrainedConfig") from None
    if isinstance(config, str):
        return config
    if isinstance(config, dict):
        return json.dumps(config)
    if hasattr(config, "to_json_string"):  # transformers.PretrainedConfig: every field, not the diff
        return config.to_json_string(use_diff=False)
    raise invalid(f"argument 'config' has type {type(config).__name__}: expected a config.json path, its text, a "
                  "dict or a transformers PretrainedConfig")


def warmup(ctx: Context, model: Model, archs: Optional[Sequence[str]] = None,
           progress: Optional[Progress] = None) -> None:
    """Compiles into the store every kernel the fused layer of ``model`` can use, for each of
    ``archs`` ("sm_90a", ...; None: the context's). "sm_90" and other plain names with an "a"
    form warm the "a" form, which is what GPUs of that compute capability run."""
    _core.warmup(ctx._core, model._desc(), list(archs or ()), progress)


def prepare(ctx: Context, model: Model, progress: Optional[Progress] = None) -> None:
    """Before CUDA graph capture: finds (compiling on a miss, unless frozen) and loads on this
    context's device every kernel the fused layer of ``model`` can use for 1..max_tokens tokens,
    so that calls captured afterwards launch without loading a module. Call it on the thread
    (and current CUDA context) the capture will use."""
    _core.prepare(ctx._core, model._desc(), progress)

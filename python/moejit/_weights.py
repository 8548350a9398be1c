"""Weights: packing the tensors checkpoints hold into moejit's layout (templates/README.md)."""

from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

from . import _arrays, _core
from ._context import Context
from ._enums import DTYPES, FORMATS, ROW_ORDERS, SOURCES, UINT32, UINT64, integer, lookup, name_of
from ._errors import invalid


class PackedWeights:
    """E experts of N x K weights in moejit's packed layout, in the context's memory.

    ``qweight``, ``scales``, ``zeros`` (INT4 asymmetric) and ``bias`` (when the source had one)
    are uint8 buffers (bias: float32 [E, N]) that can be saved and given back to
    ``PackedWeights.from_buffers`` or registered as module buffers.
    """

    def __init__(self, ctx: Context, packed: "_core.Packed", qweight, scales, zeros, bias):
        self._ctx = ctx
        self._packed = packed
        self.qweight, self.scales, self.zeros, self.bias = qweight, scales, zeros, bias
        # Plain attributes, read once: torch.compile traces through them, not through the extension.
        self.format = name_of(FORMATS, packed.format)
        self.group_size = packed.group_size
        self.scale_dtype = name_of(DTYPES, packed.scale_dtype)
        self.experts, self.n, self.k = packed.experts, packed.n, packed.k
        self.act_and_mul = packed.act_and_mul
        # "bf16": packed for bf16 activations (INT4 weights: bf16 or f16); "f16": MXFP4 weights
        # packed for f16 ones; "e4m3": for FP8 ones (W4A8); "e2m1": for MXFP4 ones (W4A4, MXFP4
        # weights, sm_120a / sm_121a).
        self.act_dtype = {DTYPES["f16"]: "f16", DTYPES["e4m3"]: "e4m3", DTYPES["e2m1"]: "e2m1"}.get(
            packed.act_dtype, "bf16")

    @property
    def context(self) -> Context:
        """The context the weights were packed for (their memory is its memory)."""
        return self._ctx

    @classmethod
    def describe(cls, ctx: Context, *, format: str, group_size: int, scale_dtype: str, experts: int, n: int, k: int,
                 act_and_mul: bool, act_dtype: str = "bf16") -> "PackedWeights":
        """Weights' shape and format without their buffers: for workspace-size queries at start-up,
        before any weights are loaded. A launch with them fails, naming the missing buffer."""
        packed = _core.Packed(ctx._core, lookup(FORMATS, format, "format"),
                              *_shape_args(group_size, scale_dtype, experts, n, k),
                              bool(act_and_mul), _packed_for(act_dtype), None, None, None, None)
        return cls(ctx, packed, None, None, None, None)

    @classmethod
    def from_buffers(cls, ctx: Context, *, format: str, group_size: int, scale_dtype: str, experts: int, n: int,
                     k: int, act_and_mul: bool, qweight, scales, zeros=None, bias=None,
                     act_dtype: str = "bf16") -> "PackedWeights":
        """Weights moejit packed earlier (buffers as ``pack_weights`` returned them, with the
        act_dtype they were packed for); every use checks the buffer sizes against the shape."""
        for name, buf in (("qweight", qweight), ("scales", scales), ("zeros", zeros)):
            _arrays.check_optional(buf, name, ("u8",))
        _arrays.check_optional(bias, "bias", ("f32",), (experts, n))
        packed = _core.Packed(ctx._core, lookup(FORMATS, format, "format"),
                              *_shape_args(group_size, scale_dtype, experts, n, k),
                              bool(act_and_mul), _packed_for(act_dtype), qweight, scales, zeros, bias)
        return cls(ctx, packed, qweight, scales, zeros, bias)

    def __repr__(self) -> str:
        return (f"moejit.PackedWeights({self.format}, group {self.group_size}, scales {self.scale_dtype}, "
                f"E={self.experts}, N={self.n}, K={self.k}, act_and_mul={self.act_and_mul})")


def _shape_of(source: str, qweight, scales, zeros) -> tuple[int, int, int, int]:
    """(experts, n, k, group_size) from the shapes the checkpoint layout has (moejit.h)."""
    def dims(x, name, rank):
        if len(x.shape) != rank:
            raise invalid(f"argument '{name}' has shape {list(x.shape)}: expected {rank} dimensions for source {source!r}")
        return tuple(int(d) for d in x.shape)

    if source == "plain":
        e, n, k = dims(qweight, "qweight", 3)
        groups = dims(scales, "scales", 3)[2]
    elif source == "vllm_mxfp4":
        e, n, half_k = dims(qweight, "qweight", 3)
        k = 2 * half_k
        groups = dims(scales, "scales", 3)[2]
    elif source in ("gptq_v1", "gptq_v2"):
        e, k8, n = dims(qweight, "qweight", 3)
        k = 8 * k8
        groups = dims(scales, "scales", 3)[1]
    elif source == "compressed_tensors":
        e, n, k8 = dims(qweight, "qweight", 3)
        k = 8 * k8
        groups = dims(scales, "scales", 3)[2]
    else:  # awq
        e, k, n8 = dims(qweight, "qweight", 3)
        n = 8 * n8
        groups = dims(scales, "scales", 3)[1]
    if groups <= 0 or k % groups:
        raise invalid(f"argument 'scales' has shape {list(scales.shape)}: expected a group count that divides K = {k}")
    return e, n, k, k // groups


def _expected_shapes(source: str, e: int, n: int, k: int, g: int) -> dict:
    groups = k // g
    if source == "plain":
        return {"qweight": ("u8", (e, n, k)), "scales": (None, (e, n, groups)), "zeros": ("u8", (e, n, groups))}
    if source == "vllm_mxfp4":
        return {"qweight": ("u8", (e, n, k // 2)), "scales": (None, (e, n, groups)), "zeros": ("u8", None)}
    if source in ("gptq_v1", "gptq_v2"):
        return {"qweight": ("i32", (e, k // 8, n)), "scales": (None, (e, groups, n)),
                "zeros": ("i32", (e, groups, n // 8))}
    if source == "compressed_tensors":
        return {"qweight": ("i32", (e, n, k // 8)), "scales": (None, (e, n, groups)),
                "zeros": ("i32", (e, n // 8, groups))}
    return {"qweight": ("i32", (e, k, n // 8)), "scales": (None, (e, groups, n)), "zeros": ("i32", (e, groups, n // 8))}


def _shape_args(group_size, scale_dtype: str, experts, n, k) -> tuple:
    """The shape of packed weights as _core.Packed takes it (group_size, scale dtype, E, N, K)."""
    return (integer(group_size, "group_size", UINT32), lookup(DTYPES, scale_dtype, "scale_dtype"),
            integer(experts, "experts", UINT32), integer(n, "n", UINT32), integer(k, "k", UINT32))


def _packed_for(act_dtype: str) -> int:
    """The C dtype of the activations weights are packed for: "bf16", "f16", "e4m3" or "e2m1"
    (the library picks the packing from it and the format: INT4 has one for both 16-bit types)."""
    if act_dtype not in ("bf16", "f16", "e4m3", "e2m1"):
        raise invalid(f"argument 'act_dtype' = {act_dtype!r}: expected 'bf16' or 'f16' (16-bit activations), 'e4m3' "
                      "or 'e2m1'")
    return DTYPES[act_dtype]


def pack_weights(ctx: Context, source: str, qweight, scales, zeros=None, bias=None, *, format: Optional[str] = None,
                 rows: str = "plain", act_dtype: str = "bf16", stream: Optional[int] = None,
                 allocator: Optional[Callable[[int], Any]] = None) -> PackedWeights:
    """Packs one layer's expert weights from the layout a checkpoint holds.

    source: "plain" (codes u8 [E,N,K] 0..15, scales [E,N,K/G], zeros u8 [E,N,K/G]),
    "vllm_mxfp4" (u8 [E,N,K/2], E8M0 u8 [E,N,K/32]), "gptq_v1" / "gptq_v2" (qweight i32
    [E,K/8,N], qzeros i32 [E,K/G,N/8], scales [E,K/G,N]; v1 as GPTQModel and AutoGPTQ write it,
    each word minus 0x11111111), "awq" (qweight i32 [E,K,N/8], qzeros i32 [E,K/G,N/8], scales
    [E,K/G,N]), "compressed_tensors" (llm-compressor's pack-quantized INT4 as the checkpoint
    stores it, experts stacked: weight_packed i32 [E,N,K/8], weight_scale [E,N,K/G],
    weight_zero_point i32 [E,N/8,K/G] when asymmetric). E, N, K and the group size come from the
    shapes. format: "mxfp4" (E8M0 u8
    scales), "int4_sym" or "int4_asym"; by default MXFP4 when the scales are uint8, else INT4
    asymmetric when zeros are given (GPTQ symmetric checkpoints also store qzeros: pass
    format="int4_sym", and moejit checks every zero point is 8). rows: "plain", or for gate/up
    (N = 2I) weights "concatenated" (vLLM's w13) or "interleaved" (gpt-oss). bias: float32 [E, N]
    in source row order. act_dtype: the activations the weights will meet, "bf16" or "f16" (MXFP4
    weights have a packing for each; INT4 ones one for both), "e4m3" (W4A8: FP8 activations;
    sm_89 and newer) or "e2m1" (W4A4: MXFP4 weights with
    MXFP4 activations; sm_120a / sm_121a). Sources may be host memory or,
    on the device backend, the context's GPU.
    allocator(nbytes) returns the uint8 buffers the packed weights live in (16-byte aligned, in
    the context's memory); by default NumPy or torch arrays (torch for CUDA memory).
    """
    src = lookup(SOURCES, source, "source")
    for name, x in (("qweight", qweight), ("scales", scales)):
        if x is None:
            raise invalid(f"argument '{name}' is None: expected an array")
    e, n, k, g = _shape_of(source, qweight, scales, zeros)
    scale_dtype = _arrays.dtype_name(scales)
    if format is None:
        format = "mxfp4" if scale_dtype == "u8" else ("int4_asym" if zeros is not None else "int4_sym")
    fmt = lookup(FORMATS, format, "format")
    want = _expected_shapes(source, e, n, k, g)
    _arrays.check(qweight, "qweight", (want["qweight"][0],), want["qweight"][1])
    _arrays.check(scales, "scales", ("u8",) if format == "mxfp4" else ("bf16", "f16"), want["scales"][1])
    _arrays.check_optional(zeros, "zeros", (want["zeros"][0],), want["zeros"][1])
    _arrays.check_optional(bias, "bias", ("f32",), (e, n))
    scale_code = DTYPES["e8m0"] if format == "mxfp4" else DTYPES[scale_dtype]
    row_code = lookup(ROW_ORDERS, rows, "rows")
    act_code = _packed_for(act_dtype)

    devices = {_arrays.device_of(x) for x in (qweight, scales, zeros, bias) if x is not None}
    if len(devices) != 1:
        raise invalid(f"the source tensors are on {sorted(devices)}: expected all on one device")
    source_device = devices.pop()
    if source_device[0] == "cuda" and source_device != ctx.memory:
        raise invalid(f"the source tensors are on cuda:{source_device[1]}: expected host memory or "
                      f"{ctx.memory[0]}:{ctx.memory[1]}, the context's memory")

    sources = (_arrays.for_core(qweight), _arrays.for_core(scales), None if zeros is None else _arrays.for_core(zeros),
               bias, source_device[0] == "cuda")
    sizes = _core.packed_sizes(ctx._core, fmt, g, scale_code, e, n, k, src, row_code, act_code, *sources)
    if allocator is None:
        def allocator(nbytes: int):
            return _arrays.empty_bytes(qweight, nbytes, device=ctx.memory, align=16)
    buffers = [None if nbytes == 0 else _allocated(allocator, nbytes) for nbytes in sizes[:3]]
    # The bias keeps its dtype and shape (float32 [E, N], in packed column order) where the
    # array library can view bytes as float32; the C call needs only its bytes.
    bias_buffer = None
    if bias is not None:
        raw = _allocated(allocator, 4 * e * n)
        bias_buffer = raw.view(_f32(raw)).reshape(e, n) if isinstance(raw, np.ndarray) or _arrays.is_torch(raw) else raw
    buffers.append(bias_buffer)
    out = _core.Packed(ctx._core, fmt, g, scale_code, e, n, k, row_code != 0, act_code, *buffers)
    stream = _arrays.current_stream(ctx.memory, qweight) if stream is None else stream
    _core.pack_weights(ctx._core, fmt, g, scale_code, e, n, k, src, row_code, act_code, *sources, out,
                       integer(stream, "stream", UINT64))
    zeros_buffer = buffers[2] if format == "int4_asym" else None
    return PackedWeights(ctx, out, buffers[0], buffers[1], zeros_buffer, buffers[3] if bias is not None else None)


def _allocated(allocator: Callable[[int], Any], nbytes: int):
    buffer = allocator(nbytes)
    _arrays.check(buffer, "allocator(...)", ("u8",), (None,))
    if int(buffer.shape[0]) < nbytes:
        raise invalid(f"allocator({nbytes}) returned {int(buffer.shape[0])} bytes: expected at least {nbytes}")
    return buffer


def _f32(like: Any):
    """float32 in the library ``like`` comes from."""
    if _arrays.is_torch(like):
        import torch
        return torch.float32
    return np.float32

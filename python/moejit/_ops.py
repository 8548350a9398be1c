"""The launch calls: the fused MoE layer and the grouped GEMM, with their workspace sizes."""

from __future__ import annotations

import functools
import inspect
import math
from typing import Optional

from . import _arrays, _core
from ._context import Context
from ._enums import DTYPES, EPILOGUES, INT32, LAYOUTS, UINT32, UINT64, integer, lookup
from ._errors import invalid
from ._weights import PackedWeights

_ACT_DTYPES = ("bf16", "f16")
_OUT_DTYPES = ("bf16", "f16", "f32")
_ACT_SCALES = {None: 0, "token": 1, "block128": 2, "block32": 3}


def _act_scale(weights: PackedWeights, act_scale: Optional[str], hidden_dtype: str) -> int:
    """The C act_scale of a call: for weights packed for e4m3, "token" (the default) or
    "block128"; for e2m1 ones "block32" (the default and only one); for 16-bit ones, none."""
    if act_scale not in _ACT_SCALES:
        raise invalid(f"argument 'act_scale' = {act_scale!r}: expected 'token', 'block128' or 'block32' (or None)")
    if weights.act_dtype == "e2m1":
        if act_scale not in (None, "block32"):
            raise invalid(f"argument 'act_scale' = {act_scale!r}: the weights were packed for e2m1 activations "
                          "(W4A4); expected 'block32' (E8M0 scales per 32) or None")
        return _ACT_SCALES["block32"]
    if act_scale == "block32":
        raise invalid(f"argument 'act_scale' = 'block32': the weights were packed for {weights.act_dtype} "
                      "activations; block32 scales go with weights packed for e2m1 (act_dtype='e2m1')")
    if weights.act_dtype != "e4m3":
        if act_scale is not None or hidden_dtype == "e4m3":
            raise invalid(f"argument 'act_scale' = {act_scale!r} with {hidden_dtype} activations: the weights were "
                          "packed for 16-bit activations; pack them with act_dtype='e4m3' for FP8 (W4A8)")
        return 0
    return _ACT_SCALES[act_scale or "token"]


def _check_scales(scales, name: str, rows: int, k: int, act_scale: int, slabs: tuple = ()) -> None:
    """Checks f32 scales of e4m3 rows: token [rows]; block128 [rows, k/128], or ``slabs + (k/128,)``
    (the masked layout's [E, m, k/128]). Per-128 scales may be any strided view (column-major
    ones, as DeepEP's dispatch gives them, are read in place)."""
    if act_scale == _ACT_SCALES["token"]:
        _arrays.check(scales, name, ("f32",), (rows,))
        return
    if slabs and len(getattr(scales, "shape", ())) == 3:
        _arrays.check(scales, name, ("f32",), slabs + (k // 128,))
        return
    _arrays.check(scales, name, ("f32",), (rows, k // 128))


def _check_mx_scales(scales, name: str, rows: int, k: int) -> None:
    """Checks the E8M0 bytes of e2m1 rows: uint8 [rows, >= k/32], rows 16 bytes apart (the
    kernels read them in 16-byte words)."""
    if scales is None:
        raise invalid(f"argument '{name}' is None: expected the E8M0 scales (uint8 [{rows}, >= {k // 32}]) of the "
                      "e2m1 hidden states")
    _arrays.check(scales, name, ("u8",), (rows, None))
    if int(scales.shape[1]) < k // 32:
        raise invalid(f"argument '{name}' has shape {list(scales.shape)}: expected [{rows}, >= {k // 32}] (one E8M0 "
                      "byte per 32 columns)")
    step = _arrays.row_stride_bytes(scales)
    if rows > 1 and step % 16 != 0:
        raise invalid(f"argument '{name}' has rows {step} bytes apart: expected a multiple of 16 (e.g. a [:, :{k // 32}] "
                      f"view of a [{rows}, {(k // 32 + 15) // 16 * 16}] array)")


def _default_out(act_dtype: str) -> str:
    """The output dtype when none is given: the activations', bf16 for e4m3 and e2m1 ones."""
    return "bf16" if act_dtype in ("e4m3", "e2m1") else act_dtype


def _activation(activation: str) -> int:
    code = lookup(EPILOGUES, activation, "activation")
    if code not in (EPILOGUES["silu"], EPILOGUES["swiglu_oai"]):
        raise invalid(f"argument 'activation' = {activation!r}: expected 'silu' or 'swiglu_oai'")
    return code


def _check_weights(w: PackedWeights, name: str) -> None:
    if not isinstance(w, PackedWeights):
        raise invalid(f"argument '{name}' is a {type(w).__name__}: expected moejit.PackedWeights (moejit.pack_weights)")


def _allocating_on_stream(array: str):
    """``call(..., stream=...)`` with the arrays it allocates placed for ``stream`` beside its
    argument ``array`` (``_arrays.allocations_on``)."""
    def wrap(call):
        position = list(inspect.signature(call).parameters).index(array)

        @functools.wraps(call)
        def on_stream(*args, stream: Optional[int] = None, **kwargs):
            like = args[position] if len(args) > position else kwargs.get(array)
            with _arrays.allocations_on(stream, like):
                return call(*args, stream=stream, **kwargs)
        return on_stream
    return wrap


def fused_moe_workspace_size(ctx: Context, w13: PackedWeights, w2: PackedWeights, tokens: int, topk: int, *,
                             act_dtype: str = "bf16", out_dtype: Optional[str] = None, activation: str = "silu",
                             global_experts: int = 0, max_tokens: int = 0, act_scale: Optional[str] = None) -> int:
    """Bytes of workspace ``fused_moe`` needs for up to ``max(tokens, max_tokens)`` tokens."""
    _check_weights(w13, "w13")
    _check_weights(w2, "w2")
    scale = _act_scale(w13, act_scale, act_dtype)
    return _core.fused_moe_workspace_size(ctx._core, w13._packed, w2._packed, lookup(DTYPES, act_dtype, "act_dtype"),
                                          lookup(DTYPES, out_dtype or _default_out(act_dtype),
                                                 "out_dtype"),
                                          _activation(activation), integer(tokens, "tokens", INT32),
                                          integer(topk, "topk", UINT32),
                                          integer(global_experts, "global_experts", UINT32),
                                          integer(max_tokens, "max_tokens", INT32), scale)


@_allocating_on_stream("hidden")
def fused_moe(ctx: Context, hidden, w13: PackedWeights, w2: PackedWeights, topk_weights, topk_ids, *,
              activation: str = "silu", global_experts: int = 0, expert_map=None, output=None,
              out_dtype: Optional[str] = None, workspace=None, max_tokens: int = 0,
              apply_router_weight_on_input: bool = False, act_scale: Optional[str] = None, hidden_scales=None,
              stream: Optional[int] = None):
    """One MoE layer: output[t] = sum_k topk_weights[t,k] * w2_e(act(w13_e hidden[t])), e = topk_ids[t,k].

    hidden [T, H] bf16/f16; w13 packed gate/up weights (N = 2I, K = H, packed from a
    "concatenated" or "interleaved" row order); w2 down weights (N = H, K = I); topk_ids int32
    [T, topk] global expert ids; topk_weights float32 [T, topk]; expert_map int32
    [global_experts] -> local expert or -1 (expert parallelism; None: identity). output [T, H] of
    out_dtype (default: hidden's) is allocated when None; workspace (uint8, at least
    ``fused_moe_workspace_size`` bytes, 256-byte aligned, any contents) too, which is not
    allowed under CUDA graph capture: pass both there. apply_router_weight_on_input (vLLM's
    flag, topk must be 1): the weight scales the input row instead of the output. W4A8: with
    w13 and w2 packed with act_dtype="e4m3" both GEMMs run on FP8 activations with f32 scales
    per token (act_scale "token", the default) or per 128 columns ("block128"); hidden is then
    bf16/f16 (quantized by the layer) or float8_e4m3fn with hidden_scales (f32 [T], or
    [T, H/128], row-major or any strided view such as DeepEP's column-major one) quantized as
    moejit.h describes; output defaults to bf16. W4A4 (sm_120a /
    sm_121a): with MXFP4 weights packed with act_dtype="e2m1" both GEMMs run on MXFP4 activations
    (E8M0 scales per 32, act_scale "block32"), hidden bf16/f16 quantized by the layer, or the
    caller's MXFP4: uint8 [T, H/2] (torch.float4_e2m1fn_x2 too), two codes per byte, the even
    column in the low nibble, with hidden_scales uint8 [T, >= H/32] E8M0 bytes whose rows start a
    multiple of 16 bytes apart (a [:, :H/32] view of [T, 16 n] is fine), quantized as moejit.h
    describes. Returns output.
    On CUDA memory the call is queued on ``stream`` (default: torch's current stream for torch
    tensors, else the legacy default stream) without synchronizing the host.
    """
    _check_weights(w13, "w13")
    _check_weights(w2, "w2")
    if w13.act_dtype == "e2m1" and _arrays.is_array(hidden) and _arrays.dtype_name(hidden) in ("u8", "e2m1x2"):
        act = _arrays.check(hidden, "hidden", ("u8", "e2m1x2"), (None, w13.k // 2))
        act_dtype = "e2m1"  # two e2m1 codes per byte
    else:
        act = _arrays.check(hidden, "hidden", _ACT_DTYPES + ("e4m3",), (None, w13.k))
        act_dtype = _arrays.dtype_name(act)
    tokens = int(hidden.shape[0])
    scale = _act_scale(w13, act_scale, act_dtype)
    if w13.act_dtype == "e2m1" and act_dtype == "e4m3":
        raise invalid("argument 'hidden' is float8_e4m3fn, but the weights were packed for e2m1 activations: "
                      "expected bf16/f16 hidden states, which the layer quantizes to MXFP4")
    if act_dtype == "e4m3":
        _check_scales(hidden_scales, "hidden_scales", tokens, w13.k, scale)
    elif act_dtype == "e2m1":
        _check_mx_scales(hidden_scales, "hidden_scales", tokens, w13.k)
    elif hidden_scales is not None:
        raise invalid(f"argument 'hidden_scales' is given with {act_dtype} hidden states: expected None (scales "
                      "come with float8_e4m3fn hidden states)")
    _arrays.check(topk_ids, "topk_ids", ("i32",), (tokens, None))
    topk = int(topk_ids.shape[1])
    _arrays.check(topk_weights, "topk_weights", ("f32",), (tokens, topk))
    if expert_map is not None:
        _arrays.check(expert_map, "expert_map", ("i32",), (None,))
        if global_experts == 0:
            global_experts = int(expert_map.shape[0])
        elif int(expert_map.shape[0]) != global_experts:
            raise invalid(f"argument 'expert_map' has shape {list(expert_map.shape)}: expected [{global_experts}] "
                          "(global_experts)")
    if output is None:
        output = _arrays.empty(hidden, (tokens, w2.n), out_dtype or _default_out(act_dtype),
                               device=ctx.memory)
    _arrays.check(output, "output", (out_dtype,) if out_dtype else _OUT_DTYPES, (tokens, w2.n))
    out_dtype = _arrays.dtype_name(output)
    if tokens == 0:
        return output  # nothing routed, nothing written
    if apply_router_weight_on_input:
        if act_dtype in ("e4m3", "e2m1"):
            raise invalid(f"apply_router_weight_on_input with {act_dtype} hidden states: expected bf16/f16 ones "
                          "(the weight scales the row before quantization)")
        if topk != 1:
            raise invalid(f"apply_router_weight_on_input with topk = {topk}: expected topk = 1 (the weight of a "
                          "token's single expert scales its input row)")
        act = _scaled_rows(hidden, topk_weights)
        topk_weights = _ones_like(topk_weights)
    if workspace is None:
        nbytes = fused_moe_workspace_size(ctx, w13, w2, tokens, topk, act_dtype=act_dtype, out_dtype=out_dtype,
                                          activation=activation, global_experts=global_experts,
                                          max_tokens=max_tokens, act_scale=act_scale)
        workspace = _arrays.empty_bytes(hidden, nbytes, device=ctx.memory) if nbytes else None
    else:
        _arrays.check(workspace, "workspace", ("u8",), (None,))
    stream = _arrays.current_stream(ctx.memory, hidden) if stream is None else stream
    _core.fused_moe(ctx._core, w13._packed, w2._packed, DTYPES[act_dtype], DTYPES[out_dtype], _activation(activation),
                    tokens, topk, integer(global_experts, "global_experts", UINT32),
                    integer(max_tokens, "max_tokens", INT32), scale, _arrays.for_core(act), hidden_scales, topk_ids,
                    topk_weights, expert_map, _arrays.for_core(output), workspace, integer(stream, "stream", UINT64))
    return output


def _scaled_rows(hidden, weights):
    """hidden[t] * weights[t, 0], rounded back to hidden's dtype (what vLLM does on input)."""
    if _arrays.is_torch(hidden):
        return (hidden.float() * weights[:, :1]).to(hidden.dtype)
    return (hidden.astype("float32") * weights[:, :1]).astype(hidden.dtype)


def _ones_like(x):
    if _arrays.is_torch(x):
        import torch
        return torch.ones_like(x)
    import numpy as np
    return np.ones_like(x)


def _gemm_integers(block_size, a_row_divisor, rows_per_expert_hint) -> tuple[int, int, int]:
    return (integer(block_size, "block_size", INT32), integer(a_row_divisor, "a_row_divisor", INT32),
            integer(rows_per_expert_hint, "rows_per_expert_hint", UINT32))


def _gemm_shape(weights: PackedWeights, layout: str, epilogue: str, a, m: Optional[int], a_row_divisor: int):
    layout_code = lookup(LAYOUTS, layout, "layout")
    epilogue_code = lookup(EPILOGUES, epilogue, "epilogue")
    out_cols = weights.n // 2 if epilogue_code in (EPILOGUES["silu"], EPILOGUES["swiglu_oai"]) else weights.n
    if layout == "masked":
        _arrays.check(a, "a", _ACT_DTYPES + ("e4m3",), (weights.experts, None, weights.k))
        # Expert e's rows start at e * m rows of a (and of c): m is a's second extent.
        if m is not None and integer(m, "m", INT32) != a.shape[1]:
            raise invalid(f"argument 'm' = {m} with the masked layout: expected a.shape[1] = {int(a.shape[1])} (or "
                          "None), the rows each expert has in a and c")
        m = int(a.shape[1])
    else:
        _arrays.check(a, "a", _ACT_DTYPES + ("e4m3",), (None, weights.k))
        if m is None:
            m = int(a.shape[0]) * (a_row_divisor if layout == "indexed" else 1)
        m = integer(m, "m", INT32)
        if layout == "contiguous" and not 0 <= m <= a.shape[0]:
            # expert_offsets reach up to m: rows of a (and of c, which has a's rows) up to m are read.
            raise invalid(f"argument 'm' = {m} with the contiguous layout: expected 0 to a.shape[0] = "
                          f"{int(a.shape[0])} (or None)")
    return layout_code, epilogue_code, out_cols, int(m)


def _check_indexed(a, m, experts, block_size, a_row_divisor, sorted_token_ids, expert_ids, num_tokens_post_pad):
    """The lengths C cannot see: the grid reads m + min(m, E) * (block_size - 1) sorted slots
    and one expert id per block of them, and A rows up to (m - 1) / a_row_divisor."""
    if block_size not in (16, 32, 64, 128):
        raise invalid(f"argument 'block_size' = {block_size}: expected 16, 32, 64 or 128 (the moe_align block size)")
    if a_row_divisor < 1:
        raise invalid(f"argument 'a_row_divisor' = {a_row_divisor}: expected >= 1 (topk, or 1)")
    slots = m + min(m, experts) * (block_size - 1)
    _arrays.check(sorted_token_ids, "sorted_token_ids", ("i32",), (None,))
    _arrays.check(expert_ids, "expert_ids", ("i32",), (None,))
    _arrays.check(num_tokens_post_pad, "num_tokens_post_pad", ("i32",), (None,))
    if sorted_token_ids.shape[0] < slots:
        raise invalid(f"argument 'sorted_token_ids' has {sorted_token_ids.shape[0]} entries: expected at least "
                      f"m + min(m, experts) * (block_size - 1) = {slots}")
    if expert_ids.shape[0] < -(-slots // block_size):
        raise invalid(f"argument 'expert_ids' has {expert_ids.shape[0]} entries: expected at least "
                      f"{-(-slots // block_size)} (one per block of sorted_token_ids)")
    if num_tokens_post_pad.shape[0] < 1:
        raise invalid("argument 'num_tokens_post_pad' is empty: expected one int32")
    if a.shape[0] * a_row_divisor < m:
        raise invalid(f"argument 'a' has {a.shape[0]} rows: expected at least ceil(m / a_row_divisor) = "
                      f"{-(-m // a_row_divisor)}")


def _gemm_act(weights: PackedWeights, a, act_scale: Optional[str]) -> tuple[str, int]:
    """a's dtype and the C act_scale: e4m3 rows need weights packed for them (and the other way
    round)."""
    act_dtype = _arrays.dtype_name(a)
    if weights.act_dtype == "e2m1":
        raise invalid("argument 'weights': packed for e2m1 activations (W4A4), which grouped_gemm takes from the C "
                      "ABI (moejit_grouped_gemm with E2M1 rows and E8M0 scales); from Python, fused_moe runs them on "
                      "bf16/f16 hidden states, or pack the weights for bf16/f16 or e4m3 rows")
    if (act_dtype == "e4m3") != (weights.act_dtype == "e4m3"):
        raise invalid(f"argument 'a' has dtype {act_dtype}, but the weights were packed for "
                      f"{'e4m3' if weights.act_dtype == 'e4m3' else '16-bit'} activations: expected "
                      f"{'float8_e4m3fn' if weights.act_dtype == 'e4m3' else 'bf16 or f16'} rows")
    return act_dtype, _act_scale(weights, act_scale, act_dtype)


def grouped_gemm_workspace_size(ctx: Context, weights: PackedWeights, a, *, layout: str, epilogue: str = "none",
                                m: Optional[int] = None, out_dtype: Optional[str] = None, block_size: int = 0,
                                a_row_divisor: int = 1, rows_per_expert_hint: int = 0,
                                act_scale: Optional[str] = None) -> int:
    """Bytes of workspace ``grouped_gemm`` needs (zero-filled once before its first use)."""
    _check_weights(weights, "weights")
    layout_code, epilogue_code, _, m = _gemm_shape(weights, layout, epilogue, a, m, a_row_divisor)
    act_dtype, scale = _gemm_act(weights, a, act_scale)
    return _core.grouped_gemm_workspace_size(ctx._core, weights._packed, DTYPES[act_dtype],
                                             lookup(DTYPES, out_dtype or _default_out(act_dtype), "out_dtype"),
                                             layout_code, epilogue_code, m, *_gemm_integers(block_size, a_row_divisor,
                                                                                           rows_per_expert_hint), scale)


@_allocating_on_stream("a")
def grouped_gemm(ctx: Context, a, weights: PackedWeights, *, layout: str, epilogue: str = "none", c=None,
                 out_dtype: Optional[str] = None, m: Optional[int] = None, expert_offsets=None, expert_counts=None,
                 sorted_token_ids=None, expert_ids=None, num_tokens_post_pad=None, block_size: int = 0,
                 a_row_divisor: int = 1, topk_weights=None, rows_per_expert_hint: int = 0, workspace=None,
                 act_scale: Optional[str] = None, a_scales=None, stream: Optional[int] = None):
    """C = epilogue(A W_e^T) per expert, in one of moejit's MoE layouts (moejit.h has the details).

    layout "contiguous": a [rows, K] grouped by expert, expert_offsets int32 [E + 1];
    "masked": a [E, max_m, K] with expert_counts int32 [E]; "indexed": vLLM's
    moe_align_block_size output (sorted_token_ids, expert_ids, num_tokens_post_pad, block_size,
    a_row_divisor = topk when a holds tokens, m = pairs). epilogue "none", "silu" / "swiglu_oai"
    (act-and-mul weights; C has N/2 columns) or "topk_weight" (indexed; topk_weights [m]).
    c is allocated when None. workspace: uint8, zero-filled once before first use (moejit leaves
    it zero); allocated zeroed when None. W4A8: a float8_e4m3fn with weights packed for e4m3 and
    a_scales f32 per row of a ("token", [rows]) or per row and 128 k ("block128", [rows, K/128];
    masked: or [E, max_m, K/128]; any strided view, e.g. DeepEP's column-major scales, is read in
    place); c defaults to bf16. Returns c.
    """
    _check_weights(weights, "weights")
    layout_code, epilogue_code, out_cols, m = _gemm_shape(weights, layout, epilogue, a, m, a_row_divisor)
    act_dtype, scale = _gemm_act(weights, a, act_scale)
    if act_dtype == "e4m3":
        a_rows = math.prod(int(extent) for extent in a.shape[:-1])
        slabs = tuple(int(extent) for extent in a.shape[:-1]) if layout == "masked" else ()
        _check_scales(a_scales, "a_scales", a_rows, weights.k, scale, slabs)
    elif a_scales is not None:
        raise invalid(f"argument 'a_scales' is given with {act_dtype} rows: expected None")
    rows_shape = (m,) if layout == "indexed" else tuple(a.shape[:-1])
    if c is None:
        c = _arrays.empty(a, rows_shape + (out_cols,), out_dtype or _default_out(act_dtype), device=ctx.memory)
    _arrays.check(c, "c", (out_dtype,) if out_dtype else _OUT_DTYPES, rows_shape + (out_cols,))
    out_dtype = _arrays.dtype_name(c)
    experts = weights.experts
    if layout == "contiguous":
        _arrays.check(expert_offsets, "expert_offsets", ("i32",), (experts + 1,))
    elif layout == "masked":
        _arrays.check(expert_counts, "expert_counts", ("i32",), (experts,))
    else:
        _check_indexed(a, m, experts, block_size, a_row_divisor, sorted_token_ids, expert_ids, num_tokens_post_pad)
    if epilogue_code == EPILOGUES["topk_weight"]:
        _arrays.check(topk_weights, "topk_weights", ("f32",), None)
        entries = math.prod(int(extent) for extent in topk_weights.shape)
        if entries < m:
            raise invalid(f"argument 'topk_weights' has {entries} entries: expected one per pair, m = {m}")
    if workspace is None:
        nbytes = grouped_gemm_workspace_size(ctx, weights, a, layout=layout, epilogue=epilogue, m=m,
                                             out_dtype=out_dtype, block_size=block_size, a_row_divisor=a_row_divisor,
                                             rows_per_expert_hint=rows_per_expert_hint, act_scale=act_scale)
        workspace = _arrays.empty_bytes(a, nbytes, device=ctx.memory, zero=True) if nbytes else None
    else:
        _arrays.check(workspace, "workspace", ("u8",), (None,))
    stream = _arrays.current_stream(ctx.memory, a) if stream is None else stream
    _core.grouped_gemm(ctx._core, weights._packed, DTYPES[act_dtype], DTYPES[out_dtype], layout_code, epilogue_code, m,
                       *_gemm_integers(block_size, a_row_divisor, rows_per_expert_hint), scale, _arrays.for_core(a),
                       int(a.shape[-1]), a_scales, _arrays.for_core(c), int(c.shape[-1]), sorted_token_ids,
                       expert_ids,
                       num_tokens_post_pad, expert_offsets, expert_counts, topk_weights, workspace,
                       integer(stream, "stream", UINT64))
    return c

"""moejit for PyTorch: ``torch.ops.moejit.fused_moe`` and ``torch.ops.moejit.grouped_gemm``, their
Python wrappers, and ``FusedMoE``, an nn.Module over one layer's packed weights.

An op schema carries tensors, ints, bools and strings only, so the ops name their context by a
small int (``register_context``; 0 is the default context of the tensors' device) and their
packed weights by the buffers and shape of each ``moejit.PackedWeights``. They write into the
output and workspace the caller gives and return nothing, so torch.compile traces them through
their fake implementations and CUDA graphs capture them (moejit allocates nothing and does not
synchronize the host once its kernels are loaded: warm them with ``moejit.prepare`` or one eager
call first). CUDA tensors run on the device backend, on torch's current stream; CPU tensors on
the host backend (a slow reference executor, for tests).
"""

from __future__ import annotations

import functools
import threading
import weakref
from typing import NamedTuple, Optional

import torch
from torch import Tensor

from ._context import Context
from ._enums import EPILOGUES
from ._errors import invalid
from ._ops import _activation, fused_moe as _fused_moe, fused_moe_workspace_size
from ._ops import grouped_gemm as _grouped_gemm, grouped_gemm_workspace_size
from ._weights import PackedWeights, pack_weights

__all__ = ["register_context", "default_context", "fused_moe", "fused_moe_workspace_bytes", "grouped_gemm",
           "grouped_gemm_workspace_bytes", "FusedMoE"]

# moejit wants 256-byte aligned workspaces and CPU tensors are only 64-byte aligned, so the ops
# align the start themselves and the byte counts of the *_workspace_bytes helpers leave room.
_WORKSPACE_ALIGN = 256
_DTYPE_NAMES = {torch.bfloat16: "bf16", torch.float16: "f16", torch.float32: "f32", torch.float8_e4m3fn: "e4m3"}
_ACT_DTYPES = (torch.bfloat16, torch.float16)
# Activations a call may pass: float8_e4m3fn ones (W4A8) need weights packed for them.
_IN_DTYPES = _ACT_DTYPES + (torch.float8_e4m3fn,)
_OUT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


# ---- Contexts --------------------------------------------------------------------------------

_lock = threading.Lock()
# A compiled graph or a captured call holds only the id, so the registry keeps each context
# alive for the life of the process. Index 0 stands for the default context of the tensors' device.
_contexts: list[Optional[Context]] = [None]
_defaults: dict[tuple[str, int], Context] = {}


def register_context(ctx: Context) -> int:
    """The id that names ``ctx`` in the ops' ``context`` argument (the same id on every call)."""
    if not isinstance(ctx, Context):
        raise invalid(f"argument 'ctx' is a {type(ctx).__name__}: expected a moejit.Context")
    with _lock:
        for i, known in enumerate(_contexts):
            if known is ctx:
                return i
        _contexts.append(ctx)
        return len(_contexts) - 1


def default_context(device: torch.device | str = "cpu") -> Context:
    """The process's context for ``device``, created on first use over the default store
    ($MOEJIT_CACHE_DIR, else ~/.cache/moejit): the host backend for "cpu", the device backend on
    that GPU for "cuda:N". The ops use it when their ``context`` is 0."""
    device = torch.device(device)
    if device.type == "cuda":
        key = ("device", device.index if device.index is not None else torch.cuda.current_device())
    elif device.type == "cpu":
        key = ("host", 0)
    else:
        raise invalid(f"argument 'device' = {str(device)!r}: expected 'cpu' or a CUDA device")
    with _lock:
        if key not in _defaults:
            _defaults[key] = Context(*key)
        return _defaults[key]


def _context(context: int, device: Optional[torch.device] = None) -> Context:
    if context == 0 and device is not None:
        return default_context(device)
    with _lock:
        if 0 < context < len(_contexts):
            return _contexts[context]
        count = len(_contexts)
    raise invalid(f"argument 'context' = {context}: expected 0 (the default context of the tensors' device) or an "
                  f"id from moejit.torch.register_context (1..{count - 1})")


def _memory_device(ctx: Context) -> torch.device:
    kind, ordinal = ctx.memory
    return torch.device("cuda", ordinal) if kind == "cuda" else torch.device("cpu")


# ---- What the wrappers pass for a PackedWeights ----------------------------------------------

class _Spec(NamedTuple):
    """A PackedWeights as plain values (the ops' arguments), which torch.compile can read."""

    context: int
    format: str
    group_size: int
    scale_dtype: str
    experts: int
    n: int
    k: int
    act_and_mul: bool
    act_dtype: str = "bf16"  # the activations the weights were packed for: "bf16", "f16" (MXFP4), "e4m3", "e2m1"


# PackedWeights -> (its _Spec, its buffers as tensors). PackedWeights reads its fields through
# the extension, which torch.compile cannot trace; from here it can, so the wrappers trace once
# the weights have been seen here (any eager call that names them).
_known: "weakref.WeakKeyDictionary[PackedWeights, tuple[_Spec, tuple]]" = weakref.WeakKeyDictionary()
# (shape, buffer addresses) -> those weights: the ops find them here instead of describing the
# buffers to moejit again (about 30 us a weight). Weak, so dropped weights are not kept; while
# they live, their buffers' memory cannot hold anything else.
_of_buffers: "weakref.WeakValueDictionary[tuple, PackedWeights]" = weakref.WeakValueDictionary()


def _buffers_key(buffers: tuple, meta: tuple) -> tuple:
    return meta + tuple(None if b is None else (b.device, b.data_ptr(), b.nbytes) for b in buffers)


def _as_tensor(x) -> Optional[Tensor]:
    # Weights packed from NumPy sources on the host backend have NumPy buffers; share their memory.
    return x if x is None or isinstance(x, Tensor) else torch.from_numpy(x)


def _known_weights(w: PackedWeights, name: str) -> tuple[_Spec, tuple]:
    if not isinstance(w, PackedWeights):
        raise invalid(f"argument '{name}' is a {type(w).__name__}: expected moejit.PackedWeights (moejit.pack_weights)")
    if w.act_dtype == "e2m1":
        raise invalid(f"argument '{name}' was packed for e2m1 activations (W4A4), which the torch ops do not take "
                      "yet: run it through moejit.fused_moe, or pack for bf16/f16 or e4m3 activations")
    entry = _known.get(w)
    if entry is None:
        spec = _Spec(register_context(w.context), w.format, w.group_size, w.scale_dtype, w.experts, w.n, w.k,
                     w.act_and_mul, w.act_dtype)
        entry = (spec, tuple(_as_tensor(b) for b in (w.qweight, w.scales, w.zeros, w.bias)))
        _known[w] = entry
        _of_buffers[_buffers_key(entry[1], spec[1:])] = w
    return entry


# ---- The ops ---------------------------------------------------------------------------------

def _describe(ctx: Context, buffers: tuple, format: str, group_size: int, scale_dtype: str, experts: int, n: int,
              k: int, act_and_mul: bool, act_dtype: str = "bf16") -> PackedWeights:
    qweight, scales, zeros, bias = buffers
    return PackedWeights.from_buffers(ctx, format=format, group_size=group_size, scale_dtype=scale_dtype,
                                      experts=experts, n=n, k=k, act_and_mul=act_and_mul, qweight=qweight,
                                      scales=scales, zeros=zeros, bias=bias, act_dtype=act_dtype)


def _weights(ctx: Context, buffers: tuple, *meta) -> PackedWeights:
    """The live weights moejit.torch has seen over these very buffers, else a new description:
    describing them again costs about 30 us a call, a lookup 2 us."""
    known = _of_buffers.get(_buffers_key(buffers, meta))
    return known if known is not None else _describe(ctx, buffers, *meta)


def _aligned(workspace: Optional[Tensor]) -> Optional[Tensor]:
    if workspace is None:
        return None
    offset = (-workspace.data_ptr()) % _WORKSPACE_ALIGN
    # One too small to align is too small to use: left whole, moejit's message counts its bytes.
    return workspace[offset:] if offset < workspace.numel() else workspace


def _stream(t: Tensor) -> int:
    return torch.cuda.current_stream(t.device).cuda_stream if t.is_cuda else 0


def _scale_arg(act_scale: Optional[str]) -> str:
    """The ops' act_scale string: "none" (16-bit activations), "token" or "block128"."""
    return "none" if act_scale is None else act_scale


def _scale_kwarg(act_scale: str) -> Optional[str]:
    return None if act_scale == "none" else act_scale


@torch.library.custom_op("moejit::fused_moe", mutates_args=("output", "workspace"))
def _fused_moe_op(output: Tensor, hidden: Tensor, w13_qweight: Tensor, w13_scales: Tensor,
                  w13_zeros: Optional[Tensor], w13_bias: Optional[Tensor], w2_qweight: Tensor, w2_scales: Tensor,
                  w2_zeros: Optional[Tensor], w2_bias: Optional[Tensor], topk_weights: Tensor, topk_ids: Tensor,
                  expert_map: Optional[Tensor], workspace: Optional[Tensor], context: int, w13_format: str,
                  w13_group_size: int, w13_scale_dtype: str, w2_format: str, w2_group_size: int,
                  w2_scale_dtype: str, experts: int, hidden_size: int, intermediate_size: int,
                  activation: str = "silu", global_experts: int = 0, max_tokens: int = 0,
                  apply_router_weight_on_input: bool = False, act_dtype: str = "bf16", act_scale: str = "none",
                  hidden_scales: Optional[Tensor] = None, w2_act_dtype: str = "") -> None:
    # act_dtype: what both weights were packed for (w2_act_dtype, when given, what w2 was: an INT4
    # "bf16" gate/up with an MXFP4 "f16" down, say); act_scale and hidden_scales: W4A8 (weights
    # packed for "e4m3"), as moejit.fused_moe takes them ("none" for 16-bit activations).
    ctx = _context(context, hidden.device)
    w13 = _weights(ctx, (w13_qweight, w13_scales, w13_zeros, w13_bias), w13_format, w13_group_size, w13_scale_dtype,
                   experts, 2 * intermediate_size, hidden_size, True, act_dtype)
    w2 = _weights(ctx, (w2_qweight, w2_scales, w2_zeros, w2_bias), w2_format, w2_group_size, w2_scale_dtype, experts,
                  hidden_size, intermediate_size, False, w2_act_dtype or act_dtype)
    _fused_moe(ctx, hidden, w13, w2, topk_weights, topk_ids, activation=activation, global_experts=global_experts,
               expert_map=expert_map, output=output, workspace=_aligned(workspace), max_tokens=max_tokens,
               apply_router_weight_on_input=apply_router_weight_on_input, act_scale=_scale_kwarg(act_scale),
               hidden_scales=hidden_scales, stream=_stream(hidden))


@_fused_moe_op.register_fake
def _(output, hidden, w13_qweight, w13_scales, w13_zeros, w13_bias, w2_qweight, w2_scales, w2_zeros, w2_bias,
      topk_weights, topk_ids, expert_map, workspace, context, w13_format, w13_group_size, w13_scale_dtype, w2_format,
      w2_group_size, w2_scale_dtype, experts, hidden_size, intermediate_size, activation="silu", global_experts=0,
      max_tokens=0, apply_router_weight_on_input=False, act_dtype="bf16", act_scale="none",
      hidden_scales=None, w2_act_dtype="") -> None:
    return None  # it only writes output and workspace, whose shapes the caller chose


@torch.library.custom_op("moejit::grouped_gemm", mutates_args=("c", "workspace"))
def _grouped_gemm_op(c: Tensor, a: Tensor, qweight: Tensor, scales: Tensor, zeros: Optional[Tensor],
                     bias: Optional[Tensor], expert_offsets: Optional[Tensor], expert_counts: Optional[Tensor],
                     sorted_token_ids: Optional[Tensor], expert_ids: Optional[Tensor],
                     num_tokens_post_pad: Optional[Tensor], topk_weights: Optional[Tensor],
                     workspace: Optional[Tensor], context: int, format: str, group_size: int, scale_dtype: str,
                     experts: int, n: int, k: int, act_and_mul: bool, layout: str, epilogue: str = "none",
                     m: Optional[int] = None, block_size: int = 0, a_row_divisor: int = 1,
                     rows_per_expert_hint: int = 0, act_dtype: str = "bf16", act_scale: str = "none",
                     a_scales: Optional[Tensor] = None) -> None:
    ctx = _context(context, a.device)
    weights = _weights(ctx, (qweight, scales, zeros, bias), format, group_size, scale_dtype, experts, n, k,
                       act_and_mul, act_dtype)
    _grouped_gemm(ctx, a, weights, layout=layout, epilogue=epilogue, c=c, m=m, expert_offsets=expert_offsets,
                  expert_counts=expert_counts, sorted_token_ids=sorted_token_ids, expert_ids=expert_ids,
                  num_tokens_post_pad=num_tokens_post_pad, block_size=block_size, a_row_divisor=a_row_divisor,
                  topk_weights=topk_weights, rows_per_expert_hint=rows_per_expert_hint,
                  workspace=_aligned(workspace), act_scale=_scale_kwarg(act_scale), a_scales=a_scales,
                  stream=_stream(a))


@_grouped_gemm_op.register_fake
def _(c, a, qweight, scales, zeros, bias, expert_offsets, expert_counts, sorted_token_ids, expert_ids,
      num_tokens_post_pad, topk_weights, workspace, context, format, group_size, scale_dtype, experts, n, k,
      act_and_mul, layout, epilogue="none", m=None, block_size=0, a_row_divisor=1, rows_per_expert_hint=0,
      act_dtype="bf16", act_scale="none", a_scales=None) -> None:
    return None  # it only writes c and the workspace


# ---- The fused layer -------------------------------------------------------------------------

def _default_out(dtype: torch.dtype) -> torch.dtype:
    """The output dtype when none is given: the activations', bf16 for float8_e4m3fn ones."""
    return torch.bfloat16 if dtype == torch.float8_e4m3fn else dtype


def _dtype_name(dtype: torch.dtype, argument: str, allowed: tuple = _ACT_DTYPES) -> str:
    if dtype not in allowed:
        raise invalid(f"argument '{argument}' has dtype {dtype}: expected {' or '.join(map(str, allowed))}")
    return _DTYPE_NAMES[dtype]


def _shape_of(spec: _Spec) -> PackedWeights:
    """Weights of ``spec`` without buffers: what the workspace-size queries read."""
    return PackedWeights.describe(_context(spec.context), format=spec.format, group_size=spec.group_size,
                                  scale_dtype=spec.scale_dtype, experts=spec.experts, n=spec.n, k=spec.k,
                                  act_and_mul=spec.act_and_mul, act_dtype=spec.act_dtype)


def _with_slack(nbytes: int) -> int:
    return nbytes + _WORKSPACE_ALIGN - 1 if nbytes else 0


@torch.compiler.assume_constant_result
def _fused_workspace_bytes(*shape) -> int:
    # A function of shapes: under torch.compile it runs once, while tracing.
    return _fused_workspace_query(*shape)


@functools.lru_cache(maxsize=256)
def _fused_workspace_query(spec13: _Spec, spec2: _Spec, act_dtype: str, out_dtype: str, activation: str, tokens: int,
                           topk: int, global_experts: int, max_tokens: int, act_scale: str = "none") -> int:
    return _with_slack(fused_moe_workspace_size(_context(spec13.context), _shape_of(spec13), _shape_of(spec2), tokens,
                                                topk, act_dtype=act_dtype, out_dtype=out_dtype, activation=activation,
                                                global_experts=global_experts, max_tokens=max_tokens,
                                                act_scale=_scale_kwarg(act_scale)))


def _fused_weights(w13: PackedWeights, w2: PackedWeights) -> tuple:
    """The specs and buffers of a layer's weights, after the checks the op cannot make: it
    describes w13 as gate/up weights of N = 2I, K = H and w2 as N = H, K = I from their shapes."""
    (spec13, buffers13), (spec2, buffers2) = _known_weights(w13, "w13"), _known_weights(w2, "w2")
    if not spec13.act_and_mul:
        raise invalid("argument 'w13' was packed with rows='plain': expected gate/up weights packed with "
                      "rows='concatenated' or 'interleaved'")
    if spec2.act_and_mul:
        raise invalid("argument 'w2' was packed as gate/up weights: expected down weights packed with rows='plain'")
    if (spec2.experts, spec2.n, 2 * spec2.k) != (spec13.experts, spec13.k, spec13.n):
        raise invalid(f"argument 'w2' has E={spec2.experts}, N={spec2.n}, K={spec2.k}: expected E={spec13.experts}, "
                      f"N={spec13.k}, K={spec13.n // 2} to match w13 (E={spec13.experts}, N=2I={spec13.n}, "
                      f"K=H={spec13.k})")
    # 16-bit weights may differ ("bf16" INT4 with "f16" MXFP4 serves f16 hidden states); the library
    # checks each against the hidden states' type.
    sixteen = ("bf16", "f16")
    if spec2.act_dtype != spec13.act_dtype and not (spec2.act_dtype in sixteen and spec13.act_dtype in sixteen):
        raise invalid(f"argument 'w2' was packed for {spec2.act_dtype} activations: expected {spec13.act_dtype} as "
                      "w13 (pack both with the same act_dtype)")
    return spec13, buffers13, spec2, buffers2


def _run_fused(hidden: Tensor, spec13: _Spec, buffers13: tuple, spec2: _Spec, buffers2: tuple, topk_weights: Tensor,
               topk_ids: Tensor, activation: str, global_experts: int, expert_map: Optional[Tensor],
               output: Optional[Tensor], out_dtype: Optional[torch.dtype], workspace: Optional[Tensor],
               max_tokens: int, apply_router_weight_on_input: bool, act_scale: Optional[str] = None,
               hidden_scales: Optional[Tensor] = None) -> Tensor:
    if topk_ids.dtype == torch.int64:
        topk_ids = topk_ids.to(torch.int32)
    if expert_map is not None and global_experts == 0:
        global_experts = expert_map.shape[0]
    tokens = hidden.shape[0]
    if output is None:
        output = torch.empty((tokens, spec2.n), dtype=out_dtype or _default_out(hidden.dtype), device=hidden.device)
    # While torch.compile traces, the batch may be a symbol (dynamic shapes) with no size to ask
    # moejit for: the op then allocates the workspace itself, once T is known.
    if workspace is None and not torch.compiler.is_compiling():
        # An empty batch returns before touching the workspace, and moejit sizes none for it.
        nbytes = _fused_workspace_bytes(spec13, spec2, _dtype_name(hidden.dtype, "hidden", _IN_DTYPES),
                                        _dtype_name(output.dtype, "output", _OUT_DTYPES), activation, tokens,
                                        topk_ids.shape[-1], global_experts, max_tokens,
                                        _scale_arg(act_scale)) if tokens else 0
        workspace = torch.empty(nbytes, dtype=torch.uint8, device=hidden.device)
    torch.ops.moejit.fused_moe(
        output, hidden, *buffers13, *buffers2, topk_weights, topk_ids, expert_map, workspace, spec13.context,
        spec13.format, spec13.group_size, spec13.scale_dtype, spec2.format, spec2.group_size, spec2.scale_dtype,
        spec13.experts, spec13.k, spec2.k, activation, global_experts, max_tokens, apply_router_weight_on_input,
        spec13.act_dtype, _scale_arg(act_scale), hidden_scales, spec2.act_dtype)
    return output


def fused_moe_workspace_bytes(w13: PackedWeights, w2: PackedWeights, tokens: int, topk: int, *,
                              dtype: torch.dtype = torch.bfloat16, out_dtype: Optional[torch.dtype] = None,
                              activation: str = "silu", global_experts: int = 0, max_tokens: int = 0,
                              act_scale: Optional[str] = None) -> int:
    """Bytes of the uint8 workspace ``fused_moe`` needs for up to ``max(tokens, max_tokens)``
    tokens of ``dtype`` activations (float8_e4m3fn too, for weights packed for e4m3, with
    ``act_scale``), alignment slack included: vLLM's workspace13 and workspace2 as one buffer,
    any contents. With an expert map, global_experts is its length."""
    spec13, _, spec2, _ = _fused_weights(w13, w2)
    return _fused_workspace_bytes(spec13, spec2, _dtype_name(dtype, "dtype", _IN_DTYPES),
                                  _dtype_name(out_dtype or _default_out(dtype), "out_dtype", _OUT_DTYPES), activation,
                                  tokens, topk, global_experts, max_tokens, _scale_arg(act_scale))


def fused_moe(hidden: Tensor, w13: PackedWeights, w2: PackedWeights, topk_weights: Tensor, topk_ids: Tensor, *,
              activation: str = "silu", global_experts: int = 0, expert_map: Optional[Tensor] = None,
              output: Optional[Tensor] = None, out_dtype: Optional[torch.dtype] = None,
              workspace: Optional[Tensor] = None, max_tokens: int = 0,
              apply_router_weight_on_input: bool = False, act_scale: Optional[str] = None,
              hidden_scales: Optional[Tensor] = None) -> Tensor:
    """``moejit.fused_moe`` through ``torch.ops.moejit.fused_moe``, taking what vLLM's modular
    experts pass to apply() under moejit's names (hidden_states -> hidden, w1 -> w13,
    global_num_experts -> global_experts, workspace13 and workspace2 -> one workspace).

    hidden [T, H] bf16/f16; w13 (gate/up) and w2 (down) from ``moejit.pack_weights``;
    topk_weights float32 [T, topk]; topk_ids [T, topk] global expert ids, int32, or int64 (as
    engines often hold them), converted here: that allocates, so CUDA graph capture wants int32.
    expert_map int32 [global_experts] -> local expert or -1. output [T, H] (of out_dtype, default
    hidden's) and workspace (``fused_moe_workspace_bytes``) are allocated when None; pass both
    under CUDA graph capture, with max_tokens when the workspace was sized for more tokens than
    this call has. apply_router_weight_on_input (topk 1): the weight scales the input row.
    W4A8 (w13 and w2 packed with act_dtype="e4m3"): act_scale "token" (default) or "block128";
    hidden bf16/f16 (the layer quantizes it) or float8_e4m3fn with hidden_scales (float32 [T],
    or [T, H/128]); output defaults to bf16. Returns output.

    torch.compile traces this once moejit.torch has seen the weights: after any eager call that
    names them (this one, or ``fused_moe_workspace_bytes``). FusedMoE and the op need none.
    """
    return _run_fused(hidden, *_fused_weights(w13, w2), topk_weights, topk_ids, activation, global_experts, expert_map,
                      output, out_dtype, workspace, max_tokens, apply_router_weight_on_input, act_scale, hidden_scales)


# ---- The grouped GEMM ------------------------------------------------------------------------

def _gemm_columns(spec: _Spec, epilogue: str) -> int:
    act_and_mul = EPILOGUES.get(epilogue) in (EPILOGUES["silu"], EPILOGUES["swiglu_oai"])
    return spec.n // 2 if act_and_mul else spec.n


@torch.compiler.assume_constant_result
def _gemm_workspace_bytes(*shape) -> int:
    return _gemm_workspace_query(*shape)


@functools.lru_cache(maxsize=256)
def _gemm_workspace_query(spec: _Spec, a_shape: tuple, act_dtype: str, out_dtype: str, layout: str, epilogue: str,
                          m: Optional[int], block_size: int, a_row_divisor: int, rows_per_expert_hint: int,
                          act_scale: str = "none") -> int:
    # moejit reads A's shape and dtype only; a meta tensor has both and no memory.
    dtype = {"bf16": torch.bfloat16, "f16": torch.float16, "e4m3": torch.float8_e4m3fn}[act_dtype]
    a = torch.empty(a_shape, dtype=dtype, device="meta")
    return _with_slack(grouped_gemm_workspace_size(_context(spec.context), _shape_of(spec), a, layout=layout,
                                                   epilogue=epilogue, m=m, out_dtype=out_dtype, block_size=block_size,
                                                   a_row_divisor=a_row_divisor,
                                                   rows_per_expert_hint=rows_per_expert_hint,
                                                   act_scale=_scale_kwarg(act_scale)))


def grouped_gemm_workspace_bytes(weights: PackedWeights, a: Tensor, *, layout: str, epilogue: str = "none",
                                 m: Optional[int] = None, out_dtype: Optional[torch.dtype] = None,
                                 block_size: int = 0, a_row_divisor: int = 1, rows_per_expert_hint: int = 0,
                                 act_scale: Optional[str] = None) -> int:
    """Bytes of the uint8 workspace ``grouped_gemm`` needs, alignment slack included. It must be
    zero-filled once before its first use (moejit leaves it zero)."""
    spec = _known_weights(weights, "weights")[0]
    return _gemm_workspace_bytes(spec, tuple(a.shape), _dtype_name(a.dtype, "a", _IN_DTYPES),
                                 _dtype_name(out_dtype or _default_out(a.dtype), "out_dtype", _OUT_DTYPES), layout,
                                 epilogue, m, block_size, a_row_divisor, rows_per_expert_hint, _scale_arg(act_scale))


def grouped_gemm(a: Tensor, weights: PackedWeights, *, layout: str, epilogue: str = "none", c: Optional[Tensor] = None,
                 out_dtype: Optional[torch.dtype] = None, m: Optional[int] = None,
                 expert_offsets: Optional[Tensor] = None, expert_counts: Optional[Tensor] = None,
                 sorted_token_ids: Optional[Tensor] = None, expert_ids: Optional[Tensor] = None,
                 num_tokens_post_pad: Optional[Tensor] = None, block_size: int = 0, a_row_divisor: int = 1,
                 topk_weights: Optional[Tensor] = None, rows_per_expert_hint: int = 0,
                 workspace: Optional[Tensor] = None, act_scale: Optional[str] = None,
                 a_scales: Optional[Tensor] = None) -> Tensor:
    """``moejit.grouped_gemm`` through ``torch.ops.moejit.grouped_gemm`` (the layouts and
    epilogues are described there). c is allocated when None ([m, N'] for the indexed layout,
    a's rows otherwise; N' = N/2 after an act-and-mul epilogue; bf16 for float8_e4m3fn rows);
    the workspace is allocated zeroed when None. W4A8: a float8_e4m3fn with weights packed for
    e4m3, act_scale "token" (default, a_scales float32 [rows]) or "block128" ([rows, K/128]).
    Returns c. Traces under torch.compile as ``fused_moe`` does."""
    spec, buffers = _known_weights(weights, "weights")
    if c is None:
        rows = (m if m is not None else a.shape[0] * a_row_divisor,) if layout == "indexed" else tuple(a.shape[:-1])
        c = torch.empty(rows + (_gemm_columns(spec, epilogue),), dtype=out_dtype or _default_out(a.dtype),
                        device=a.device)
    if workspace is None and not torch.compiler.is_compiling():  # else the op allocates it (see _run_fused)
        nbytes = _gemm_workspace_bytes(spec, tuple(a.shape), _dtype_name(a.dtype, "a", _IN_DTYPES),
                                       _dtype_name(c.dtype, "c", _OUT_DTYPES), layout, epilogue, m, block_size,
                                       a_row_divisor, rows_per_expert_hint, _scale_arg(act_scale))
        workspace = torch.zeros(nbytes, dtype=torch.uint8, device=a.device) if nbytes else None
    torch.ops.moejit.grouped_gemm(
        c, a, *buffers, expert_offsets, expert_counts, sorted_token_ids, expert_ids, num_tokens_post_pad, topk_weights,
        workspace, spec.context, spec.format, spec.group_size, spec.scale_dtype, spec.experts, spec.n, spec.k,
        spec.act_and_mul, layout, epilogue, m, block_size, a_row_divisor, rows_per_expert_hint, spec.act_dtype,
        _scale_arg(act_scale), a_scales)
    return c


# ---- FusedMoE --------------------------------------------------------------------------------

_BUFFER_NAMES = ("qweight", "scales", "zeros", "bias")


def _placed(t: Optional[Tensor], device: torch.device) -> Optional[Tensor]:
    """``t`` in ``device``'s memory, contiguous, its start 16-byte aligned as packed buffers must be
    (a tensor loaded from a file may start anywhere; a fresh allocation is aligned)."""
    if t is None:
        return None
    t = torch.as_tensor(t).to(device).contiguous()
    return t.clone() if t.data_ptr() % 16 else t


def _with_defaults(state: dict) -> dict:
    """A FusedMoE extra state with the fields added since it may have been saved (W4A8's
    act_dtype and act_scale) set to what such a state meant: 16-bit activations."""
    state = dict(state)
    for name in ("w13", "w2"):
        if isinstance(state.get(name), dict):
            state[name] = {"act_dtype": "bf16", **state[name]}
    state.setdefault("act_scale", None)
    return state


class FusedMoE(torch.nn.Module):
    """One MoE layer over moejit-packed weights: ``forward(hidden, topk_weights, topk_ids)`` is
    ``moejit.torch.fused_moe``.

    Build it from a checkpoint's tensors (``from_checkpoint``, which packs once), from packed
    weights, or from a state_dict (``from_state_dict``). The buffers hold the packed form
    (w13_qweight, w13_scales, w13_zeros, w13_bias, the same for w2, expert_map; absent ones are
    None), the extra state its format and shape, so ``state_dict()`` is all a rebuild needs.
    Weights packed for e4m3 make the layer W4A8, with ``act_scale`` "token" (default) or
    "block128"; forward then takes bf16/f16 hidden states, or float8_e4m3fn ones with their
    ``hidden_scales``.
    Moving the module to another device is not supported (its context stays where it was):
    rebuild it there with ``from_state_dict(..., context=...)``.
    """

    def __init__(self, w13: PackedWeights, w2: PackedWeights, *, activation: str = "silu",
                 expert_map: Optional[Tensor] = None, global_experts: int = 0, act_scale: Optional[str] = None):
        super().__init__()
        _activation(activation)  # an unknown name fails here, not at the first forward
        spec13, buffers13, spec2, buffers2 = _fused_weights(w13, w2)
        if spec13.act_dtype == "e4m3":
            if act_scale not in (None, "token", "block128"):
                raise invalid(f"argument 'act_scale' = {act_scale!r}: expected 'token' or 'block128' (or None)")
            act_scale = act_scale or "token"
        elif act_scale is not None:
            raise invalid(f"argument 'act_scale' = {act_scale!r}: expected None, the weights were packed for 16-bit "
                          "activations (pack them with act_dtype='e4m3' for W4A8)")
        self.act_scale = act_scale
        self._spec13, self._spec2 = spec13, spec2
        self._packed = (w13, w2)  # alive while the module is: the ops find them by their buffers
        self.activation = activation
        self.global_experts = global_experts or (int(expert_map.shape[0]) if expert_map is not None else 0)
        for prefix, buffers in (("w13", buffers13), ("w2", buffers2)):
            for name, buffer in zip(_BUFFER_NAMES, buffers):
                self.register_buffer(f"{prefix}_{name}", buffer)
        self.register_buffer("expert_map", _placed(expert_map, buffers13[0].device))
        self.register_buffer("workspace", None, persistent=False)
        self.max_tokens = 0

    @classmethod
    def from_checkpoint(cls, source: str, w13_qweight, w13_scales, w2_qweight, w2_scales, *, w13_zeros=None,
                        w13_bias=None, w2_zeros=None, w2_bias=None, format: Optional[str] = None,
                        rows: str = "concatenated", activation: str = "silu", expert_map=None,
                        global_experts: int = 0, context: Optional[Context] = None,
                        device: torch.device | str | None = None, act_dtype: str = "bf16",
                        act_scale: Optional[str] = None) -> "FusedMoE":
        """Packs one layer's checkpoint tensors (``moejit.pack_weights``: source, format; rows is
        w13's order, "concatenated" as vLLM holds it or "interleaved" as gpt-oss does; act_dtype
        "e4m3" for W4A8, with act_scale) for ``context``, by default the default context of
        ``device`` (default: the tensors')."""
        if context is None:
            context = default_context(device if device is not None else getattr(w13_qweight, "device", "cpu"))
        w13 = pack_weights(context, source, w13_qweight, w13_scales, w13_zeros, w13_bias, format=format, rows=rows,
                           act_dtype=act_dtype)
        w2 = pack_weights(context, source, w2_qweight, w2_scales, w2_zeros, w2_bias, format=format,
                          act_dtype=act_dtype)
        return cls(w13, w2, activation=activation, expert_map=expert_map, global_experts=global_experts,
                   act_scale=act_scale)

    @classmethod
    def from_state_dict(cls, state_dict: dict, *, context: Optional[Context] = None, prefix: str = "") -> "FusedMoE":
        """The module whose ``state_dict()`` this was, on ``context`` (default: the default context
        of the buffers' device); buffers elsewhere are copied there."""
        extra = prefix + "_extra_state"
        if extra not in state_dict:
            raise invalid(f"argument 'state_dict' has no {extra!r}: expected a moejit.torch.FusedMoE state_dict")
        state = state_dict[extra]
        if context is None:
            context = default_context(state_dict[prefix + "w13_qweight"].device)
        device = _memory_device(context)

        def packed(name: str) -> PackedWeights:
            meta = dict(state[name])
            buffers = [_placed(state_dict.get(f"{prefix}{name}_{b}"), device) for b in _BUFFER_NAMES]
            return _describe(context, tuple(buffers), meta["format"], meta["group_size"], meta["scale_dtype"],
                             meta["experts"], meta["n"], meta["k"], meta["act_and_mul"], meta["act_dtype"])

        state = _with_defaults(state)
        return cls(packed("w13"), packed("w2"), activation=state["activation"],
                   expert_map=_placed(state_dict.get(prefix + "expert_map"), device),
                   global_experts=state["global_experts"], act_scale=state["act_scale"])

    def get_extra_state(self) -> dict:
        def meta(spec: _Spec) -> dict:
            return {field: getattr(spec, field) for field in _Spec._fields if field != "context"}

        return {"w13": meta(self._spec13), "w2": meta(self._spec2), "activation": self.activation,
                "global_experts": self.global_experts, "act_scale": self.act_scale}

    def set_extra_state(self, state: dict) -> None:
        # load_state_dict copies buffers into this module's: they must describe the same layer.
        if _with_defaults(state) != self.get_extra_state():
            raise invalid(f"argument 'state_dict' describes another layer ({state}): expected "
                          f"{self.get_extra_state()}; build a module for it with FusedMoE.from_state_dict")

    def reserve_workspace(self, max_tokens: int, topk: int, dtype: Optional[torch.dtype] = None) -> None:
        """Allocates the workspace once, for calls of up to ``max_tokens`` tokens of ``dtype`` with
        ``topk`` experts each; forward then allocates only its output, as CUDA graph capture at
        several batch sizes wants. ``dtype`` defaults to float16 for MXFP4 weights packed for f16,
        else bfloat16."""
        if dtype is None:
            dtype = torch.float16 if self._spec13.act_dtype == "f16" else torch.bfloat16
        nbytes = _fused_workspace_bytes(self._spec13, self._spec2, _dtype_name(dtype, "dtype", _IN_DTYPES),
                                        _DTYPE_NAMES[_default_out(dtype)], self.activation, max_tokens, topk,
                                        self.global_experts, max_tokens, _scale_arg(self.act_scale))
        self.workspace = torch.empty(nbytes, dtype=torch.uint8, device=self.w13_qweight.device)
        self.max_tokens = max_tokens

    def forward(self, hidden: Tensor, topk_weights: Tensor, topk_ids: Tensor, output: Optional[Tensor] = None,
                hidden_scales: Optional[Tensor] = None) -> Tensor:
        """hidden [T, H] bf16/f16 (W4A8: or float8_e4m3fn with hidden_scales), topk_weights float32
        [T, topk], topk_ids [T, topk] int32 (int64 is converted, which allocates) -> output [T, H],
        allocated in hidden's dtype (bf16 for float8_e4m3fn) when None."""
        return _run_fused(hidden, self._spec13, self._weight_buffers("w13"), self._spec2, self._weight_buffers("w2"),
                          topk_weights, topk_ids, self.activation, self.global_experts, self.expert_map, output, None,
                          self.workspace, self.max_tokens, False, self.act_scale, hidden_scales)

    def _apply(self, fn, recurse=True):
        # .half(), .to(torch.bfloat16) and the like cast floating buffers; the bias is part of the
        # packed weights, float32 as moejit reads it, and keeps its dtype (and its memory, which
        # the ops find the weights by).
        biases = {name: self._buffers[name] for name in ("w13_bias", "w2_bias") if self._buffers.get(name) is not None}
        module = super()._apply(fn, recurse)
        for name, bias in biases.items():
            if self._buffers[name].dtype != bias.dtype:
                self._buffers[name] = bias
        return module

    def _weight_buffers(self, prefix: str) -> tuple:
        return tuple(getattr(self, f"{prefix}_{name}") for name in _BUFFER_NAMES)

    def extra_repr(self) -> str:
        s13, s2 = self._spec13, self._spec2
        w4a8 = (f", act_dtype='e4m3', act_scale={self.act_scale!r}" if s13.act_dtype == "e4m3"
                else f", act_dtype={s13.act_dtype!r}" if s13.act_dtype != "bf16" else "")
        return (f"experts={s13.experts}, hidden={s13.k}, intermediate={s2.k}, format={s13.format}, "
                f"group_size={s13.group_size}, activation={self.activation!r}, global_experts={self.global_experts}"
                f"{w4a8}")

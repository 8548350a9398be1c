"""fp64 reference of moejit's grouped GEMM and fused MoE layer, and writers of the checkpoint
layouts moejit reads, for the Python tests.

Written from moejit's public conventions (include/moejit/moejit.h, templates/README.md) and its
C++ test reference (tests/support/reference/), independently of the kernels and of the
package under test: weights are dequantized in float64 from the logical form (one 4-bit code
per element, [E, N, K], row n = output n), products and sums are float64, and only the roundings
the kernels' data flow imposes are applied (see fused_moe_reference).

Gate/up weights (N = 2I) are canonical in the concatenated order (gate rows 0..I-1, then up rows)
throughout; reorder_rows produces the other orders checkpoints hold, before exporting.
"""

from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np

# OCP MX v1.0 E2M1: codes 0..7 are the magnitudes, 8..15 their negations (8 is -0).
E2M1_VALUES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                        -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])
E2M1_VALUES.flags.writeable = False

FORMATS = ("mxfp4", "int4_sym", "int4_asym")
ROW_ORDERS = ("concatenated", "interleaved")
EPILOGUES = ("none", "silu", "swiglu_oai")

MX_BLOCK = 32
INT4_SYM_ZERO = 8
# GPTQ v1 (AutoGPTQ, GPTQModel's v1 export) stores each packed qzeros word minus this, as one
# wrapping 32-bit subtraction, so a zero point of 0 borrows from the nibble above.
GPTQ_V1_ZERO_OFFSET = np.uint32(0x11111111)
# AutoAWQ's pack order: nibble i of a word holds column 8c + AWQ_ORDER[i].
AWQ_ORDER = np.array([0, 2, 4, 6, 1, 3, 5, 7])

SWIGLU_OAI_ALPHA = 1.702
SWIGLU_OAI_LIMIT = 7.0

_SCALE_DTYPES = {"bf16": ml_dtypes.bfloat16, "f16": np.float16}
_ROUNDING_DTYPES = {"bf16": ml_dtypes.bfloat16, "f16": np.float16, "f32": np.float32}
_NIBBLE_SHIFTS = np.arange(8, dtype=np.uint32) * np.uint32(4)


# ---- Number formats ------------------------------------------------------------------------

def e8m0_to_float(scale_bytes) -> np.ndarray:
    """2^(byte - 127) for each E8M0 byte; 0xFF is NaN and 0x00 the normal 2^-127."""
    scale_bytes = np.asarray(scale_bytes)
    if scale_bytes.dtype != np.uint8:
        raise TypeError(f"E8M0 scales have dtype {scale_bytes.dtype}: expected uint8 bytes")
    values = np.ldexp(1.0, scale_bytes.astype(np.int32) - 127)
    return np.where(scale_bytes == 0xFF, np.nan, values)


def round_to(x, dtype: str) -> np.ndarray:
    """x rounded to nearest-even in "bf16", "f16" or "f32" (one rounding straight from float64,
    overflow to infinity), returned as float64."""
    if dtype not in _ROUNDING_DTYPES:
        raise ValueError(f"dtype {dtype!r}: expected one of {sorted(_ROUNDING_DTYPES)}")
    with np.errstate(over="ignore"):
        return np.asarray(x, dtype=np.float64).astype(_ROUNDING_DTYPES[dtype]).astype(np.float64)


def _check_representable(x: np.ndarray, dtype: str, what: str) -> None:
    # The kernels read activations in the act dtype; an input that does not round-trip would
    # make the reference compute with values the kernel never sees.
    rounded = round_to(x, dtype)
    differs = ~((rounded == x) | (np.isnan(rounded) & np.isnan(x)))
    if differs.any():
        at = tuple(int(i) for i in np.argwhere(differs)[0])
        raise ValueError(f"{what}{list(at)} = {float(x[at])!r} is not a {dtype} value (it rounds to "
                         f"{float(rounded[at])!r}): round the input with round_to first")


# ---- Logical weights ------------------------------------------------------------------------

# eq=False: element-wise array equality has no single truth value.
@dataclasses.dataclass(frozen=True, eq=False)
class QuantWeights:
    """4-bit weights of E experts in moejit's logical form (the plain-codes source).

    codes: uint8 [E, N, K], 0..15. scales: [E, N, K/G], E8M0 bytes (uint8) for mxfp4, or
    ml_dtypes.bfloat16 / np.float16 for INT4. zeros: uint8 [E, N, K/G] for int4_asym, else
    None. bias: float32 [E, N] or None, in the same row order as the codes.
    group_size: 32 for mxfp4; 32, 64, 128 or K (per-channel) for INT4.
    """

    format: str
    group_size: int
    codes: np.ndarray
    scales: np.ndarray
    zeros: np.ndarray | None = None
    bias: np.ndarray | None = None

    def __post_init__(self):
        if self.format not in FORMATS:
            raise ValueError(f"format {self.format!r}: expected one of {FORMATS}")
        if self.codes.dtype != np.uint8 or self.codes.ndim != 3:
            raise ValueError(f"codes: {self.codes.dtype} {self.codes.shape}: expected uint8 [E, N, K]")
        if self.codes.size and self.codes.max() > 15:
            raise ValueError(f"codes hold {self.codes.max()}: expected 0..15")
        experts, n, k = self.codes.shape
        allowed_groups = (MX_BLOCK,) if self.format == "mxfp4" else (32, 64, 128, k)
        if self.group_size not in allowed_groups or k % self.group_size != 0:
            raise ValueError(f"group_size {self.group_size} for {self.format} with K = {k}: expected one of "
                             f"{sorted(set(allowed_groups))} dividing K")
        group_shape = (experts, n, k // self.group_size)
        if self.scales.shape != group_shape:
            raise ValueError(f"scales shape {self.scales.shape}: expected [E, N, K/G] = {group_shape}")
        if self.format == "mxfp4":
            if self.scales.dtype != np.uint8:
                raise ValueError(f"mxfp4 scales have dtype {self.scales.dtype}: expected uint8 E8M0 bytes")
        elif self.scales.dtype not in (np.dtype(ml_dtypes.bfloat16), np.dtype(np.float16)):
            raise ValueError(f"INT4 scales have dtype {self.scales.dtype}: expected bfloat16 or float16")
        if self.format == "int4_asym":
            if self.zeros is None or self.zeros.dtype != np.uint8 or self.zeros.shape != group_shape:
                raise ValueError(f"int4_asym zeros: expected uint8 {group_shape}")
            if self.zeros.size and self.zeros.max() > 15:
                raise ValueError(f"zeros hold {self.zeros.max()}: expected 0..15")
        elif self.zeros is not None:
            raise ValueError(f"{self.format} weights have no zero points: expected zeros=None")
        if self.bias is not None and (self.bias.dtype != np.float32 or self.bias.shape != (experts, n)):
            raise ValueError(f"bias: {self.bias.dtype} {self.bias.shape}: expected float32 [E, N] = {(experts, n)}")

    @property
    def experts(self) -> int:
        return self.codes.shape[0]

    @property
    def n(self) -> int:
        return self.codes.shape[1]

    @property
    def k(self) -> int:
        return self.codes.shape[2]

    @property
    def scale_dtype(self) -> str:
        """"e8m0", "bf16" or "f16"."""
        if self.format == "mxfp4":
            return "e8m0"
        return "bf16" if self.scales.dtype == np.dtype(ml_dtypes.bfloat16) else "f16"


def _dequantize_parts(fmt: str, group_size: int, codes, scales, zeros) -> np.ndarray:
    # Works on any leading shape, so a GEMM can dequantize one expert at a time.
    if fmt == "mxfp4":
        elements = E2M1_VALUES[codes]
        scale_values = e8m0_to_float(scales)
    else:
        zero_points = np.repeat(zeros.astype(np.float64), group_size, axis=-1) if fmt == "int4_asym" \
            else float(INT4_SYM_ZERO)
        elements = codes.astype(np.float64) - zero_points
        scale_values = scales.astype(np.float64)
    return elements * np.repeat(scale_values, group_size, axis=-1)


def dequantize(qw: QuantWeights) -> np.ndarray:
    """float64 [E, N, K]: e2m1(code) * 2^(s - 127) for mxfp4, (q - zero) * scale for INT4
    (zero 8 when symmetric). Every value is exact."""
    return _dequantize_parts(qw.format, qw.group_size, qw.codes, qw.scales, qw.zeros)


def _dequantize_expert(qw: QuantWeights, expert: int) -> np.ndarray:
    zeros = None if qw.zeros is None else qw.zeros[expert]
    return _dequantize_parts(qw.format, qw.group_size, qw.codes[expert], qw.scales[expert], zeros)


def random_quant_weights(rng: np.random.Generator, format: str, experts: int, n: int, k: int,
                         group_size: int = 32, scale_dtype: str = "bf16", with_bias: bool = False,
                         output_rms: float = 1.0) -> QuantWeights:
    """Random codes with scales sized so that a GEMM row over unit-variance inputs has an RMS
    near `output_rms` (within a factor of about 2) for any k. group_size 0 (or k) is per-channel
    INT4; MXFP4 always has group 32 and E8M0 scales, whatever group_size and scale_dtype say.
    int4_asym zero points are uniform in 0..15 with a 0 (first group) and a 15 (last group)
    always present, so GPTQ v1's borrowing word is exercised. The bias is N(0, 0.2 output_rms).
    """
    if format not in FORMATS:
        raise ValueError(f"format {format!r}: expected one of {FORMATS}")
    target_weight_rms = output_rms / np.sqrt(k)
    codes = rng.integers(0, 16, size=(experts, n, k), dtype=np.uint8)
    zeros = None
    if format == "mxfp4":
        group_size = MX_BLOCK
        code_rms = np.sqrt(np.mean(E2M1_VALUES ** 2))
        # Scale exponents spread over three binades around the one that hits the target RMS.
        center = int(np.round(np.log2(target_weight_rms / code_rms)))
        exponents = center + rng.integers(-1, 2, size=(experts, n, k // MX_BLOCK))
        scales = (np.clip(exponents, -127, 127) + 127).astype(np.uint8)
    else:
        if scale_dtype not in _SCALE_DTYPES:
            raise ValueError(f"scale_dtype {scale_dtype!r} for {format}: expected 'bf16' or 'f16'")
        group_size = group_size or k
        groups = (experts, n, k // group_size)
        if format == "int4_asym":
            zeros = rng.integers(0, 16, size=groups, dtype=np.uint8)
            zeros.flat[0] = 0
            zeros.flat[-1] = 15
            # q and zero independent and uniform on 0..15: E[(q - z)^2] = 2 Var(q).
            code_rms = np.sqrt(2 * (16 ** 2 - 1) / 12)
        else:
            code_rms = np.sqrt(np.mean((np.arange(16) - INT4_SYM_ZERO) ** 2))
        spread = rng.uniform(0.5, 1.5, size=groups)
        scales = (target_weight_rms / code_rms * spread).astype(_SCALE_DTYPES[scale_dtype])
    bias = None
    if with_bias:
        bias = rng.normal(0.0, 0.2 * output_rms, size=(experts, n)).astype(np.float32)
    return QuantWeights(format, group_size, codes, scales, zeros, bias)


def take_experts(qw: QuantWeights, experts) -> QuantWeights:
    """The weights of `experts` (global ids), in that order: a rank's local experts."""
    experts = np.asarray(experts)
    return QuantWeights(qw.format, qw.group_size, qw.codes[experts], qw.scales[experts],
                        None if qw.zeros is None else qw.zeros[experts],
                        None if qw.bias is None else qw.bias[experts])


# ---- Row orders of gate/up weights ------------------------------------------------------------

def to_row_order(array, order: str, axis: int) -> np.ndarray:
    """`array`, whose `axis` holds N = 2I rows in the canonical concatenated order, rearranged
    into `order`: "concatenated" (unchanged) or "interleaved" (gate j at row 2j, up j at 2j + 1,
    as gpt-oss checkpoints hold them)."""
    if order not in ROW_ORDERS:
        raise ValueError(f"row order {order!r}: expected one of {ROW_ORDERS}")
    array = np.asarray(array)
    rows = array.shape[axis]
    if rows % 2 != 0:
        raise ValueError(f"axis {axis} has {rows} rows: gate/up weights need an even N = 2I")
    if order == "concatenated":
        return array.copy()
    half = rows // 2
    source_row = np.empty(rows, dtype=np.int64)
    source_row[0::2] = np.arange(half)
    source_row[1::2] = half + np.arange(half)
    return np.take(array, source_row, axis=axis)


def reorder_rows(qw: QuantWeights, order: str) -> QuantWeights:
    """Canonical (concatenated) gate/up weights with codes, scales, zeros and bias moved to
    `order`. Apply before exporting: GPTQ/AWQ put N last and pack it by 8."""
    def rows_of(array):
        return None if array is None else to_row_order(array, order, axis=1)

    return QuantWeights(qw.format, qw.group_size, rows_of(qw.codes), rows_of(qw.scales), rows_of(qw.zeros),
                        rows_of(qw.bias))


# ---- Checkpoint layouts -----------------------------------------------------------------------

def _pack_nibbles(values: np.ndarray, axis: int) -> np.ndarray:
    # Element 8c + i of `axis` goes to bits 4i..4i+3 of word c.
    moved = np.moveaxis(values.astype(np.uint32), axis, -1)
    eights = moved.reshape(*moved.shape[:-1], moved.shape[-1] // 8, 8)
    words = np.bitwise_or.reduce(eights << _NIBBLE_SHIFTS, axis=-1)
    return np.ascontiguousarray(np.moveaxis(words, -1, axis))


def _unpack_nibbles(words: np.ndarray, axis: int) -> np.ndarray:
    moved = np.moveaxis(np.ascontiguousarray(words).view(np.uint32), axis, -1)
    nibbles = (moved[..., None] >> _NIBBLE_SHIFTS) & np.uint32(0xF)
    unpacked = nibbles.reshape(*moved.shape[:-1], moved.shape[-1] * 8).astype(np.uint8)
    return np.ascontiguousarray(np.moveaxis(unpacked, -1, axis))


def _layout(source, qweight, scales, zeros, bias) -> dict:
    return {"source": source, "qweight": qweight, "scales": scales, "zeros": zeros,
            "bias": None if bias is None else bias.copy()}


def to_plain(qw: QuantWeights) -> dict:
    """The plain-codes source: codes u8 [E, N, K], scales [E, N, K/G], zeros u8 [E, N, K/G]
    (None unless int4_asym)."""
    return _layout("plain", qw.codes.copy(), qw.scales.copy(), None if qw.zeros is None else qw.zeros.copy(),
                   qw.bias)


def to_vllm_mxfp4(qw: QuantWeights) -> dict:
    """vLLM / gpt-oss MXFP4: u8 [E, N, K/2] with even k in the low nibble, E8M0 u8 [E, N, K/32]."""
    if qw.format != "mxfp4":
        raise ValueError(f"vllm_mxfp4 holds mxfp4 weights, not {qw.format}")
    packed = qw.codes[..., 0::2] | (qw.codes[..., 1::2] << 4)
    return _layout("vllm_mxfp4", packed.astype(np.uint8), qw.scales.copy(), None, qw.bias)


def from_vllm_mxfp4(qweight, scales, bias=None) -> QuantWeights:
    """Reads vLLM MXFP4 bytes (u8 [E, N, K/2]) and E8M0 scales back into codes."""
    if qweight.dtype != np.uint8:
        raise ValueError(f"vllm_mxfp4 qweight has dtype {qweight.dtype}: expected uint8")
    codes = np.empty((*qweight.shape[:2], qweight.shape[2] * 2), dtype=np.uint8)
    codes[..., 0::2] = qweight & 0xF
    codes[..., 1::2] = qweight >> 4
    return QuantWeights("mxfp4", MX_BLOCK, codes, np.ascontiguousarray(scales), None, bias)


def to_gptq(qw: QuantWeights, version: int) -> dict:
    """GPTQ: qweight i32 [E, K/8, N] (k = 8r + i in nibble i of word (r, n)), qzeros i32
    [E, K/G, N/8] (zero of n = 8c + i in nibble i), scales [E, K/G, N]. Symmetric weights get
    zero points 8 written out. version 1 stores each qzeros word minus 0x11111111 (wrapping);
    version 2 the zero points themselves."""
    if qw.format == "mxfp4":
        raise ValueError("GPTQ holds INT4 weights, not mxfp4")
    if version not in (1, 2):
        raise ValueError(f"GPTQ version {version}: expected 1 or 2")
    qweight = _pack_nibbles(qw.codes.transpose(0, 2, 1), axis=1)
    zero_points = qw.zeros if qw.zeros is not None else np.full(qw.scales.shape, INT4_SYM_ZERO, np.uint8)
    zero_words = _pack_nibbles(zero_points.transpose(0, 2, 1), axis=2)
    if version == 1:
        zero_words = zero_words - GPTQ_V1_ZERO_OFFSET
    return _layout(f"gptq_v{version}", qweight.view(np.int32), np.ascontiguousarray(qw.scales.transpose(0, 2, 1)),
                   zero_words.view(np.int32), qw.bias)


def from_gptq(qweight, qzeros, scales, version: int, symmetric: bool, bias=None) -> QuantWeights:
    """Reads GPTQ tensors back as moejit does: v1 words get 0x11111111 added back word-wise;
    symmetric weights must hold zero point 8 everywhere (qzeros may then be None)."""
    if version not in (1, 2):
        raise ValueError(f"GPTQ version {version}: expected 1 or 2")
    codes = _unpack_nibbles(qweight, axis=1).transpose(0, 2, 1)
    groups = scales.shape[1]
    group_size = codes.shape[2] // groups
    zeros = None
    if qzeros is not None:
        words = np.ascontiguousarray(qzeros).view(np.uint32)
        if version == 1:
            words = words + GPTQ_V1_ZERO_OFFSET
        zero_points = _unpack_nibbles(words, axis=2).transpose(0, 2, 1)
        if symmetric:
            if (zero_points != INT4_SYM_ZERO).any():
                at = tuple(int(i) for i in np.argwhere(zero_points != INT4_SYM_ZERO)[0])
                raise ValueError(f"symmetric GPTQ qzeros hold zero point {zero_points[at]} at [e, n, g] = "
                                 f"{list(at)}: expected 8 everywhere")
        else:
            zeros = np.ascontiguousarray(zero_points)
    elif not symmetric:
        raise ValueError("asymmetric GPTQ weights need qzeros")
    return QuantWeights("int4_sym" if symmetric else "int4_asym", group_size, np.ascontiguousarray(codes),
                        np.ascontiguousarray(scales.transpose(0, 2, 1)), zeros, bias)


def _awq_gather_index(n: int, order: np.ndarray) -> np.ndarray:
    columns = np.arange(n)
    return columns // 8 * 8 + order[columns % 8]


def to_awq(qw: QuantWeights) -> dict:
    """AWQ (asymmetric only): qweight i32 [E, K, N/8] and qzeros i32 [E, K/G, N/8] with nibble i
    of word c holding column 8c + AWQ_ORDER[i]; the zero points are stored as they are; scales
    [E, K/G, N]."""
    if qw.format != "int4_asym":
        raise ValueError(f"AWQ holds int4_asym weights, not {qw.format}")
    nibble_columns = _awq_gather_index(qw.n, AWQ_ORDER)
    qweight = _pack_nibbles(qw.codes.transpose(0, 2, 1)[..., nibble_columns], axis=2)
    qzeros = _pack_nibbles(qw.zeros.transpose(0, 2, 1)[..., nibble_columns], axis=2)
    return _layout("awq", qweight.view(np.int32), np.ascontiguousarray(qw.scales.transpose(0, 2, 1)),
                   qzeros.view(np.int32), qw.bias)


def from_awq(qweight, qzeros, scales, bias=None) -> QuantWeights:
    """Reads AWQ tensors back into codes and zero points (int4_asym)."""
    # Column 8c + j sits at nibble argsort(AWQ_ORDER)[j] = [0, 4, 1, 5, 2, 6, 3, 7][j].
    column_nibbles = _awq_gather_index(qweight.shape[2] * 8, np.argsort(AWQ_ORDER))
    codes = _unpack_nibbles(qweight, axis=2)[..., column_nibbles].transpose(0, 2, 1)
    zeros = _unpack_nibbles(qzeros, axis=2)[..., column_nibbles].transpose(0, 2, 1)
    group_size = codes.shape[2] // scales.shape[1]
    return QuantWeights("int4_asym", group_size, np.ascontiguousarray(codes),
                        np.ascontiguousarray(scales.transpose(0, 2, 1)), np.ascontiguousarray(zeros), bias)


# ---- Activations ------------------------------------------------------------------------------

def silu_and_mul(gate, up) -> np.ndarray:
    """silu(gate) * up, silu(x) = x / (1 + e^-x)."""
    gate = np.asarray(gate, dtype=np.float64)
    with np.errstate(over="ignore"):  # e^-x overflows for x < -709: silu is then -0, as it should be
        return gate / (1.0 + np.exp(-gate)) * up


def swiglu_oai(gate, up) -> np.ndarray:
    """gpt-oss clamped SwiGLU: g = min(gate, 7), u = clamp(up, -7, 7); g * sigmoid(1.702 g) * (u + 1).
    The gate has no lower clamp; NaN passes through, as torch.clamp lets it."""
    gate = np.asarray(gate, dtype=np.float64)
    up = np.asarray(up, dtype=np.float64)
    # Comparisons rather than np.clip, matching the C++ reference's NaN behaviour.
    g = np.where(gate > SWIGLU_OAI_LIMIT, SWIGLU_OAI_LIMIT, gate)
    u = np.where(up > SWIGLU_OAI_LIMIT, SWIGLU_OAI_LIMIT, np.where(up < -SWIGLU_OAI_LIMIT, -SWIGLU_OAI_LIMIT, up))
    with np.errstate(over="ignore"):
        return g * (1.0 / (1.0 + np.exp(-SWIGLU_OAI_ALPHA * g))) * (u + 1.0)


def _act_and_mul(acc: np.ndarray, epilogue: str) -> np.ndarray:
    half = acc.shape[-1] // 2
    gate, up = acc[..., :half], acc[..., half:]
    return silu_and_mul(gate, up) if epilogue == "silu" else swiglu_oai(gate, up)


# ---- Grouped GEMM -----------------------------------------------------------------------------

def contiguous_offsets(counts) -> np.ndarray:
    """int32 [E + 1] offsets of the contiguous layout: expert e owns rows offsets[e]..offsets[e+1]."""
    counts = np.asarray(counts)
    if (counts < 0).any():
        raise ValueError(f"counts {counts.tolist()}: expected non-negative row counts")
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)


def grouped_gemm_reference(a, qw: QuantWeights, expert_of_row, epilogue: str = "none",
                           act_dtype: str = "bf16") -> np.ndarray:
    """Row r: epilogue(a[r] @ W_e^T + bias_e) with e = expert_of_row[r], float64 before the
    conversion to the output dtype. `a` must already hold act_dtype values. Act-and-mul
    epilogues ("silu", "swiglu_oai") read canonical gate/up rows and give N/2 columns."""
    if epilogue not in EPILOGUES:
        raise ValueError(f"epilogue {epilogue!r}: expected one of {EPILOGUES}")
    a = np.asarray(a, dtype=np.float64)
    expert_of_row = np.asarray(expert_of_row)
    if a.ndim != 2 or a.shape[1] != qw.k:
        raise ValueError(f"a has shape {a.shape}: expected [rows, K = {qw.k}]")
    if expert_of_row.shape != (a.shape[0],):
        raise ValueError(f"expert_of_row has shape {expert_of_row.shape}: expected [rows] = ({a.shape[0]},)")
    if expert_of_row.size and (expert_of_row.min() < 0 or expert_of_row.max() >= qw.experts):
        raise ValueError(f"expert_of_row holds {expert_of_row.min()}..{expert_of_row.max()}: "
                         f"expected 0..{qw.experts - 1}")
    _check_representable(a, act_dtype, "a")
    columns = qw.n if epilogue == "none" else qw.n // 2
    c = np.zeros((a.shape[0], columns))
    for expert in np.unique(expert_of_row):
        rows = expert_of_row == expert
        acc = a[rows] @ _dequantize_expert(qw, expert).T
        if qw.bias is not None:
            acc += qw.bias[expert]
        c[rows] = acc if epilogue == "none" else _act_and_mul(acc, epilogue)
    return c


# ---- Fused MoE layer --------------------------------------------------------------------------

def fused_moe_reference(hidden, w13: QuantWeights, w2: QuantWeights, topk_ids, topk_weights,
                        activation: str, expert_map=None, act_dtype: str = "bf16",
                        round_intermediates: bool = True) -> np.ndarray:
    """output[t] = sum_k topk_weights[t, k] * (w2_e(act(w13_e hidden[t] + b13_e)) + b2_e),
    e = expert_map[topk_ids[t, k]] (identity without a map; -1 contributes nothing), as float64
    before the conversion to the output dtype.

    With round_intermediates, the two values moejit's layer stores in act_dtype between its
    kernels are rounded there (src/dispatch/fused_moe_op.cpp): the activated gate/up row (the
    down GEMM's input) and each pair's down row after its routing weight is applied; with an
    f32 output too. Without it, nothing is rounded, like the C++ tests' fp64 layer reference.
    `hidden` must already hold act_dtype values; w13 rows are canonical (concatenated).
    """
    if activation not in ("silu", "swiglu_oai"):
        raise ValueError(f"activation {activation!r}: expected 'silu' or 'swiglu_oai'")
    hidden = np.asarray(hidden, dtype=np.float64)
    topk_ids = np.asarray(topk_ids)
    topk_weights = np.asarray(topk_weights)
    tokens, hidden_size = hidden.shape
    if w13.k != hidden_size or w2.n != hidden_size or w13.n != 2 * w2.k or w13.experts != w2.experts:
        raise ValueError(f"w13 [{w13.experts}, {w13.n}, {w13.k}] and w2 [{w2.experts}, {w2.n}, {w2.k}] with "
                         f"H = {hidden_size}: expected w13 [E, 2I, H] and w2 [E, H, I]")
    if topk_ids.ndim != 2 or topk_ids.shape[0] != tokens or topk_weights.shape != topk_ids.shape:
        raise ValueError(f"topk_ids {topk_ids.shape}, topk_weights {topk_weights.shape}: expected [T = {tokens}, "
                         f"topk] both")
    if expert_map is not None:
        expert_map = np.asarray(expert_map)
        if ((expert_map < -1) | (expert_map >= w13.experts)).any():
            raise ValueError(f"expert_map holds {expert_map.min()}..{expert_map.max()}: expected -1 or "
                             f"0..{w13.experts - 1}")
    global_experts = w13.experts if expert_map is None else expert_map.shape[0]
    if topk_ids.size and (topk_ids.min() < 0 or topk_ids.max() >= global_experts):
        raise ValueError(f"topk_ids hold {topk_ids.min()}..{topk_ids.max()}: expected 0..{global_experts - 1}")
    local_ids = topk_ids if expert_map is None else expert_map[topk_ids]
    _check_representable(hidden, act_dtype, "hidden")

    def stored(x):
        return round_to(x, act_dtype) if round_intermediates else x

    pair_rows = np.zeros((tokens, topk_ids.shape[1], hidden_size))
    for expert in np.unique(local_ids[local_ids >= 0]):
        token_of_pair, slot_of_pair = np.nonzero(local_ids == expert)
        gate_up = hidden[token_of_pair] @ _dequantize_expert(w13, expert).T
        if w13.bias is not None:
            gate_up += w13.bias[expert]
        activated = stored(_act_and_mul(gate_up, activation))
        down = activated @ _dequantize_expert(w2, expert).T
        if w2.bias is not None:
            down += w2.bias[expert]
        routing = topk_weights[token_of_pair, slot_of_pair].astype(np.float64)
        pair_rows[token_of_pair, slot_of_pair] = stored(down * routing[:, None])
    return pair_rows.sum(axis=1)


# ---- Routing ----------------------------------------------------------------------------------

def random_routing(rng: np.random.Generator, tokens: int, topk: int, global_experts: int):
    """(topk_ids int32 [T, topk], distinct experts per token; topk_weights float32 [T, topk] in
    0.1..1)."""
    if topk > global_experts:
        raise ValueError(f"topk {topk} > global_experts {global_experts}: a token's experts must be distinct")
    topk_ids = np.argsort(rng.random((tokens, global_experts)), axis=1)[:, :topk].astype(np.int32)
    topk_weights = rng.uniform(0.1, 1.0, size=(tokens, topk)).astype(np.float32)
    return topk_ids, topk_weights


def random_expert_map(rng: np.random.Generator, global_experts: int, local_experts: int) -> np.ndarray:
    """int32 [global_experts]: a random subset of global ids -> local ids 0..local-1 in random
    order, -1 elsewhere. When some experts are remote, the highest global id is always local,
    so the subset is never the lowest ids and the map's last entry is exercised."""
    if not 0 < local_experts <= global_experts:
        raise ValueError(f"local_experts {local_experts}: expected 1..global_experts = {global_experts}")
    local_to_global = rng.permutation(global_experts)[:local_experts]
    if local_experts < global_experts and global_experts - 1 not in local_to_global:
        local_to_global[rng.integers(local_experts)] = global_experts - 1
    expert_map = np.full(global_experts, -1, dtype=np.int32)
    expert_map[local_to_global] = np.arange(local_experts, dtype=np.int32)
    return expert_map


def local_experts_of(expert_map) -> np.ndarray:
    """The global id of each local expert (the inverse of an expert map), for take_experts."""
    expert_map = np.asarray(expert_map)
    local_to_global = np.empty(int((expert_map >= 0).sum()), dtype=np.int64)
    local_to_global[expert_map[expert_map >= 0]] = np.nonzero(expert_map >= 0)[0]
    return local_to_global


# ---- Comparison -------------------------------------------------------------------------------

def assert_close(actual, expected, rtol: float, atol: float, what: str) -> None:
    """|actual - expected| <= atol + rtol |expected| everywhere (NaN matches NaN, equal infinities
    match); otherwise an AssertionError naming `what`, the count and the worst element."""
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    if actual.shape != expected.shape:
        raise AssertionError(f"{what}: shape {actual.shape}, expected {expected.shape}")
    with np.errstate(invalid="ignore"):
        difference = np.abs(actual - expected)
        allowed = atol + rtol * np.abs(expected)
        close = (difference <= allowed) | (actual == expected) | (np.isnan(actual) & np.isnan(expected))
    if close.all():
        return
    excess = np.where(close, -np.inf, np.nan_to_num(difference - allowed, nan=np.inf))
    worst = np.unravel_index(np.argmax(excess), actual.shape)
    worst_index = [int(i) for i in worst]
    raise AssertionError(
        f"{what}: {int((~close).sum())} of {actual.size} elements differ by more than atol {atol} + rtol {rtol} * "
        f"|expected|; worst at {worst_index}: actual {float(actual[worst])!r}, expected {float(expected[worst])!r} "
        f"(|difference| {difference[worst]:.4g}, allowed {allowed[worst]:.4g})")

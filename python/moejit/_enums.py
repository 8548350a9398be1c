"""Names for the C ABI's enumerations (values as in moejit.h, part of the ABI), and its integer
ranges."""

from __future__ import annotations

from ._errors import invalid

BACKENDS = {"auto": 0, "device": 1, "host": 2}
DTYPES = {"bf16": 1, "f16": 2, "f32": 3, "e4m3": 4, "e8m0": 5, "e2m1": 6}
FORMATS = {"mxfp4": 1, "int4_sym": 2, "int4_asym": 3}
SOURCES = {"plain": 1, "vllm_mxfp4": 2, "gptq_v1": 3, "gptq_v2": 4, "awq": 5, "compressed_tensors": 6}
ROW_ORDERS = {"plain": 0, "concatenated": 1, "interleaved": 2}
LAYOUTS = {"indexed": 1, "contiguous": 2, "masked": 3}
# Activations as vLLM spells them ("silu", "swigluoai") and as moejit does.
EPILOGUES = {"none": 0, "silu": 1, "silu_and_mul": 1, "swiglu_oai": 2, "swigluoai": 2, "topk_weight": 3}
LOG_LEVELS = ("error", "warn", "info", "debug")


def name_of(table: dict, value: int) -> str:
    return next(k for k, v in table.items() if v == value)


def lookup(table: dict, value, argument: str) -> int:
    """The C value of ``value`` (a name in ``table``), or an InvalidArgumentError naming the choices."""
    if isinstance(value, str) and value in table:
        return table[value]
    raise invalid(f"argument '{argument}' = {value!r}: expected one of {', '.join(repr(k) for k in table)}")


INT32 = (-(1 << 31), (1 << 31) - 1)
UINT32 = (0, (1 << 32) - 1)
UINT64 = (0, (1 << 64) - 1)


def integer(value, argument: str, bounds: tuple[int, int]) -> int:
    """``value`` as the C integer type of ``bounds`` holds it, or an InvalidArgumentError naming the
    argument (the extension's own conversion would raise a TypeError that names neither)."""
    if not isinstance(value, int):
        try:
            value = value.__index__()  # numpy and torch integers
        except (AttributeError, TypeError):
            raise invalid(f"argument '{argument}' = {value!r}: expected an integer") from None
    if not bounds[0] <= value <= bounds[1]:
        raise invalid(f"argument '{argument}' = {value}: expected {bounds[0]} to {bounds[1]}")
    return value

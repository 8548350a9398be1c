"""Arrays from NumPy and PyTorch as the extension takes them, and checks of what they hold.

NumPy arrays (bfloat16 through ml_dtypes) and CPU tensors run on the host backend; CUDA tensors
on the device backend. Other arrays that export DLPack (``__dlpack__``, ``__dlpack_device__``)
with ``shape`` and a NumPy ``dtype`` (CuPy's, say) are taken as well. The extension checks contiguity and device; dtypes and shapes are
checked here, where each argument's meaning is known, so the messages can say what was expected.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any, Optional, Sequence

import numpy as np

from ._errors import UnavailableError, invalid

_NUMPY_DTYPES = {np.dtype(np.float16): "f16", np.dtype(np.float32): "f32", np.dtype(np.int32): "i32",
                 np.dtype(np.uint8): "u8", np.dtype(np.int64): "i64", np.dtype(np.float64): "f64",
                 np.dtype(np.uint16): "u16", np.dtype(np.int8): "i8"}


# ml_dtypes' types, by NumPy name.
_ML_DTYPES = {"bfloat16": "bf16", "float8_e4m3fn": "e4m3"}


def _torch():
    """torch if the caller has imported it (a torch.Tensor cannot exist otherwise)."""
    return sys.modules.get("torch")


def _torch_for(device: tuple[str, int]):
    """torch, to allocate on ``device``; an error saying what to do where it cannot."""
    torch = _torch()
    if torch is None:
        raise invalid(f"moejit allocates {device[0]} memory with torch, which is not imported: pass the output "
                      "and workspace arrays")
    if device[0] == "cuda" and not torch.cuda.is_available():
        raise UnavailableError(f"moejit would allocate on cuda:{device[1]}, but torch sees no CUDA device", 3)
    return torch


def is_torch(x: Any) -> bool:
    torch = _torch()
    return torch is not None and isinstance(x, torch.Tensor)


def is_dlpack(x: Any) -> bool:
    return hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__") and hasattr(x, "shape")


def is_array(x: Any) -> bool:
    return isinstance(x, np.ndarray) or is_torch(x) or is_dlpack(x)


# numpy.dtype.name is computed in Python on every read (microseconds): names are looked up once
# per dtype object, which checks read several times a call.
_DTYPE_NAMES: dict = {}


def dtype_name(x: Any) -> str:
    dt = x.dtype
    name = _DTYPE_NAMES.get(dt)
    if name is None:
        if is_torch(x):
            name = _torch_dtype_names().get(dt, str(dt))
        else:
            npdt = np.dtype(dt)
            name = _ML_DTYPES.get(npdt.name) or _NUMPY_DTYPES.get(npdt, npdt.name)
        _DTYPE_NAMES[dt] = name
    return name


def _torch_dtype_names() -> dict:
    torch = _torch()
    names = {torch.bfloat16: "bf16", torch.float16: "f16", torch.float32: "f32", torch.int32: "i32",
             torch.uint8: "u8", torch.int64: "i64", torch.float64: "f64", torch.int8: "i8"}
    if hasattr(torch, "float8_e4m3fn"):
        names[torch.float8_e4m3fn] = "e4m3"
    if hasattr(torch, "float4_e2m1fn_x2"):
        names[torch.float4_e2m1fn_x2] = "e2m1x2"  # two e2m1 codes per byte
    return names


def for_core(x: Any) -> Any:
    """What the extension receives: the array itself, or for NumPy bfloat16 and float8 (which
    DLPack and the buffer protocol cannot carry; nor torch's float8) an unsigned view of the same
    memory."""
    if isinstance(x, np.ndarray):
        if x.dtype.name == "bfloat16":
            return x.view(np.uint16)
        if x.dtype.name == "float8_e4m3fn":
            return x.view(np.uint8)
    elif is_torch(x) and dtype_name(x) in ("e4m3", "e2m1x2"):
        return x.view(_torch().uint8)
    return x


def row_stride_bytes(x: Any) -> int:
    """Bytes from one row of a 2-D array to the next."""
    if is_torch(x):
        return int(x.stride(0)) * x.element_size()
    if isinstance(x, np.ndarray):
        return int(x.strides[0])
    return int(x.shape[1]) * np.dtype(x.dtype).itemsize  # other DLPack arrays: as if contiguous


def device_of(x: Any) -> tuple[str, int]:
    """("cpu", 0) or ("cuda", ordinal)."""
    if is_torch(x):
        return (x.device.type, x.device.index or 0) if x.device.type == "cuda" else (x.device.type, 0)
    if isinstance(x, np.ndarray):
        return ("cpu", 0)
    if is_dlpack(x):
        kind, ordinal = x.__dlpack_device__()
        return {1: ("cpu", 0), 2: ("cuda", int(ordinal))}.get(int(kind), (f"dlpack device {int(kind)}", int(ordinal)))
    raise invalid(f"an argument is a {type(x).__name__}: expected a numpy.ndarray, a torch.Tensor or a DLPack array")


def check(x: Any, name: str, dtypes: Sequence[str], shape: Sequence[int | None] | None = None) -> Any:
    """Checks that ``x`` is an array of one of ``dtypes`` with ``shape`` (None: any extent)."""
    if not is_array(x):
        raise invalid(f"argument '{name}' is a {type(x).__name__}: expected a numpy.ndarray, a torch.Tensor or a "
                      "DLPack array")
    got = dtype_name(x)
    if got not in dtypes:
        raise invalid(f"argument '{name}' has dtype {got}: expected {' or '.join(dtypes)}")
    if shape is not None:
        actual = tuple(x.shape)
        if len(actual) != len(shape) or any(e is not None and a != e for a, e in zip(actual, shape)):
            want = "[" + ", ".join("*" if e is None else str(e) for e in shape) + "]"
            raise invalid(f"argument '{name}' has shape {list(actual)}: expected {want}")
    return x


def check_optional(x: Any, name: str, dtypes: Sequence[str], shape: Sequence[int | None] | None = None) -> Any:
    return None if x is None else check(x, name, dtypes, shape)


def empty_bytes(like: Any, nbytes: int, *, device: tuple[str, int], zero: bool = False, align: int = 256) -> Any:
    """A uint8 buffer of ``nbytes`` in the memory of ``device``, from the same library as ``like``
    (NumPy for host memory unless ``like`` is a tensor), its start aligned to ``align`` bytes."""
    if device[0] == "cuda" or is_torch(like):
        torch = _torch_for(device)
        dev = torch.device(device[0], device[1]) if device[0] == "cuda" else torch.device("cpu")
        # CUDA allocations are 256-byte aligned; CPU tensors are over-allocated and sliced like NumPy's.
        if dev.type == "cuda":
            return (torch.zeros if zero else torch.empty)(nbytes, dtype=torch.uint8, device=dev)
        raw = (torch.zeros if zero else torch.empty)(nbytes + align, dtype=torch.uint8)
        offset = (-raw.data_ptr()) % align
        return raw[offset:offset + nbytes]
    raw = (np.zeros if zero else np.empty)(nbytes + align, dtype=np.uint8)
    offset = (-raw.ctypes.data) % align
    return raw[offset:offset + nbytes]


def empty(like: Any, shape: Sequence[int], dtype: str, *, device: tuple[str, int]) -> Any:
    """An uninitialized array of ``shape`` and ``dtype`` ("bf16", "f16", "f32") beside ``like``."""
    if device[0] == "cuda" or is_torch(like):
        torch = _torch_for(device)
        dt = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[dtype]
        dev = torch.device(device[0], device[1]) if device[0] == "cuda" else torch.device("cpu")
        return torch.empty(tuple(shape), dtype=dt, device=dev)
    if dtype == "bf16":
        import ml_dtypes
        return np.empty(tuple(shape), dtype=ml_dtypes.bfloat16)
    return np.empty(tuple(shape), dtype={"f16": np.float16, "f32": np.float32}[dtype])


def current_stream(device: tuple[str, int], like: Any) -> int:
    """The stream a call on ``device`` goes to by default: torch's current stream when its
    arrays are CUDA tensors, else 0 (the legacy default stream; pass ``stream`` for others)."""
    if device[0] != "cuda" or not is_torch(like):
        return 0
    return _torch().cuda.current_stream(device[1]).cuda_stream


def allocations_on(stream: Optional[int], like: Any):
    """Where a call's own allocations (output, workspace, scaled rows) go when the caller queues
    it on ``stream``: for CUDA tensors, torch's allocator on that stream, so that their memory is
    not handed to other streams' work while the call runs and zero fills are queued before it;
    for anything else, or torch's current stream, as they are."""
    torch = _torch()
    if stream is None or not is_torch(like) or not like.is_cuda:
        return contextlib.nullcontext()
    if stream == torch.cuda.current_stream(like.device).cuda_stream:
        return contextlib.nullcontext()
    named = (torch.cuda.default_stream(like.device) if stream == 0
             else torch.cuda.ExternalStream(stream, device=like.device))
    return torch.cuda.stream(named)

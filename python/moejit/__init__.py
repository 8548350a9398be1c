"""moejit: runtime-specialized MoE grouped-GEMM kernels (MXFP4 and INT4 weights) for serving engines.

A Python face on moejit's C ABI (include/moejit/moejit.h). NumPy arrays and CPU tensors run on
the host backend; CUDA tensors on the device backend, on torch's current stream. With torch
importable, ``import moejit.torch`` registers ``torch.ops.moejit.fused_moe`` and
``torch.ops.moejit.grouped_gemm`` and provides ``moejit.torch.FusedMoE``.
"""

from . import _core
from ._context import Context
from ._errors import (CompileError, CorruptError, Error, FrozenMissError, InternalError, InvalidArgumentError,
                      NotFoundError, StoreIOError, UnavailableError, UnsupportedError, STATUS_CLASSES)
from ._ops import fused_moe, fused_moe_workspace_size, grouped_gemm, grouped_gemm_workspace_size
from ._warmup import Model, prepare, warmup
from ._weights import PackedWeights, pack_weights

_core._register_error_classes(STATUS_CLASSES)

__version__ = _core.version()

__all__ = ["Context", "Model", "PackedWeights", "pack_weights", "fused_moe", "fused_moe_workspace_size",
           "grouped_gemm", "grouped_gemm_workspace_size", "warmup", "prepare", "Error", "InvalidArgumentError",
           "NotFoundError", "UnavailableError", "CompileError", "StoreIOError", "CorruptError", "FrozenMissError",
           "UnsupportedError", "InternalError", "__version__"]

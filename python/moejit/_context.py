"""moejit.Context: where kernels are built, stored and run."""

from __future__ import annotations

import logging
import os
from typing import Iterable, Optional

from . import _core
from ._enums import BACKENDS, LOG_LEVELS, lookup, name_of

_PYTHON_LEVELS = {"error": logging.ERROR, "warn": logging.WARNING, "info": logging.INFO, "debug": logging.DEBUG}


class Context:
    """A moejit context: a backend, its kernel store and in-memory kernel table.

    backend: "auto" (the GPU when the CUDA driver reports one, the host backend, with a warning,
    only when there is no driver or no device), "device" or "host". device: the CUDA ordinal.
    cache_dir: the writable store (None: $MOEJIT_CACHE_DIR, else ~/.cache/moejit);
    read_only_dirs: shipped stores searched first. frozen: a kernel missing from the store is an
    error instead of a compile. logger: where moejit's diagnostics go (default: the "moejit"
    logger when logging has handlers for it, else stderr as from C); like the C library's sink
    this is process-wide: the last context created with one receives every message.
    usage_manifest: append every kernel spec this context uses to this file (for
    ``moejit warmup --from-usage``). host_arch: the target whose kernels the host backend runs
    (None: "sm_90a"; "sm_120a" runs the block-scaled W4A8 and W4A4 paths). Safe to share
    between threads; close() waits for calls in flight.
    """

    def __init__(self, backend: str = "auto", device: int = 0, *, cache_dir: Optional[os.PathLike | str] = None,
                 read_only_dirs: Iterable[os.PathLike | str] = (), compile_threads: int = 0, frozen: bool = False,
                 logger: Optional[logging.Logger] = None, usage_manifest: Optional[os.PathLike | str] = None,
                 host_arch: Optional[str] = None):
        # Into Python logging when the caller asked for it (a logger, or handlers configured for
        # "moejit" or above it); otherwise moejit's own stderr sink, so that its warnings and
        # MOEJIT_PRINT_CONFIGS's lines appear without any logging set-up, as from C.
        target = logger
        if target is None and logging.getLogger("moejit").hasHandlers():
            target = logging.getLogger("moejit")
        forward = None
        if target is not None:
            def forward(level: int, message: str) -> None:
                python_level = _PYTHON_LEVELS[LOG_LEVELS[level]] if 0 <= level < len(LOG_LEVELS) else logging.INFO
                target.log(python_level, message)

        self._core = _core.Context(
            lookup(BACKENDS, backend, "backend"), int(device),
            None if cache_dir is None else os.fspath(cache_dir),
            [os.fspath(d) for d in read_only_dirs], int(compile_threads), bool(frozen), forward,
            None if usage_manifest is None else os.fspath(usage_manifest), host_arch)
        # Where this context's tensors live: ("cuda", ordinal) or ("cpu", 0).
        self.memory = ("cuda", self.device) if self.backend == "device" else ("cpu", 0)

    @property
    def backend(self) -> str:
        """"device" or "host" (AUTO resolved)."""
        return name_of(BACKENDS, self._core.backend)

    @property
    def arch(self) -> str:
        """The target architecture ("sm_90a"); "" on the host backend or with no GPU to ask."""
        return self._core.arch

    @property
    def device(self) -> int:
        return self._core.device

    def stats(self) -> dict:
        """Kernel-table and store counters: memory_hits, disk_hits, compiles, compile_ms, ..."""
        return self._core.stats()

    def close(self) -> None:
        self._core.close()

    @property
    def closed(self) -> bool:
        return self._core.closed

    def __enter__(self) -> "Context":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"backend={self.backend!r}, arch={self.arch!r}"
        return f"moejit.Context({state})"

"""moejit's exceptions: one class per moejit_status_t, all subclasses of moejit.Error."""

from __future__ import annotations


class Error(Exception):
    """A failed moejit call: ``status`` is the moejit_status_t, ``str(e)`` the C library's message."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.message = message
        self.status = status

    @property
    def status_name(self) -> str:
        return _STATUS_NAMES.get(self.status, "unknown")


class InvalidArgumentError(Error, ValueError):
    """A field or argument is out of range; the message names it and what was expected."""


class NotFoundError(Error):
    """A file, entry or symbol does not exist."""


class UnavailableError(Error):
    """A run-time dependency (NVRTC, libcuda, a GPU) is missing."""


class CompileError(Error):
    """The kernel compiler rejected the source; the message carries its log."""


class StoreIOError(Error, OSError):
    """A file-system operation failed."""


class CorruptError(Error):
    """Stored data failed verification."""


class FrozenMissError(Error):
    """Frozen mode: the kernel is not in the store."""


class UnsupportedError(Error):
    """A valid request this build or device cannot honor."""


class InternalError(Error):
    """A bug in moejit (or a kernel trap); please report it."""


# Index = moejit_status_t (0 is MOEJIT_OK and never raised).
STATUS_CLASSES = (Error, InvalidArgumentError, NotFoundError, UnavailableError, CompileError, StoreIOError,
                  CorruptError, FrozenMissError, UnsupportedError, InternalError)
_STATUS_NAMES = {0: "ok", 1: "invalid_argument", 2: "not_found", 3: "unavailable", 4: "compile", 5: "io",
                 6: "corrupt", 7: "frozen_miss", 8: "unsupported", 9: "internal"}


def invalid(message: str) -> InvalidArgumentError:
    """An InvalidArgumentError raised by the Python layer itself, before any pointer reaches C."""
    return InvalidArgumentError(message, 1)

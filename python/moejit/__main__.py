"""The `moejit` command (warmup, cache, compile, demo): the C++ CLI built into the package."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def executable() -> Path:
    return Path(__file__).resolve().parent / "bin" / "moejit"


def main() -> None:
    exe = executable()
    if not exe.is_file():
        sys.exit(f"moejit: the command is missing from the package ({exe}); reinstall moejit")
    os.execv(exe, [str(exe), *sys.argv[1:]])


if __name__ == "__main__":
    main()

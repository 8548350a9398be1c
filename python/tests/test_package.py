"""The package as users get it: its version, the `moejit` command it installs, warm-up with a
progress callback, and (given a built wheel) a fresh virtual environment that imports it."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

import moejit

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
SMALL = moejit.Model(hidden=128, intermediate=64, experts=4, topk=2, format="mxfp4", max_tokens=4)


def test_version_matches_the_c_library_and_pyproject():
    assert moejit.__version__ == moejit._core.version()
    declared = next(line for line in PYPROJECT.read_text().splitlines() if line.startswith("version"))
    assert f'"{moejit.__version__}"' in declared


def test_console_command_runs_the_cli():
    # pip puts console scripts beside the interpreter of the environment it installs into.
    script = Path(sys.executable).parent / "moejit"
    command = str(script) if script.exists() else shutil.which("moejit")
    assert command is not None, "pip did not install the `moejit` console script"
    for argv in ([command, "--version", "--json"], [sys.executable, "-m", "moejit", "--version", "--json"]):
        run = subprocess.run(argv, capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        assert json.loads(run.stdout)["version"] == moejit.__version__


def test_warmup_on_the_host_backend_reports_progress(store_dir, caplog):
    seen = []
    with moejit.Context("host", cache_dir=store_dir) as ctx:
        moejit.warmup(ctx, SMALL, progress=lambda done, total, what: seen.append((done, total, what)))
        assert seen, "no progress reported"
        assert seen[-1][0] == seen[-1][1], f"warm-up ended at {seen[-1]}"
        assert ctx.stats()["compiles"] + ctx.stats()["disk_hits"] + ctx.stats()["memory_hits"] >= len(seen) > 0


def test_progress_callback_exception_propagates(store_dir):
    class Stop(Exception):
        pass

    def progress(done, total, what):
        raise Stop(f"stopped at {done}/{total}")

    with moejit.Context("host", cache_dir=store_dir) as ctx, pytest.raises(Stop):
        moejit.warmup(ctx, SMALL, progress=progress)


def test_bad_model_names_the_field(store_dir):
    with moejit.Context("host", cache_dir=store_dir) as ctx:
        with pytest.raises(moejit.InvalidArgumentError, match="format"):
            moejit.warmup(ctx, moejit.Model(hidden=128, intermediate=64, experts=4, topk=2, format="nf4"))
        with pytest.raises(moejit.InvalidArgumentError, match="topk"):
            moejit.warmup(ctx, moejit.Model(hidden=128, intermediate=64, experts=4, topk=9))


def test_logs_reach_python_logging(tmp_path, caplog):
    """An untrusted store directory is refused with one warning, which arrives as a log record."""
    untrusted = tmp_path / "store"
    untrusted.mkdir()
    untrusted.chmod(0o777)
    with caplog.at_level(logging.WARNING, logger="moejit"):
        moejit.Context("host", cache_dir=untrusted).close()
    assert any(str(untrusted) in r.getMessage() for r in caplog.records if r.name == "moejit"), caplog.text


@pytest.mark.skipif(not os.environ.get("MOEJIT_WHEEL"),
                    reason="MOEJIT_WHEEL (the path of a built moejit wheel) is not set; .ci/run sets it")
def test_wheel_installs_into_a_fresh_venv(tmp_path):
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    # numpy from the same place this interpreter got it (no network needed when it is cached).
    install = subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                              os.environ["MOEJIT_WHEEL"]], capture_output=True, text=True)
    assert install.returncode == 0, install.stderr
    probe = ("import moejit, numpy; ctx = moejit.Context('host'); "
             "print(moejit.__version__, ctx.backend, moejit.__file__)")
    run = subprocess.run([python, "-c", probe], capture_output=True, text=True, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": "", "MOEJIT_CACHE_DIR": str(tmp_path / "cache")})
    assert run.returncode == 0, run.stderr
    version, backend, location = run.stdout.split()
    assert version == moejit.__version__ and backend == "host"
    assert Path(location).is_relative_to(env_dir), f"imported {location}, not the venv's copy"
    cli = subprocess.run([env_dir / "bin" / "moejit", "--version"], capture_output=True, text=True)
    assert cli.returncode == 0, cli.stderr


def test_readme_python_example_runs(tmp_path):
    """The top-level README's Python example, as a reader would paste it."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = readme.split("```python\n", 1)[1].split("```", 1)[0]
    run = subprocess.run([sys.executable, "-c", block + "\nprint(out.dtype, out.shape)\n"], capture_output=True,
                         text=True, cwd=tmp_path, env={**os.environ, "MOEJIT_CACHE_DIR": str(tmp_path / "cache")})
    assert run.returncode == 0, run.stderr
    assert run.stdout.split()[-3:] == ["bfloat16", "(4,", "256)"], run.stdout

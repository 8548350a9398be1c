"""The package as users get it: its version, the `moejit` command it installs, warm-up with a
progress callback, and (given a built wheel) a fresh virtual environment that imports it."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import threading
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


def test_model_integers_out_of_range_name_the_field(store_dir):
    with moejit.Context("host", cache_dir=store_dir) as ctx:
        for field, value in (("hidden", -1), ("max_tokens", 1 << 32), ("experts", 2.5)):
            model = moejit.Model(**{"hidden": 128, "intermediate": 64, "experts": 4, "topk": 2, field: value})
            with pytest.raises(moejit.InvalidArgumentError, match=rf"model field '{field}' = {value}: expected an "
                                                                  r"integer from 0 to 4294967295"):
                moejit.warmup(ctx, model)


def test_close_from_a_callback_raises_instead_of_hanging(store_dir):
    """The call in flight holds the context: close() from its own progress callback would wait
    for it forever. It raises (and the warm-up goes on); close() after the call works."""
    errors = []

    def progress(done, total, what):
        try:
            ctx.close()
        except moejit.InvalidArgumentError as e:
            errors.append(str(e))

    ctx = moejit.Context("host", cache_dir=store_dir)
    finished = []
    # In a thread, so that a regression fails the test instead of hanging the suite.
    worker = threading.Thread(target=lambda: (moejit.warmup(ctx, SMALL, progress=progress), finished.append(True)),
                              daemon=True)
    worker.start()
    worker.join(timeout=120)
    assert finished, "warm-up did not return: close() from the callback waited for its own call"
    assert errors and "close() from within a call on this context" in errors[0], errors
    assert not ctx.closed
    ctx.close()
    assert ctx.closed


def test_host_contexts_share_weights_whatever_the_device_ordinal(store_dir):
    """Host memory has no ordinal: weights packed on one host context serve another created with
    device=1 (an engine passing its local rank in CPU CI)."""
    import ml_dtypes
    import numpy as np
    import reference as ref
    rng = np.random.default_rng(5)
    with moejit.Context("host", cache_dir=store_dir) as one, \
            moejit.Context("host", device=1, cache_dir=store_dir) as other:
        assert other.device == 1 and other.memory == ("cpu", 0)
        w13 = moejit.pack_weights(one, rows="concatenated",
                                  **ref.to_vllm_mxfp4(ref.random_quant_weights(rng, "mxfp4", 4, 128, 128)))
        w2 = moejit.pack_weights(one, **ref.to_vllm_mxfp4(ref.random_quant_weights(rng, "mxfp4", 4, 128, 64)))
        hidden = rng.standard_normal((3, 128)).astype(ml_dtypes.bfloat16)
        ids, weights = ref.random_routing(rng, 3, 2, 4)
        expected = moejit.fused_moe(one, hidden, w13, w2, weights, ids)
        assert np.array_equal(moejit.fused_moe(other, hidden, w13, w2, weights, ids).view(np.uint16),
                              expected.view(np.uint16))


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

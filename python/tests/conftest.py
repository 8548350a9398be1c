"""Shared fixtures: one host-backend context per session over a private kernel store, so each
kernel is compiled once however many tests use it."""

from __future__ import annotations

import numpy as np
import pytest

import moejit


@pytest.fixture(scope="session")
def store_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("moejit-store")


@pytest.fixture(scope="session")
def host_ctx(store_dir):
    with moejit.Context("host", cache_dir=store_dir) as ctx:
        yield ctx


@pytest.fixture
def rng(request):
    # Fresh data per test, reproducible from the test's name when a failure needs replaying.
    seed = abs(hash(request.node.nodeid)) % (2**32)
    print(f"rng seed {seed}")
    return np.random.default_rng(seed)

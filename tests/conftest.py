"""The tests are laid out like the source (``tests/core/...`` for ``suanli/core/...``) and
imported by path (``--import-mode=importlib``), so that two test modules may share a name;
the shared builders beside this file are importable from any of them."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)


import pytest  # noqa: E402


@pytest.fixture(scope="session")
def ray_cluster():  # type: ignore[no-untyped-def]
    """One real Ray cluster for every test that asks for it (``ray_cluster.start``): a head
    and two worker nodes of four declared H100s each, started once, stopped at the end."""
    import ray_cluster as rc

    cluster = rc.start()
    try:
        yield cluster
    finally:
        cluster.shutdown()

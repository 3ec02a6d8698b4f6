"""The registry: every seam's plugins by name, unknown names listing the known ones, and
plugins from another package through Python entry points (a tiny package made here, found
the way an installed one is: by its ``.dist-info``; run in a fresh interpreter so that this
process's registry stays the built-in one)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from suanli.core.registry import SEAMS, UnknownPolicyError, catalogue, create, names

PLUGIN = '''
"""A placement from another package: the last node that fits."""
import numpy as np

from suanli.core.seams import Placement


class LastFit(Placement):
    """The last node (by index) that fits: a plugin from the tiny package."""

    def score(self, view, task, count, nodes, rng):
        return -nodes.astype(np.float64)
'''


def tiny_package(root: Path, body: str = PLUGIN, name: str = "last-fit") -> Path:
    """``tiny_suanli_plugin`` with one entry point, ``suanli.placement:NAME``."""
    (root / "tiny_suanli_plugin").mkdir()
    (root / "tiny_suanli_plugin" / "__init__.py").write_text(body)
    info = root / "tiny_suanli_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: tiny-suanli-plugin\nVersion: 0.1\n"
    )
    (info / "entry_points.txt").write_text(
        f"[suanli.placement]\n{name} = tiny_suanli_plugin:LastFit\n"
    )
    return root


def run_python(code: str, path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(path), *sys.path])}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env
    )


def test_every_seam_has_its_plugins() -> None:
    listed = {name.split("/")[0] for name, _ in catalogue()}
    assert listed == set(SEAMS)
    for seam in SEAMS:
        assert names(seam), seam


def test_an_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(UnknownPolicyError) as e:
        create("admission", "quotas")
    assert str(e.value) == (
        "unknown admission policy 'quotas' (known: " + ", ".join(names("admission")) + ")"
    )


def test_a_plugin_from_another_package_registers_through_an_entry_point(tmp_path: Path) -> None:
    root = tiny_package(tmp_path)
    got = run_python(
        """
        import numpy as np

        from suanli.core.builder import PolicySet, build
        from suanli.core.model import ClusterSpec, GpuModel, Job, NodeSpec
        from suanli.core.registry import catalogue
        from suanli.core.view import ClusterView
        from suanli.sim.engine import simulate

        print(dict(catalogue())["placement/last-fit"])
        v = GpuModel("V", 1024)
        spec = ClusterSpec("c", tuple(NodeSpec(f"n{i}", 2, v, 1000, 1000) for i in range(3)))
        policy = PolicySet.parse("fifo+last-fit")
        policy.check()
        s = build(ClusterView(spec), policy)
        s.submit(Job("j", 0.0, 10.0))
        (d,) = s.cycle(np.random.default_rng(0))
        print(d.placement.tasks[0].node)
        print(simulate(spec, [Job("j", 0.0, 10.0)], policy).finished)
        """,
        root,
    )
    assert got.returncode == 0, got.stderr
    doc, node, finished = got.stdout.splitlines()
    assert doc == "The last node (by index) that fits: a plugin from the tiny package."
    assert (node, finished) == ("2", "1")  # the last of three nodes: its own choice
    cli = subprocess.run(
        [sys.executable, "-m", "suanli.cli.main", "policies"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(root), *sys.path])},
    )
    assert cli.returncode == 0, cli.stderr
    assert any(line.split()[0] == "placement/last-fit" for line in cli.stdout.splitlines())


def test_a_broken_plugin_fails_only_where_it_is_used(tmp_path: Path) -> None:
    root = tiny_package(tmp_path, "raise ImportError('needs a GPU driver')\n")
    got = run_python(
        """
        from suanli.core.registry import PluginError, catalogue, create
        print(create("placement", "best-fit").__class__.__name__)
        print(dict(catalogue())["placement/last-fit"])
        try:
            create("placement", "last-fit")
        except PluginError as e:
            print(e)
        """,
        root,
    )
    assert got.returncode == 0, got.stderr
    best, listed, error = got.stdout.splitlines()
    assert best == "BestFit"
    assert listed == "(does not load: needs a GPU driver)"
    assert error.startswith("plugin placement/last-fit (entry point suanli.placement: ")
    assert error.endswith("failed to load: ImportError: needs a GPU driver")


def test_a_plugin_that_takes_a_built_in_name_is_ignored_and_listed(tmp_path: Path) -> None:
    root = tiny_package(tmp_path, name="best-fit")
    got = run_python(
        """
        from suanli.core.registry import catalogue, create
        print(type(create("placement", "best-fit")).__name__)
        print([d for n, d in catalogue() if n == "placement/best-fit"][-1])
        """,
        root,
    )
    assert got.returncode == 0, got.stderr
    kind, listed = got.stdout.splitlines()
    assert kind == "BestFit"  # the built-in still answers to its name
    assert listed == "(entry point tiny_suanli_plugin:LastFit ignored: the name is taken)"

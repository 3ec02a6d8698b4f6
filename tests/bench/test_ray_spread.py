"""What-if runs spread over a real Ray cluster (``suanli.sim.spread``): ``suanli bench fgd``
(pod lists and variants) and a multi-policy ``suanli simulate`` give the same JSON with
``--ray ADDRESS`` as without, and a missing Ray, a malformed address, an address where no
cluster answers and workers that cannot import the function fail with one clear line, fast.

One cluster for the module (a head and one more node, one CPU each, their own temporary
directory so that this machine's default Ray address is left alone), started here and shut
down at the end. The replays use the tiny openb trace (``openb_tiny``) and a 300-job synthetic
workload: nothing needs the public traces, and on Ray only the driver reads the trace files.
"""

from __future__ import annotations

import json
import operator
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from openb_tiny import write_tiny_traces
from suanli.cli.main import app
from suanli.sim import spread
from suanli.sim.spread import SpreadError, spread_map
from support import cli_runner

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'suanli[ray]')")
from ray.cluster_utils import Cluster  # noqa: E402

TIMING = {"wall_s", "decisions_per_s", "jobs_per_s"}
"""Keys of the JSON that measure this run's own speed, not what it computed."""


@pytest.fixture(scope="module")
def ray_address() -> Iterator[str]:
    temp = tempfile.mkdtemp(prefix="suanli-spread-", dir="/tmp")  # short: Ray's socket paths
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "include_dashboard": False, "temp_dir": temp},
    )
    try:
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        yield str(cluster.address)
    finally:
        cluster.shutdown()
        shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture()
def runner() -> CliRunner:
    return cli_runner()


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_traces(tmp_path_factory.mktemp("traces"))


def without_timing(doc: Any) -> Any:
    if isinstance(doc, dict):
        return {k: without_timing(v) for k, v in doc.items() if k not in TIMING}
    if isinstance(doc, list):
        return [without_timing(v) for v in doc]
    return doc


def invoke_json(runner: CliRunner, args: list[str]) -> Any:
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def unreachable() -> str:
    """An address where nothing listens (the port was free a moment ago)."""
    return f"127.0.0.1:{free_port()}"


# --- spread_map itself ----------------------------------------------------------------------


def test_spread_map_in_input_order_everywhere(ray_address: str) -> None:
    items = list(range(7))
    want = [100 + i for i in items]
    assert spread_map(operator.add, items, 100) == want
    assert spread_map(operator.add, items, 100, workers=2, chunksize=3) == want
    assert spread_map(operator.add, items, 100, ray=ray_address, chunksize=3) == want
    assert spread_map(operator.add, [], 100, ray=ray_address) == []
    assert not ray.is_initialized()  # the driver disconnected


def _only_here(shared: int, item: int) -> int:
    """A function of this test module, which the Ray workers cannot import."""
    return shared + item


def test_workers_that_cannot_import_the_function_say_so(ray_address: str) -> None:
    with pytest.raises(SpreadError, match="could not import .*every node needs suanli"):
        spread_map(_only_here, [1, 2], 0, ray=ray_address)
    assert not ray.is_initialized()


# --- suanli bench fgd -----------------------------------------------------------------------


def test_bench_fgd_same_with_ray(runner: CliRunner, tiny_dir: Path, ray_address: str) -> None:
    args = ["bench", "fgd", "--trace-dir", str(tiny_dir), "--pods", "tiny",
            "--policies", "FGD,BestFit,frag-balance", "--seeds", "1-3"]  # fmt: skip
    local = invoke_json(runner, [*args, "--workers", "2", "--json"])
    on_ray = invoke_json(runner, [*args, "--ray", ray_address, "--json"])
    assert [(d["policy"], d["seeds"]) for d in on_ray] == [
        ("FGD", 3),
        ("BestFit", 3),
        ("frag-balance", 3),
    ]
    assert without_timing(on_ray) == without_timing(local)


def test_bench_fgd_variants_same_with_ray(
    runner: CliRunner, tiny_dir: Path, ray_address: str
) -> None:
    args = ["bench", "fgd", "--trace-dir", str(tiny_dir), "--pods", "tiny",
            "--variants", "share=0.6;cpu=1.1", "--policies", "FGD,BestFit", "--seeds", "1,2",
            "--json"]  # fmt: skip
    local = invoke_json(runner, [*args, "--workers", "1"])
    on_ray = invoke_json(runner, [*args, "--ray", ray_address])
    assert [(c["cell"], c["policy"]) for c in on_ray["cells"]] == [
        ("share=0.6", "FGD"),
        ("share=0.6", "BestFit"),
        ("cpu=1.1", "FGD"),
        ("cpu=1.1", "BestFit"),
    ]
    assert on_ray == local


# --- suanli simulate ------------------------------------------------------------------------


def test_simulate_policy_sets_same_with_ray(runner: CliRunner, ray_address: str) -> None:
    args = ["simulate", "-n", "300", "-p", "fifo+best-fit", "-p", "drf+best-fit",
            "--quotas", "shared", "--preempt",
            "--explain", "j000002", "--json"]  # fmt: skip
    local = invoke_json(runner, args)
    on_ray = invoke_json(runner, [*args, "--ray", ray_address])
    assert [r["policy"] for r in on_ray["results"]] == [
        "fifo+best-fit",
        "drf+best-fit",
    ]
    assert without_timing(on_ray) == without_timing(local)
    assert not ray.is_initialized()


# --- errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["bench", "fgd", "--pods", "tiny", "--seeds", "1"],
        ["bench", "fgd", "--pods", "tiny", "--variants", "share=0.6", "--seeds", "1"],
        ["simulate", "-n", "300", "-p", "fifo+best-fit", "-p", "fifo+first-fit"],
    ],
)
def test_unreachable_address_fails_fast(
    runner: CliRunner, tiny_dir: Path, command: list[str]
) -> None:
    address = unreachable()
    extra = ["--trace-dir", str(tiny_dir)] if command[0] == "bench" else []
    t0 = time.perf_counter()
    result = runner.invoke(app, [*command, *extra, "--ray", address])
    assert time.perf_counter() - t0 < 10
    assert result.exit_code == 2
    assert result.stderr.startswith(
        f"suanli: error: --ray: cannot reach the Ray cluster at {address}"
    )
    assert result.stderr.count("\n") == 1
    assert result.stdout == ""


@pytest.mark.parametrize("address", ["nohost", "host:port", "host:0", "ray://:6379"])
def test_malformed_address_is_named(runner: CliRunner, address: str) -> None:
    result = runner.invoke(app, ["simulate", "-n", "300", "--ray", address])
    assert result.exit_code == 2
    assert f"--ray: Ray address {address!r}: expected HOST:PORT" in result.stderr


def test_without_ray_installed_the_error_names_the_extra(
    runner: CliRunner, tiny_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    with pytest.raises(SpreadError, match=r"Ray is not installed: pip install 'suanli\[ray\]'"):
        spread_map(operator.add, [1], 0, ray="127.0.0.1:6379")
    for command in (
        ["bench", "fgd", "--trace-dir", str(tiny_dir), "--pods", "tiny"],
        ["simulate", "-n", "300"],
    ):
        result = runner.invoke(app, [*command, "--ray", "127.0.0.1:6379"])
        assert result.exit_code == 2
        assert "pip install 'suanli[ray]'" in result.stderr


def test_connect_is_bounded_where_no_ray_head_answers(tmp_path: Path) -> None:
    # Something accepts TCP connections but never speaks Ray: ray.init alone would retry for
    # minutes. In a child process, so that Ray's abandoned connect cannot touch this one.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        script = textwrap.dedent(f"""
            import operator, time
            from suanli.sim.spread import SpreadError, spread_map
            t0 = time.perf_counter()
            try:
                spread_map(operator.add, [1], 0, ray="127.0.0.1:{port}", connect_timeout=3)
            except SpreadError as e:
                print(f"{{time.perf_counter() - t0:.1f}} {{e}}")
        """)
        child = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
        )
    assert child.returncode == 0, child.stderr
    took, _, message = child.stdout.strip().partition(" ")
    assert float(took) < 6
    assert message.startswith("could not connect to the Ray cluster at 127.0.0.1:")
    assert "within 3 s" in message


def test_where_names_the_place() -> None:
    assert spread.where(2, None) == "2 process(es)"
    assert spread.where(0, None) == "1 process(es)"
    assert spread.where(2, "10.0.0.1:6379") == "the Ray cluster at 10.0.0.1:6379"

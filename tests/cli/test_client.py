"""The client verbs against the real API, served by uvicorn on a loopback port."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from typer.testing import CliRunner

from suanli.api.app import create_app
from suanli.cli.client_http import expected_start
from suanli.cli.main import app as cli
from suanli.control.metrics import ControlMetrics
from suanli.metering.charges import Charge
from suanli.store import Store, open_store, post_charges
from suanli.store import jobs as js
from suanli.store import predictions as pr
from suanli.store.tokens import create_token

NOW = 1_764_000_000_000


@dataclass
class Server:
    url: str
    store: Store
    logs: Path
    tokens: dict[str, str]
    log_reads: list[int]
    """How many times the API has looked up a log file (one element, counted up)."""

    def run(self, who: str, *args: str, env: dict[str, str] | None = None) -> Any:
        at = args.index("--") if "--" in args else len(args)  # options go before '--'
        given = [*args[:at], "--server", self.url, "--token", self.tokens[who], *args[at:]]
        return CliRunner().invoke(cli, given, env=env)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    store = open_store(tmp_path / "suanli.db")
    logs = tmp_path / "logs"
    logs.mkdir()
    reads = [0]

    def log_file(job: str, attempt: int, task: int, stream: str) -> Path:
        reads[0] += 1
        return logs / f"{job}.{attempt}.{task}.{stream}"

    app = create_app(
        store,
        metrics=ControlMetrics(),
        log_file=log_file,
        queues=lambda: [{"name": "vision", "tenants": ["vision"]}],
    )
    port = _free_port()
    uv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=uv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not uv.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.02)
    tokens = {}
    for who, role, tenant in (
        ("root", "admin", None),
        ("ana", "user", "vision"),
        ("nina", "user", "nlp"),
    ):
        tokens[who], _ = create_token(
            store, name=who, role=role, tenant=tenant, user=who, now_ms=NOW
        )
    yield Server(f"http://127.0.0.1:{port}", store, logs, tokens, reads)
    uv.should_exit = True
    thread.join(10)
    store.close()


def ok(result: Any) -> str:
    assert result.exit_code == 0, (result.exit_code, result.output)
    return str(result.stdout)


def test_submit_queue_show_cancel(server: Server, tmp_path: Path) -> None:
    out = ok(server.run("ana", "submit", "--gpus", "2", "--name", "resnet", "--", "python", "t.py"))
    assert out.strip() == "Submitted job 1 to queue vision"
    spec = tmp_path / "job.yaml"
    spec.write_text("command: [python, eval.py]\ngpus: 0.5\nmemory: 8G\nenv: {A: '1'}\n")
    job = json.loads(
        ok(
            server.run(
                "ana",
                "submit",
                str(spec),
                "--memory",
                "16G",
                "--env",
                "B=2",
                "--class",
                "spot",
                "--json",
            )
        )  # fmt: skip
    )
    assert job["id"] == "2" and job["priority_class"] == "spot"
    assert job["spec"]["memory"] == 16384 and job["spec"]["env"] == {"A": "1", "B": "2"}
    assert job["spec"]["command"] == ["python", "eval.py"] and job["spec"]["gpus"] == 0.5
    spec_json = tmp_path / "job.json"
    spec_json.write_text(json.dumps({"command": ["true"]}))
    ok(server.run("ana", "submit", "-f", str(spec_json), "--", "echo", "hi"))

    table = ok(server.run("ana", "queue"))
    lines = table.splitlines()
    assert lines[0].split()[:6] == ["JOB", "NAME", "USER", "QUEUE", "CLASS", "STATE"]
    assert "resnet" in lines[1] and "pending" in lines[1] and len(lines) == 4
    listed = json.loads(ok(server.run("ana", "queue", "--json")))
    assert [j["id"] for j in listed["jobs"]] == ["1", "2", "3"] and listed["next"] is None
    assert json.loads(ok(server.run("nina", "queue", "--json")))["jobs"] == []

    shown = ok(server.run("ana", "show", "1"))
    assert "resnet" in shown and "python t.py" in shown and "submitted" in shown
    assert json.loads(ok(server.run("ana", "show", "1", "--json")))["job"]["name"] == "resnet"

    assert ok(server.run("ana", "cancel", "1", "2")).splitlines() == [
        "job 1: cancel requested",
        "job 2: cancel requested",
    ]
    result = server.run("nina", "cancel", "3")
    assert result.exit_code == 1 and result.stderr.strip() == "suanli: error: no job '3'"
    result = server.run("nina", "show", "3")
    assert result.exit_code == 1 and "no job '3'" in result.stderr
    assert "cancelling" in ok(server.run("ana", "queue"))
    assert len(json.loads(ok(server.run("root", "queue", "--all", "--json")))["jobs"]) == 3
    state = json.loads(ok(server.run("root", "queue", "--state", "succeeded", "--json")))
    assert state["jobs"] == []


def test_queue_and_show_tell_a_waiting_job_when_it_will_start(server: Server) -> None:
    # The scheduler loop writes each pending job's estimate to the store (no loop runs here:
    # written as it would); the API shows it to the job's owner, the client as a range.
    ok(server.run("ana", "submit", "--gpus", "2", "--", "train"))
    ok(server.run("ana", "submit", "--gpus", "2", "--", "train"))
    ok(server.run("ana", "submit", "--gpus", "2", "--", "train"))
    planned = 1_764_000_000_000
    pr.set_start_estimates(server.store, {"1": (planned + 600_000, planned + 5_400_000, planned),
                                          "3": (None, None, planned)})  # fmt: skip
    listed = json.loads(ok(server.run("ana", "queue", "--json")))["jobs"]
    first = listed[0]["start_estimate"]
    assert first == {"p50": "2025-11-24T16:10:00.000Z", "p90": "2025-11-24T17:30:00.000Z",
                     "planned_at": "2025-11-24T16:00:00.000Z"}  # fmt: skip
    assert listed[1]["start_estimate"] is None  # not estimated yet
    assert listed[2]["start_estimate"]["p50"] is None  # no healthy node can hold it
    table = ok(server.run("ana", "queue")).splitlines()
    assert "EXPECTED START" in table[0]
    assert expected_start(first) in table[1] and " to " in expected_start(first)
    assert "never" in table[3]
    shown = ok(server.run("ana", "show", "1"))
    assert "expected start" in shown and expected_start(first) in shown
    # Another tenant's user sees nothing of it.
    assert json.loads(ok(server.run("nina", "queue", "--json")))["jobs"] == []
    assert server.run("nina", "show", "1").exit_code == 1
    # Once it runs, no estimate is shown (the store keeps what was said).
    with server.store.begin() as conn:
        js.set_job_state(conn, "1", "running", planned + 700_000)
    assert json.loads(ok(server.run("ana", "show", "1", "--json")))["job"]["start_estimate"] is None
    assert "expected start" not in ok(server.run("ana", "show", "1"))


def test_errors_are_one_line(server: Server) -> None:
    result = server.run("ana", "submit", "--gpus", "1.5", "--", "x")
    assert result.exit_code == 1
    assert result.stderr.startswith("suanli: error: invalid request: gpus:")
    assert result.stderr.count("\n") == 1
    result = server.run("ana", "submit")
    assert result.exit_code == 2 and "no command" in result.stderr
    result = server.run("ana", "submit", "--env", "oops", "--", "x")
    assert result.exit_code == 2
    bad = CliRunner().invoke(cli, ["queue", "--server", server.url, "--token", "sl_wrong"])
    assert bad.exit_code == 1 and "invalid or revoked token" in bad.stderr
    down = CliRunner().invoke(cli, ["nodes", "--server", "http://127.0.0.1:9", "--token", "x"])
    assert down.exit_code == 1 and "cannot reach" in down.stderr
    none = CliRunner().invoke(
        cli,
        ["nodes", "--server", server.url],
        env={"SUANLI_TOKEN": None, "SUANLI_TOKEN_FILE": "/nonexistent/token"},
    )
    assert none.exit_code == 2 and "no API token" in none.stderr


def test_token_from_environment_and_file(server: Server, tmp_path: Path) -> None:
    runner = CliRunner()
    env = {"SUANLI_SERVER": server.url, "SUANLI_TOKEN": server.tokens["ana"]}
    assert json.loads(ok(runner.invoke(cli, ["queue", "--json"], env=env)))["jobs"] == []
    path = tmp_path / "token"
    path.write_text(server.tokens["nina"] + "\n")
    env = {"SUANLI_SERVER": server.url, "SUANLI_TOKEN": None, "SUANLI_TOKEN_FILE": str(path)}
    ok(runner.invoke(cli, ["submit", "--", "true"], env=env))
    assert json.loads(ok(server.run("root", "queue", "--json")))["jobs"][0]["tenant"] == "nlp"


def test_logs_nodes_usage(server: Server) -> None:
    ok(server.run("ana", "submit", "--gpus", "0.5", "--", "python", "t.py"))
    js.sync_inventory(
        server.store,
        [js.NodeRow("n0", 2, "H100", 81920, 96000, 1 << 20, True, "declared")],
        [js.GpuRow("n0", i, "H100", f"virtual-{i}", 81920) for i in range(2)],
        NOW,
    )
    place = [{"task": 0, "node": "n0", "gpus": [0], "gpu_milli": 500, "gpu_memory_mib": 0,
              "cpu_milli": 1000, "memory_mib": 1024}]  # fmt: skip
    with server.store.begin() as conn:
        js.admit_attempt(conn, "1", 1, place, NOW)
    (server.logs / "1.1.0.stdout").write_text("one\ntwo\nthree\n")
    (server.logs / "1.1.0.stderr").write_text("oops\n")
    assert ok(server.run("ana", "logs", "1")) == "one\ntwo\nthree\n"
    assert ok(server.run("ana", "logs", "1", "--tail", "1")) == "three\n"
    assert ok(server.run("ana", "logs", "1", "--stderr")) == "oops\n"
    assert json.loads(ok(server.run("ana", "logs", "1", "--json")))["offset"] == 14
    result = server.run("ana", "logs", "1", "--attempt", "3")
    assert result.exit_code == 1 and "no attempt 3" in result.stderr

    # --follow: prints what is appended until the job ends (appended only once the command
    # has read the log, so that its --tail 1 is "three" however slowly it starts).
    before = server.log_reads[0]

    def finish() -> None:
        deadline = time.monotonic() + 30
        while server.log_reads[0] == before and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)
        with (server.logs / "1.1.0.stdout").open("a") as f:
            f.write("four\n")
        with server.store.begin() as conn:
            js.end_attempt(conn, "1", 1, NOW, outcome="succeeded", exit_code=0, detail="ok")
            js.set_job_state(conn, "1", "succeeded", NOW, exit_code=0)

    worker = threading.Thread(target=finish)
    worker.start()
    out = ok(server.run("ana", "logs", "1", "--follow", "--tail", "1", "--interval", "0.1"))
    worker.join()
    assert out == "three\nfour\n"

    nodes = ok(server.run("nina", "nodes"))
    assert nodes.splitlines()[0].split()[:3] == ["NODE", "STATE", "GPUS"]
    assert "n0" in nodes and "0/2" in nodes  # the attempt ended: its share is back
    assert json.loads(ok(server.run("nina", "nodes", "--json")))["nodes"][0]["gpu_count"] == 2

    charge = Charge("k0", "r0", "1", 1, "vision/ana", "vision", "normal", "c", "gpu", "H100",
                    "", NOW, NOW + 3_600_000, 3_600_000_000, Decimal(1), Decimal(3),
                    Decimal(3), "USD", "v1")  # fmt: skip
    from datetime import UTC, datetime

    post_charges(server.store, [charge], datetime(2025, 11, 25, tzinfo=UTC), "b")
    usage = ok(server.run("ana", "usage", "--by", "queue", "--by", "user"))
    assert usage.splitlines()[0].split() == ["QUEUE", "USER", "RESOURCE", "CURRENCY", "AMOUNT",
                                             "QUANTITY", "UNIT", "ENTRIES"]  # fmt: skip
    assert usage.splitlines()[1].split() == ["vision", "vision/ana", "gpu", "USD", "3.000000",
                                             "1.000000000", "GPU-h", "1"]  # fmt: skip
    assert json.loads(ok(server.run("nina", "usage", "--json")))["totals"] == []


def test_tokens(server: Server) -> None:
    made = server.run("root", "token", "create", "ci", "--user", "ci", "--tenant", "vision")
    secret = ok(made).strip()
    assert secret.startswith("sl_") and "shown this once" in made.stderr
    server.tokens["ci"] = secret
    assert ok(server.run("ci", "queue", "--json"))
    listed = ok(server.run("root", "token", "list"))
    assert listed.splitlines()[0].split()[:3] == ["ID", "NAME", "ROLE"] and "ci" in listed
    tokens = json.loads(ok(server.run("root", "token", "list", "--json")))["tokens"]
    ci = next(t["id"] for t in tokens if t["name"] == "ci")
    assert ok(server.run("root", "token", "revoke", str(ci))).strip() == f"token {ci} (ci) revoked"
    assert server.run("ci", "queue").exit_code == 1
    refused = server.run("ana", "token", "list")
    assert refused.exit_code == 1 and "only admins" in refused.stderr


def test_client_verbs_start_quickly() -> None:
    code = "import suanli.cli.client, suanli.cli.client_tokens, sys; print(sorted(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(out.stdout.replace("'", '"')))
    assert not loaded & {"sqlalchemy", "numba", "fastapi", "httpx", "suanli.store"}


# --- submit: working directory, spec file or command ----------------------------------------


def _spec(result: Any) -> dict[str, Any]:
    return dict(json.loads(ok(result))["spec"])


def test_submit_sends_the_working_directory(
    server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    (project / "data").mkdir(parents=True)
    monkeypatch.chdir(project)
    # Default: where suanli submit ran.
    assert _spec(server.run("ana", "submit", "--json", "--", "true"))["workdir"] == str(project)
    # --chdir: relative to here, made absolute.
    spec = _spec(server.run("ana", "submit", "--chdir", "data", "--json", "--", "true"))
    assert spec["workdir"] == str(project / "data")
    spec = _spec(server.run("ana", "submit", "-D", str(tmp_path), "--json", "--", "true"))
    assert spec["workdir"] == str(tmp_path)
    # A spec file's workdir wins over the default; --chdir wins over the file's.
    job = project / "job.yaml"
    job.write_text(f"command: ['true']\nworkdir: {tmp_path}\n")
    assert _spec(server.run("ana", "submit", str(job), "--json"))["workdir"] == str(tmp_path)
    spec = _spec(server.run("ana", "submit", str(job), "--chdir", ".", "--json"))
    assert spec["workdir"] == str(project)
    # --chdir must be a directory here.
    for bad, why in (("missing", "no such directory"), ("job.yaml", "not a directory")):
        result = server.run("ana", "submit", "--chdir", bad, "--", "true")
        assert result.exit_code == 2, result.output
        assert result.stderr.strip() == (f"suanli: error: --chdir {bad}: {why} ({project / bad})")
    assert "--chdir" in CliRunner().invoke(cli, ["submit", "--help"]).stdout


def test_submit_a_missing_spec_file_is_an_error(
    server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("nonexist.yaml", "Typo.YML", "job.Json"):
        result = server.run("ana", "submit", name, "--gpus", "1")
        assert result.exit_code == 2, result.output
        assert result.stderr.strip() == (
            f"suanli: error: no such spec file: {name} "
            "(to run a program of that name, put it after --)"
        )
    (tmp_path / "dir.yaml").mkdir()
    result = server.run("ana", "submit", "dir.yaml")
    assert result.exit_code == 2 and "not a file: dir.yaml" in result.stderr
    assert json.loads(ok(server.run("root", "queue", "--all", "--json")))["jobs"] == []
    # After '--' it is a command, even if such a file exists.
    assert _spec(server.run("ana", "submit", "--json", "--", "nonexist.yaml", "x"))["command"] == [
        "nonexist.yaml",
        "x",
    ]
    (tmp_path / "job.yaml").write_text("command: [python, eval.py]\n")
    assert _spec(server.run("ana", "submit", "--json", "--", "job.yaml"))["command"] == ["job.yaml"]
    # What worked still works: a spec file (any case of its suffix), then the command.
    assert _spec(server.run("ana", "submit", "job.yaml", "--json"))["command"] == [
        "python",
        "eval.py",
    ]
    spec = _spec(server.run("ana", "submit", "job.yaml", "--json", "--", "echo", "hi"))
    assert spec["command"] == ["echo", "hi"]
    (tmp_path / "JOB.JSON").write_text(json.dumps({"command": ["true"], "gpus": 0.5}))
    assert _spec(server.run("ana", "submit", "JOB.JSON", "--json"))["gpus"] == 0.5
    # A program without '--' (no spec-file suffix) is a command as before.
    assert _spec(server.run("ana", "submit", "--json", "python3", "t.py"))["command"] == [
        "python3",
        "t.py",
    ]


# --- usage: one unit per row ----------------------------------------------------------------


def test_usage_rows_have_one_unit_each(server: Server) -> None:
    from datetime import UTC, datetime

    from suanli.cli.client import UNITS
    from suanli.metering.prices import load_price_book
    from suanli.metering.rating import rate
    from suanli.metering.usage import RESOURCES, UsageRecord

    # A real bill: 2 H100s, 4 cores and 16 GiB for 90 minutes (a Sunday night, off-peak).
    start = round(datetime(2026, 3, 1, 1, 0, tzinfo=UTC).timestamp() * 1000)
    record = UsageRecord("u1", "1", 1, start, start + 90 * 60_000, "vision/ana", "vision",
                         "normal", "local", (("H100", 2000),), 4000, 16384, 0, 0)  # fmt: skip
    book = load_price_book(Path(__file__).parents[2] / "examples" / "prices.yaml")
    post_charges(server.store, list(rate([record], book)), datetime.now(UTC), "b")

    def table(*args: str) -> list[list[str]]:
        return [line.split() for line in ok(server.run("ana", "usage", *args)).splitlines()]

    default = table()
    assert default[0] == ["QUEUE", "RESOURCE", "CURRENCY", "AMOUNT", "QUANTITY", "UNIT",
                          "ENTRIES"]  # fmt: skip
    assert default[1:] == [
        ["vision", "cpu", "USD", "0.180000", "6.000000000", "core-h", "1"],  # 4 cores x 1.5 h
        ["vision", "gpu", "USD", "9.600000", "3.000000000", "GPU-h", "1"],  # 2 GPUs x 1.5 h
        ["vision", "memory", "USD", "0.096000", "24.000000000", "GiB-h", "1"],  # 16 GiB x 1.5 h
    ]
    # --by without resource: resource is added, so that no row adds GPU-h to GiB-h.
    by_user = table("--by", "user")
    assert by_user[0][:2] == ["USER", "RESOURCE"] and "UNIT" in by_user[0]
    assert [row[1] for row in by_user[1:]] == ["cpu", "gpu", "memory"]
    assert table("--by", "user,resource") == by_user
    asked = json.loads(ok(server.run("ana", "usage", "--by", "queue", "--json")))
    assert asked["by"] == ["queue", "resource"] and len(asked["totals"]) == 3
    assert set(UNITS) == set(RESOURCES)  # every resource the ledger holds has its unit


def test_job_ids_sort_as_numbers(server: Server) -> None:
    for _ in range(11):
        ok(server.run("ana", "submit", "--", "true"))
    jobs = [line.split()[0] for line in ok(server.run("ana", "queue")).splitlines()[1:]]
    assert jobs == [str(i) for i in range(1, 12)]  # the API's order, submission order

    from datetime import UTC, datetime

    charges = [
        Charge(f"k{job}", f"r{job}", job, 1, "vision/ana", "vision", "normal", "c", "gpu",
               "H100", "", NOW, NOW + 3_600_000, 3_600_000_000, Decimal(1), Decimal(3),
               Decimal(3), "USD", "v1")
        for job in ("1", "10", "2", "11", "3")
    ]  # fmt: skip
    post_charges(server.store, charges, datetime(2025, 11, 25, tzinfo=UTC), "b")
    rows = ok(server.run("root", "usage", "--by", "job_id")).splitlines()[1:]
    assert [row.split()[0] for row in rows] == ["1", "2", "3", "10", "11"]

"""The control plane's command-line client, Slurm-like: ``submit``, ``queue``, ``show``,
``cancel``, ``logs``, ``nodes`` and ``usage`` (``token`` is in ``client_tokens``).

Each verb is one or a few API calls (``suanli.cli.client_http``); ``--json`` prints the API's
JSON instead of a table.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from suanli.cli.client_http import (
    DEFAULT_SERVER,
    Client,
    JsonOption,
    ServerOption,
    TokenOption,
    console,
    print_json,
    print_rows,
    when,
)
from suanli.cli.errors import fail

LIVE_STATES = ("pending", "admitted", "running")
FINAL_STATES = ("succeeded", "failed", "cancelled", "preempted", "lost")
PAGE = 500
SPEC_SUFFIXES = (".yaml", ".yml", ".json")


# --- submit -------------------------------------------------------------------------------


def load_spec(path: Path) -> dict[str, Any]:
    """A spec file (YAML or JSON) as a mapping; exits (code 2) if it is not one."""
    try:
        text = path.read_text()
    except OSError as e:
        fail(f"cannot read {path}: {e.strerror}")
    try:
        if path.suffix == ".json":
            data = json.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)
    except ValueError as e:  # json.JSONDecodeError and yaml.YAMLError's reasons
        fail(f"{path}: not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {e}")
    except Exception as e:  # yaml.YAMLError is not a ValueError
        fail(f"{path}: not valid YAML: {e}")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        fail(f"{path}: a job spec is a mapping of fields, got {type(data).__name__}")
    return data


def _env(pairs: list[str]) -> dict[str, str]:
    env = {}
    for pair in pairs:
        name, eq, value = pair.partition("=")
        if not eq or not name:
            fail(f"--env {pair!r}: give NAME=VALUE")
        env[name] = value
    return env


def _number(text: str) -> int | float:
    value = float(text)
    return int(value) if value.is_integer() else value


def submit_command(
    args: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[SPEC_FILE] [-- COMMAND ARGS...]",
            help="A spec file (.yaml, .yml or .json), then the command after '--'.",
            show_default=False,
        ),
    ] = None,
    file: Annotated[
        Path | None, typer.Option("--file", "-f", help="The spec file (YAML or JSON).")
    ] = None,
    gpus: Annotated[
        str | None, typer.Option(help="GPUs per task: 1, 2, 8 or a share like 0.25.")
    ] = None,
    cpu: Annotated[str | None, typer.Option(help="Cores per task.")] = None,
    memory: Annotated[str | None, typer.Option(help="Memory per task (16G, 512M).")] = None,
    tasks: Annotated[int | None, typer.Option(help="Tasks, started together.")] = None,
    name: Annotated[str | None, typer.Option(help="The job's name.")] = None,
    queue: Annotated[str | None, typer.Option(help="Queue (default: the tenant).")] = None,
    tenant: Annotated[str | None, typer.Option(help="Tenant (admins must give it).")] = None,
    priority_class: Annotated[
        str | None, typer.Option("--class", help="online, high, normal or spot.")
    ] = None,
    max_runtime: Annotated[
        float | None, typer.Option(help="Seconds; the job is stopped after it.")
    ] = None,
    env: Annotated[list[str] | None, typer.Option("--env", help="NAME=VALUE (repeatable).")] = None,
    server: ServerOption = DEFAULT_SERVER,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Submit a job: a spec file, options overriding its fields, and/or the command after
    '--' (e.g. suanli submit --gpus 2 -- python train.py)."""
    rest = list(args or [])
    spec: dict[str, Any] = {}
    if file is None and rest and rest[0].endswith(SPEC_SUFFIXES) and Path(rest[0]).is_file():
        file = Path(rest.pop(0))
    if file is not None:
        spec = load_spec(file)
    if rest:
        spec["command"] = rest
    try:
        numbers = {k: _number(v) for k, v in (("gpus", gpus), ("cpu", cpu)) if v is not None}
    except ValueError:
        fail("--gpus and --cpu take numbers")
    overrides: dict[str, Any] = {
        **numbers,
        "memory": memory,
        "tasks": tasks,
        "name": name,
        "queue": queue,
        "tenant": tenant,
        "priority_class": priority_class,
        "max_runtime": max_runtime,
    }
    spec.update({k: v for k, v in overrides.items() if v is not None})
    if env:
        spec["env"] = {**(spec.get("env") or {}), **_env(env)}
    if not spec.get("command"):
        fail("no command: give it after '--' (suanli submit -- python train.py) or in a spec")
    job = Client.of(server, token).post("/v1/jobs", spec)
    if as_json:
        print_json(job)
    else:
        typer.echo(f"Submitted job {job['id']} to queue {job['queue']}")


# --- queue, show, cancel ------------------------------------------------------------------


def queue_command(
    state: Annotated[
        list[str] | None, typer.Option("--state", "-t", help="Only these states (repeatable).")
    ] = None,
    queue: Annotated[str | None, typer.Option("--queue", "-q", help="Only this queue.")] = None,
    user: Annotated[str | None, typer.Option("--user", "-u", help="Only this user's.")] = None,
    every: Annotated[
        bool, typer.Option("--all", "-a", help="Finished jobs too (default: live ones).")
    ] = False,
    server: ServerOption = DEFAULT_SERVER,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """List jobs (pending, admitted and running unless --all or --state)."""
    client = Client.of(server, token)
    states = state or ([] if every else list(LIVE_STATES))
    jobs: list[dict[str, Any]] = []
    after = None
    while True:
        page = client.get("/v1/jobs", state=states, queue=queue, user=user, after=after, limit=PAGE)
        jobs += page["jobs"]
        after = page["next"]
        if after is None:
            break
    if as_json:
        print_json({"jobs": jobs, "next": None})
        return
    rows = (
        (
            j["id"], j["name"], j["user"], j["queue"], j["priority_class"],
            j["state"] + (" (cancelling)" if j["cancel_requested"] and j["state"] in LIVE_STATES
                          else ""),
            str(j["attempts"]), when(j["submitted_at"]), j["reason"] or "",
        )
        for j in jobs
    )  # fmt: skip
    columns = ("JOB", "NAME", "USER", "QUEUE", "CLASS", "STATE", "TRIES", "SUBMITTED", "REASON")
    print_rows(columns, rows, right=("JOB", "TRIES"), wrap=("REASON",))


def show_command(
    job: Annotated[str, typer.Argument(help="The job's id.")],
    server: ServerOption = DEFAULT_SERVER,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show a job: its fields, spec, attempts and history."""
    from urllib.parse import quote

    detail = Client.of(server, token).get(f"/v1/jobs/{quote(job, safe='')}")
    if as_json:
        print_json(detail)
        return
    from rich.table import Table

    j = detail["job"]
    out = console()
    fields = Table(box=None, show_header=False, pad_edge=False)
    fields.add_column(style="bold", no_wrap=True)
    fields.add_column()
    spec = j["spec"]
    rows = [
        ("job", j["id"]), ("name", j["name"]), ("tenant", j["tenant"]), ("user", j["user"]),
        ("queue", j["queue"]), ("class", j["priority_class"]), ("state", j["state"]),
        ("reason", j["reason"] or "-"), ("attempts", str(j["attempts"])),
        ("cancel requested", "yes" if j["cancel_requested"] else "no"),
        ("exit code", "-" if j["exit_code"] is None else str(j["exit_code"])),
        ("submitted", when(j["submitted_at"])), ("updated", when(j["updated_at"])),
        ("command", " ".join(spec.get("command", []))),
        ("resources", f"{spec.get('tasks', 1)} task(s) x {spec.get('gpus', 0):g} GPU, "
                      f"{spec.get('cpu', 1):g} CPU, {spec.get('memory', '?')} MiB"),
    ]  # fmt: skip
    for k, v in rows:
        fields.add_row(k, v)
    out.print(fields)
    if detail["attempts"]:
        table = Table(title="attempts", title_justify="left", header_style="bold")
        for col in ("#", "STATE", "NODES", "ADMITTED", "STARTED", "ENDED", "OUTCOME", "EXIT"):
            table.add_column(col, no_wrap=True)
        for a in detail["attempts"]:
            nodes = ",".join(sorted({t["node"] for t in a["placement"]}))
            table.add_row(
                str(a["attempt"]), a["state"], nodes, when(a["admitted_at"]),
                when(a["started_at"]), when(a["ended_at"]), a["outcome"] or "-",
                "-" if a["exit_code"] is None else str(a["exit_code"]),
            )  # fmt: skip
        out.print(table)
    history = Table(title="history", title_justify="left", header_style="bold")
    for col in ("AT", "EVENT", "DETAIL"):
        history.add_column(col, no_wrap=col != "DETAIL")
    for e in detail["history"]:
        history.add_row(when(e["at"]), e["kind"], e["detail"])
    out.print(history)


def cancel_command(
    jobs: Annotated[list[str], typer.Argument(help="The jobs' ids.", show_default=False)],
    server: ServerOption = DEFAULT_SERVER,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Ask for jobs to be cancelled (the scheduler stops them soon after)."""
    from urllib.parse import quote

    client = Client.of(server, token)
    done: list[Any] = []
    failed = 0
    for job in jobs:
        try:
            done.append(client.post(f"/v1/jobs/{quote(job, safe='')}/cancel"))
        except typer.Exit:  # the error is printed; go on with the others
            failed += 1
            continue
        if not as_json:
            j = done[-1]
            note = "cancel requested" if j["state"] in LIVE_STATES else f"already {j['state']}"
            typer.echo(f"job {j['id']}: {note}")
    if as_json:
        print_json(done)
    if failed:
        raise typer.Exit(1)


# --- logs ---------------------------------------------------------------------------------


def logs_command(
    job: Annotated[str, typer.Argument(help="The job's id.")],
    attempt: Annotated[int | None, typer.Option(help="Attempt (default: the latest).")] = None,
    task: Annotated[int, typer.Option(help="Task index.")] = 0,
    stderr: Annotated[bool, typer.Option("--stderr", help="stderr instead of stdout.")] = False,
    tail: Annotated[int | None, typer.Option("--tail", "-n", help="Only the last N lines.")] = None,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing until the job ends.")
    ] = False,
    interval: Annotated[float, typer.Option(hidden=True)] = 1.0,
    server: ServerOption = DEFAULT_SERVER,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Print a task's log (task 0 of the latest attempt, stdout, by default)."""
    from urllib.parse import quote

    if tail is not None and tail < 0:
        fail("--tail takes a number of lines >= 0")
    client = Client.of(server, token)
    path = f"/v1/jobs/{quote(job, safe='')}"
    params: dict[str, Any] = {
        "attempt": attempt,
        "task": task,
        "stream": "stderr" if stderr else "stdout",
        "tail": tail,
    }
    if as_json:  # the log is text: JSON gives it with where it ends
        r = client.send(
            "GET", path + "/logs", params={k: v for k, v in params.items() if v is not None}
        )
        print_json({"log": r.text, "offset": int(r.headers.get("x-suanli-log-size", 0))})
        return
    out = sys.stdout.buffer if hasattr(sys.stdout, "buffer") else None
    while True:
        final = follow and client.get(path)["job"]["state"] in FINAL_STATES
        r = client.send(
            "GET", path + "/logs", params={k: v for k, v in params.items() if v is not None}
        )
        if out is not None:
            out.write(r.content)
            out.flush()
        else:
            typer.echo(r.text, nl=False)
        if not follow or final:
            return
        params["tail"] = None
        params["offset"] = int(r.headers.get("x-suanli-log-size", 0))
        time.sleep(interval)


# --- nodes, usage -------------------------------------------------------------------------


def nodes_command(
    server: ServerOption = DEFAULT_SERVER,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """List the nodes, their GPUs and how much of them is allocated."""
    data = Client.of(server, token).get("/v1/nodes")
    if as_json:
        print_json(data)
        return
    rows = (
        (
            n["name"], "up" if n["healthy"] else "down", str(n["gpu_count"]),
            n["gpu_model"] or "-",
            f"{sum(g['used_milli'] for g in n['gpus']) / 1000:g}/{len(n['gpus'])}",
            f"{n['cpu_milli'] / 1000:g}", f"{n['memory_mib'] / 1024:.0f}G", n["source"],
        )
        for n in data["nodes"]
    )  # fmt: skip
    print_rows(("NODE", "STATE", "GPUS", "MODEL", "GPU USED", "CPU", "MEMORY", "SOURCE"), rows)


def usage_command(
    by: Annotated[
        list[str] | None,
        typer.Option("--by", "-b", help="Group by (repeatable): queue, user, day, ..."),
    ] = None,
    since: Annotated[str | None, typer.Option(help="From (ISO date/time or epoch ms).")] = None,
    until: Annotated[str | None, typer.Option(help="Until, excluded.")] = None,
    server: ServerOption = DEFAULT_SERVER,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Charges from the ledger, totalled by queue and resource (or --by)."""
    data = Client.of(server, token).get("/v1/usage", by=by, since=since, until=until)
    if as_json:
        print_json(data)
        return
    figures = ("AMOUNT", "QUANTITY", "ENTRIES")
    rows = (
        (*(t["group"][d] for d in data["by"]), t["currency"], t["amount"], t["quantity"],
         str(t["entries"]))
        for t in data["totals"]
    )  # fmt: skip
    print_rows((*(d.upper() for d in data["by"]), "CURRENCY", *figures), rows, right=figures)


__all__ = [
    "cancel_command",
    "logs_command",
    "nodes_command",
    "queue_command",
    "show_command",
    "submit_command",
    "usage_command",
]

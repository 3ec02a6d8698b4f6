"""The control plane's command-line client, Slurm-like: ``submit``, ``queue``, ``show``,
``cancel``, ``logs``, ``nodes`` and ``usage`` (``token`` is in ``client_tokens``), and
``ready``, which waits for a server that is starting.

Each verb is one or a few API calls (``suanli.cli.client_http``); ``--json`` prints the API's
JSON instead of a table.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperCommand

from suanli.cli.client_http import (
    DEFAULT_SERVER,
    Client,
    JsonOption,
    ServerOption,
    TokenOption,
    admin_token_file,
    console,
    expected_start,
    natural_key,
    print_json,
    print_rows,
    refused,
    resolve_token,
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
        if path.suffix.lower() == ".json":
            data = json.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)
    except ValueError as e:  # json.JSONDecodeError and yaml.YAMLError's reasons
        fail(f"{path}: not valid {'JSON' if path.suffix.lower() == '.json' else 'YAML'}: {e}")
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


AFTER_DASHES = "suanli.submit.after_dashes"
"""``ctx.meta`` key: how many of submit's positional arguments came after ``--``."""


class SubmitCommand(TyperCommand):
    """``submit``'s click command: it notes how many positional arguments came after
    ``--`` (click drops the ``--`` itself), so that ``submit job.yaml`` (a spec file) can be
    told from ``submit -- job.yaml`` (a program of that name)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        takes_value = {
            name
            for p in self.get_params(ctx)
            if getattr(p, "param_type_name", "") == "option"
            and not getattr(p, "is_flag", False)
            and not getattr(p, "count", False)
            for name in (*p.opts, *p.secondary_opts)
        }
        i, after = 0, 0
        while i < len(args):
            if args[i] == "--":
                after = len(args) - i - 1
                break
            i += 2 if args[i] in takes_value else 1  # an option's value may be '--'
        ctx.meta[AFTER_DASHES] = after
        return super().parse_args(ctx, args)


def _workdir(chdir: Path | None) -> str:
    """``--chdir`` made absolute against the current directory (it must be a directory
    here), else the current directory."""
    try:
        here = os.getcwd()
    except OSError:
        if chdir is None or not chdir.expanduser().is_absolute():
            fail("the current directory no longer exists: give --chdir /absolute/dir")
        here = "/"
    if chdir is None:
        return here
    path = os.path.abspath(os.path.join(here, chdir.expanduser()))
    if not os.path.isdir(path):
        problem = "not a directory" if os.path.exists(path) else "no such directory"
        fail(f"--chdir {chdir}: {problem} ({path})")
    return path


def submit_command(
    ctx: typer.Context,
    args: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[SPEC_FILE] [-- COMMAND ARGS...]",
            help="A spec file (.yaml, .yml or .json; it must exist), then the command "
            "after '--' (a program named like a spec file goes after '--' too).",
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
    min_workers: Annotated[
        int | None, typer.Option(help="Elastic: the fewest tasks it runs on (default --tasks).")
    ] = None,
    max_workers: Annotated[
        int | None, typer.Option(help="Elastic: the most tasks it runs on (default --tasks).")
    ] = None,
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
    chdir: Annotated[
        Path | None,
        typer.Option(
            "--chdir",
            "-D",
            metavar="DIR",
            help="The tasks' working directory (relative to here; it must exist). "
            "Default: the spec file's workdir, else the current directory; --chdir wins "
            "over the spec file's.",
            show_default=False,
        ),
    ] = None,
    test_only: Annotated[
        bool,
        typer.Option(
            "--test-only",
            help="Queue nothing: say when the job would start if submitted now (as "
            "sbatch --test-only), checked as a submission is.",
        ),
    ] = False,
    server: ServerOption = DEFAULT_SERVER,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Submit a job: a spec file, options overriding its fields, and/or the command after
    '--' (e.g. suanli submit --gpus 2 -- python train.py). The tasks run in the current
    directory (or --chdir DIR, or the spec file's workdir)."""
    rest = list(args or [])
    after_dashes = ctx.meta.get(AFTER_DASHES)  # None: not parsed by SubmitCommand
    spec: dict[str, Any] = {}
    first_is_spec = (
        file is None
        and bool(rest)
        and rest[0].lower().endswith(SPEC_SUFFIXES)
        and (after_dashes is None or len(rest) > after_dashes)  # it came before '--'
    )
    if first_is_spec and not Path(rest[0]).is_file():
        if after_dashes is None:  # cannot tell a spec file from a command: as before
            first_is_spec = False
        else:
            what = "not a file" if Path(rest[0]).exists() else "no such spec file"
            fail(f"{what}: {rest[0]} (to run a program of that name, put it after --)")
    if first_is_spec:
        file = Path(rest.pop(0))
    if file is not None:
        spec = load_spec(file)
    if rest:
        spec["command"] = rest
    if chdir is not None or spec.get("workdir") is None:
        spec["workdir"] = _workdir(chdir)
    try:
        numbers = {k: _number(v) for k, v in (("gpus", gpus), ("cpu", cpu)) if v is not None}
    except ValueError:
        fail("--gpus and --cpu take numbers")
    overrides: dict[str, Any] = {
        **numbers,
        "memory": memory,
        "tasks": tasks,
        "min_workers": min_workers,
        "max_workers": max_workers,
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
    if test_only:
        got = Client.of(server, token).post("/v1/what-if", spec)
        if as_json:
            print_json(got)
            return
        room = "room for it now" if got["room_now"] else "no room for it now"
        typer.echo(f"Job would start {expected_start(got['start_estimate'])} in queue "
                   f"{got['queue']} ({room}; {got['pending_jobs']} jobs pending, load "
                   f"{got['load']:.2f}); nothing was queued")  # fmt: skip
        return
    job = Client.of(server, token).post("/v1/jobs", spec)
    if as_json:
        print_json(job)
    else:
        typer.echo(f"Submitted job {job['id']} to queue {job['queue']}")


submit_command.click_class = SubmitCommand  # type: ignore[attr-defined]  # see main._load


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
            str(j["attempts"]), when(j["submitted_at"]),
            expected_start(j.get("start_estimate")) if j["state"] == "pending" else "",
            j["reason"] or "",
        )
        for j in jobs
    )  # fmt: skip
    columns = ("JOB", "NAME", "USER", "QUEUE", "CLASS", "STATE", "TRIES", "SUBMITTED",
               "EXPECTED START", "REASON")  # fmt: skip
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
        ("reason", j["reason"] or "-"),
        *((("expected start", expected_start(j.get("start_estimate"))),)
          if j["state"] == "pending" else ()),
        ("attempts", str(j["attempts"])),
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
    if spec.get("routing"):
        from rich.markup import escape

        from suanli.core.routing import Route

        out.print("[bold]routing[/bold]")
        out.print(escape(Route.from_dict(spec["routing"]).explain()))
    if detail["attempts"]:
        table = Table(title="attempts", title_justify="left", header_style="bold")
        for col in ("#", "STATE", "NODES", "ADMITTED", "STARTED", "ENDED", "OUTCOME", "EXIT"):
            table.add_column(col, no_wrap=True)
        for a in detail["attempts"]:
            nodes = ",".join(sorted({t["node"] for t in a["placement"]}, key=natural_key))
            table.add_row(
                str(a["attempt"]), a["state"], nodes, when(a["admitted_at"]),
                when(a["started_at"]), when(a["ended_at"]), a["outcome"] or "-",
                "-" if a["exit_code"] is None else str(a["exit_code"]),
            )  # fmt: skip
        out.print(table)
        out.print(_utilisation_lines(detail))
    history = Table(title="history", title_justify="left", header_style="bold")
    for col in ("AT", "EVENT", "DETAIL"):
        history.add_column(col, no_wrap=col != "DETAIL")
    for e in detail["history"]:
        history.add_row(when(e["at"]), e["kind"], e["detail"])
    out.print(history)


def _utilisation_lines(detail: dict[str, Any]) -> str:
    """The show's GPU utilisation section: per attempt, the sampled mean utilisation (of
    what it holds, time-weighted), its peak GPU memory and the number of samples, or why
    there are none."""
    sampling = str(detail.get("gpu_sampling") or "")
    why = sampling.removeprefix("off: ") if sampling.startswith("off") else ""
    lines = ["[bold]GPU utilisation[/bold] (time-weighted mean of what each attempt holds)"]
    for a in detail["attempts"]:
        u = a.get("gpu_utilization")
        if u is not None:
            text = (f"mean {u['mean_pct']:.1f}%, peak memory {u['peak_memory_mib']:,} MiB, "
                    f"{u['samples']:,} sample{'s' if u['samples'] != 1 else ''}")  # fmt: skip
        elif not any(t.get("gpus") for t in a["placement"]):
            text = "no GPUs"
        else:
            text = f"no utilisation samples ({why})" if why else "no utilisation samples"
        lines.append(f"  attempt {a['attempt']}: {text}")
    return "\n".join(lines)


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
    while follow and attempt is None:  # a job not started yet has no log: wait for it
        job_now = client.get(path)["job"]
        if job_now["attempts"] >= 1 or job_now["state"] in FINAL_STATES:
            break
        time.sleep(interval)
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


# --- usage -------------------------------------------------------------------------


UNITS = {"gpu": "GPU-h", "cpu": "core-h", "memory": "GiB-h", "storage": "GB-h", "network": "GB"}
"""The unit of a usage total's ``quantity``, by the ledger's resource: the API gives each
quantity in its resource's priced unit already (``suanli.metering.usage``: GPU-hours,
core-hours, GiB-hours, GB-hours of storage, GB of network transfer)."""


def usage_command(
    by: Annotated[
        list[str] | None,
        typer.Option(
            "--by",
            "-b",
            help="Group by (repeatable): queue, user, day, job_id, ...; resource is always "
            "added (each total is in one unit).",
        ),
    ] = None,
    since: Annotated[str | None, typer.Option(help="From (ISO date/time or epoch ms).")] = None,
    until: Annotated[str | None, typer.Option(help="Until, excluded.")] = None,
    server: ServerOption = DEFAULT_SERVER,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Charges from the ledger, totalled by queue and resource (or --by and resource), with
    each quantity's unit (GPU-h, core-h, GiB-h); then GPU time allocated, used (x each
    attempt's sampled mean utilisation), idle and unmeasured (attempts without samples)."""
    dims = None
    if by:  # as the API reads it (commas too), and resource so that each row has one unit
        dims = list(dict.fromkeys(d.strip() for v in by for d in v.split(",") if d.strip()))
        if "resource" not in dims:
            dims.append("resource")
    data = Client.of(server, token).get("/v1/usage", by=dims, since=since, until=until)
    if as_json:
        print_json(data)
        return
    totals = sorted(
        data["totals"],
        key=lambda t: (tuple(natural_key(t["group"][d]) for d in data["by"]), t["currency"]),
    )
    figures = ("AMOUNT", "QUANTITY", "ENTRIES")
    rows = (
        (*(t["group"][d] for d in data["by"]), t["currency"], t["amount"], t["quantity"],
         UNITS.get(t["group"].get("resource", ""), "-"), str(t["entries"]))
        for t in totals
    )  # fmt: skip
    columns = (*(d.upper() for d in data["by"]), "CURRENCY", "AMOUNT", "QUANTITY", "UNIT",
               "ENTRIES")  # fmt: skip
    print_rows(columns, rows, right=figures)
    _print_gpu_time(data.get("gpu"))


UNMEASURED_SHOWN = 20
"""Attempts without samples that ``suanli usage`` names (``--json`` lists more)."""


def _print_gpu_time(gpu: dict[str, Any] | None) -> None:
    """The bill's GPU time: per group allocated, used, idle and unmeasured GPU-hours, and
    the attempts without utilisation samples (neither used nor idle)."""
    if not gpu or not gpu["rows"]:
        return
    out = console()
    out.print()
    out.print("[bold]GPU time[/bold]: used = allocated x the attempt's sampled mean "
              "utilisation; idle = allocated - used")  # fmt: skip
    dims = gpu["by"]
    rows = sorted(gpu["rows"], key=lambda r: tuple(natural_key(r["group"][d]) for d in dims))
    figures = ("ALLOCATED GPU-h", "USED GPU-h", "IDLE GPU-h", "UNMEASURED GPU-h")
    measured = any(r["used_milli_ms"] or r["idle_milli_ms"] for r in rows)
    print_rows(
        (*(d.upper() for d in dims), *figures),
        (
            (*(r["group"][d] for d in dims), r["allocated_gpu_hours"],
             r["used_gpu_hours"] if r["allocated_milli_ms"] > r["unmeasured_milli_ms"] else "-",
             r["idle_gpu_hours"] if r["allocated_milli_ms"] > r["unmeasured_milli_ms"] else "-",
             r["unmeasured_gpu_hours"])
            for r in rows
        ),
        right=figures,
    )  # fmt: skip
    n = gpu["unmeasured_attempts"]
    if not n:
        return
    named = ", ".join(
        f"job {u['job_id']} attempt {u['attempt']} ({u['gpu_hours']} GPU-h)"
        for u in gpu["unmeasured"][:UNMEASURED_SHOWN]
    )
    more = n - min(n, UNMEASURED_SHOWN)
    out.print(
        f"unmeasured ({n} attempt{'s' if n != 1 else ''} without utilisation samples, neither "
        f"used nor idle{'' if measured else '; none was sampled'}): {named}"
        + (f", and {more} more (--json lists up to {len(gpu['unmeasured'])})" if more else ""),
        soft_wrap=True,
    )


# --- ready --------------------------------------------------------------------------------

LOOPBACK_HOSTS = ("localhost", "::1")


def _is_loopback(server: str) -> bool:
    from ipaddress import ip_address
    from urllib.parse import urlsplit

    host = (urlsplit(server).hostname or "").lower()
    if host in LOOPBACK_HOSTS:
        return True
    try:
        return ip_address(host).is_loopback
    except ValueError:
        return False


def _expected_token_file(
    base: str, state_dir: Path | None, token: str | None, seconds: float
) -> Path | None:
    """The admin token file ``ready`` waits for, or None: none for a server on another
    machine (unless --state-dir names it), and none if the client's own token works there
    (then the server has tokens already: it is not a fresh one and writes no admin token)."""
    if state_dir is None and not _is_loopback(base):
        return None
    given = resolve_token(token)
    if given:
        import httpx

        headers = {"Authorization": f"Bearer {given}", "Accept": "application/json"}
        try:
            r = httpx.get(base + "/v1/whoami", headers=headers, timeout=max(seconds, 0.5))
            if r.status_code == 200:
                return None
        except httpx.HTTPError:
            pass
    return admin_token_file(state_dir)


def _has_text(path: Path) -> bool:
    try:
        return bool(path.read_text().strip())
    except (OSError, UnicodeDecodeError):
        return False


def ready_command(
    server: ServerOption = DEFAULT_SERVER,
    timeout: Annotated[
        float,
        typer.Option("--timeout", metavar="SECONDS", help="How long to wait at most."),
    ] = 60.0,
    state_dir: Annotated[
        Path | None,
        typer.Option(
            "--state-dir",
            metavar="DIR",
            help="The server's state directory, for its admin token (default: as suanli "
            "serve's, $SUANLI_STATE_DIR, else ~/.local/share/suanli, for a server on this "
            "machine).",
            show_default=False,
        ),
    ] = None,
    token: TokenOption = None,
    quiet: Annotated[
        bool,
        typer.Option(
            "--quiet", "-q", help="Print nothing when ready (a timeout: one line on stderr)."
        ),
    ] = False,
    interval: Annotated[float, typer.Option(hidden=True)] = 0.2,
) -> None:
    """Wait until the server answers (GET /healthz: 200) and, for a fresh server on this
    machine, until it has written its admin token (STATE/admin.token); then print
    'ready: URL/v1'. Exits 1, saying what it waited for, after --timeout."""
    import math

    import httpx

    if not server.startswith(("http://", "https://")):
        fail(f"--server {server!r}: an http:// or https:// URL")
    if not (math.isfinite(timeout) and timeout >= 0):
        fail(f"--timeout: must be a number of seconds >= 0, got {timeout:g}")
    base = server.rstrip("/")
    start = time.monotonic()
    deadline = start + timeout

    def left() -> float:
        return deadline - time.monotonic()

    def give_up(waiting_for: str) -> None:
        refused(f"not ready after {timeout:g}s: {waiting_for}")

    health = base + "/healthz"
    while True:
        try:
            r = httpx.get(health, timeout=min(max(left(), 0.5), 5.0))
            if r.status_code == 200:
                break
            last = f"it answers {r.status_code} {r.reason_phrase}"
            try:
                body = r.json()
            except ValueError:
                body = None
            if isinstance(body, dict) and isinstance(body.get("error"), str):
                last += f" ({body['error']})"
        except httpx.HTTPError as e:
            last = f"cannot reach it ({e or type(e).__name__})"
        if left() <= 0:
            give_up(f"waiting for {health} to answer 200: {last}")
        time.sleep(max(min(interval, left()), 0))
    token_path = _expected_token_file(base, state_dir, token, min(max(left(), 0.5), 5.0))
    if token_path is not None:
        while not _has_text(token_path):
            if left() <= 0:
                give_up(
                    f"waiting for the admin token {token_path} (a server writes it on its "
                    f"first start only: if it has started before, give --token or "
                    f"SUANLI_TOKEN; another state directory: --state-dir DIR)"
                )
            time.sleep(max(min(interval, left()), 0))
    if not quiet:
        typer.echo(f"ready: {base}/v1")


__all__ = [
    "cancel_command",
    "logs_command",
    "queue_command",
    "ready_command",
    "show_command",
    "submit_command",
    "usage_command",
]

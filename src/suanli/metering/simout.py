"""Reading a simulation output directory (``suanli simulate -o DIR``) as metering input.

``load_output(dir)`` reads ``DIR/summary.json`` and lists its results (one per policy set);
``read_attempts(result, epoch_ms)`` parses that result's ``<stem>-attempts.csv`` into
``Attempt`` values in epoch milliseconds.

Contracts:

- **Time.** Simulated second ``s`` (a CSV cell with at most three decimals) is the instant
  ``epoch_ms + int(Decimal(s) * 1000)``: exact, the same conversion the simulator used for the
  summary's ``allocated_gpu_hours``, so a bill of the CSV adds up to that figure exactly.
- **Scenarios.** Every result of a directory is a scenario of its own: the same trace under
  another policy set. So that the scenarios of one directory can share a ledger, a job's id
  is prefixed with its result's file stem (``fifo_best-fit/j000001``, see ``scenario_job``):
  the usage and charge keys of two scenarios never collide.
- **Owner.** ``org`` is the CSV's ``tenant``, ``cluster`` the summary's cluster name; storage
  and network (GB in the CSV) become integer MB, ``round_half_even(GB × 1000)``.
- **Errors.** Every problem is a ``SimOutputError`` (a ``SpecError``) on one line naming the
  file, and for a CSV cell the line and column:
  ``DIR/fifo_best-fit-attempts.csv: line 7, column 'gpu_util': expected a number in [0, 1], got 'x'``.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from operator import itemgetter
from pathlib import Path
from typing import Any

from suanli.core.model import SpecError
from suanli.metering.usage import Attempt
from suanli.sim.attempts import ATTEMPT_COLUMNS

__all__ = [
    "ATTEMPT_COLUMNS",
    "DEFAULT_EPOCH",
    "OUTCOMES",
    "SUMMARY_FILE",
    "SimOutput",
    "SimOutputError",
    "SimResultFiles",
    "load_output",
    "parse_epoch",
    "read_attempts",
    "scenario_job",
    "seconds_to_ms",
    "select_results",
]

SUMMARY_FILE = "summary.json"
DEFAULT_EPOCH = "2026-01-05T00:00:00Z"
"""Simulated second 0 by default: a Monday at midnight UTC, so that time-of-day bands of a
price book fall on simulated time as they would on a real week."""

# ATTEMPT_COLUMNS (suanli.sim.attempts): the columns ``read_attempts`` needs, in any order
# (others are ignored).

OUTCOMES = frozenset({"finished", "preempted", "failed", "cancelled", "lost", "running"})

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MS = timedelta(milliseconds=1)
_THOUSAND = Decimal(1000)


class SimOutputError(SpecError):
    """A simulation output directory that cannot be read as asked (one line, naming the file)."""


@dataclass(frozen=True, slots=True)
class SimResultFiles:
    """One result (policy set) of an output directory and where its attempts are."""

    index: int
    """Position in ``summary.json``'s ``results``."""
    policy: str
    cluster: str
    stem: str
    """The attempts file name without ``-attempts.csv``: unique within the directory."""
    attempts_csv: Path
    allocated_gpu_hours: Decimal | None
    """The simulator's GPU-hours of the attempts (``None`` when the summary predates it)."""
    total_gpus: int | None
    makespan_s: float | None
    summary: Mapping[str, Any]
    """The result's whole summary entry, as read."""


@dataclass(frozen=True, slots=True)
class SimOutput:
    """An output directory: its ``run`` description and its results, in summary order."""

    directory: Path
    run: Mapping[str, Any]
    results: tuple[SimResultFiles, ...]


def scenario_job(stem: str, job: str) -> str:
    """The ledger job id of ``job`` in the scenario of result file stem ``stem``."""
    return f"{stem}/{job}"


def parse_epoch(text: str) -> int:
    """An ISO-8601 instant with a UTC offset (``2026-01-05T00:00:00Z``) as epoch ms.

    ``SimOutputError`` for a malformed text, a time without offset (its zone would be a
    guess) or an instant finer than a millisecond."""
    try:
        dt = datetime.fromisoformat(text.strip())
    except ValueError:
        raise SimOutputError(
            f"--epoch: expected an ISO-8601 instant such as {DEFAULT_EPOCH}, got {text!r}"
        ) from None
    if dt.tzinfo is None or dt.utcoffset() is None:
        raise SimOutputError(
            f"--epoch: {text!r} has no UTC offset; add Z or +hh:mm (e.g. {DEFAULT_EPOCH})"
        )
    span = dt - _EPOCH
    if span % _ONE_MS:
        raise SimOutputError(f"--epoch: {text!r} is finer than a millisecond")
    return span // _ONE_MS


def seconds_to_ms(cell: str) -> int:
    """Simulated seconds (a decimal text) as integer ms: ``int(Decimal(cell) * 1000)``.

    Plain texts of at most three decimals (all the simulator writes) take an exact fast path
    that gives the same value; ``ValueError`` if ``cell`` is not a finite number."""
    fast = _plain_ms(cell)
    if fast is not None:
        return fast
    try:
        value = Decimal(cell.strip())
    except InvalidOperation:
        raise ValueError(cell) from None
    if not value.is_finite():
        raise ValueError(cell)
    return int(value * _THOUSAND)


# --------------------------------------------------------------------------------------------
# summary.json
# --------------------------------------------------------------------------------------------


def load_output(directory: str | Path) -> SimOutput:
    """The results of the output directory ``directory`` (see the module docstring)."""
    d = Path(directory)
    if not d.exists():
        raise SimOutputError(f"{d}: no such directory")
    if not d.is_dir():
        raise SimOutputError(f"{d}: not a directory")
    path = d / SUMMARY_FILE
    if not path.is_file():
        raise SimOutputError(
            f"{d}: no {SUMMARY_FILE}: not a simulation output directory "
            "(write one with suanli simulate -o DIR)"
        )
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise SimOutputError(
            f"{path}: invalid JSON at line {e.lineno}, column {e.colno}: {e.msg}"
        ) from None
    except (OSError, UnicodeDecodeError) as e:
        raise SimOutputError(f"{path}: cannot read: {e}") from None
    if not isinstance(doc, dict):
        raise SimOutputError(f"{path}: expected an object with run and results")
    run = doc.get("run") or {}
    entries = doc.get("results")
    if not isinstance(run, dict):
        raise SimOutputError(f"{path}: run: expected an object")
    if not isinstance(entries, list) or not entries:
        raise SimOutputError(f"{path}: results: expected a non-empty list")
    results = tuple(_result(d, path, i, e, run) for i, e in enumerate(entries))
    return SimOutput(d, run, results)


def _result(d: Path, path: Path, i: int, e: Any, run: Mapping[str, Any]) -> SimResultFiles:
    at = f"{path}: results[{i}]"
    if not isinstance(e, dict):
        raise SimOutputError(f"{at}: expected an object")
    policy = e.get("policy")
    if not isinstance(policy, str) or not policy:
        raise SimOutputError(f"{at}.policy: expected the policy-set label")
    cluster = e.get("cluster", run.get("cluster"))
    if not isinstance(cluster, str) or not cluster:
        raise SimOutputError(f"{at}.cluster: expected the cluster name")
    files = e.get("files")
    name = files.get("attempts_csv") if isinstance(files, dict) else None
    if not isinstance(name, str) or not name:
        raise SimOutputError(
            f"{at}.files.attempts_csv: missing (no attempts were written for {policy!r}; "
            "simulate again with this version of suanli)"
        )
    if Path(name).name != name:
        raise SimOutputError(f"{at}.files.attempts_csv: expected a file name, got {name!r}")
    stem = name.removesuffix(".csv").removesuffix("-attempts")
    hours = e.get("allocated_gpu_hours")
    allocated: Decimal | None = None
    if hours is not None:
        try:
            allocated = Decimal(str(hours))
        except InvalidOperation:
            raise SimOutputError(
                f"{at}.allocated_gpu_hours: expected a decimal string, got {hours!r}"
            ) from None
    total = e.get("total_gpus", run.get("gpus"))
    makespan = e.get("makespan_s")
    return SimResultFiles(
        index=i,
        policy=policy,
        cluster=cluster,
        stem=stem,
        attempts_csv=d / name,
        allocated_gpu_hours=allocated,
        total_gpus=int(total) if isinstance(total, int) else None,
        makespan_s=float(makespan) if isinstance(makespan, (int, float)) else None,
        summary=e,
    )


def select_results(output: SimOutput, policies: Sequence[str] | None) -> list[SimResultFiles]:
    """The results named by ``policies`` (policy labels or file stems), in the order given;
    all of them when ``policies`` is empty. ``SimOutputError`` names the choices otherwise."""
    if not policies:
        return list(output.results)
    chosen: list[SimResultFiles] = []
    for label in policies:
        hit = [r for r in output.results if label in (r.policy, r.stem)]
        if not hit:
            choices = ", ".join(r.policy for r in output.results)
            raise SimOutputError(
                f"--policy {label!r}: no such result in {output.directory} (results: {choices})"
            )
        for r in hit:
            if r not in chosen:
                chosen.append(r)
    return chosen


# --------------------------------------------------------------------------------------------
# <stem>-attempts.csv
# --------------------------------------------------------------------------------------------


def read_attempts(
    result: SimResultFiles, epoch_ms: int, *, namespace: bool = True
) -> list[Attempt]:
    """The attempts of ``result``, in file order, with simulated second 0 at ``epoch_ms``.

    With ``namespace`` (the default) job ids are ``scenario_job(result.stem, job)``."""
    path = result.attempts_csv
    if not path.is_file():
        raise SimOutputError(
            f"{path}: no such file (listed in {SUMMARY_FILE} for {result.policy!r})"
        )
    try:
        with path.open(newline="", encoding="utf-8") as f:
            return _read_rows(f, path, epoch_ms, f"{result.stem}/" if namespace else "", result)
    except UnicodeDecodeError as e:
        raise SimOutputError(f"{path}: not UTF-8 text ({e.reason})") from None
    except csv.Error as e:
        raise SimOutputError(f"{path}: malformed CSV: {e}") from None


def _read_rows(
    f: Any, path: Path, epoch_ms: int, prefix: str, result: SimResultFiles
) -> list[Attempt]:
    """The rows of an open attempts CSV. Each row takes a fast path that accepts only cells
    it can read exactly; anything else goes to ``_row_error``, which checks the row column by
    column and raises the first problem (or returns the parsed attempt, for the rare valid
    row the fast path does not take, such as a time written as ``1e3``)."""
    reader = csv.reader(f)
    header = next(reader, None)
    if header is None:
        raise SimOutputError(f"{path}: empty file (expected a header line)")
    missing = [c for c in ATTEMPT_COLUMNS if c not in header]
    if missing:
        raise SimOutputError(
            f"{path}: line 1: missing column(s) {', '.join(repr(c) for c in missing)}"
        )
    pick = itemgetter(*(header.index(c) for c in ATTEMPT_COLUMNS))
    width = len(header)
    cluster = result.cluster
    # Caches of parsed cells: most cells of these columns repeat.
    gpus: dict[str, tuple[tuple[tuple[str, int], ...], int]] = {}
    utils: dict[str, float | None] = {}
    mbs: dict[str, int] = {}
    outcomes = OUTCOMES
    ms = _plain_ms
    out: list[Attempt] = []
    append = out.append
    for row in reader:
        if len(row) != width:
            if not row:
                continue
            raise SimOutputError(
                f"{path}: line {reader.line_num}: {len(row)} cells, expected {width}"
            )
        v = pick(row)
        (job, attempt, tenant, queue, cls, start, end, outcome, gpu, gpu_milli, cpu, mem, util,
         storage, network) = v  # fmt: skip
        g = gpus.get(gpu)
        u = utils.get(util, _MISSING)
        st = mbs.get(storage)
        nw = mbs.get(network)
        s = ms(start)
        e = ms(end)
        if (
            g is None
            or u is _MISSING
            or st is None
            or nw is None
            or s is None
            or e is None
            or e < s
            or not (job and tenant and cls)
            or outcome not in outcomes
            or not attempt.isdecimal()
            or not cpu.isdecimal()
            or not mem.isdecimal()
            or not gpu_milli.isdecimal()
            or int(gpu_milli) != g[1]
        ):
            a = _row_error(v, path, reader.line_num, epoch_ms, prefix, cluster)
            gpus.setdefault(gpu, (a.gpu, sum(m for _, m in a.gpu)))
            utils.setdefault(util, a.gpu_util)
            mbs.setdefault(storage, a.storage_mb)
            mbs.setdefault(network, a.network_mb)
            append(a)
            continue
        append(
            Attempt(
                prefix + job,
                int(attempt),
                epoch_ms + s,
                epoch_ms + e,
                tenant,
                queue,
                cls,
                cluster,
                g[0],
                int(cpu),
                int(mem),
                st,
                nw,
                outcome,
                u,  # type: ignore[arg-type]  # not _MISSING: checked above
            )
        )
    return out


_MISSING = object()


def _plain_ms(cell: str) -> int | None:
    """``seconds_to_ms`` of a plain ``digits[.ddd]`` cell; ``None`` for any other text."""
    whole, dot, frac = cell.partition(".")
    if not whole.isdecimal() or not cell.isascii():
        return None
    if not dot:
        return int(whole) * 1000
    if not frac.isdecimal() or len(frac) > 3:
        return None
    return int(whole) * 1000 + int(frac.ljust(3, "0"))


def _row_error(
    v: Sequence[str], path: Path, line: int, epoch_ms: int, prefix: str, cluster: str
) -> Attempt:
    """Check one row (cells in ``ATTEMPT_COLUMNS`` order) column by column: the first
    problem raises ``SimOutputError`` naming the file, line and column; a valid row comes
    back as its attempt."""
    (job, attempt, tenant, queue, cls, start, end, outcome, gpu, gpu_milli, cpu, mem, util,
     storage, network) = v  # fmt: skip

    def bad(column: str, problem: str) -> SimOutputError:
        return SimOutputError(f"{path}: line {line}, column {column!r}: {problem}")

    if not job:
        raise bad("job", "empty job id")
    n_attempt = _count(attempt, "attempt", bad)
    if not tenant:
        raise bad("tenant", "empty tenant")
    if not cls:
        raise bad("priority_class", "empty priority class")
    try:
        s = seconds_to_ms(start)
    except ValueError:
        raise bad("start", f"expected simulated seconds, got {start!r}") from None
    try:
        e = seconds_to_ms(end)
    except ValueError:
        raise bad("end", f"expected simulated seconds, got {end!r}") from None
    if e < s:
        raise bad("end", f"ends ({end}) before it starts ({start})")
    if outcome not in OUTCOMES:
        raise bad("outcome", f"expected one of {', '.join(sorted(OUTCOMES))}, got {outcome!r}")
    models = _gpu_cell(gpu, bad)
    if sum(m for _, m in models) != _count(gpu_milli, "gpu_milli", bad):
        raise bad("gpu_milli", f"{gpu_milli} is not the sum of column 'gpu' ({gpu!r})")
    cpu_milli = _count(cpu, "cpu_milli", bad)
    memory_mib = _count(mem, "memory_mib", bad)
    return Attempt(
        job_id=prefix + job,
        attempt=n_attempt,
        start_ms=epoch_ms + s,
        end_ms=epoch_ms + e,
        org=tenant,
        queue=queue,
        priority_class=cls,
        cluster=cluster,
        gpu=models,
        cpu_milli=cpu_milli,
        memory_mib=memory_mib,
        storage_mb=_megabytes(storage, "storage_gb", bad),
        network_mb=_megabytes(network, "network_gb", bad),
        outcome=outcome,
        gpu_util=_util_cell(util, bad),
    )


def _count(cell: str, column: str, bad: Any) -> int:
    """A non-negative integer cell."""
    if cell.isdecimal():
        return int(cell)
    raise bad(column, f"expected a whole number >= 0, got {cell!r}")


def _gpu_cell(cell: str, bad: Any) -> tuple[tuple[str, int], ...]:
    """``MODEL=milli[;MODEL=milli...]`` (empty: no GPU)."""
    out: list[tuple[str, int]] = []
    for part in cell.split(";") if cell else ():
        model, eq, milli = part.partition("=")
        if not eq or not milli.isdecimal():
            raise bad("gpu", f"expected MODEL=milli-GPU (';' between models), got {cell!r}")
        if int(milli):
            out.append((model, int(milli)))
    return tuple(out)


def _util_cell(cell: str, bad: Any) -> float | None:
    """Measured GPU utilisation in [0, 1]; empty means unknown."""
    if not cell:
        return None
    try:
        u = float(cell)
    except ValueError:
        u = -1.0
    if not 0.0 <= u <= 1.0:  # also false for NaN
        raise bad("gpu_util", f"expected a number in [0, 1] or nothing, got {cell!r}")
    return u


def _megabytes(cell: str, column: str, bad: Any) -> int:
    """GB as integer MB, ``round_half_even(GB × 1000)``; empty is 0."""
    if not cell:
        return 0
    try:
        gb = Decimal(cell)
    except InvalidOperation:
        gb = Decimal(-1)
    if not gb.is_finite() or gb < 0:
        raise bad(column, f"expected GB >= 0, got {cell!r}")
    return int((gb * _THOUSAND).to_integral_value(rounding=ROUND_HALF_EVEN))

"""The ledger's usage against Slurm's own accounting (``sacct``): an outside truth for the
live bill when tasks run on Slurm (``suanli bill slurm``, docs/billing.md).

Each task of an attempt is one Slurm job named ``suanli/<instance>/<job>/<attempt>/<task>``
(``suanli.backends.slurm_backend``). Per attempt, Slurm's figures are its jobs' allocated
GPUs (``AllocTRES`` ``gres/gpu``) times their elapsed seconds (``ElapsedRaw``), and the span
from the first job's start to the last one's end; the ledger's are its usage records of that
attempt (milli-GPU × duration, and their span). They cannot agree to the millisecond: Slurm
counts whole seconds from when ``slurmstepd`` started the batch step to when it ended, the
ledger from when the control plane launched the tasks to when it read their end. So every
attempt's difference is reported, and those past a tolerance (per attempt, in seconds of
its span, times its GPUs for GPU time) are flagged.

A fractional task holds no GPU in Slurm (its share is suanli's alone): its attempt is
compared on time only, and said so.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from suanli.backends.base import job_dir_name
from suanli.core.model import SpecError
from suanli.metering.usage import UsageRecord

SACCT_FIELDS = "JobID,JobName,State,Start,End,ElapsedRaw,AllocTRES,NodeList,User"
"""What ``sacct -X -P -n -o`` is asked for (``sacct_command``)."""
DEFAULT_TOLERANCE_S = 10.0


@dataclass(frozen=True, slots=True)
class SlurmTask:
    """One task's Slurm job, as Slurm's accounting has it."""

    slurm_id: str
    job: str  # the job's directory name (``job_dir_name``)
    attempt: int
    task: int
    state: str
    start_s: float | None
    end_s: float | None
    elapsed_s: int
    gpus: int
    node: str
    user: str


def sacct_command(partition: str, since: str) -> list[str]:
    """The ``sacct`` arguments that list every user's jobs in ``partition`` since ``since``
    (one line per job, ``|``-separated)."""
    return ["sacct", "-X", "-n", "-P", "-a", f"--partition={partition}", f"--starttime={since}",
            f"--format={SACCT_FIELDS}"]  # fmt: skip


def _instant(text: str) -> float | None:
    if text in ("", "Unknown", "None"):
        return None
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def _gpus(tres: str) -> int:
    for item in tres.split(","):
        name, _, value = item.partition("=")
        if name == "gres/gpu":
            return int(value)
    return 0


def parse_sacct(text: str, prefix: str = "suanli/") -> list[SlurmTask]:
    """suanli's tasks in ``sacct -P`` output of :data:`SACCT_FIELDS` (others' jobs skipped).
    ``prefix``: the job names' start (``suanli/<instance>/`` for one control plane's).
    Slurm prints times in the cluster's local time: run it with ``TZ=UTC``.
    ``SpecError`` names the line of a row that cannot be read."""
    out = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split("|")
        if len(fields) != 9:
            raise SpecError(f"sacct line {lineno}: expected 9 fields, got {line!r}")
        slurm_id, name, state, start, end, elapsed, tres, node, user = fields
        parts = name.split("/")  # suanli/<instance>/<job>/<attempt>/<task>
        if not name.startswith(prefix) or len(parts) != 5:
            continue
        try:
            job, attempt, task = parts[2], int(parts[3]), int(parts[4])
            item = SlurmTask(
                slurm_id, job, attempt, task, state.split()[0], _instant(start), _instant(end),
                int(elapsed or 0), _gpus(tres), node, user,
            )  # fmt: skip
        except (IndexError, ValueError) as e:
            raise SpecError(f"sacct line {lineno}: cannot read {line!r}: {e}") from None
        out.append(item)
    return out


@dataclass(frozen=True, slots=True)
class AttemptCheck:
    """One attempt's figures in the ledger and in Slurm, and what differs."""

    job_id: str
    attempt: int
    ledger_gpu_s: float
    slurm_gpu_s: float
    ledger_span_s: float
    slurm_span_s: float
    tasks: int
    note: str = ""

    @property
    def gpu_s_difference(self) -> float:
        return self.ledger_gpu_s - self.slurm_gpu_s

    @property
    def span_difference(self) -> float:
        return self.ledger_span_s - self.slurm_span_s


@dataclass(slots=True)
class Reconciliation:
    """Every attempt's check; those past the tolerance; attempts only one side has."""

    tolerance_s: float
    checked: list[AttemptCheck] = field(default_factory=list)
    differs: list[AttemptCheck] = field(default_factory=list)
    only_ledger: list[tuple[str, int]] = field(default_factory=list)
    only_slurm: list[tuple[str, int]] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (self.differs or self.only_ledger or self.only_slurm)

    def totals(self) -> dict[str, float]:
        return {
            "ledger_gpu_hours": sum(c.ledger_gpu_s for c in self.checked) / 3600,
            "slurm_gpu_hours": sum(c.slurm_gpu_s for c in self.checked) / 3600,
            "max_span_difference_s": max(
                (abs(c.span_difference) for c in self.checked), default=0.0
            ),
        }


def reconcile(
    usage: Iterable[UsageRecord],
    slurm: Iterable[SlurmTask],
    *,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
    fractional: Iterable[tuple[str, int]] = (),
) -> Reconciliation:
    """Compare per attempt (see the module docstring). ``usage``: the ledger's records of
    the attempts run on Slurm; ``fractional``: (job, attempt) of attempts whose tasks held
    GPU shares (compared on time only). A Slurm job that never ran (cancelled while pending:
    no start) is no usage and is left out."""
    ledger: dict[tuple[str, int], list[UsageRecord]] = defaultdict(list)
    ids: dict[tuple[str, int], str] = {}
    for r in usage:
        key = (job_dir_name(r.job_id), r.attempt)
        ledger[key].append(r)
        ids[key] = r.job_id
    engine: dict[tuple[str, int], list[SlurmTask]] = defaultdict(list)
    for t in slurm:
        if t.start_s is not None and t.elapsed_s > 0:
            engine[(t.job, t.attempt)].append(t)
    shares = {(job_dir_name(j), a) for j, a in fractional}
    out = Reconciliation(tolerance_s)
    for key in sorted(set(ledger) | set(engine)):
        records, tasks = ledger.get(key), engine.get(key)
        if records is None:
            out.only_slurm.append(key)
            continue
        if tasks is None:
            out.only_ledger.append((ids[key], key[1]))
            continue
        ledger_gpu_s = sum(r.gpu_milli * r.duration_ms for r in records) / 1e6
        span = (max(r.end_ms for r in records) - min(r.start_ms for r in records)) / 1000
        starts = [t.start_s for t in tasks if t.start_s is not None]
        ends = [t.end_s for t in tasks if t.end_s is not None]
        slurm_span = (max(ends) - min(starts)) if starts and ends else 0.0
        slurm_gpu_s = float(sum(t.gpus * t.elapsed_s for t in tasks))
        note = "GPU shares: suanli's alone (compared on time)" if key in shares else ""
        check = AttemptCheck(ids[key], key[1], ledger_gpu_s, slurm_gpu_s, span, slurm_span,
                             len(tasks), note)  # fmt: skip
        out.checked.append(check)
        gpus = max(1, max(t.gpus for t in tasks))
        gpu_off = not note and abs(check.gpu_s_difference) > tolerance_s * gpus * len(tasks)
        if abs(check.span_difference) > tolerance_s or gpu_off:
            out.differs.append(check)
    return out

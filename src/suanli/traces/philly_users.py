"""Microsoft Philly with its users: the latest 15,000 jobs of the Philly trace, each with the
anonymised id of the user who submitted it (136 users, about 58 days).

File: ``philly-users/philly_data_training.csv``, as cut by the Gen-Parallel-Workloads project
(DIR-LAB, ``Philly/training_data/philly_data_training.csv``) from the Philly trace (Jeon et al.,
USENIX ATC 2019): ``u_id, user, gpu_num, cpu_num, node_num, interval, run_time, wall_time,
new_status`` -> :func:`load_philly_user_jobs`. The jobs ran on Philly's machines
(``philly/cluster_machine_list.csv``). Every assumption is a keyword argument.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from suanli.core.model import Job, TaskRequest
from suanli.traces.base import (
    JOB_CPU_MILLI_PER_GPU,
    JOB_MEMORY_MIB_PER_GPU,
    TraceJobs,
    check_non_negative,
)
from suanli.traces.philly import task_for
from suanli.traces.table import (
    Header,
    RowError,
    RowParser,
    parse_float,
    parse_int,
    parse_name,
    paused_gc,
    read_rows,
)

JOB_COLUMNS = ("u_id", "user", "gpu_num", "node_num", "interval", "run_time")
"""Required columns of ``philly_data_training.csv`` (``cpu_num`` and ``wall_time`` are not used)."""

STATUS_COLUMN = "new_status"
"""The optional column of how each job ended (a file without it loads with outcomes ``""``)."""

STATUS_OUTCOMES = {"pass": "completed", "failed": "failed", "killed": "killed"}
"""``new_status`` (case-insensitive) -> ``Job.outcome``."""

_STATUS_NAMES = "Pass, Failed or Killed"
_EXPECTED_STATUS = f"expected {_STATUS_NAMES}"

# u_id, user, tasks, task, interval, run, outcome
_Row = tuple[int, str, int, TaskRequest, float, float, str]


def load_philly_user_jobs(
    path: str | Path,
    gpu_models: Iterable[str] | None = None,
    *,
    cpu_milli_per_gpu: int = JOB_CPU_MILLI_PER_GPU,
    memory_mib_per_gpu: int = JOB_MEMORY_MIB_PER_GPU,
    priority_class: str = "normal",
    skip_bad_rows: bool = False,
) -> TraceJobs:
    """Philly jobs with their users, in file (submission) order.

    - ``id``: ``philly-user-NNNNN`` from ``u_id``;
    - ``submit``: the running sum of ``interval`` (seconds since the previous job's
      submission; the first job at 0);
    - ``runtime``: ``run_time``, which must be > 0;
    - tasks: the job's ``gpu_num`` GPUs over its ``node_num`` nodes, as it ran: one task per
      node of ``gpu_num / node_num`` GPUs (it must divide), all started together;
    - each task asks ``cpu_milli_per_gpu`` and ``memory_mib_per_gpu`` per GPU (ASSUMPTION:
      ``cpu_num`` is 0 in every row, so the file records GPUs only) and, if ``gpu_models`` is
      given, one of those models;
    - ``user`` ``u<user>``, ``tenant`` ``philly/u<user>``, ``queue`` ``philly`` (the file has no
      virtual cluster), ``priority_class`` as given;
    - ``outcome`` from ``new_status`` where the file has that column (``Pass`` -> ``completed``,
      ``Failed`` -> ``failed``, ``Killed`` -> ``killed``, in any case; another value is a bad
      row), else ``""``. A recorded fact only: the job still runs its ``run_time``.

    Bad rows raise ``TraceFormatError``, or with ``skip_bad_rows`` are counted in the returned
    list's ``skipped`` report.
    """
    check_non_negative("cpu_milli_per_gpu", cpu_milli_per_gpu)
    check_non_negative("memory_mib_per_gpu", memory_mib_per_gpu)
    models = frozenset(gpu_models or ())
    tasks_of: dict[int, TaskRequest] = {}

    def make(h: Header) -> RowParser[_Row]:
        i_id, i_user, i_gpus, i_nodes, i_gap, i_run = (h.index[c] for c in JOB_COLUMNS)
        i_status = h.index.get(STATUS_COLUMN)

        def parse(row: list[str], line: int) -> _Row:
            uid = parse_int(row[i_id], "u_id", 0)
            user = parse_name(row[i_user], "user")
            gpus = parse_int(row[i_gpus], "gpu_num", 1)
            nodes = parse_int(row[i_nodes], "node_num", 1)
            if gpus % nodes:
                raise RowError(
                    f"gpu_num {gpus} does not divide over node_num {nodes}", "gpu_num", "layout"
                )
            gap = parse_float(row[i_gap], "interval", 0.0)
            run = parse_float(row[i_run], "run_time", 0.0, above=True)
            per = gpus // nodes
            task = tasks_of.get(per)
            if task is None:
                task = tasks_of[per] = task_for(per, cpu_milli_per_gpu, memory_mib_per_gpu, models)
            outcome = "" if i_status is None else _outcome(row[i_status])
            return (uid, user, nodes, task, gap, run, outcome)

        return parse

    with paused_gc():
        rows, skipped, _ = read_rows(
            path, JOB_COLUMNS, (STATUS_COLUMN,), make, skip_bad_rows=skip_bad_rows
        )
        jobs: list[Job] = []
        t = 0.0
        width = max(5, len(str(max((r[0] for r in rows), default=0))))
        for k, (uid, user, tasks, task, gap, run, outcome) in enumerate(rows):
            t = t + gap if k else 0.0
            jobs.append(
                Job(
                    id=f"philly-user-{uid:0{width}d}",
                    submit=t,
                    runtime=run,
                    task=task,
                    tasks=tasks,
                    tenant=f"philly/u{user}",
                    queue="philly",
                    priority_class=priority_class,
                    user=f"u{user}",
                    outcome=outcome,
                )
            )
        return TraceJobs(jobs, skipped)


def _outcome(text: str) -> str:
    """``Job.outcome`` for a ``new_status`` cell, or RowError naming the column and the value."""
    outcome = STATUS_OUTCOMES.get(text.strip().lower())
    if outcome is None:
        raise RowError(
            f"{_EXPECTED_STATUS} (any case), got {text!r}", STATUS_COLUMN, _EXPECTED_STATUS
        )
    return outcome

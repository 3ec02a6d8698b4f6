"""Microsoft ITP: ten GPU training clusters (2021-03 to 2021-05), from the ElasticFlow artifact.

Files ``cluster01.csv`` .. ``cluster10.csv`` (``microsoft/elasticflow-traces``,
``data/raw-traces.tar.gz``): ``job_id, submission_time, duration, num_gpu``, times in
seconds -> :func:`load_itp_jobs`. The node counts of the clusters are not published;
:func:`itp_cluster` derives one from the load a trace offers.

Every assumption is a keyword argument; ``docs/traces.md`` lists them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path

from suanli.core.model import MILLI, GpuModel, Job, NodeSpec, SpecError, TaskRequest
from suanli.traces.base import (
    GPUS_PER_TASK,
    JOB_CPU_MILLI_PER_GPU,
    JOB_MEMORY_MIB_PER_GPU,
    NODE_CPU_MILLI_PER_GPU,
    NODE_MEMORY_MIB_PER_GPU,
    TraceCluster,
    TraceJobs,
    check_non_negative,
    check_positive,
    gang_split,
    resolve_gpu_model,
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

JOB_COLUMNS = ("job_id", "submission_time", "duration", "num_gpu")

ITP_TARGET_LOAD = 0.8
"""Offered load at which :func:`itp_cluster` sizes a cluster (ASSUMPTION, see there)."""


def load_itp_jobs(
    path: str | Path,
    gpu_models: Iterable[str] | None = None,
    *,
    cluster: str | None = None,
    rebase: bool = True,
    gpus_per_task: int = GPUS_PER_TASK,
    cpu_milli_per_gpu: int = JOB_CPU_MILLI_PER_GPU,
    memory_mib_per_gpu: int = JOB_MEMORY_MIB_PER_GPU,
    priority_class: str = "normal",
    skip_bad_rows: bool = False,
) -> TraceJobs:
    """One ITP cluster's jobs, in submission order (ties: file order).

    - ``id``: ``job_id`` (unique; a repeated id is a bad row).
    - ``submit``: ``submission_time`` minus the earliest of the file (``rebase``; False keeps
      the trace's own seconds).
    - ``runtime``: ``duration``, which must be > 0 (zero or negative: a bad row).
    - tasks: as for Philly (:func:`~suanli.traces.base.gang_split`): up to ``gpus_per_task``
      GPUs one task, more the fewest identical tasks of at most ``gpus_per_task`` GPUs
      (64 -> 8 x 8); ``num_gpu`` must be >= 1 (zero: a bad row). Each task asks
      ``cpu_milli_per_gpu`` and ``memory_mib_per_gpu`` per GPU (ASSUMPTION: the trace
      records GPUs only) and, if ``gpu_models`` is given, one of those models.
    - ``tenant`` ``itp/<cluster>``, ``queue`` ``<cluster>``; ``cluster`` defaults to the
      file's stem (``cluster04``).
    """
    check_non_negative("cpu_milli_per_gpu", cpu_milli_per_gpu)
    check_non_negative("memory_mib_per_gpu", memory_mib_per_gpu)
    gang_split(1, gpus_per_task)  # validates gpus_per_task
    name = cluster if cluster is not None else Path(path).stem
    models = frozenset(gpu_models or ())
    seen: set[str] = set()
    splits: dict[int, tuple[int, TaskRequest]] = {}

    def make(h: Header) -> RowParser[tuple[str, float, float, int, TaskRequest]]:
        i_id, i_sub, i_dur, i_gpus = (h.index[c] for c in JOB_COLUMNS)

        def parse(row: list[str], line: int) -> tuple[str, float, float, int, TaskRequest]:
            jid = parse_name(row[i_id], "job_id")
            if jid in seen:
                raise RowError(f"job {jid!r} appears twice", "job_id", "duplicate job_id")
            sub = parse_float(row[i_sub], "submission_time")
            duration = parse_float(row[i_dur], "duration", 0.0, above=True)
            num_gpus = parse_int(row[i_gpus], "num_gpu", 1)
            split = splits.get(num_gpus)
            if split is None:
                tasks, per = gang_split(num_gpus, gpus_per_task)
                split = (tasks, task_for(per, cpu_milli_per_gpu, memory_mib_per_gpu, models))
                splits[num_gpus] = split
            seen.add(jid)
            return (jid, sub, duration, split[0], split[1])

        return parse

    with paused_gc():
        rows, skipped, _ = read_rows(path, JOB_COLUMNS, (), make, skip_bad_rows=skip_bad_rows)
        t0 = min((r[1] for r in rows), default=0.0) if rebase else 0.0
        rows.sort(key=lambda r: r[1])
        tenant = f"itp/{name}"
        jobs = [
            Job(
                id=jid,
                submit=sub - t0,
                runtime=duration,
                task=task,
                tasks=tasks,
                tenant=tenant,
                queue=name,
                priority_class=priority_class,
            )
            for jid, sub, duration, tasks, task in rows
        ]
    return TraceJobs(jobs, skipped)


def _nodes_for_job(job: Job, gpus_per_node: int) -> int:
    """The fewest nodes of ``gpus_per_node`` GPUs that hold all of a job's tasks."""
    per_task = job.task.gpus
    if per_task == 0:
        return 1
    if per_task > gpus_per_node:
        raise SpecError(
            f"job {job.id}: a task of {per_task} GPUs does not fit a node of {gpus_per_node}"
        )
    return math.ceil(job.tasks / (gpus_per_node // per_task))


def itp_node_count(
    jobs: Sequence[Job],
    gpus_per_node: int = 8,
    *,
    speed: float = 1.0,
    target_load: float = ITP_TARGET_LOAD,
) -> int:
    """The node count :func:`itp_cluster` derives: see there."""
    check_positive("gpus_per_node", gpus_per_node)
    check_positive("speed", speed)
    check_positive("target_load", target_load)
    if not jobs:
        raise SpecError("no jobs to size a cluster for")
    largest = max(_nodes_for_job(j, gpus_per_node) for j in jobs)
    first = min(j.submit for j in jobs)
    span = max(j.submit for j in jobs) - first
    by_load = 0
    if span > 0:
        gpu_seconds = sum(j.gpu_demand_milli * j.runtime for j in jobs) / MILLI
        gpus = gpu_seconds / speed / (span * target_load)
        by_load = math.ceil(gpus / gpus_per_node)
    return max(by_load, largest, 1)


def itp_cluster(
    jobs: Sequence[Job],
    gpus_per_node: int = 8,
    nodes: int | None = None,
    gpu_model: str | GpuModel = "V100",
    *,
    target_load: float = ITP_TARGET_LOAD,
    cpu_milli_per_gpu: int = NODE_CPU_MILLI_PER_GPU,
    memory_mib_per_gpu: int = NODE_MEMORY_MIB_PER_GPU,
    name: str = "itp",
) -> TraceCluster:
    """A cluster for ITP ``jobs``: ``nodes`` nodes of ``gpus_per_node`` GPUs of one model.

    The trace does not publish node counts. With ``nodes`` None, ASSUMPTION: the smallest
    count at which the trace's offered load, its GPU-seconds over the GPU capacity times the
    span of its submissions, is at most ``target_load`` (capacity in reference-speed GPUs:
    GPUs x the model's speed), and never fewer nodes than the largest job needs. Node CPU and
    memory: ``cpu_milli_per_gpu`` and ``memory_mib_per_gpu`` per GPU (ASSUMPTION). The model
    is a catalogue name or a :class:`GpuModel` (ASSUMPTION: V100, the ElasticFlow paper's
    testbed GPU; ITP's own models are not in the trace).
    """
    model = resolve_gpu_model(gpu_model)
    check_positive("gpus_per_node", gpus_per_node)
    if nodes is None:
        nodes = itp_node_count(jobs, gpus_per_node, speed=model.speed, target_load=target_load)
    check_positive("nodes", nodes)
    width = max(3, len(str(nodes - 1)))
    return TraceCluster(
        name,
        tuple(
            NodeSpec(
                f"{name}-{i:0{width}d}",
                gpus_per_node,
                model,
                gpus_per_node * cpu_milli_per_gpu,
                gpus_per_node * memory_mib_per_gpu,
            )
            for i in range(nodes)
        ),
    )

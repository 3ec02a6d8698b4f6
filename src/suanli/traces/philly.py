"""Microsoft Philly: DNN training jobs (2017-09 to 2017-12) and the machines they ran on.

Files:

- ``philly_jobs.csv`` (the Pollux artifact's processing, ``petuum/adaptdl``,
  ``simulator/traces/philly.csv``): ``timestamp, duration, num_gpus, gpu_time, cluster``
  -> :func:`load_philly_jobs`;
- ``cluster_machine_list.csv`` (original trace, ``msr-fiddle/philly-traces``):
  ``machineId, number of GPUs, single GPU mem``, written with spaces after the commas
  -> :func:`load_philly_machines`.

Every assumption is a keyword argument; ``docs/traces.md`` lists them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import tzinfo
from pathlib import Path

from suanli.core.model import KNOWN_GPU_MODELS, GpuModel, Job, NodeSpec, TaskRequest
from suanli.traces.base import (
    GIB,
    GPUS_PER_TASK,
    JOB_CPU_MILLI_PER_GPU,
    JOB_MEMORY_MIB_PER_GPU,
    NODE_CPU_MILLI_PER_GPU,
    NODE_MEMORY_MIB_PER_GPU,
    TraceCluster,
    TraceJobs,
    check_non_negative,
    gang_split,
)
from suanli.traces.errors import SkipReport
from suanli.traces.table import (
    Header,
    RowError,
    RowParser,
    TimestampParser,
    parse_float,
    parse_int,
    parse_name,
    paused_gc,
    read_rows,
)

JOB_COLUMNS = ("timestamp", "duration", "num_gpus", "cluster")
"""Required columns of ``philly_jobs.csv`` (``gpu_time`` is optional and not used)."""
MACHINE_COLUMNS = ("machineId", "number of GPUs", "single GPU mem")

# GPU model by the machine list's "single GPU mem". ASSUMPTION from the memory sizes (the
# file names no model): 12 GB -> K80 (one GK210 half of a K80 board, 12 GiB, the catalogue's
# K80); 24 GB -> P40 (24 GiB; speed 0.5 of a V100 for training, an estimate: Pascal without
# tensor cores, about 12 of the V100's 15.7 FP32 TFLOPS, less in practice).
PHILLY_GPU_MODELS: Mapping[str, GpuModel] = {
    "12GB": KNOWN_GPU_MODELS["K80"],
    "24GB": GpuModel("P40", 24 * GIB, 0.5),
}


def load_philly_machines(
    path: str | Path,
    *,
    gpu_models: Mapping[str, GpuModel] = PHILLY_GPU_MODELS,
    cpu_milli_per_gpu: int = NODE_CPU_MILLI_PER_GPU,
    memory_mib_per_gpu: int = NODE_MEMORY_MIB_PER_GPU,
    name: str = "philly",
    skip_bad_rows: bool = False,
) -> TraceCluster:
    """The Philly machine list as a cluster, in file order (node names: ``machineId``).

    The GPU model comes from ``single GPU mem`` through ``gpu_models`` (keys as written, e.g.
    ``"12GB"``; an unknown size is a bad row). The file gives no CPU or memory:
    ASSUMPTION, each node gets ``cpu_milli_per_gpu`` and ``memory_mib_per_gpu`` per GPU.
    """
    check_non_negative("cpu_milli_per_gpu", cpu_milli_per_gpu)
    check_non_negative("memory_mib_per_gpu", memory_mib_per_gpu)
    seen: set[str] = set()

    def make(h: Header) -> RowParser[NodeSpec]:
        i_id, i_gpus, i_mem = (h.index[c] for c in MACHINE_COLUMNS)

        def parse(row: list[str], line: int) -> NodeSpec:
            mid = parse_name(row[i_id], "machineId")
            if mid in seen:
                raise RowError(f"machine {mid!r} appears twice", "machineId", "duplicate machine")
            gpus = parse_int(row[i_gpus], "number of GPUs")
            model: GpuModel | None = None
            if gpus:
                model = gpu_models.get(row[i_mem])
                if model is None:
                    raise RowError(
                        f"no GPU model for {row[i_mem]!r} (known: "
                        f"{', '.join(sorted(gpu_models))}; pass gpu_models= to add it)",
                        "single GPU mem",
                        "unknown GPU memory size",
                    )
            seen.add(mid)
            return NodeSpec(mid, gpus, model, gpus * cpu_milli_per_gpu, gpus * memory_mib_per_gpu)

        return parse

    nodes, skipped, _ = read_rows(
        path, MACHINE_COLUMNS, (), make, skip_bad_rows=skip_bad_rows, strip=True
    )
    return TraceCluster(name, tuple(nodes), skipped=skipped)


def task_for(
    gpus: int,
    cpu_milli_per_gpu: int,
    memory_mib_per_gpu: int,
    gpu_models: frozenset[str],
) -> TaskRequest:
    """A whole-GPU training task of ``gpus`` GPUs with CPU and memory in proportion."""
    return TaskRequest(
        gpus=gpus,
        cpu_milli=gpus * cpu_milli_per_gpu,
        memory_mib=gpus * memory_mib_per_gpu,
        gpu_models=gpu_models,
    )


def load_philly_jobs(
    path: str | Path,
    gpu_models: Iterable[str] | None = None,
    *,
    gpus_per_task: int = GPUS_PER_TASK,
    cpu_milli_per_gpu: int = JOB_CPU_MILLI_PER_GPU,
    memory_mib_per_gpu: int = JOB_MEMORY_MIB_PER_GPU,
    priority_class: str = "normal",
    tz: tzinfo | None = None,
    skip_bad_rows: bool = False,
) -> TraceJobs:
    """Philly jobs, in submission order (ties: file order).

    - ``id``: ``philly-NNNNN``, the row's line number minus one (the first data row is 1).
    - ``submit``: seconds after the earliest ``timestamp`` of the rows read. The timestamps
      are local wall-clock times without a zone; ASSUMPTION, with ``tz`` None they are taken
      as they stand (no daylight-saving shift); pass a ``tzinfo`` to read them in a zone.
    - ``runtime``: ``duration``, which must be > 0; a row with zero (or negative) duration is
      a bad row.
    - tasks (:func:`gang_split`): up to ``gpus_per_task`` GPUs one task of ``num_gpus``;
      more, the fewest identical tasks of at most ``gpus_per_task`` GPUs (16 -> 2 x 8,
      12 -> 2 x 6), all started together. ``num_gpus`` must be >= 1; a row with zero GPUs is
      a bad row.
    - each task asks ``cpu_milli_per_gpu`` and ``memory_mib_per_gpu`` per GPU (ASSUMPTION:
      the trace records GPUs only) and, if ``gpu_models`` is given, one of those models.
    - ``tenant`` ``philly/<cluster>``, ``queue`` ``<cluster>`` (the virtual cluster id),
      ``priority_class`` as given (all Philly jobs are training jobs of one class).

    Bad rows raise :class:`TraceFormatError`, or with ``skip_bad_rows`` are counted in the
    returned list's ``skipped`` report.
    """
    check_non_negative("cpu_milli_per_gpu", cpu_milli_per_gpu)
    check_non_negative("memory_mib_per_gpu", memory_mib_per_gpu)
    gang_split(1, gpus_per_task)  # validates gpus_per_task
    models = frozenset(gpu_models or ())
    stamp = TimestampParser(tz)
    splits: dict[int, tuple[int, TaskRequest]] = {}

    def make(h: Header) -> RowParser[tuple[int, float, float, int, TaskRequest, str]]:
        i_ts, i_dur, i_gpus, i_vc = (h.index[c] for c in JOB_COLUMNS)

        def parse(row: list[str], line: int) -> tuple[int, float, float, int, TaskRequest, str]:
            t = stamp(row[i_ts], "timestamp")
            duration = parse_float(row[i_dur], "duration", 0.0, above=True)
            num_gpus = parse_int(row[i_gpus], "num_gpus", 1)
            vc = parse_name(row[i_vc], "cluster")
            split = splits.get(num_gpus)
            if split is None:
                tasks, per = gang_split(num_gpus, gpus_per_task)
                split = (tasks, task_for(per, cpu_milli_per_gpu, memory_mib_per_gpu, models))
                splits[num_gpus] = split
            return (line - 1, t, duration, split[0], split[1], vc)

        return parse

    with paused_gc():
        rows, skipped, _ = read_rows(
            path, JOB_COLUMNS, ("gpu_time",), make, skip_bad_rows=skip_bad_rows
        )
        return _jobs(rows, skipped, priority_class)


def _jobs(
    rows: list[tuple[int, float, float, int, TaskRequest, str]],
    skipped: SkipReport | None,
    priority_class: str,
) -> TraceJobs:
    """Jobs from parsed rows ``(number, time, duration, tasks, task, cluster)``."""
    if not rows:
        return TraceJobs([], skipped)
    t0 = min(r[1] for r in rows)
    rows.sort(key=lambda r: r[1])  # stable: ties keep file order
    width = max(5, len(str(max(r[0] for r in rows))))
    tenants: dict[str, str] = {}
    jobs = [
        Job(
            id=f"philly-{num:0{width}d}",
            submit=t - t0,
            runtime=duration,
            task=task,
            tasks=tasks,
            tenant=tenants.get(vc) or tenants.setdefault(vc, f"philly/{vc}"),
            queue=vc,
            priority_class=priority_class,
        )
        for num, t, duration, tasks, task, vc in rows
    ]
    return TraceJobs(jobs, skipped)

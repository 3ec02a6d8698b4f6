"""openb: the Alibaba GPU cluster trace 2023 used by the FGD paper (USENIX ATC'23).

Files (``alibaba/clusterdata``, ``cluster-trace-gpu-v2023/csv/``):

- ``openb_node_list_all_node.csv`` / ``openb_node_list_gpu_node.csv``:
  ``sn, cpu_milli, memory_mib, gpu, model`` -> :func:`load_openb_nodes`;
- ``openb_pod_list_*.csv``: ``name, cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec, qos,
  pod_phase, creation_time, deletion_time, scheduled_time`` (``multigpu20`` has only the first
  five) -> :func:`load_openb_pods`, then :meth:`OpenbPods.to_jobs`.

Every assumption is a keyword argument; ``docs/traces.md`` lists them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias

import numpy as np

from suanli.core.model import KNOWN_GPU_MODELS, MILLI, GpuModel, Job, NodeSpec, TaskRequest
from suanli.traces.base import GIB, TraceCluster, TraceJobs, check_non_negative, check_positive
from suanli.traces.errors import MissingColumnsError, SkipReport
from suanli.traces.table import (
    Header,
    RowError,
    RowParser,
    parse_int,
    parse_name,
    read_rows,
)

# GPU models of the node lists. T4, P100, V100M16, V100M32 and A10 are the catalogue's.
# G2 and G3 are anonymised in the trace. ASSUMPTION: both are V100-class data-centre GPUs
# (32 GiB, speed 1.0); nothing in the trace gives their memory (openb pods ask for GPU
# compute shares, never GPU memory) and the FGD paper does not name them.
OPENB_GPU_MODELS: Mapping[str, GpuModel] = {
    "G2": GpuModel("G2", 32 * GIB, 1.0),
    "G3": GpuModel("G3", 32 * GIB, 1.0),
    **{n: KNOWN_GPU_MODELS[n] for n in ("T4", "P100", "V100M16", "V100M32", "A10")},
}

# ``model`` values that mean "no GPU" (compared in lower case). The file leaves CPU-only
# nodes' model empty; its README says ``none``.
_NO_MODEL = frozenset({"", "none", "cpu"})

# qos -> priority class. ASSUMPTION, following calibration.py: the model's online and high
# classes are not preemptible, normal and spot are. Kubernetes' Guaranteed and Burstable and
# Alibaba's latency-sensitive LS are not best-effort -> high; BE (best-effort) -> normal (the
# trace has one best-effort level; spot is left to other workloads). LS pods that share a GPU
# (1 GPU, gpu_milli < 1000) -> online (see OPENB_SHARED_LS_CLASS).
OPENB_QOS_CLASSES: Mapping[str, str] = {
    "LS": "high",
    "Guaranteed": "high",
    "Burstable": "high",
    "BE": "normal",
}
OPENB_SHARED_LS_CLASS = "online"
"""Class of LS pods on a shared GPU: the typical request of an inference service."""

POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
"""The columns every pod list has (``multigpu20`` has only these)."""
POD_OPTIONAL = ("gpu_spec", "qos", "pod_phase", "creation_time", "deletion_time", "scheduled_time")
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")

# name, cpu, memory, GPUs, gpu_milli, gpu_spec, qos, phase, creation, deletion, scheduled
_PodRow: TypeAlias = tuple[str, int, int, int, int, frozenset[str], str, str, int, int, int]


def load_openb_nodes(
    path: str | Path,
    *,
    gpu_models: Mapping[str, GpuModel] = OPENB_GPU_MODELS,
    name: str = "openb",
    skip_bad_rows: bool = False,
) -> TraceCluster:
    """The openb node list as a cluster, in file order.

    A node with ``gpu`` 0 is CPU-only (``gpus=0``, no model, whatever ``model`` says); a GPU
    node's model is looked up in ``gpu_models`` (an unknown name is a bad row). CPU and
    memory are taken as they stand (milli-cores, MiB). Node names are ``sn``.
    """
    seen: set[str] = set()

    def make(h: Header) -> RowParser[NodeSpec]:
        i_sn, i_cpu, i_mem, i_gpu, i_model = (h.index[c] for c in NODE_COLUMNS)

        def parse(row: list[str], line: int) -> NodeSpec:
            sn = parse_name(row[i_sn], "sn")
            if sn in seen:
                raise RowError(f"node {sn!r} appears twice", "sn", "duplicate node name")
            cpu = parse_int(row[i_cpu], "cpu_milli")
            mem = parse_int(row[i_mem], "memory_mib")
            gpus = parse_int(row[i_gpu], "gpu")
            model: GpuModel | None = None
            if gpus:
                text = row[i_model].strip()
                if text.lower() in _NO_MODEL:
                    raise RowError(
                        f"a node with {gpus} GPUs needs a GPU model, got {text!r}",
                        "model",
                        "GPU node without a model",
                    )
                model = gpu_models.get(text)
                if model is None:
                    raise RowError(
                        f"unknown GPU model {text!r} (known: {', '.join(sorted(gpu_models))}; "
                        "pass gpu_models= to add it)",
                        "model",
                        "unknown GPU model",
                    )
            seen.add(sn)
            return NodeSpec(sn, gpus, model, cpu, mem)

        return parse

    nodes, skipped, _ = read_rows(path, NODE_COLUMNS, (), make, skip_bad_rows=skip_bad_rows)
    return TraceCluster(name, tuple(nodes), skipped=skipped)


@dataclass(frozen=True, eq=False)
class OpenbPods:
    """An openb pod list, by column (row ``i`` of every array is pod ``names[i]``).

    Integer columns are ``int64`` arrays. ``gpu_spec`` holds the acceptable GPU models of each
    pod (empty: any). ``qos``, ``pod_phase`` and the times are None when the file lacks them
    (``multigpu20``); ``scheduled_time`` is -1 for a pod the trace never scheduled (empty in
    the file). Times are seconds as the trace gives them.
    """

    source: Path
    names: tuple[str, ...]
    cpu_milli: np.ndarray
    memory_mib: np.ndarray
    num_gpu: np.ndarray
    gpu_milli: np.ndarray
    gpu_spec: tuple[frozenset[str], ...]
    qos: tuple[str, ...] | None = None
    pod_phase: tuple[str, ...] | None = None
    creation_time: np.ndarray | None = None
    deletion_time: np.ndarray | None = None
    scheduled_time: np.ndarray | None = None
    skipped: SkipReport | None = None

    def __len__(self) -> int:
        return len(self.names)

    @property
    def timed(self) -> bool:
        """Whether the list has creation and deletion times."""
        return self.creation_time is not None and self.deletion_time is not None

    @property
    def fractional(self) -> np.ndarray:
        """Boolean mask of the pods that ask for a share of one GPU."""
        mask: np.ndarray = (self.num_gpu == 1) & (self.gpu_milli < MILLI)
        return mask

    def select(self, mask: np.ndarray) -> OpenbPods:
        """The pods where ``mask`` (booleans, or indices) selects, in their order here."""
        idx = np.arange(len(self))[np.asarray(mask)]
        pick = idx.tolist()

        def arr(a: np.ndarray | None) -> np.ndarray | None:
            return None if a is None else a[idx]

        def tup(t: tuple[str, ...] | None) -> tuple[str, ...] | None:
            return None if t is None else tuple(t[i] for i in pick)

        return OpenbPods(
            source=self.source,
            names=tuple(self.names[i] for i in pick),
            cpu_milli=self.cpu_milli[idx],
            memory_mib=self.memory_mib[idx],
            num_gpu=self.num_gpu[idx],
            gpu_milli=self.gpu_milli[idx],
            gpu_spec=tuple(self.gpu_spec[i] for i in pick),
            qos=tup(self.qos),
            pod_phase=tup(self.pod_phase),
            creation_time=arr(self.creation_time),
            deletion_time=arr(self.deletion_time),
            scheduled_time=arr(self.scheduled_time),
            skipped=self.skipped,
        )

    def priority_classes(
        self,
        *,
        qos_classes: Mapping[str, str] = OPENB_QOS_CLASSES,
        shared_ls_class: str | None = OPENB_SHARED_LS_CLASS,
        no_qos_class: str = "normal",
    ) -> tuple[str, ...]:
        """Each pod's priority class (see :meth:`to_jobs`)."""
        if self.qos is None:
            return (no_qos_class,) * len(self)
        frac = self.fractional.tolist()
        out: list[str] = []
        for i, q in enumerate(self.qos):
            if shared_ls_class is not None and q == "LS" and frac[i]:
                out.append(shared_ls_class)
                continue
            cls = qos_classes.get(q)
            if cls is None:
                raise ValueError(
                    f"pod {self.names[i]}: qos {q!r} has no priority class "
                    f"(mapped: {', '.join(sorted(qos_classes))}; pass qos_classes=)"
                )
            out.append(cls)
        return tuple(out)

    def to_jobs(
        self,
        *,
        qos_classes: Mapping[str, str] = OPENB_QOS_CLASSES,
        shared_ls_class: str | None = OPENB_SHARED_LS_CLASS,
        no_qos_class: str = "normal",
        min_runtime: float = 1.0,
        tenant: str = "openb",
        queue: str = "openb",
        arrival_interval: float | None = None,
        untimed_runtime: float | None = None,
    ) -> TraceJobs:
        """One single-task job per pod, in submission order (ties: file order).

        - ``submit`` = ``creation_time`` minus the earliest ``creation_time``.
        - ``runtime`` = ``deletion_time - creation_time``, at least ``min_runtime`` (the trace
          has whole seconds; a pod created and deleted in the same second held its resources
          for up to one). Pods still running when the trace ends are cut at its end, as the
          trace records them; pending pods (never scheduled) are kept as demand.
        - task: ``num_gpu`` 0 -> CPU-only (``gpus=0``); 1 GPU with ``gpu_milli`` < 1000 -> a
          share of one GPU (compute only, ``gpu_memory_mib=0``: the trace asks for no GPU
          memory); otherwise ``num_gpu`` whole GPUs. CPU and memory as the pod asks;
          ``gpu_models`` from ``gpu_spec``.
        - priority class: ``qos`` through ``qos_classes``, except LS pods on a shared GPU,
          which get ``shared_ls_class`` (None: use ``qos_classes`` for them too); lists
          without ``qos`` give every job ``no_qos_class``.

        A list without times (``multigpu20``) needs both ``arrival_interval`` and
        ``untimed_runtime``: pods then arrive in file order, ``arrival_interval`` seconds
        apart, and each runs ``untimed_runtime`` seconds (the FGD replay has pods that arrive
        in order and never leave: pass a runtime longer than the replay). Without them such a
        list raises ValueError.
        """
        check_non_negative("min_runtime", min_runtime)
        n = len(self)
        if self.creation_time is not None and self.deletion_time is not None:
            if arrival_interval is not None or untimed_runtime is not None:
                raise ValueError(
                    f"{self.source.name} has creation and deletion times; "
                    "arrival_interval and untimed_runtime are only for lists without them"
                )
            created = self.creation_time
            submit = (created - created.min()).astype(np.float64) if n else np.zeros(0)
            runtime = np.maximum((self.deletion_time - created).astype(np.float64), min_runtime)
        else:
            if arrival_interval is None or untimed_runtime is None:
                raise ValueError(
                    f"{self.source.name} has no creation or deletion times: pass "
                    "arrival_interval= (seconds between arrivals, in file order) and "
                    "untimed_runtime= (seconds each pod runs) to replay it"
                )
            check_non_negative("arrival_interval", arrival_interval)
            check_positive("untimed_runtime", untimed_runtime)
            submit = np.arange(n, dtype=np.float64) * arrival_interval
            runtime = np.full(n, float(untimed_runtime))
        classes = self.priority_classes(
            qos_classes=qos_classes, shared_ls_class=shared_ls_class, no_qos_class=no_qos_class
        )
        order = np.argsort(submit, kind="stable").tolist()
        cpu, mem = self.cpu_milli.tolist(), self.memory_mib.tolist()
        ngpu, milli = self.num_gpu.tolist(), self.gpu_milli.tolist()
        subs, runs = submit.tolist(), runtime.tolist()
        tasks: dict[tuple[int, int, int, int, frozenset[str]], TaskRequest] = {}
        jobs: list[Job] = []
        for i in order:
            key = (ngpu[i], milli[i], cpu[i], mem[i], self.gpu_spec[i])
            task = tasks.get(key)
            if task is None:
                g = ngpu[i]
                task = TaskRequest(
                    gpus=g,
                    gpu_milli=milli[i] if g == 1 else MILLI,
                    cpu_milli=cpu[i],
                    memory_mib=mem[i],
                    gpu_models=self.gpu_spec[i],
                )
                tasks[key] = task
            jobs.append(
                Job(
                    id=self.names[i],
                    submit=subs[i],
                    runtime=runs[i],
                    task=task,
                    tenant=tenant,
                    queue=queue,
                    priority_class=classes[i],
                )
            )
        return TraceJobs(jobs, self.skipped)


def load_openb_pods(path: str | Path, *, skip_bad_rows: bool = False) -> OpenbPods:
    """Read an openb pod list (any of the four) into an :class:`OpenbPods`.

    Checks each row: integers where integers belong, ``gpu_milli`` in 0..1000, 0 for a
    CPU-only pod and below 1000 only for a 1-GPU pod, ``deletion_time`` not before
    ``creation_time``, pod names unique. ``creation_time`` and ``deletion_time`` come as a
    pair: a file with one needs the other.
    """
    seen: set[str] = set()
    specs: dict[str, frozenset[str]] = {"": frozenset()}

    def make(h: Header) -> RowParser[_PodRow]:
        i_name, i_cpu, i_mem, i_ngpu, i_milli = (h.index[c] for c in POD_COLUMNS)
        i_spec, i_qos, i_phase, i_c, i_d, i_s = (h.index.get(c, -1) for c in POD_OPTIONAL)
        if (i_c < 0) != (i_d < 0):
            raise MissingColumnsError(
                h.path, ["deletion_time" if i_d < 0 else "creation_time"], h.columns
            )

        def parse(row: list[str], line: int) -> _PodRow:
            name = parse_name(row[i_name], "name")
            if name in seen:
                raise RowError(f"pod {name!r} appears twice", "name", "duplicate pod name")
            cpu = parse_int(row[i_cpu], "cpu_milli")
            mem = parse_int(row[i_mem], "memory_mib")
            ngpu = parse_int(row[i_ngpu], "num_gpu")
            milli = parse_int(row[i_milli], "gpu_milli", 0, MILLI)
            if ngpu == 0 and milli:
                raise RowError(
                    f"a CPU-only pod (num_gpu 0) must have gpu_milli 0, got {milli}",
                    "gpu_milli",
                    "gpu_milli on a CPU-only pod",
                )
            if ngpu and not milli:
                raise RowError(
                    f"a pod with {ngpu} GPUs needs gpu_milli in 1..1000, got 0",
                    "gpu_milli",
                    "GPU pod with gpu_milli 0",
                )
            if ngpu > 1 and milli < MILLI:
                raise RowError(
                    f"a shared GPU (gpu_milli < 1000) is for a 1-GPU pod, not {ngpu} GPUs",
                    "gpu_milli",
                    "GPU share on a multi-GPU pod",
                )
            text = row[i_spec] if i_spec >= 0 else ""
            spec = specs.get(text)
            if spec is None:
                spec = frozenset(s.strip() for s in text.split("|") if s.strip())
                specs[text] = spec
            qos = row[i_qos].strip() if i_qos >= 0 else ""
            phase = row[i_phase].strip() if i_phase >= 0 else ""
            c = d = s = -1
            if i_c >= 0:
                c = parse_int(row[i_c], "creation_time")
                d = parse_int(row[i_d], "deletion_time")
                if d < c:
                    raise RowError(
                        f"deletion_time {d} is before creation_time {c}",
                        "deletion_time",
                        "deletion before creation",
                    )
            if i_s >= 0 and row[i_s].strip():
                s = parse_int(row[i_s], "scheduled_time")
            seen.add(name)
            return (name, cpu, mem, ngpu, milli, spec, qos, phase, c, d, s)

        return parse

    rows, skipped, header = read_rows(
        path, POD_COLUMNS, POD_OPTIONAL, make, skip_bad_rows=skip_bad_rows
    )
    cols = list(zip(*rows, strict=True)) if rows else [()] * 11
    timed = header.has("creation_time")  # and so deletion_time: they come as a pair

    def ints(k: int) -> np.ndarray:
        return np.array(cols[k], dtype=np.int64)

    return OpenbPods(
        source=Path(path),
        names=tuple(cols[0]),
        cpu_milli=ints(1),
        memory_mib=ints(2),
        num_gpu=ints(3),
        gpu_milli=ints(4),
        gpu_spec=tuple(cols[5]),
        qos=tuple(cols[6]) if header.has("qos") else None,
        pod_phase=tuple(cols[7]) if header.has("pod_phase") else None,
        creation_time=ints(8) if timed else None,
        deletion_time=ints(9) if timed else None,
        scheduled_time=ints(10) if header.has("scheduled_time") else None,
        skipped=skipped,
    )

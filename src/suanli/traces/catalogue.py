"""The traces by short name, for the command line: ``philly``, ``openb:gpushare40``, ...

:func:`resolve_trace` turns a spec into jobs plus the cluster they ran on (the trace's own
machine list, or a documented stand-in where the trace has none); :func:`resolve_cluster`
turns a name into a cluster. Both also take the path of a CSV file, whose kind is recognised
from its header.

=====================  ======================================================  ==============
trace spec             jobs                                                    cluster
=====================  ======================================================  ==============
``openb[:VARIANT]``    ``openb/openb_pod_list_VARIANT.csv`` (default,          openb node list
                       gpushare40, cpu050; multigpu20 has no times)            (all nodes)
``philly``             ``philly/philly_jobs.csv``                              Philly machines
``philly-users``       ``philly-users/philly_data_training.csv`` (with users)  Philly machines
``itp:clusterNN``      ``itp/clusterNN.csv`` (01..10; ``itp:4`` also works)    derived
``azure-llm:SERVICE``  ``azure-llm-2023/AzureLLMInferenceTrace_SERVICE.csv``   1 x 8 x H100
                       (code, conv)
=====================  ======================================================  ==============

Each trace declares the hardware its durations were measured on (``LoadedTrace.basis``,
``suanli.core.speed``): the GPU models of its own machines (for ITP the derived V100
cluster), but for Azure LLM a V100, the GPU its modelled runtimes are stated for. A CSV
file takes the declaration of its kind, with the machines it is replayed with.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from suanli.core.model import ClusterSpec, Job
from suanli.core.speed import REFERENCE, SpeedBasis, native_basis
from suanli.traces.azure_llm import AZURE_BASIS, azure_llm_cluster, load_azure_llm
from suanli.traces.azure_llm import COLUMNS as AZURE_COLUMNS
from suanli.traces.base import TraceJobs
from suanli.traces.errors import SkipReport, TraceFormatError, TraceUseError, UnknownTraceError
from suanli.traces.itp import JOB_COLUMNS as ITP_COLUMNS
from suanli.traces.itp import itp_cluster, load_itp_jobs
from suanli.traces.locate import find_trace_dir
from suanli.traces.openb import NODE_COLUMNS as OPENB_NODE_COLUMNS
from suanli.traces.openb import POD_COLUMNS, load_openb_nodes, load_openb_pods
from suanli.traces.pai2020 import MACHINE_COLUMNS as PAI_COLUMNS
from suanli.traces.pai2020 import load_pai2020_machines
from suanli.traces.philly import JOB_COLUMNS as PHILLY_COLUMNS
from suanli.traces.philly import MACHINE_COLUMNS as PHILLY_MACHINE_COLUMNS
from suanli.traces.philly import load_philly_jobs, load_philly_machines
from suanli.traces.philly_users import JOB_COLUMNS as PHILLY_USER_COLUMNS
from suanli.traces.philly_users import load_philly_user_jobs
from suanli.traces.spot2026 import NODE_COLUMNS as SPOT_COLUMNS
from suanli.traces.spot2026 import load_spot2026_nodes
from suanli.traces.table import read_header

CITATIONS: Mapping[str, str] = {
    "openb": (
        "Alibaba GPU cluster trace 2023 (openb; alibaba/clusterdata, cluster-trace-gpu-v2023): "
        'Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with '
        'Fragmentation Gradient Descent", USENIX ATC 2023'
    ),
    "philly": (
        'Microsoft Philly trace (msr-fiddle/philly-traces): Jeon et al., "Analysis of '
        'Large-Scale Multi-Tenant GPU Clusters for DNN Training Workloads", USENIX ATC 2019; '
        "jobs as processed by the Pollux artifact (petuum/adaptdl), Qiao et al., OSDI 2021"
    ),
    "philly-users": (
        "Microsoft Philly trace with user ids (the latest 15,000 jobs, as cut by "
        "DIR-LAB/Gen-Parallel-Workloads, Philly/training_data/philly_data_training.csv): Jeon "
        'et al., "Analysis of Large-Scale Multi-Tenant GPU Clusters for DNN Training '
        'Workloads", USENIX ATC 2019'
    ),
    "itp": (
        "Microsoft ITP traces from the ElasticFlow artifact (microsoft/elasticflow-traces): "
        'Gu et al., "ElasticFlow: An Elastic Serverless Training Platform for Distributed '
        'Deep Learning", ASPLOS 2023'
    ),
    "pai2020": (
        "Alibaba PAI GPU cluster trace 2020 (alibaba/clusterdata, cluster-trace-gpu-v2020): "
        'Weng et al., "MLaaS in the Wild: Workload Analysis and Scheduling in Large-Scale '
        'Heterogeneous GPU Clusters", NSDI 2022'
    ),
    "spot2026": (
        "Alibaba spot-GPU trace 2026 (alibaba/clusterdata, cluster-trace-v2026-spot-gpu): "
        'Duan et al., "GFS: A Preemptive Scheduling Framework for GPU Clusters with '
        'Predictive Spot Management", ASPLOS 2026'
    ),
    "azure-llm": (
        "Azure LLM inference trace 2023 (Azure/AzurePublicDataset): Patel et al., "
        '"Splitwise: Efficient Generative LLM Inference Using Phase Splitting", ISCA 2024'
    ),
}

OPENB_VARIANTS = ("default", "gpushare40", "cpu050", "multigpu20")
ITP_VARIANTS = tuple(f"cluster{i:02d}" for i in range(1, 11))
AZURE_VARIANTS = ("code", "conv")

OPENB_NODES = Path("openb") / "openb_node_list_all_node.csv"
OPENB_GPU_NODES = Path("openb") / "openb_node_list_gpu_node.csv"
PHILLY_JOBS = Path("philly") / "philly_jobs.csv"
PHILLY_MACHINES = Path("philly") / "cluster_machine_list.csv"
PHILLY_USER_JOBS = Path("philly-users") / "philly_data_training.csv"
PAI_MACHINES = Path("pai2020") / "pai_machine_spec.csv"
SPOT_NODES = Path("alibaba-spot-2026") / "node_info_df.csv"


@dataclass(frozen=True, eq=False)
class LoadedTrace:
    """A trace ready to simulate: its jobs, the cluster they ran on, and where they came from.

    ``spec`` is the resolved spec (``openb:default``, or the file path); ``skipped`` the
    combined report of the files read (None unless ``skip_bad_rows``); ``source`` the
    citation; ``files`` the files read, jobs first. ``basis`` is what the jobs' runtimes
    were measured on (``suanli.core.speed``): the trace's native GPU models, for
    ``simulate(..., speed_basis=trace.basis)``; replayed on ``cluster`` (every model native,
    but Azure's) the durations are the recorded ones. ``kind`` is the trace family.
    """

    spec: str
    jobs: list[Job]
    cluster: ClusterSpec
    skipped: SkipReport | None
    source: str
    files: tuple[Path, ...]
    basis: SpeedBasis = REFERENCE
    kind: str = ""
    """The trace family (``philly``, ``philly-users``, ``openb``, ``itp``, ``azure-llm``),
    whether named or read from a CSV path; what its defaults (e.g. its jobs' GPU duty) key on."""

    def with_native(self, models: Iterable[str]) -> LoadedTrace:
        """This trace with ``models`` declared its native GPU models, their GPU-weighted
        speed taken on the trace's own machines; ``SpecError`` for a name that is not a GPU
        model of them."""
        return replace(self, basis=native_basis(self.cluster, models))


def own_basis(cluster: ClusterSpec) -> SpeedBasis:
    """The basis of a trace recorded on ``cluster``: every GPU model of it native (the
    reference basis for a cluster without GPUs, where speeds play no part)."""
    return native_basis(cluster) if cluster.total_gpus else REFERENCE


def trace_names() -> tuple[str, ...]:
    """Every trace spec :func:`resolve_trace` knows by name."""
    return (
        "openb",
        *(f"openb:{v}" for v in OPENB_VARIANTS),
        "philly",
        "philly-users",
        *(f"itp:{v}" for v in ITP_VARIANTS),
        *(f"azure-llm:{v}" for v in AZURE_VARIANTS),
    )


def cluster_names() -> tuple[str, ...]:
    """Every cluster name :func:`resolve_cluster` knows."""
    return (
        "openb",
        "openb-gpu",
        "philly",
        "pai2020",
        "spot2026",
        *(f"itp:{v}" for v in ITP_VARIANTS),
        "azure-llm",
    )


def _short_trace_names() -> tuple[str, ...]:
    return (
        "openb",
        *(f"openb:{v}" for v in OPENB_VARIANTS[1:]),
        "philly",
        "philly-users",
        "itp:cluster01..itp:cluster10",
        *(f"azure-llm:{v}" for v in AZURE_VARIANTS),
        "or the path of a CSV file",
    )


def _looks_like_path(spec: str) -> bool:
    return "/" in spec or "\\" in spec or spec.lower().endswith(".csv") or Path(spec).is_file()


def _itp_variant(variant: str) -> str:
    v = variant.lower().removeprefix("cluster")
    if v.isdigit() and 1 <= int(v) <= len(ITP_VARIANTS):
        return f"cluster{int(v):02d}"
    raise UnknownTraceError(f"unknown ITP cluster {variant!r}", [f"itp:{v}" for v in ITP_VARIANTS])


# ------------------------------------------------------------------------------------------
# Traces by name
# ------------------------------------------------------------------------------------------


def _openb(variant: str, root: Path, skip: bool) -> LoadedTrace:
    if variant not in OPENB_VARIANTS:
        raise UnknownTraceError(
            f"unknown openb pod list {variant!r}", [f"openb:{v}" for v in OPENB_VARIANTS]
        )
    if variant == "multigpu20":
        raise TraceUseError(
            "openb:multigpu20 has no creation or deletion times, so it has no schedule to "
            "replay; load it with suanli.traces.load_openb_pods(path).to_jobs("
            "arrival_interval=..., untimed_runtime=...) to choose one"
        )
    pods_file = root / "openb" / f"openb_pod_list_{variant}.csv"
    pods = load_openb_pods(pods_file, skip_bad_rows=skip)
    return _openb_loaded(f"openb:{variant}", pods_file, pods.to_jobs(), root / OPENB_NODES, skip)


def _openb_loaded(
    spec: str, pods_file: Path, jobs: TraceJobs, nodes_file: Path, skip: bool
) -> LoadedTrace:
    cluster = load_openb_nodes(nodes_file, skip_bad_rows=skip)
    return LoadedTrace(
        spec,
        jobs,
        cluster,
        SkipReport.combine([jobs.skipped, cluster.skipped]),
        CITATIONS["openb"],
        (pods_file, nodes_file),
        own_basis(cluster),
        kind="openb",
    )


def _philly(variant: str, root: Path, skip: bool) -> LoadedTrace:
    if variant:
        raise UnknownTraceError(f"philly has no variant {variant!r}", ("philly",))
    return _philly_loaded("philly", root / PHILLY_JOBS, root / PHILLY_MACHINES, skip)


def _philly_loaded(spec: str, jobs_file: Path, machines_file: Path, skip: bool) -> LoadedTrace:
    jobs = load_philly_jobs(jobs_file, skip_bad_rows=skip)
    cluster = load_philly_machines(machines_file, skip_bad_rows=skip)
    return LoadedTrace(
        spec,
        jobs,
        cluster,
        SkipReport.combine([jobs.skipped, cluster.skipped]),
        CITATIONS["philly"],
        (jobs_file, machines_file),
        own_basis(cluster),
        kind="philly",
    )


def _philly_users(variant: str, root: Path, skip: bool) -> LoadedTrace:
    if variant:
        raise UnknownTraceError(f"philly-users has no variant {variant!r}", ("philly-users",))
    return _philly_users_loaded(
        "philly-users", root / PHILLY_USER_JOBS, root / PHILLY_MACHINES, skip
    )


def _philly_users_loaded(
    spec: str, jobs_file: Path, machines_file: Path, skip: bool
) -> LoadedTrace:
    jobs = load_philly_user_jobs(jobs_file, skip_bad_rows=skip)
    cluster = load_philly_machines(machines_file, skip_bad_rows=skip)
    return LoadedTrace(
        spec,
        jobs,
        cluster,
        SkipReport.combine([jobs.skipped, cluster.skipped]),
        CITATIONS["philly-users"],
        (jobs_file, machines_file),
        own_basis(cluster),
        kind="philly-users",
    )


def _itp(variant: str, root: Path, skip: bool) -> LoadedTrace:
    if not variant:
        raise UnknownTraceError(
            "itp needs one of its ten clusters, e.g. itp:cluster04",
            [f"itp:{v}" for v in ITP_VARIANTS],
        )
    name = _itp_variant(variant)
    return _itp_loaded(f"itp:{name}", root / "itp" / f"{name}.csv", skip)


def _itp_loaded(spec: str, jobs_file: Path, skip: bool) -> LoadedTrace:
    jobs = load_itp_jobs(jobs_file, skip_bad_rows=skip)
    if not jobs:
        raise TraceUseError(f"{jobs_file.name}: no jobs to size a cluster for")
    cluster = itp_cluster(jobs, name=f"itp-{jobs_file.stem}")
    return LoadedTrace(
        spec,
        jobs,
        cluster,
        jobs.skipped,
        CITATIONS["itp"],
        (jobs_file,),
        own_basis(cluster),
        kind="itp",
    )


def _azure(variant: str, root: Path, skip: bool) -> LoadedTrace:
    if variant not in AZURE_VARIANTS:
        raise UnknownTraceError(
            f"azure-llm needs a service, not {variant!r}",
            [f"azure-llm:{v}" for v in AZURE_VARIANTS],
        )
    path = root / "azure-llm-2023" / f"AzureLLMInferenceTrace_{variant}.csv"
    return _azure_loaded(f"azure-llm:{variant}", path, skip)


def _azure_loaded(spec: str, path: Path, skip: bool) -> LoadedTrace:
    requests = load_azure_llm(path, skip_bad_rows=skip)
    jobs = requests.to_jobs()
    return LoadedTrace(
        spec,
        jobs,
        azure_llm_cluster(),
        jobs.skipped,
        CITATIONS["azure-llm"],
        (path,),
        AZURE_BASIS,
        kind="azure-llm",
    )


_TRACES: Mapping[str, tuple[str, Callable[[str, Path, bool], LoadedTrace]]] = {
    "openb": ("default", _openb),
    "philly": ("", _philly),
    "philly-users": ("", _philly_users),
    "itp": ("", _itp),
    "azure-llm": ("", _azure),
}


# ------------------------------------------------------------------------------------------
# Files recognised by their header
# ------------------------------------------------------------------------------------------

_KINDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("openb-pods", POD_COLUMNS),
    ("philly-jobs", PHILLY_COLUMNS),
    ("philly-user-jobs", PHILLY_USER_COLUMNS),
    ("itp-jobs", ITP_COLUMNS),
    ("azure-llm", AZURE_COLUMNS),
    ("openb-nodes", OPENB_NODE_COLUMNS),
    ("philly-machines", PHILLY_MACHINE_COLUMNS),
    ("pai2020-machines", PAI_COLUMNS),
    ("spot2026-nodes", SPOT_COLUMNS),
)
JOB_KINDS = ("openb-pods", "philly-jobs", "philly-user-jobs", "itp-jobs", "azure-llm")


def file_kind(path: str | Path) -> str:
    """What a trace file holds, from its header: ``openb-pods``, ``philly-jobs``,
    ``philly-user-jobs``, ``itp-jobs``, ``azure-llm``, ``openb-nodes``, ``philly-machines``, ``pai2020-machines``
    or ``spot2026-nodes``. Raises :class:`TraceFormatError` for a header none matches."""
    p = Path(path)
    header = set(read_header(p))
    for kind, columns in _KINDS:
        if header.issuperset(columns):
            return kind
    known = "; ".join(f"{k}: {', '.join(c)}" for k, c in _KINDS)
    raise TraceFormatError(p, 1, f"header matches no known trace format ({known})")


def _beside_or_in(path: Path, relative: Path, trace_dir: str | Path | None) -> Path:
    """``relative``'s file name beside ``path`` if there, else ``relative`` in the trace dir."""
    sibling = path.parent / relative.name
    if sibling.is_file():
        return sibling
    return find_trace_dir(trace_dir) / relative


def _from_file(path: Path, trace_dir: str | Path | None, skip: bool) -> LoadedTrace:
    kind = file_kind(path)
    spec = str(path)
    if kind == "openb-pods":
        pods = load_openb_pods(path, skip_bad_rows=skip)
        if not pods.timed:
            raise TraceUseError(
                f"{path.name} has no creation or deletion times; load it with "
                "load_openb_pods(path).to_jobs(arrival_interval=..., untimed_runtime=...)"
            )
        nodes = _beside_or_in(path, OPENB_NODES, trace_dir)
        return _openb_loaded(spec, path, pods.to_jobs(), nodes, skip)
    if kind == "philly-jobs":
        return _philly_loaded(spec, path, _beside_or_in(path, PHILLY_MACHINES, trace_dir), skip)
    if kind == "philly-user-jobs":
        machines = _beside_or_in(path, PHILLY_MACHINES, trace_dir)
        return _philly_users_loaded(spec, path, machines, skip)
    if kind == "itp-jobs":
        return _itp_loaded(spec, path, skip)
    if kind == "azure-llm":
        return _azure_loaded(spec, path, skip)
    raise TraceUseError(f"{path.name} is a machine list ({kind}), not jobs: use it as a cluster")


def resolve_trace(
    spec: str,
    trace_dir: str | Path | None = None,
    skip_bad_rows: bool = False,
    native: Iterable[str] | None = None,
) -> LoadedTrace:
    """Jobs and cluster for a trace spec (see the module docstring) or a CSV file path.

    Names are case-insensitive. ``trace_dir`` is passed to :func:`find_trace_dir` when a
    named trace (or the machine list of a file's trace) is read. For a file, the machine list
    beside it is used if present (``openb_node_list_all_node.csv``,
    ``cluster_machine_list.csv``), else the trace directory's.

    The result's ``basis``, the hardware the runtimes were measured on: every GPU model of the trace's
    own machines (Philly, philly-users, openb; ITP's derived V100 cluster), a V100 for Azure
    LLM (its runtimes are modelled for one). ``native`` overrides it with GPU models of the
    trace's own machines (``LoadedTrace.with_native``; an unknown name is a ``SpecError``).
    """
    loaded = _resolve(spec, trace_dir, skip_bad_rows)
    return loaded if native is None else loaded.with_native(native)


def _resolve(spec: str, trace_dir: str | Path | None, skip_bad_rows: bool) -> LoadedTrace:
    name, _, variant = spec.strip().partition(":")
    entry = _TRACES.get(name.lower())
    if entry is not None:
        default, load = entry
        return load(variant.lower() or default, find_trace_dir(trace_dir), skip_bad_rows)
    if _looks_like_path(spec):
        path = Path(spec).expanduser()
        if not path.is_file():
            raise TraceUseError(f"trace file not found: {path}")
        return _from_file(path, trace_dir, skip_bad_rows)
    raise UnknownTraceError(f"unknown trace {spec!r}", _short_trace_names())


_CLUSTERS: Mapping[str, tuple[Path, Callable[..., ClusterSpec]]] = {
    "openb": (OPENB_NODES, load_openb_nodes),
    "openb-gpu": (OPENB_GPU_NODES, load_openb_nodes),
    "philly": (PHILLY_MACHINES, load_philly_machines),
    "pai2020": (PAI_MACHINES, load_pai2020_machines),
    "spot2026": (SPOT_NODES, load_spot2026_nodes),
}

_CLUSTER_LOADERS: Mapping[str, Callable[..., ClusterSpec]] = {
    "openb-nodes": load_openb_nodes,
    "philly-machines": load_philly_machines,
    "pai2020-machines": load_pai2020_machines,
    "spot2026-nodes": load_spot2026_nodes,
}


def resolve_cluster(
    spec: str, trace_dir: str | Path | None = None, skip_bad_rows: bool = False
) -> ClusterSpec:
    """A trace's cluster by name (``openb``, ``openb-gpu``, ``philly``, ``pai2020``,
    ``spot2026``; also ``itp:clusterNN``, derived from that cluster's jobs, and
    ``azure-llm``, the replay default) or from a machine-list CSV file.

    The result is a :class:`~suanli.traces.base.TraceCluster` whose ``skipped`` holds the
    skip report when ``skip_bad_rows`` is set.
    """
    key = spec.strip().lower()
    entry = _CLUSTERS.get(key)
    if entry is not None:
        rel, load = entry
        return load(find_trace_dir(trace_dir) / rel, name=key, skip_bad_rows=skip_bad_rows)
    name, _, variant = key.partition(":")
    if name == "itp" and variant:
        return resolve_trace(f"itp:{variant}", trace_dir, skip_bad_rows).cluster
    if key == "azure-llm":
        return azure_llm_cluster()
    if _looks_like_path(spec):
        path = Path(spec.strip()).expanduser()
        if not path.is_file():
            raise TraceUseError(f"cluster file not found: {path}")
        kind = file_kind(path)
        loader = _CLUSTER_LOADERS.get(kind)
        if loader is None:
            raise TraceUseError(f"{path.name} holds jobs ({kind}), not machines: use it as a trace")
        return loader(path, name=path.stem, skip_bad_rows=skip_bad_rows)
    raise UnknownTraceError(
        f"unknown cluster {spec!r}",
        (
            "openb",
            "openb-gpu",
            "philly",
            "pai2020",
            "spot2026",
            "itp:cluster01..itp:cluster10",
            "azure-llm",
            "or the path of a machine-list CSV file",
        ),
    )

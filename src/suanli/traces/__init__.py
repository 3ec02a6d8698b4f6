"""Readers of public GPU-cluster traces, mapped into the core model.

Each reader takes a file path and returns model values (jobs, clusters) or a columnar view
of the file; every assumption a mapping needs is a keyword argument with a documented
default (``docs/traces.md``). Bad rows raise :class:`TraceFormatError` naming the file,
line and column; with ``skip_bad_rows=True`` they are skipped and counted in a
:class:`SkipReport` instead, never dropped silently.

>>> from suanli.traces import resolve_trace
>>> t = resolve_trace("philly")            # doctest: +SKIP
>>> len(t.jobs), t.cluster.total_gpus      # doctest: +SKIP
(82247, 2490)
"""

from suanli.traces.azure_llm import LlmRequests, azure_llm_cluster, load_azure_llm
from suanli.traces.base import TraceCluster, TraceJobs, gang_split, resolve_gpu_model
from suanli.traces.catalogue import (
    CITATIONS,
    LoadedTrace,
    cluster_names,
    file_kind,
    resolve_cluster,
    resolve_trace,
    trace_names,
)
from suanli.traces.errors import (
    MissingColumnsError,
    SkipReport,
    TraceFormatError,
    TraceNotFoundError,
    TraceUseError,
    UnknownTraceError,
)
from suanli.traces.itp import itp_cluster, itp_node_count, load_itp_jobs
from suanli.traces.locate import ENV_VAR, find_trace_dir
from suanli.traces.openb import (
    OPENB_GPU_MODELS,
    OPENB_QOS_CLASSES,
    OpenbPods,
    load_openb_nodes,
    load_openb_pods,
)
from suanli.traces.pai2020 import PAI2020_GPU_MODELS, load_pai2020_machines
from suanli.traces.philly import PHILLY_GPU_MODELS, load_philly_jobs, load_philly_machines
from suanli.traces.philly_users import load_philly_user_jobs
from suanli.traces.spot2026 import SPOT2026_GPU_MODELS, load_spot2026_nodes

__all__ = [
    "CITATIONS",
    "ENV_VAR",
    "OPENB_GPU_MODELS",
    "OPENB_QOS_CLASSES",
    "PAI2020_GPU_MODELS",
    "PHILLY_GPU_MODELS",
    "SPOT2026_GPU_MODELS",
    "LlmRequests",
    "LoadedTrace",
    "MissingColumnsError",
    "OpenbPods",
    "SkipReport",
    "TraceCluster",
    "TraceFormatError",
    "TraceJobs",
    "TraceNotFoundError",
    "TraceUseError",
    "UnknownTraceError",
    "azure_llm_cluster",
    "cluster_names",
    "file_kind",
    "find_trace_dir",
    "gang_split",
    "itp_cluster",
    "itp_node_count",
    "load_azure_llm",
    "load_itp_jobs",
    "load_openb_nodes",
    "load_openb_pods",
    "load_pai2020_machines",
    "load_philly_jobs",
    "load_philly_machines",
    "load_philly_user_jobs",
    "load_spot2026_nodes",
    "resolve_cluster",
    "resolve_gpu_model",
    "resolve_trace",
    "trace_names",
]

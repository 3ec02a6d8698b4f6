"""Workloads: the built-in seeded synthetic generator (calibrated to public traces).

See ``suanli.workload.synthetic`` (the generator), ``suanli.workload.calibration`` (the
figures taken from the traces) and ``docs/workload.md``.
"""

from suanli.workload.calibration import PHILLY_RUNTIME, QuantileTable, RuntimeModel
from suanli.workload.info import WorkloadInfo
from suanli.workload.synthetic import (
    WorkloadConfig,
    generate,
    generate_with_info,
    offered_load,
    tenant_paths,
)

__all__ = [
    "PHILLY_RUNTIME",
    "QuantileTable",
    "RuntimeModel",
    "WorkloadConfig",
    "WorkloadInfo",
    "generate",
    "generate_with_info",
    "offered_load",
    "tenant_paths",
]

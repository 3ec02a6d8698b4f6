"""Workloads: the built-in seeded synthetic generator (calibrated to public traces).

See ``suanli.workload.synthetic`` and ``docs/workload.md``.
"""

from suanli.workload.synthetic import (
    PHILLY_RUNTIME,
    QuantileTable,
    RuntimeModel,
    WorkloadConfig,
    generate,
    offered_load,
    tenant_paths,
)

__all__ = [
    "PHILLY_RUNTIME",
    "QuantileTable",
    "RuntimeModel",
    "WorkloadConfig",
    "generate",
    "offered_load",
    "tenant_paths",
]

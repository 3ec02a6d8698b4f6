"""Hypothesis strategies shared by several test modules."""

from __future__ import annotations

from hypothesis import strategies as st

from builders import gpus_cluster, job
from suanli.core.model import ClusterSpec, Job


@st.composite
def backfill_workloads(draw: st.DrawFn) -> tuple[ClusterSpec, list[Job]]:
    gpus = draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
    spec = gpus_cluster(*gpus)
    jobs = [
        job(
            f"j{i:02d}",
            submit=float(draw(st.integers(0, 500))),
            runtime=float(draw(st.integers(1, 2000))),
            gpus=draw(st.integers(1, min(gpus))),
            tasks=draw(st.integers(1, len(gpus))),
        )
        for i in range(draw(st.integers(1, 14)))
    ]
    return spec, jobs

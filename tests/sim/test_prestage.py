"""Pre-staging in the simulator: a job the plan expects to start soon is prepared before its
GPUs are free, and starts with its start-up delay cut by the time it was staged."""

from __future__ import annotations

import numpy as np
import pytest

from builders import cluster, job, node
from suanli.core.model import SpecError
from suanli.sim.engine import PolicySet, simulate


def busy_queue(n: int = 60) -> list:  # type: ignore[type-arg]
    """Four GPUs, a 600 s job every 100 s from one user: a queue that never empties."""
    return [job(f"j{k:02d}", 100.0 * k, 600.0, user="u") for k in range(n)]


def run(prestage: bool):  # type: ignore[no-untyped-def]
    return simulate(cluster(node("n0", 4)), busy_queue(), PolicySet.parse("fifo+best-fit"),
                    startup_s=120.0, prestage=prestage)  # fmt: skip


def test_staged_jobs_start_without_their_delay_and_free_gpu_time() -> None:
    plain, staged = run(False), run(True)
    paid0, saved0 = plain.records.startup_paid, plain.records.startup_saved
    paid1, saved1 = staged.records.startup_paid, staged.records.startup_saved
    assert paid0 is not None and saved0 is not None and paid1 is not None and saved1 is not None
    # Without it every attempt pays the whole 120 s on its GPUs.
    assert bool((paid0 == 120.0).all()) and not saved0.any()
    # With it, once the predictor knows the 600 s runtime, the jobs that waited were staged
    # in time: most start with nothing left to pay; what was paid and saved adds up.
    np.testing.assert_allclose(paid1 + saved1, 120.0)
    waited = staged.records.start - staged.records.submit > 120.0
    assert waited.sum() > 20 and float(np.median(saved1[waited])) == 120.0
    # Saved start-up is GPU time given back: every job's hold is shorter, and the queue
    # moves sooner.
    assert staged.records.held_s.sum() < plain.records.held_s.sum() - 20 * 120.0
    assert staged.jct.mean < plain.jct.mean


def test_bad_settings_are_refused() -> None:
    c, jobs = cluster(node("n0", 4)), busy_queue(3)
    with pytest.raises(SpecError, match="startup_s must be >= 0"):
        simulate(c, jobs, PolicySet.parse("fifo+best-fit"), startup_s=-1.0)
    with pytest.raises(SpecError, match="prestage needs a start-up delay"):
        simulate(c, jobs, PolicySet.parse("fifo+best-fit"), prestage=True)

"""runtime/estimate and runtime/oracle: how long a job is expected to run."""

from __future__ import annotations

import pytest

from builders import job
from suanli.core.model import SpecError
from suanli.core.registry import create


def test_the_estimate_is_the_users_else_a_default() -> None:
    est = create("runtime", "estimate")
    assert est.duration(job("a", runtime=50.0, estimate=80.0)) == 80.0
    assert est.duration(job("b", runtime=50.0)) == 86_400.0  # Slurm's DefaultTime's part
    assert create("runtime", "estimate", default=600.0).duration(job("c")) == 600.0
    with pytest.raises(SpecError, match="default must be >= 0"):
        create("runtime", "estimate", default=-1.0)


def test_the_oracle_knows_the_true_runtime() -> None:
    assert create("runtime", "oracle").duration(job("a", runtime=50.0, estimate=80.0)) == 50.0

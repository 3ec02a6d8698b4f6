"""GPU duty profiles (suanli.workload.duty), checked against the figures they cite: Jeon et
al.'s means (ATC'19) and the GenAI serving trace itself (read here with the csv module)."""

from __future__ import annotations

import collections
import csv
import os
from pathlib import Path

import numpy as np
import pytest

from suanli.core.model import Job, SpecError, TaskRequest
from suanli.workload.duty import (
    INFERENCE_DUTY,
    INFERENCE_PROBS,
    TRAINING_MEANS,
    apply_duty,
    describe,
    parse_duty,
)

TRACES = Path(os.environ.get("SUANLI_TRACE_DIR", Path(__file__).parents[3] / "shared" / "traces"))
GENAI = TRACES / "genai-2026" / "pod_gpu_duty_cycle_anon.csv"


def _jobs(n: int, gpus: int, milli: int = 1000) -> list[Job]:
    task = TaskRequest(gpus=1 if milli < 1000 else gpus, gpu_milli=milli)
    return [Job(f"j{i}", float(i), 100.0, task) for i in range(n)]


@pytest.mark.parametrize(
    ("size", "mean"),
    [(1, 0.5238), (2, 0.4518), (4, 0.4518), (8, 0.5863), (16, 0.4043), (64, 0.4043)],
)
def test_training_means_are_jeon_et_al_by_job_size(size: int, mean: float) -> None:
    jobs = apply_duty(_jobs(20000, size), parse_duty("training"), seed=1)
    duty = np.array([j.gpu_util for j in jobs])
    assert duty.mean() == pytest.approx(mean, abs=0.01)
    assert 0 <= duty.min() and duty.max() <= 1


def test_inference_quantiles_match_the_genai_trace() -> None:
    if not GENAI.exists():
        pytest.skip(f"the GenAI serving trace is absent ({GENAI}); set SUANLI_TRACE_DIR")
    samples: dict[str, list[float]] = collections.defaultdict(list)
    with GENAI.open() as f:
        for row in csv.DictReader(f):
            samples[row["container_ip"]].append(float(row["value"]) / 100)
    means = np.array([np.mean(v) for v in samples.values()])
    assert len(means) == 143
    assert np.concatenate([np.array(v) for v in samples.values()]).mean() == pytest.approx(
        0.0703, abs=5e-4
    )
    assert np.quantile(means, INFERENCE_PROBS) == pytest.approx(np.array(INFERENCE_DUTY), abs=1e-4)


def test_inference_draws_reproduce_the_table() -> None:
    jobs = apply_duty(_jobs(50000, 1, milli=500), parse_duty("inference"), seed=2)
    duty = np.array([j.gpu_util for j in jobs])
    assert np.median(duty) == pytest.approx(0.0578, abs=0.002)
    assert duty.max() <= max(INFERENCE_DUTY)


def test_sharing_constant_beta_and_declared() -> None:
    jobs = _jobs(5000, 1, milli=300)
    assert {j.gpu_util for j in apply_duty(jobs, parse_duty("sharing"), 0)} == {1.0}
    whole = np.array([j.gpu_util for j in apply_duty(_jobs(5000, 1), parse_duty("sharing"), 0)])
    assert whole.mean() == pytest.approx(0.5238, abs=0.02)
    assert {j.gpu_util for j in apply_duty(jobs, parse_duty("constant:0.25"), 0)} == {0.25}
    beta = np.array([j.gpu_util for j in apply_duty(jobs, parse_duty("beta:0.3,8"), 0)])
    assert beta.mean() == pytest.approx(0.3, abs=0.01)
    declared = [j.gpu_util for j in apply_duty(jobs, parse_duty("declared"), 0)]
    assert declared == [j.gpu_util for j in jobs]
    assert "constant:0.25" in describe(
        apply_duty(jobs, parse_duty("constant:0.25"), 0), parse_duty("constant:0.25")
    )


def test_cpu_only_jobs_keep_duty_one() -> None:
    jobs = [Job("c", 0.0, 10.0, TaskRequest(gpus=0, cpu_milli=1000))]
    assert apply_duty(jobs, parse_duty("constant:0.1"), 0)[0].gpu_util == 1.0


def test_same_seed_same_duties() -> None:
    jobs = _jobs(100, 1)
    a = apply_duty(jobs, parse_duty("training"), 7)
    assert a == apply_duty(jobs, parse_duty("training"), 7)
    assert a != apply_duty(jobs, parse_duty("training"), 8)


@pytest.mark.parametrize(
    "bad", ["busy", "constant:1.5", "constant:x", "beta:0,4", "beta:0.5", "beta:0.5,-1"]
)
def test_bad_profiles_name_the_known_ones(bad: str) -> None:
    with pytest.raises(SpecError, match="known profiles are training, inference"):
        parse_duty(bad)


def test_trace_defaults() -> None:
    from suanli.workload.duty import trace_default

    assert trace_default("philly").kind == "training"
    assert trace_default("openb:gpushare40").kind == "sharing"
    assert trace_default("azure-llm:code").kind == "inference"
    assert trace_default("/data/my.csv").kind == "declared"


def test_training_table_sizes() -> None:
    assert [s for s, _ in TRAINING_MEANS] == [1, 4, 8, 16]

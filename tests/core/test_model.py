"""Domain values: validation (every bad value is a SpecError naming it) and derived values."""

from __future__ import annotations

import math

import pytest

from builders import V100, cluster, node, task
from suanli.core.model import (
    KNOWN_GPU_MODELS,
    MILLI,
    OUTCOMES,
    ClusterSpec,
    GpuModel,
    Job,
    NodeSpec,
    SpecError,
    TaskRequest,
)

# (id, constructor, substring the message must contain)
BAD = [
    ("model-no-name", lambda: GpuModel("", 1024), "name"),
    ("model-zero-memory", lambda: GpuModel("X", 0), "memory_mib"),
    ("model-negative-memory", lambda: GpuModel("X", -1), "memory_mib"),
    ("model-zero-speed", lambda: GpuModel("X", 1024, 0.0), "speed"),
    ("model-negative-speed", lambda: GpuModel("X", 1024, -1.0), "speed"),
    ("model-nan-speed", lambda: GpuModel("X", 1024, math.nan), "speed"),
    ("node-negative-gpus", lambda: NodeSpec("n", -1, V100, 1, 1), "gpus"),
    ("node-gpus-without-model", lambda: NodeSpec("n", 2, None, 1, 1), "GPU model"),
    ("node-negative-cpu", lambda: NodeSpec("n", 1, V100, -1, 1), "cpu"),
    ("node-negative-memory", lambda: NodeSpec("n", 1, V100, 1, -1), "memory"),
    ("cluster-no-nodes", lambda: ClusterSpec("c", ()), "no nodes"),
    ("cluster-duplicate-node", lambda: cluster(node("a"), node("a")), "duplicate node name 'a'"),
    ("task-negative-gpus", lambda: TaskRequest(gpus=-1), "gpus"),
    ("task-cpu-only-with-share", lambda: TaskRequest(gpus=0, gpu_milli=500), "CPU-only"),
    ("task-cpu-only-with-gpu-memory", lambda: TaskRequest(gpus=0, gpu_memory_mib=10), "CPU-only"),
    ("task-zero-milli", lambda: TaskRequest(gpus=1, gpu_milli=0), "gpu_milli"),
    ("task-milli-over-1000", lambda: TaskRequest(gpus=1, gpu_milli=1001), "gpu_milli"),
    ("task-fraction-of-two-gpus", lambda: TaskRequest(gpus=2, gpu_milli=500), "fractional"),
    ("task-negative-cpu", lambda: TaskRequest(cpu_milli=-1), "cpu"),
    ("task-negative-memory", lambda: TaskRequest(memory_mib=-1), "memory"),
    ("task-negative-gpu-memory", lambda: TaskRequest(gpu_memory_mib=-1), "GPU memory"),
    ("job-no-id", lambda: Job("", 0, 1), "id"),
    ("job-zero-tasks", lambda: Job("j", 0, 1, tasks=0), "tasks"),
    ("job-gang-min-over-tasks", lambda: Job("j", 0, 1, tasks=2, gang_min=3), "gang_min"),
    ("job-negative-gang-min", lambda: Job("j", 0, 1, gang_min=-1), "gang_min"),
    ("job-negative-runtime", lambda: Job("j", 0, -1), "runtime"),
    ("job-nan-runtime", lambda: Job("j", 0, math.nan), "runtime"),
    ("job-negative-submit", lambda: Job("j", -1, 1), "submit"),
    ("job-nan-submit", lambda: Job("j", math.nan, 1), "submit"),
    ("job-negative-estimate", lambda: Job("j", 0, 1, estimate=-1), "estimate"),
    ("job-util-over-one", lambda: Job("j", 0, 1, gpu_util=1.5), "gpu_util"),
    ("job-util-negative", lambda: Job("j", 0, 1, gpu_util=-0.1), "gpu_util"),
    ("job-util-nan", lambda: Job("j", 0, 1, gpu_util=math.nan), "gpu_util"),
    ("job-unknown-outcome", lambda: Job("j", 0, 1, outcome="Pass"), "job j: outcome"),
    ("job-outcome-case", lambda: Job("j", 0, 1, outcome="Killed"), "'Killed'"),
]


@pytest.mark.parametrize("make, needle", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_value_is_a_spec_error_naming_it(make, needle) -> None:
    with pytest.raises(SpecError) as err:
        make()
    assert needle in str(err.value)


def test_spec_error_is_a_value_error() -> None:
    assert issubclass(SpecError, ValueError)


GOOD = [
    ("cpu-only-default-milli", lambda: TaskRequest(gpus=0)),
    ("cpu-only-zero-milli", lambda: TaskRequest(gpus=0, gpu_milli=0, cpu_milli=500)),
    ("fraction-1-milli", lambda: TaskRequest(gpus=1, gpu_milli=1)),
    ("job-gang-min-equals-tasks", lambda: Job("j", 0, 1, tasks=3, gang_min=3)),
    ("job-zero-runtime", lambda: Job("j", 0, 0)),
    ("job-util-bounds", lambda: Job("j", 0, 1, gpu_util=0.0)),
    ("job-outcome-killed", lambda: Job("j", 0, 1, outcome="killed")),
    ("node-without-gpus", lambda: NodeSpec("n", 0, None, 0, 0)),
]


@pytest.mark.parametrize("make", [g[1] for g in GOOD], ids=[g[0] for g in GOOD])
def test_edge_values_are_accepted(make) -> None:
    make()


# (id, task, fractional, gpu_share_milli)
TASKS = [
    ("one-whole", task(1), False, 1000),
    ("three-whole", task(3), False, 3000),
    ("half", task(1, 500), True, 500),
    ("tiny", task(1, 1), True, 1),
    ("cpu-only", task(0, cpu=2000), False, 0),
    ("cpu-only-zero-milli", TaskRequest(gpus=0, gpu_milli=0), False, 0),
]


@pytest.mark.parametrize("t, fractional, share", [x[1:] for x in TASKS], ids=[x[0] for x in TASKS])
def test_task_derived_values(t: TaskRequest, fractional: bool, share: int) -> None:
    assert t.fractional is fractional
    assert t.gpu_share_milli == share


# (id, job, min_tasks, gpu_demand_milli)
JOBS = [
    ("single", Job("j", 0, 1), 1, 1000),
    ("gang-all", Job("j", 0, 1, task=task(2), tasks=4), 4, 8000),
    ("gang-min", Job("j", 0, 1, task=task(2), tasks=4, gang_min=2), 2, 8000),
    ("fractional-gang", Job("j", 0, 1, task=task(1, 250), tasks=3), 3, 750),
    ("cpu-only", Job("j", 0, 1, task=task(0, cpu=1), tasks=5), 5, 0),
]


@pytest.mark.parametrize("j, min_tasks, demand", [x[1:] for x in JOBS], ids=[x[0] for x in JOBS])
def test_job_derived_values(j: Job, min_tasks: int, demand: int) -> None:
    assert j.min_tasks == min_tasks
    assert j.gpu_demand_milli == demand


def test_cpu_only_has_one_encoding() -> None:
    # gpu_milli 0 or 1000 on a CPU-only task: equal requests, one shape.
    a = TaskRequest(gpus=0, gpu_milli=0, cpu_milli=500)
    b = TaskRequest(gpus=0, cpu_milli=500)
    assert a == b and hash(a) == hash(b)


def test_milli_is_one_gpu() -> None:
    assert MILLI == 1000


def test_node_domain_defaults_to_its_name() -> None:
    assert node("n7").domain == "n7"
    assert node("n7", domain="nvl-0").domain == "nvl-0"


def test_cluster_totals_and_models_in_order_of_appearance() -> None:
    a100 = KNOWN_GPU_MODELS["A100"]
    spec = cluster(node("a", 4, a100), node("b", 0, None), node("c", 8, V100), node("d", 2, a100))
    assert spec.total_gpus == 14
    assert [m.name for m in spec.gpu_models] == ["A100", "V100"]


def test_values_are_frozen_and_hashable() -> None:
    t = task(2)
    assert hash(t) == hash(task(2))
    with pytest.raises(AttributeError):
        t.gpus = 3  # type: ignore[misc]
    j = Job("j", 0, 1)
    with pytest.raises(AttributeError):
        j.runtime = 5  # type: ignore[misc]


def test_known_models_are_valid() -> None:
    for name, m in KNOWN_GPU_MODELS.items():
        assert m.name == name and m.memory_mib > 0 and m.speed > 0


def test_job_outcome_is_a_recorded_fact() -> None:
    """Not recorded unless given; kept by ``replace``; one of ``OUTCOMES``."""
    assert OUTCOMES == ("", "completed", "failed", "killed")
    assert Job("j", 0, 1).outcome == ""
    failed = Job("j", 0, 1, outcome="failed")
    assert failed.with_class("spot").outcome == "failed"
    assert [Job("j", 0, 1, outcome=o).outcome for o in OUTCOMES] == list(OUTCOMES)

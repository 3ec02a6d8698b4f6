"""Trace readers against the public traces: the facts their README states.

Skipped, with a message saying where they were looked for, when the traces are absent.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from suanli.core.model import MILLI
from suanli.sim.engine import check_feasible
from suanli.traces import (
    LlmRequests,
    OpenbPods,
    TraceJobs,
    load_azure_llm,
    load_itp_jobs,
    load_openb_nodes,
    load_openb_pods,
    load_pai2020_machines,
    load_philly_jobs,
    load_philly_machines,
    load_philly_user_jobs,
    load_spot2026_nodes,
    resolve_cluster,
    resolve_trace,
)
from support import trace_dir_or_skip


@pytest.fixture(scope="module")
def traces() -> Path:
    return trace_dir_or_skip()


@pytest.fixture(scope="module")
def default_pods(traces: Path) -> OpenbPods:
    return load_openb_pods(traces / "openb" / "openb_pod_list_default.csv")


@pytest.fixture(scope="module")
def philly(traces: Path) -> TraceJobs:
    return load_philly_jobs(traces / "philly" / "philly_jobs.csv", skip_bad_rows=True)


@pytest.fixture(scope="module")
def azure(traces: Path) -> dict[str, LlmRequests]:
    d = traces / "azure-llm-2023"
    return {s: load_azure_llm(d / f"AzureLLMInferenceTrace_{s}.csv") for s in ("code", "conv")}


def test_openb_nodes(traces: Path) -> None:
    c = load_openb_nodes(traces / "openb" / "openb_node_list_all_node.csv")
    assert len(c.nodes) == 1523
    assert sum(n.gpus > 0 for n in c.nodes) == 1213
    assert c.total_gpus == 6212
    g2 = [n for n in c.nodes if n.gpu_model is not None and n.gpu_model.name == "G2"]
    assert (len(g2), sum(n.gpus for n in g2)) == (549, 4392)
    assert {m.name for m in c.gpu_models} == {"G2", "T4", "P100", "G3", "V100M16", "V100M32", "A10"}
    gpu_only = load_openb_nodes(traces / "openb" / "openb_node_list_gpu_node.csv")
    assert (len(gpu_only.nodes), gpu_only.total_gpus) == (1213, 6212)


def test_openb_default_pods(default_pods: OpenbPods) -> None:
    pods = default_pods
    assert len(pods) == 8152
    assert int(pods.fractional.sum()) == 3078
    assert int((pods.num_gpu == 0).sum()) == 1088
    assert pods.qos is not None
    assert Counter(pods.qos) == {"LS": 4647, "BE": 3398, "Burstable": 100, "Guaranteed": 7}
    jobs = pods.to_jobs()
    assert len(jobs) == 8152 and jobs[0].submit == 0.0
    assert Counter(j.priority_class for j in jobs)["online"] == 759  # as in calibration.py
    assert sum(j.task.fractional for j in jobs) == 3078
    assert all(j.runtime >= 1.0 for j in jobs)


def test_openb_other_pod_lists(traces: Path) -> None:
    d = traces / "openb"
    assert len(load_openb_pods(d / "openb_pod_list_gpushare40.csv")) == 8152
    assert len(load_openb_pods(d / "openb_pod_list_cpu050.csv")) == 7439
    multi = load_openb_pods(d / "openb_pod_list_multigpu20.csv")
    assert len(multi) == 8324 and not multi.timed
    with pytest.raises(ValueError, match="no creation or deletion times"):
        multi.to_jobs()


def test_philly_jobs(philly: TraceJobs) -> None:
    assert len(philly) == 82247
    assert philly.skipped is not None and philly.skipped.rows_skipped == 0
    assert len({j.tenant for j in philly}) == 15
    assert sum(j.tasks > 1 for j in philly) == 289  # jobs over 8 GPUs are gangs
    assert max(j.tasks for j in philly) == 16
    assert philly[0].submit == 0.0
    assert all(a.submit <= b.submit for a, b in zip(philly, philly[1:], strict=False))
    gpus = Counter(j.tasks * j.task.gpus for j in philly)
    assert (gpus[1], gpus[2], gpus[4], gpus[8]) == (76627, 1818, 1870, 1643)


def test_philly_machines(traces: Path) -> None:
    c = load_philly_machines(traces / "philly" / "cluster_machine_list.csv")
    assert (len(c.nodes), c.total_gpus) == (552, 2490)
    assert Counter(n.gpus for n in c.nodes) == {2: 321, 8: 231}


def test_itp_jobs(traces: Path) -> None:
    jobs = [load_itp_jobs(traces / "itp" / f"cluster{i:02d}.csv") for i in range(1, 11)]
    assert sum(len(j) for j in jobs) == 69351
    gpu_hours = sum(j.gpu_demand_milli * j.runtime for js in jobs for j in js) / MILLI / 3600
    assert gpu_hours == pytest.approx(1_632_720, abs=1)
    assert max(j.tasks * j.task.gpus for js in jobs for j in js) == 64


def test_pai2020_machines(traces: Path) -> None:
    c = load_pai2020_machines(traces / "pai2020" / "pai_machine_spec.csv")
    assert (len(c.nodes), c.total_gpus) == (1897, 6742)


def test_spot2026_nodes(traces: Path) -> None:
    c = load_spot2026_nodes(traces / "alibaba-spot-2026" / "node_info_df.csv")
    assert (len(c.nodes), c.total_gpus) == (4278, 10412)


def test_azure_llm(azure: dict[str, LlmRequests]) -> None:
    assert (len(azure["code"]), len(azure["conv"])) == (8819, 19366)
    for r in azure.values():
        assert r.arrival.min() == 0.0 and r.arrival.max() < 3600
        assert int(r.context_tokens.min()) > 0
    jobs = azure["code"].to_jobs()
    assert len(jobs) == 8819 and {j.priority_class for j in jobs} == {"online"}


@pytest.mark.parametrize("spec", ["openb", "openb:gpushare40", "itp:cluster10", "azure-llm:code"])
def test_catalogue_traces_fit_their_clusters(traces: Path, spec: str) -> None:
    t = resolve_trace(spec, traces)
    assert t.jobs and t.source
    check_feasible(t.cluster, t.jobs)


def test_philly_fits_the_philly_machines(traces: Path, philly: TraceJobs) -> None:
    check_feasible(resolve_cluster("philly", traces), philly)


def test_catalogue_clusters(traces: Path) -> None:
    gpus = {n: resolve_cluster(n, traces).total_gpus for n in ("openb-gpu", "pai2020", "spot2026")}
    assert gpus == {"openb-gpu": 6212, "pai2020": 6742, "spot2026": 10412}


def test_philly_with_users(traces: Path) -> None:
    """The Philly cut with user ids: every row read, 136 users, about 58 days."""
    jobs = load_philly_user_jobs(
        traces / "philly-users" / "philly_data_training.csv", skip_bad_rows=True
    )
    assert len(jobs) == 15_000
    assert jobs.skipped is not None and jobs.skipped.rows_skipped == 0
    assert len({j.user for j in jobs}) == 136
    assert 57 * 86_400 < jobs[-1].submit < 58 * 86_400
    assert sum(j.tasks * j.task.gpus == 1 for j in jobs) == 11_963  # the file's 1-GPU jobs
    # new_status: Pass 8,538, Failed 4,509, Killed 1,953.
    assert Counter(j.outcome for j in jobs) == {
        "completed": 8_538,
        "failed": 4_509,
        "killed": 1_953,
    }

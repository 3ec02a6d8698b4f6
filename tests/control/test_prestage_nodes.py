"""Which nodes a job expected to start soon is prepared on (``LiveStarts.nodes_for``): those
of the running attempts expected to end first, among the nodes it could use, until they hold
as many GPUs as it asks for."""

from __future__ import annotations

from types import SimpleNamespace

from tests.builders import A100, V100, cluster, job, node, take, task

from suanli.control.starts import PRESTAGE_NODES, LiveStarts
from suanli.core.decisions import JobPlacement
from suanli.core.model import Job
from suanli.core.view import ClusterView


class Known:
    """A predictor that knows each job's runtime (so the expected ends are the true ones)."""

    plan_q = 0.9

    def quantile(self, j: Job, q: float) -> float:
        return j.runtime

    def duration(self, j: Job) -> float:
        return j.runtime

    def learn(self, j: Job, runtime: float, at: float) -> None:
        pass


def starts(view: ClusterView) -> LiveStarts:
    return LiveStarts(None, view, SimpleNamespace(runtime=Known()))  # type: ignore[arg-type]


def running(view: ClusterView, name: str, node_i: int, gpus: list[int], runtime: float):  # type: ignore[no-untyped-def]
    j = job(name, 0.0, runtime, gpus=len(gpus))
    return (j, 0.0, JobPlacement.of((take(view, node_i, gpus, j.task),)))


def test_the_first_to_free_up_first_until_they_hold_its_gpus() -> None:
    view = ClusterView(cluster(node("n0", 4), node("n1", 4), node("n2", 4, A100)))
    rows = [
        running(view, "late", 0, [0, 1], 900.0),
        running(view, "soon", 1, [0, 1, 2, 3], 50.0),
        running(view, "mid", 0, [2, 3], 300.0),
        running(view, "a100", 2, [0, 1, 2, 3], 10.0),
    ]
    s = starts(view)
    # A job that names no GPU model may use any node: the A100 one frees up first. One that
    # asks for V100s is prepared on n1 alone (its four GPUs free up at 50 s).
    assert s.nodes_for([job("any", 0.0, gpus=4)], 0.0, rows) == [[2]]
    v100 = job("v100", 0.0, 60.0, task(4, models=("V100",)))
    assert s.nodes_for([v100], 0.0, rows) == [[1]]
    # Six GPUs in two tasks of three: n1's four, then n0's two that "mid" holds.
    two = job("two", 0.0, 60.0, task(3, models=("V100",)), tasks=2)
    assert s.nodes_for([two], 0.0, rows) == [[1, 0]]
    assert s.nodes_for([v100], 0.0, []) == [[]]


def test_never_more_than_the_cap_of_nodes() -> None:
    n = PRESTAGE_NODES + 4
    view = ClusterView(cluster(*(node(f"n{i}", 1, V100) for i in range(n))))
    rows = [running(view, f"r{i}", i, [0], 100.0 + i) for i in range(n)]
    big = job("big", 0.0, 60.0, gpus=1, tasks=n)
    assert starts(view).nodes_for([big], 0.0, rows) == [list(range(PRESTAGE_NODES))]

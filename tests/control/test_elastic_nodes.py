"""The elastic-resize contract across nodes (the fake backend on two nodes of two GPUs, a fake
clock): an elastic job grows onto another node, each task launched where it was placed and
told its layout; a shrink for a waiting job takes its highest rank wherever that runs, and
the survivors on both nodes are told the new world size."""

from __future__ import annotations

from declared import declare_inventory
from fake_clock import Clock
from suanli.backends.base import Elastic
from suanli.backends.fake import FakeBackend
from suanli.config.cluster import load_cluster
from suanli.control.loop import ControlConfig, Controller
from suanli.control.spec import JobSpec
from suanli.core.preemption import PreemptionConfig
from suanli.sim.engine import PolicySet
from suanli.store import Store
from suanli.store import jobs as js


def submit(store: Store, s: JobSpec, at: float) -> str:
    return js.submit_job(
        store, spec=s.model_dump(mode="json"), tenant="lab", user="ana", name="",
        queue="lab", priority_class=s.priority_class, now_ms=round(at * 1000),
    ).id  # fmt: skip


def test_an_elastic_job_grows_onto_another_node_and_shrinks_across_nodes(store: Store) -> None:
    clock = Clock()
    cluster = load_cluster("2x2xTESTGPU[gpumem=80G,speed=1]")
    declare_inventory(store, cluster)
    names = [n.name for n in cluster.nodes]
    backend = FakeBackend(clock, addresses={names[0]: "10.0.0.1", names[1]: "10.0.0.2"})
    config = ControlConfig(
        cluster=cluster,
        policy=PolicySet.parse("fifo+best-fit"),
        preemption=PreemptionConfig(min_runtime=0, restart_overhead=0),
    )
    ctl = Controller(store, config, backend, clock=clock)
    ctl.recover()
    e = submit(store, JobSpec(command=["train"], gpus=1, cpu=0.5, memory="1G", tasks=2,
                              min_workers=1, max_workers=4), clock.t)  # fmt: skip
    ctl.step()
    tasks = [x for x in backend.launched if x.job_id == e]
    assert len(tasks) == 4  # started on 2, grown into the 2 GPUs of the other node
    on = {x.task: x.node for x in tasks}
    assert set(on.values()) == set(names)
    assert on[0] == on[1] and on[2] == on[3] != on[0]  # each pair on one node
    for rank in range(4):
        assert backend.files[(e, 1, rank)] == Elastic(4, rank, 1)

    clock.t += 10
    o = submit(store, JobSpec(command=["serve"], gpus=1, cpu=0.5, memory="1G",
                              priority_class="online"), clock.t)  # fmt: skip
    ctl.step()
    ctl.step()
    assert js.get_job(store, o).state == "running"  # type: ignore[union-attr]
    left = {h.task for h in backend.running() if h.job_id == e}
    assert left == {0, 1, 2}  # the highest rank gave its GPU
    for rank in sorted(left):
        assert backend.files[(e, 1, rank)] == Elastic(3, rank, 2)
    online = next(x for x in backend.launched if x.job_id == o)
    assert online.node == on[3] and online.gpus == next(x.gpus for x in tasks if x.task == 3)

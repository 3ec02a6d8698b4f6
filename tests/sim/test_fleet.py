"""The serving fleet's replay (``suanli.sim.fleet``): instances placed on a fleet that grows
only when nothing in service holds an arrival, under every node's CPU, memory, GPU and NIC
capacity and every service's density limit; read-outs exact over time."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from suanli.core.model import MILLI, GpuModel, SpecError, TaskRequest
from suanli.sim.fleet import Instance, NodeType, replay_fleet

H100 = GpuModel("H100", 80 * 1024, 5.0)
GPU = NodeType("gpu", gpus=8, cpu=64, memory_gib=512, nics=2, gpu_model=H100)
CPU = NodeType("cpu", gpus=0, cpu=64, memory_gib=512, nics=1)


def inst(i: int, pool: str = "gpu", *, gpus: int = 1, cpu: int = 4, mem: int = 16,
         nic: float = 0.0, app: str = "a", limit: int | None = None, start: float = 0.0,
         end: float | None = None) -> Instance:  # fmt: skip
    task = TaskRequest(gpus=gpus, cpu_milli=cpu * MILLI, memory_mib=mem * 1024)
    return Instance(f"i{i}", pool, task, nic, app, limit, start, end)


def test_the_fleet_grows_only_when_nothing_in_service_holds_an_arrival() -> None:
    xs = [inst(k, gpus=2) for k in range(4)] + [inst(4, gpus=1)]  # 9 GPUs: two nodes
    r = replay_fleet(xs, [GPU], horizon=10.0)
    assert r.nodes == {"gpu": 2} and r.placed == 5 and r.refused == 0
    assert r.bound == {"gpu": 2}
    assert sorted(set(r.where.values())) == ["gpu-0", "gpu-1"]


def test_a_departure_frees_room_for_an_arrival_at_the_same_instant() -> None:
    xs = [inst(0, gpus=8, end=10.0), inst(1, gpus=8, start=10.0)]
    r = replay_fleet(xs, [GPU], horizon=20.0)
    assert r.nodes == {"gpu": 1} and r.where == {"i0": "gpu-0", "i1": "gpu-0"}


@pytest.mark.parametrize(
    ("xs", "nodes"),
    [
        pytest.param([inst(k, nic=60.0) for k in range(4)], 2, id="NIC shares: 2 NICs hold 3 x 60%"),
        pytest.param([inst(k, cpu=40) for k in range(3)], 3, id="cores: 64 hold one 40-core"),
        pytest.param([inst(k, mem=300) for k in range(3)], 3, id="memory: 512 GiB hold one 300"),
        pytest.param([inst(k, limit=2) for k in range(5)], 3, id="density: 2 a node"),
        pytest.param([inst(k, limit=2, app=f"s{k}") for k in range(5)], 1, id="density per service"),
    ],
)  # fmt: skip
def test_each_limit_binds(xs: list[Instance], nodes: int) -> None:
    assert replay_fleet(xs, [GPU], horizon=1.0).nodes == {"gpu": nodes}


def test_pools_are_apart_and_an_instance_no_node_holds_is_refused() -> None:
    xs = [inst(0), inst(1, "cpu", gpus=0), inst(2, "cpu", gpus=0, cpu=65), inst(3, nic=250.0)]
    r = replay_fleet(xs, [GPU, CPU], horizon=1.0)
    assert r.nodes == {"gpu": 1, "cpu": 1} and r.placed == 2 and r.refused == 2
    assert r.where == {"i0": "gpu-0", "i1": "cpu-0"}
    assert r.capacity == {"gpu": 8, "cpu": 128, "memory": 1024, "nic": 3}


def test_time_averages_are_exact() -> None:
    # One node from 0 to 100: 4 GPUs held 0-50, then 8 from 50-75: (4*50 + 8*25) / 800.
    xs = [inst(0, gpus=4, cpu=8, nic=50.0, end=50.0), inst(1, gpus=8, cpu=8, start=50.0, end=75.0)]
    r = replay_fleet(xs, [GPU], horizon=100.0)
    assert r.allocation["gpu"] == pytest.approx((4 * 50 + 8 * 25) / 800)
    assert r.allocation["cpu"] == pytest.approx(8 * 75 / (64 * 100))
    assert r.allocation["nic"] == pytest.approx(0.5 * 50 / (2 * 100))
    assert r.peak["gpu"] == 8


def test_stranded_gpus_are_free_gpus_where_the_probe_no_longer_fits() -> None:
    # A CPU-only instance takes 60 of the node's 64 cores: its 8 GPUs are free but a
    # 1-GPU, 8-core probe fits nowhere, all the time.
    xs = [inst(0, gpus=0, cpu=60)]
    probe = TaskRequest(gpus=1, cpu_milli=8 * MILLI)
    r = replay_fleet(xs, [GPU], horizon=7200.0, probe=probe, sample_s=600.0)
    assert r.stranded_gpus == 1.0
    roomy = replay_fleet([inst(0, gpus=0, cpu=16)], [GPU], horizon=7200.0, probe=probe)
    assert roomy.stranded_gpus == 0.0


def test_bad_input_is_named() -> None:
    with pytest.raises(SpecError, match="instance i0 asks for pool 'tpu'"):
        replay_fleet([inst(0, "tpu")], [GPU], horizon=1.0)
    with pytest.raises(SpecError, match="instance i0 ends before it starts"):
        replay_fleet([inst(0, start=5.0, end=1.0)], [GPU], horizon=10.0)
    with pytest.raises(SpecError, match="horizon"):
        replay_fleet([inst(0, start=5.0)], [GPU], horizon=1.0)
    with pytest.raises(SpecError, match="unique"):
        replay_fleet([inst(0)], [GPU, GPU], horizon=1.0)


instances = st.lists(
    st.tuples(
        st.sampled_from(["gpu", "cpu"]),
        st.integers(0, 8),  # GPUs (a CPU-pool instance asks none)
        st.integers(1, 64),  # cores
        st.integers(1, 512),  # GiB
        st.sampled_from([0.0, 1.0, 25.0, 50.0, 100.0]),  # % of a NIC
        st.sampled_from(["a", "b", "c"]),
        st.sampled_from([None, 1, 2, 4]),
        st.integers(0, 50),  # start
        st.one_of(st.none(), st.integers(0, 50)),  # life
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(instances, st.sampled_from(["best-fit", "first-fit", "worst-fit"]))
def test_no_node_is_ever_over_any_limit(raw: list[tuple], placement: str) -> None:  # type: ignore[type-arg]
    xs = [inst(k, pool, gpus=g if pool == "gpu" else 0, cpu=c, mem=m, nic=nic, app=app,
               limit=lim, start=float(s), end=None if life is None else float(s + life))
          for k, (pool, g, c, m, nic, app, lim, s, life) in enumerate(raw)]  # fmt: skip
    r = replay_fleet(xs, [GPU, CPU], horizon=200.0, placement=placement)
    assert r.placed + r.refused == len(xs)
    # Replay the placements: at every instant no node is over a limit.
    node_type = {"gpu": GPU, "cpu": CPU}
    for t in sorted({x.start for x in xs}):
        alive = [x for x in xs if x.id in r.where and x.start <= t
                 and (x.end is None or x.end > t)]  # fmt: skip
        per_node: dict[str, list[Instance]] = {}
        for x in alive:
            per_node.setdefault(r.where[x.id], []).append(x)
        for node, on in per_node.items():
            nt = node_type[node.split("-")[0]]
            assert sum(x.task.gpus for x in on) <= nt.gpus
            assert sum(x.task.cpu_milli for x in on) <= nt.cpu * MILLI
            assert sum(x.task.memory_mib for x in on) <= nt.memory_gib * 1024
            assert sum(x.nic_pct for x in on) <= nt.nics * 100 + 1e-9
    # An arrival never lands where its service already has its own limit of instances.
    order = {x.id: k for k, x in enumerate(xs)}
    for x in xs:
        if x.id not in r.where or x.max_per_node is None:
            continue
        before = [y for y in xs if y.id in r.where and y.app == x.app
                  and r.where[y.id] == r.where[x.id] and (y.end is None or y.end > x.start)
                  and (y.start, order[y.id]) < (x.start, order[x.id])]  # fmt: skip
        assert len(before) < x.max_per_node
    # The fleet is never smaller than its bound, nor larger than one node an instance.
    for pool, n in r.nodes.items():
        assert r.bound[pool] <= n
        assert n <= sum(1 for x in xs if x.pool == pool and x.id in r.where)
    assert replay_fleet(xs, [GPU, CPU], horizon=200.0, placement=placement).where == r.where

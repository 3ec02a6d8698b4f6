"""Where the co-location model's GPUs are: packing, spreading, and replicas that keep their
GPU when the worker beside them leaves."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from suanli.sim.colocation.nodes import Nodes


def test_one_node_jobs_pack_and_spreading_jobs_take_the_emptiest_nodes() -> None:
    n = Nodes(3, 8)
    n.place(0, 6, spread=False)  # node 0
    n.place(1, 2, spread=False)  # best fit: the 2 left on node 0
    assert n.job[1] == {0: 2} and n.free.tolist() == [0, 8, 8]
    n.place(2, 12, spread=True)
    assert n.job[2] == {1: 8, 2: 4}
    assert n.take_replica() == 2  # the replica goes where least is free


def test_a_shrinking_job_gives_back_its_plain_workers_first() -> None:
    n = Nodes(2, 8)
    n.place(0, 8, spread=False)
    n.host(0, 0)
    n.host(0, 0)
    assert n.shrink(0, 5) == []  # 6 plain workers: 5 of them go
    assert n.free.tolist() == [5, 8]
    moved = n.shrink(0, 2)  # one plain, one that hosts a replica
    assert moved == [(0, 1)] and n.free.tolist() == [6, 8]  # the replica keeps its GPU
    assert n.release(0) == [(0, 1)] and n.free.tolist() == [6, 8]


@settings(max_examples=200, deadline=None)
@given(ops=st.lists(st.tuples(st.integers(0, 3), st.integers(1, 12), st.booleans()), max_size=30))
def test_free_gpus_never_go_negative_or_past_the_node(ops: list[tuple[int, int, bool]]) -> None:
    n = Nodes(4, 8)
    held: dict[int, int] = {}
    for k, (op, w, spread) in enumerate(ops):
        if op == 0 and n.room(spread) >= min(w, 8 if not spread else 32):
            w = w if spread else min(w, 8)
            if n.room(spread) >= w:
                n.place(k, w, spread)
                held[k] = w
        elif op == 1 and held:
            j = sorted(held)[0]
            held[j] += n.grow(j, w, spread=False)
        elif op == 2 and held:
            j = sorted(held)[-1]
            give = min(w, held[j])
            n.shrink(j, give)
            held[j] -= give
        assert (n.free >= 0).all() and (n.free <= 8).all()
        assert n.total == 32 - sum(held.values())

"""Property tests of the spreading rules (``suanli.core.spread``) on random clusters of racks
and NVLink domains with random free counts: both take exactly the tasks asked, never more on
a node than fit there; ``compact`` never uses more nodes than the fewest possible, and
``by_level`` keeps the gang inside one domain, else one rack, whenever one can hold it."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import cluster, node
from suanli.core.spread import by_level, compact
from suanli.core.view import ClusterView


@st.composite
def layouts(draw):  # type: ignore[no-untyped-def]
    n = draw(st.integers(2, 14))
    racks = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    domains = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    free = draw(st.lists(st.integers(0, 8), min_size=n, max_size=n))
    spec = cluster(*(node(f"n{i}", 8, rack=f"r{racks[i]}", domain=f"d{racks[i]}-{domains[i]}")
                     for i in range(n)))  # fmt: skip
    k = np.array(free, dtype=np.int64)
    count = draw(st.integers(1, max(1, int(k.sum()))))
    score = np.array(draw(st.lists(st.floats(0, 10), min_size=n, max_size=n)))[k > 0]
    return ClusterView(spec), k, count, score


@settings(max_examples=300, deadline=None)
@given(layouts())
def test_both_rules_take_exactly_the_tasks_and_only_what_fits(case) -> None:  # type: ignore[no-untyped-def]
    view, k, count, score = case
    if int(k.sum()) < count or not (k > 0).any():
        return
    fewest = int(np.searchsorted(np.cumsum(np.sort(k)[::-1]), count) + 1)
    for rule in (compact, by_level):
        chosen = rule(view, k, count, score)
        nodes = [n for n, _ in chosen]
        assert sum(t for _, t in chosen) == count and len(set(nodes)) == len(nodes)
        assert all(0 < t <= k[n] for n, t in chosen)
        if rule is compact:
            assert len(chosen) == fewest
    chosen = by_level(view, k, count, score)
    used = [n for n, _ in chosen]
    for groups in (view.node_domain, view.node_rack):
        holds = np.bincount(groups, weights=k, minlength=groups.max() + 1) >= count
        if holds.any():
            assert len({int(groups[n]) for n in used}) == 1
            break

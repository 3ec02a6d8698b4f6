"""ClusterView.set_gpu_health: a GPU out of service is never found free, what its holders
release stays held, and returning it gives back exactly what it had."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import frac, gpus_cluster, states_equal, take, task
from suanli.core.model import MILLI
from suanli.core.view import ClusterView, OvercommitError


def test_a_free_gpu_out_of_service_is_never_found() -> None:
    view = ClusterView(gpus_cluster(2))
    view.set_gpu_health(0, 1, False)
    assert view.node_full_free[0] == 1
    assert view.node_free_milli[0] == MILLI
    assert view.gpus_fitting(0, task(1)).tolist() == [0]
    assert view.fit_counts(task(1)).tolist() == [1]
    assert not view.feasible(task(2))[0]
    assert view.gpus_fitting(0, frac(500)).tolist() == [0]
    view.set_gpu_health(0, 0, False)
    assert not view.feasible(frac(1))[0] and view.fit_counts(frac(1)).tolist() == [0]
    view.set_gpu_health(0, 0, True)
    assert view.active().tolist() == [False]  # out of service is not an allocation
    with pytest.raises(OvercommitError):
        view.allocate(view.placement_for(0, [1], frac(100)))


def test_what_a_holder_releases_stays_held_until_the_gpu_returns() -> None:
    view = ClusterView(gpus_cluster(2))
    before = view.state()
    a = take(view, 0, [0], frac(300, 1000))
    b = take(view, 0, [0], frac(200, 1000))
    view.set_gpu_health(0, 0, False)
    assert view.gpu_free_milli[0, 0] == 0 and view.gpu_held_milli[0, 0] == 500
    view.release(a)
    assert view.gpu_free_milli[0, 0] == 0 and view.gpu_held_milli[0, 0] == 800
    assert view.allocated_milli == 200
    assert view.node_free_milli[0] == MILLI  # only GPU 1
    with pytest.raises(OvercommitError):
        view.release(a)  # twice: still refused
    view.release(b)
    assert view.allocated_milli == 0 and view.node_full_free[0] == 1
    view.set_gpu_health(0, 0, True)
    assert states_equal(view.state(), before)


def test_returning_with_holders_left_keeps_their_allocation() -> None:
    view = ClusterView(gpus_cluster(1))
    a = take(view, 0, [0], frac(400, 2000))
    view.set_gpu_health(0, 0, False)
    view.set_gpu_health(0, 0, True)
    assert view.gpu_free_milli[0, 0] == 600
    assert view.gpu_free_mem[0, 0] == view.gpu_cap_mem[0, 0] - 2000
    view.release(a)
    assert view.node_full_free[0] == 1


def test_health_changes_are_counted_and_not_allowed_in_a_what_if() -> None:
    view = ClusterView(gpus_cluster(2))
    seen = view.health_changes
    view.set_gpu_health(0, 0, False)
    view.set_gpu_health(0, 0, False)  # no change: not counted
    assert view.health_changes == seen + 1 and view.any_out
    mark = view.checkpoint()
    with pytest.raises(RuntimeError, match="what-if"):
        view.set_gpu_health(0, 1, False)
    view.rollback(mark)
    view.set_gpu_health(0, 0, True)
    assert not view.any_out
    with pytest.raises(OvercommitError, match="no GPU 2"):
        view.set_gpu_health(0, 2, False)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(1, 4)), max_size=30))
def test_any_sequence_undone_gives_the_first_state(steps: list[tuple[int, int, int]]) -> None:
    """Allocations, releases, GPUs out and back in any order: once every GPU is back and
    every allocation released, the view is as it began; free never goes negative and an
    out-of-service GPU is never free."""
    view = ClusterView(gpus_cluster(4))
    before = view.state()
    held: list = []
    for op, gpu, size in steps:
        if op == 0:
            t = frac(size * 200, size * 100)
            fit = view.gpus_fitting(0, t)
            if len(fit):
                held.append(take(view, 0, [int(fit[0])], t))
        elif op == 1 and held:
            view.release(held.pop(gpu % len(held)))
        elif op == 2:
            view.set_gpu_health(0, gpu, False)
        else:
            view.set_gpu_health(0, gpu, True)
        assert (view.gpu_free_milli >= 0).all()
        assert (view.gpu_free_milli[view.gpu_out] == 0).all()
        assert view.node_free_milli[0] == int(view.gpu_free_milli[0].sum())
        assert view.node_full_free[0] == int((view.gpu_free_milli[0] == MILLI).sum())
    for gpu in range(4):
        view.set_gpu_health(0, gpu, True)
    for p in held:
        view.release(p)
    assert states_equal(view.state(), before)
    assert np.array_equal(view.gpu_held_milli, np.zeros_like(view.gpu_held_milli))

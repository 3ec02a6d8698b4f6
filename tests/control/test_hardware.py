"""Hardware holds in the live loop: a GPU out of service on a health fault (its attempts
requeued from their checkpoints, nothing new placed on it, back when healthy) and an
operator's cordon and drain, over a real store with the fake backend and a fake clock.

There is no GPU here: the health watch reads a stand-in for the NVML reader
(``suanli.backends.gpu_health.NvmlHealth``, tested over a stand-in ``pynvml`` in
``tests/backends/test_gpu_health.py``), which says each GPU's fault as the test scripts it.
"""

from __future__ import annotations

from collections.abc import Mapping

from fake_clock import Clock
from loop_builders import make, spec, state, submit
from suanli.control.health_watch import HealthWatch
from suanli.control.loop import Controller
from suanli.store import Store
from suanli.store import jobs as js
from suanli.store import nodes as sn


class Faults:
    """A stand-in health reader: GPU index -> its fault (absent: healthy)."""

    name = "stand-in"

    def __init__(self) -> None:
        self.faults: dict[int, str] = {}
        self.reads = 0

    def read(self, gpus: Mapping[int, str]) -> dict[int, str | None]:
        self.reads += 1
        return {i: self.faults.get(i) for i in gpus}


def watched(store: Store, clock: Clock) -> tuple[Controller, Faults, HealthWatch, str]:
    ctl, backend = make(store, clock)
    node = ctl.node_names[0]
    faults = Faults()
    watch = HealthWatch(store, faults, node=node, gpus=dict.fromkeys(range(4), ""), clock=clock)
    ctl.health_probe = watch.probe
    ctl.recover()
    return ctl, faults, watch, node


def one_running(store: Store) -> tuple[Clock, Controller, Faults, HealthWatch, str, str, int]:
    """A watched controller running one one-GPU job: (clock, controller, the stand-in's
    faults, the watch, the watched node, the job, its GPU)."""
    clock = Clock()
    ctl, faults, watch, node = watched(store, clock)
    job = submit(store, spec(1000, gpus=1), clock.t)
    ctl.step()
    ((_, gpu),) = gpus_of(store, job)
    return clock, ctl, faults, watch, node, job, gpu


def gpus_of(store: Store, job_id: str) -> set[tuple[str, int]]:
    (a,) = [x for x in js.job_attempts(store, job_id) if x.state != "ended"]
    return {(t["node"], g) for t in a.placement for g in t["gpus"]}


def test_a_faulty_gpu_is_drained_its_attempt_requeued_and_it_returns_when_healthy(
    store: Store,
) -> None:
    clock = Clock()
    ctl, faults, watch, node = watched(store, clock)
    big = submit(store, spec(1000, gpus=4), clock.t)
    ctl.step()
    assert gpus_of(store, big) == {(node, g) for g in range(4)}
    faults.faults[2] = "xid 79"
    assert watch.check() == [(2, "xid 79")]
    clock.t += 10
    ctl.step()  # interrupted and stopped; it restarts on the other node, which is free
    ctl.step()
    (first, second) = js.job_attempts(store, big)
    assert (first.outcome, first.detail) == (
        "preempted",
        f"interrupted: GPU 2 of node {node} is out of service (xid 79)",
    )
    assert gpus_of(store, big) == {(ctl.node_names[1], g) for g in range(4)}
    assert ctl._preempted_at(big) == []  # not a preemption: the thrash cap does not count it
    events = [e.kind for e in js.job_history(store, big)]
    assert "interrupted" in events
    # Nothing new lands on the faulty GPU: four one-GPU jobs, three fit on node 0.
    small = [submit(store, spec(1000, gpus=1), clock.t) for _ in range(4)]
    ctl.step()
    placed = [gpus_of(store, j) for j in small if state(store, j) == "running"]
    assert len(placed) == 3 and all((node, 2) not in p for p in placed)
    waiting = next(j for j in small if state(store, j) == "pending")
    # Healthy again: back in service, and the job waiting for it starts there.
    del faults.faults[2]
    assert watch.check() == [(2, None)]
    clock.t += 10
    ctl.step()
    assert gpus_of(store, waiting) == {(node, 2)}
    assert sn.holds(store).faults == {}


def test_a_task_that_fails_with_its_gpu_is_requeued_not_failed(store: Store) -> None:
    clock, ctl, faults, watch, node, job, gpu = one_running(store)
    # The GPU falls off the bus and takes the process with it, before the watch's next read:
    # the loop asks the watch at once, and the job is interrupted, not failed.
    faults.faults[gpu] = "lost: the GPU fell off the bus"
    (handle,) = ctl.backend.running()
    ctl.backend.crash(handle, "exit code 134")
    clock.t += 0.5
    ctl.step()
    assert faults.reads == 1 and state(store, job) in ("pending", "running")
    ctl.step()
    assert state(store, job) == "running" and (node, gpu) not in gpus_of(store, job)
    first = js.job_attempts(store, job)[0]
    assert first.outcome == "preempted" and first.detail.startswith("interrupted: GPU")


def test_a_failure_on_a_healthy_gpu_is_still_the_jobs(store: Store) -> None:
    clock = Clock()
    ctl, faults, _, _ = watched(store, clock)
    job = submit(store, spec(1000, gpus=1), clock.t)
    ctl.step()
    (handle,) = ctl.backend.running()
    ctl.backend.crash(handle)
    clock.t += 0.5
    ctl.step()
    assert faults.reads == 1 and state(store, job) == "failed"


def test_cordon_keeps_what_runs_and_drain_requeues_it_across_a_restart(store: Store) -> None:
    clock = Clock()
    ctl, _ = make(store, clock)
    ctl.recover()
    a, b = ctl.node_names
    first = submit(store, spec(1000, gpus=4), clock.t)
    ctl.step()
    assert {n for n, _ in gpus_of(store, first)} == {a}
    sn.set_cordon(store, a, "cordon", "firmware", round(clock.t * 1000))
    clock.t += 5
    later = [submit(store, spec(1000, gpus=4), clock.t) for _ in range(2)]
    ctl.step()
    assert state(store, first) == "running" and {n for n, _ in gpus_of(store, first)} == {a}
    running = [j for j in later if state(store, j) == "running"]
    assert len(running) == 1 and {n for n, _ in gpus_of(store, running[0])} == {b}
    # Drained: the attempt on it is requeued; it waits, as node b is taken.
    sn.set_cordon(store, a, "drain", "firmware", round(clock.t * 1000))
    clock.t += 5
    ctl.step()
    ctl.step()
    assert state(store, first) == "pending"
    assert js.job_attempts(store, first)[0].detail == f"interrupted: node {a} is drained (firmware)"
    # A restart keeps the hold: nothing lands on node a.
    ctl2, _ = make(store, clock)
    ctl2.backend = ctl.backend
    ctl2.recover()
    clock.t += 5
    ctl2.step()
    assert all(state(store, j) == "pending" for j in (first, *set(later) - set(running)))
    sn.set_cordon(store, a, None, None, round(clock.t * 1000))
    clock.t += 5
    ctl2.step()
    assert state(store, first) == "running" and {n for n, _ in gpus_of(store, first)} == {a}


def test_a_restart_finds_the_fault_and_moves_the_attempt_it_restored(store: Store) -> None:
    clock, ctl, faults, watch, node, job, gpu = one_running(store)
    # The fault is recorded while the control plane is down; the restarted one restores
    # the attempt, then reads the holds and interrupts it.
    sn.set_gpu_faults(store, node, {gpu: "ecc: 1 uncorrected errors"}, round(clock.t * 1000))
    ctl2, _ = make(store, clock)
    ctl2.backend = ctl.backend
    ctl2.recover()
    assert ctl2.gpus_out == {(0, gpu): "ecc: 1 uncorrected errors"}
    ctl2.step()
    ctl2.step()
    assert state(store, job) == "running" and (node, gpu) not in gpus_of(store, job)
    assert js.job_attempts(store, job)[0].detail.endswith("(ecc: 1 uncorrected errors)")


def test_a_cordoned_node_that_leaves_and_returns_stays_cordoned(store: Store) -> None:
    clock = Clock()
    ctl, _ = make(store, clock)
    ctl.recover()
    a, b = ctl.node_names
    sn.set_cordon(store, a, "cordon", None, round(clock.t * 1000))
    clock.t += 5  # the holds are read every 2 s
    ctl.step()
    assert not ctl.view.healthy[0]
    nodes = {n.name: n for n in ctl.config.cluster.nodes}
    ctl.apply_inventory([nodes[b]], clock.t)  # node a left the engine's cluster ...
    assert not ctl.view.healthy[0] and ctl.view.healthy[1]
    ctl.apply_inventory([nodes[a], nodes[b]], clock.t)  # ... and came back: still cordoned
    assert not ctl.view.healthy[0] and ctl.config.cluster.nodes[0].healthy
    sn.set_cordon(store, a, None, None, round(clock.t * 1000))
    clock.t += 5
    ctl.step()
    assert ctl.view.healthy.all()

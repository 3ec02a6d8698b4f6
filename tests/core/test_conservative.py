"""backfill/conservative alone, against a hand-built handle: a reservation for each job of
its window, and what a job beyond the window may do around them."""

from __future__ import annotations

from builders import gpus_cluster, job, rng
from fake_handle import FakeHandle
from suanli.core.conservative import Conservative
from suanli.core.decisions import Admit, BehindReservation, Decision, Skip
from suanli.core.seams import HELD


def test_beyond_the_window_a_job_starts_only_around_every_reservation() -> None:
    h = FakeHandle(gpus_cluster(6))
    cons = Conservative(depth=1)
    cons.bind(h)
    cons.restored(h.run(job("A", runtime=100.0, gpus=4, estimate=100.0), 0, (0, 1, 2, 3)))
    wide = job("wide", 1.0, gpus=6, estimate=50.0)  # the window: reserved at 100
    long = job("long", 2.0, estimate=500.0)  # would still run at 100: it waits
    short = job("short", 3.0, estimate=50.0)  # ends by 53: it starts
    lanes = {}
    for j in (wide, long, short):
        key = (j.submit, j.id)
        lanes[j.id] = h.pend(j, key)
        cons.submitted(key, j)
    h.now = 3.0
    out: list[Decision] = []
    cons.begin(rng(), out)
    assert cons.reservations == [("wide", 100.0)]
    assert cons.gate(wide, lanes["wide"], rng(), out) is HELD  # the plan's own job
    assert cons.gate(long, lanes["long"], rng(), out) is HELD
    assert out[-1] == Skip(long, BehindReservation("wide", 100.0))
    started = cons.gate(short, lanes["short"], rng(), out)
    assert isinstance(started, Admit) and started.job is short
    cons.started(short)
    assert cons.reservations == [("wide", 100.0)]  # the reservation did not move

"""backfill/easy alone, against a hand-built handle: the blocked head's reservation, and which
later jobs it holds back."""

from __future__ import annotations

from builders import gpus_cluster, job, rng
from fake_handle import FakeHandle
from suanli.core.backfill import Easy
from suanli.core.decisions import BehindReservation, Decision, Skip
from suanli.core.seams import HELD


def test_a_long_job_waits_behind_the_heads_reservation_a_short_one_does_not() -> None:
    h = FakeHandle(gpus_cluster(4), keep_order=True)
    easy = Easy()
    easy.bind(h)
    running = h.run(job("a", runtime=1000.0, gpus=2, estimate=1000.0), 0, (0, 1))
    easy.restored(running)
    head = job("big", 1.0, gpus=4, estimate=100.0)
    lane = h.pend(head)
    h.table.track(lane.shape, h.view.fit_counts(head.task, head.tasks))  # tried: no room
    lane.skipped = head.id
    short = job("short", 2.0, estimate=500.0)
    long = job("long", 3.0, estimate=5000.0)
    l_short, l_long = h.pend(short), h.pend(long)
    out: list[Decision] = []
    easy.begin(rng(), out)
    assert easy.gate(short, l_short, rng(), out) is None  # ends (by 502) before 1000
    assert easy.gate(long, l_long, rng(), out) is HELD
    assert out == [Skip(long, BehindReservation("big", 1000.0))]
    # Held lanes are back in line at the next cycle.
    easy.begin(rng(), [])
    assert h.activated == [l_long.index]


def test_without_a_blocked_head_nothing_is_held() -> None:
    h = FakeHandle(gpus_cluster(4), keep_order=True)
    easy = Easy()
    easy.bind(h)
    first, later = job("first", 0.0, estimate=9_000.0), job("later", 1.0, estimate=9_000.0)
    h.pend(first)
    lane = h.pend(later)
    easy.begin(rng(), [])
    assert easy.gate(later, lane, rng(), []) is None

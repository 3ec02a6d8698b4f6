"""``suanli.bench.predict``: the policy list, the load rule's search, the rows of a sweep and
the targets' verdict. A synthetic Gen-Parallel-Workloads CSV stands in for a trace; one test
takes a slice of the public ``philly-users`` and skips where the traces are absent."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from suanli.bench.predict import (
    FIFO,
    POLICIES,
    SEARCH_POINTS,
    Row,
    find_time_scale,
    load,
    offered_scale,
    parse_policies,
    pooled,
    run_trace,
    verdict,
)
from suanli.core.model import Job, TaskRequest
from suanli.traces.catalogue import PHILLY_USER_JOBS
from support import trace_dir_or_skip, write_gpw


def test_the_policy_list_parses_with_readable_labels() -> None:
    labels = [p.label for p in parse_policies(POLICIES)]
    assert len(set(labels)) == len(POLICIES) == 12
    assert labels[0] == FIFO
    assert labels[5] == "qssf/easy@history+best-fit"  # qssf@history/easy, as the label puts it
    assert labels[9] == "sjf-gpu/easy-oracle+best-fit"
    parsed = parse_policies(POLICIES)
    assert [p.backfill for p in parsed] == ["none", "easy"] * 6
    assert [p.runtime for p in parsed[2:4]] == ["estimate", "history"]  # LAS needs no runtimes


def _power_law(root: float, slope: float = 1.5):
    """FIFO's ratio as ``(root / s) ** slope``: 1 at ``root``, falling as arrivals spread."""
    calls: list[float] = []

    def run(s: float) -> tuple[float, None]:
        calls.append(s)
        return (root / s) ** slope, None

    return run, calls


@pytest.mark.parametrize("root", [0.17, 0.003, 2.1, 50.0])
def test_the_search_converges_within_ten_runs(root: float) -> None:
    run, calls = _power_law(root)
    ts = find_time_scale(load_stub(), [], evaluate=run)
    assert ts.converged and 0.9 <= ts.ratio <= 1.1
    assert len(calls) == len(ts.tried) <= 10
    assert (ts.scale, ts.ratio) in ts.tried[-SEARCH_POINTS:]  # from the last round
    assert abs(math.log(ts.scale / root)) < math.log(1.1) / 1.5 + 1e-9


def test_the_search_starts_at_the_offered_load_and_runs_rounds_of_two() -> None:
    """The first round is the scale at which the jobs' GPU-time fills the cluster over
    their arrival span, and twice it; each round's points come from the runs before it
    only, so running a round's points at once (``evaluate_many``) changes nothing."""
    trace = load_stub()
    trace.jobs = [_job(i, submit=100.0 * i, gpus=2, runtime=500.0) for i in range(11)]
    trace.cluster = type("C", (), {"total_gpus": 4})()
    offered = offered_scale(trace, trace.jobs)
    assert offered == pytest.approx(11 * 2 * 500.0 / (4 * 1000.0))
    run, calls = _power_law(0.9, slope=4.0)
    rounds: list[list[float]] = []

    def many(scales: list[float]) -> list[tuple[float, None]]:
        rounds.append(list(scales))
        return [run(s) for s in scales]

    ts = find_time_scale(trace, evaluate_many=many)
    assert rounds[0] == pytest.approx([offered, 2 * offered])
    assert all(len(r) == SEARCH_POINTS for r in rounds)
    one_by_one, _ = _power_law(0.9, slope=4.0)
    assert find_time_scale(trace, evaluate=one_by_one).tried == ts.tried
    assert ts.converged


def test_the_search_brackets_a_ratio_that_is_not_monotone() -> None:
    """FIFO's ratio need not fall everywhere as arrivals spread (a burst may land
    differently): a run that waited long above one that waited little is not taken as the
    bracket's low end, and the search still ends in the band."""

    def bumpy(s: float) -> tuple[float, None]:
        return (5.0 if 1.5 < s < 2.5 else (0.3 / s) ** 3), None

    ts = find_time_scale(load_stub(), [], evaluate=bumpy)
    assert [x for t in ts.tried[:2] for x in t] == pytest.approx(
        [1.0, 0.027, 2.0, 5.0]
    )  # light, then long waits above it
    assert ts.converged, ts.tried
    assert all(s < 1.0 for s, _ in ts.tried[2:])  # the bracket is below the light run
    assert ts.scale == pytest.approx(0.3, rel=0.05)


def test_the_search_says_when_it_does_not_converge() -> None:
    """A load no scale reaches (every job fits at once): ten runs, the closest taken."""
    ts = find_time_scale(load_stub(), [], evaluate=lambda s: (0.0, None))
    assert not ts.converged and len(ts.tried) == 10
    assert "did not converge" in ts.line()


def _job(i: int, submit: float, gpus: int, runtime: float) -> Job:
    return Job(id=f"j{i}", submit=submit, runtime=runtime, task=TaskRequest(gpus=gpus))


def load_stub():
    class Stub:
        jobs: list = []

    return Stub()


def test_the_search_on_a_small_workload(tmp_path: Path) -> None:
    """Real FIFO replays of a small trace: the scale found puts FIFO's mean wait within 10%
    of the mean runtime, and the FIFO run kept is the one at that scale."""
    trace, jobs = load(str(write_gpw(tmp_path)))
    ts = find_time_scale(trace, jobs)
    assert ts.converged, ts.tried
    assert 0.9 <= ts.ratio <= 1.1 and len(ts.tried) <= 10
    assert ts.mean_runtime_s == pytest.approx(np.mean([j.runtime for j in jobs]))
    assert ts.fifo is not None and ts.fifo.row.scale == ts.scale
    assert ts.fifo.row.wait_mean / ts.mean_runtime_s == pytest.approx(ts.ratio)


def test_a_sweep_on_a_synthetic_csv(tmp_path: Path) -> None:
    path = write_gpw(tmp_path)
    r = run_trace(str(path), POLICIES, workers=2)
    assert r.kind == "philly-users" and r.jobs == 240 and r.gpus == 32
    rows = {row.policy: row for row in r.rows}
    assert list(rows) == [p.label for p in parse_policies(POLICIES)]
    for row in r.rows:
        assert row.scale == r.time_scale.scale and row.finished == row.jobs == 240
        assert row.jct_mean >= row.queue_mean >= 0 and 0 < row.allocation <= 1
        assert row.wall_s > 0
        if row.preemptive:
            assert row.queue_mean >= row.wait_mean  # requeued time counts too
        else:
            assert row.preemptions == 0
            assert row.queue_mean == pytest.approx(row.wait_mean)  # the wait before the start
        # Accuracy where the run predicted at submission: history, learned (not oracle).
        assert row.predicted == (row.runtime in ("history", "learned"))
        if row.predicted:
            assert row.mae_s > 0 and 0 <= row.coverage_p90 <= 1 and row.median_rel_error >= 0
        # Training time: only the learned estimator trains (its first fit at 200 ended jobs).
        if row.runtime == "learned":
            assert row.fits >= 1 and 0 < row.train_s < row.wall_s
        else:
            assert row.fits == 0 and row.train_s == 0
    assert rows["las+best-fit"].preemptions > 0
    assert rows["sjf-gpu@oracle+best-fit"].jct_mean < rows[FIFO].jct_mean
    v = r.verdict
    assert v is not None and v.best in {p for p in rows if p.startswith("qssf")}
    assert [t.reference for t in v.targets] == (
        ["sjf-gpu@oracle+best-fit", "las+best-fit", FIFO]
        if v.backfill == "none"
        else ["sjf-gpu/easy-oracle+best-fit", "las/easy@history+best-fit",
              "fifo/easy@history+best-fit"]
    ) + ["the real waits"]  # fmt: skip
    best = rows[v.best]
    assert v.targets[-1].ratio == best.start_error and 0 <= best.start_cover_p90 <= 1
    # Every row's start-time estimates are scored, wherever jobs waited.
    assert all(row.start_error >= 0 for row in r.rows if not row.preemptive)
    # The same replays on one process: the same numbers.
    one = run_trace(str(path), ["fifo+best-fit", "qssf@history+best-fit"], workers=1)
    assert one.time_scale.scale == r.time_scale.scale
    assert one.rows[1].jct_mean == rows["qssf@history+best-fit"].jct_mean
    # Pooled with itself: the same means, twice the jobs.
    (fifo, _) = pooled([one, one], "two")
    assert fifo.jobs == 480 and fifo.jct_mean == pytest.approx(one.rows[0].jct_mean)
    assert fifo.allocation == pytest.approx(one.rows[0].allocation)


def test_a_slice_of_philly_users() -> None:
    root = trace_dir_or_skip()
    if not (root / PHILLY_USER_JOBS).is_file():
        pytest.skip(f"philly-users not found: no {root / PHILLY_USER_JOBS.parent}/")
    policies = ["fifo+best-fit", "qssf@history+best-fit", "las+best-fit", "sjf-gpu@oracle+best-fit"]
    r = run_trace("philly-users", policies, trace_dir=root, first=400, workers=2)
    assert r.jobs == 400 and r.cut == 400 and len(r.rows) == 4 and r.verdict is not None
    # The file's first 400 jobs (its sparse head, 341 h long on average) fit on Philly's
    # 2,490 GPUs even when they all arrive at once: no scale loads them, and the search
    # says so after its ten runs rather than pretend.
    assert not r.time_scale.converged and len(r.time_scale.tried) == 10
    assert r.time_scale.ratio == 0 and "did not converge" in r.time_scale.line()
    # The first 400 of ITP's cluster01 on its 64 GPUs do reach the load.
    itp = run_trace("itp:cluster01", policies[:2], trace_dir=root, first=400, workers=1)
    assert itp.time_scale.converged and itp.verdict is None  # no targets for ITP


def _row(
    policy: str, queue: str, backfill: str, runtime: str, jct: float, q: float, start: float = 0.2
) -> Row:
    return Row(trace="t", policy=policy, queue=queue, backfill=backfill, runtime=runtime,
               preemptive=queue in ("las", "srtf"), scale=1.0, jobs=10, finished=10,
               jct_mean=jct, jct_p99=jct, queue_mean=q, queue_p99=q, wait_mean=q,
               allocation=0.5, preemptions=0, start_error=start)  # fmt: skip


def test_the_verdict_from_a_hand_made_table() -> None:
    rows = [
        _row("fifo", "fifo", "none", "estimate", 200.0, 100.0),
        _row("fifo/easy", "fifo", "easy", "history", 180.0, 80.0),
        _row("las", "las", "none", "estimate", 150.0, 40.0),
        _row("las/easy", "las", "easy", "history", 100.0, 30.0),
        _row("qssf@history", "qssf", "none", "history", 110.0, 10.0),
        _row("qssf/easy@history", "qssf", "easy", "history", 95.0, 12.0),
        _row("qssf@learned", "qssf", "none", "learned", 105.0, 13.0),
        _row("sjf", "sjf-gpu", "none", "oracle", 100.0, 8.0),
        _row("sjf/easy", "sjf-gpu", "easy", "oracle", 90.0, 7.0),
        _row("srtf", "srtf", "none", "oracle", 50.0, 1.0),  # preemptive: never the best
    ]
    v = verdict(rows)
    assert v is not None and v.best == "qssf/easy@history" and v.backfill == "easy"
    by = {t.what: t for t in v.targets}
    sjf, las, fifo = (by["mean JCT vs SJF-oracle"], by["mean JCT vs LAS"],
                      by["mean queueing delay vs FIFO"])  # fmt: skip
    assert (sjf.reference, sjf.ratio, sjf.met) == ("sjf/easy", pytest.approx(95 / 90), True)
    assert (las.reference, las.ratio, las.met) == ("las/easy", pytest.approx(0.95), False)
    assert (fifo.reference, fifo.ratio, fifo.met) == ("fifo/easy", pytest.approx(0.15), False)
    assert not v.met
    # All three met, against the no-backfill references when the best has no backfill.
    rows2 = [r for r in rows if r.policy != "qssf/easy@history"]
    rows2 = [
        _row("qssf@learned", "qssf", "none", "learned", 107.0, 13.0) if r.policy == "qssf@learned"
        else _row("las", "las", "none", "estimate", 140.0, 40.0) if r.policy == "las"
        else r
        for r in rows2
    ]  # fmt: skip
    v2 = verdict(rows2)
    assert v2 is not None and v2.best == "qssf@learned" and v2.backfill == "none"
    assert [t.reference for t in v2.targets] == ["sjf", "las", "fifo", "the real waits"]
    assert [round(t.ratio, 4) for t in v2.targets] == [1.07, round(107 / 140, 4), 0.13, 0.2]
    assert v2.met
    # Start-time estimates off by more than 30% of the wait: not met.
    worse = [_row("qssf@learned", "qssf", "none", "learned", 107.0, 13.0, 0.31)
             if r.policy == "qssf@learned" else r for r in rows2]  # fmt: skip
    v4 = verdict(worse)
    assert v4 is not None and not v4.met and not v4.targets[-1].met
    # A missing reference is said, not judged; no predictive row: no verdict.
    v3 = verdict([r for r in rows2 if r.queue != "las"])
    assert v3 is not None and v3.missing == ("las (no backfill)",) and not v3.met
    assert verdict([r for r in rows if r.queue != "qssf"]) is None
    # 0 / 0 queueing delay is not a pass.
    zero = [_row("fifo", "fifo", "none", "estimate", 1.0, 0.0),
            _row("q", "qssf", "none", "history", 1.0, 0.0)]  # fmt: skip
    (t, _) = [t for t in verdict(zero).targets]  # type: ignore[union-attr]
    assert math.isnan(t.ratio) and not t.met

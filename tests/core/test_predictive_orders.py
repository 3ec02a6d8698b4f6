"""Orders by runtime and by attained service: QSSF (predicted GPU-time, aged), SJF and SRTF on
true GPU-time (oracles), Tiresias' 2D-LAS, and ``preemption/by-order`` that makes LAS and SRTF
preemptive; the policy-set syntax that names the estimator; and the simulator telling a
predictor of each end, never earlier."""

from __future__ import annotations

import math

import pytest

from builders import gpus_cluster, job
from suanli.core.builder import PolicySet, Setting, build
from suanli.core.model import SpecError
from suanli.core.preemption import PreemptionConfig
from suanli.core.registry import create, register
from suanli.core.view import ClusterView
from suanli.sim.engine import simulate

BY_ORDER = PreemptionConfig(policy="by-order")


def starts(result, jid: str) -> float:  # type: ignore[no-untyped-def]
    return float(result.records.start[result.records.ids.index(jid)])


def finish(result, jid: str) -> float:  # type: ignore[no-untyped-def]
    return float(result.records.finish[result.records.ids.index(jid)])


# ------------------------------------------------------------------ the policy-set syntax


@pytest.mark.parametrize(
    ("text", "queue", "backfill", "runtime", "label"),
    [
        ("qssf@history+best-fit", "qssf", "none", "history", "qssf@history+best-fit"),
        ("qssf@learned/easy+best-fit", "qssf", "easy", "learned", "qssf/easy@learned+best-fit"),
        ("qssf/easy@learned+best-fit", "qssf", "easy", "learned", "qssf/easy@learned+best-fit"),
        ("sjf-gpu@oracle/strict+first-fit", "sjf-gpu", "none", "oracle", None),
        ("fifo/easy-oracle+best-fit", "fifo", "easy", "oracle", "fifo/easy-oracle+best-fit"),
        ("las+best-fit", "las", "none", "estimate", "las+best-fit"),
    ],
)
def test_a_policy_set_names_one_estimator_for_order_and_backfill(
    text: str, queue: str, backfill: str, runtime: str, label: str | None
) -> None:
    p = PolicySet.parse(text)
    assert (p.queue, p.backfill, p.runtime) == (queue, backfill, runtime)
    assert p.label == (label or text)
    assert PolicySet.parse(p.label) == p


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("qssf@history/easy@learned+best-fit", "one runtime estimator"),
        ("qssf@/easy+best-fit", "QUEUE"),
    ],
)
def test_a_policy_set_with_two_estimators_is_refused(text: str, match: str) -> None:
    with pytest.raises(SpecError, match=match):
        PolicySet.parse(text)


# ------------------------------------------------------------------ QSSF


def test_qssf_orders_by_the_schedulers_estimator_times_gpus() -> None:
    # With true runtimes: GPU-time 4 × 10 = 40 beats 1 × 100 = 100 beats 8 × 50 = 400.
    view = ClusterView(gpus_cluster(8))
    s = build(view, PolicySet(queue="qssf", runtime="oracle"), Setting())
    for j in (
        job("long", submit=0, runtime=100, gpus=1),
        job("wide", submit=0, runtime=50, gpus=8),
        job("short", submit=0, runtime=10, gpus=4),
    ):
        s.submit(j)
    assert [j.id for j in s.pending_jobs()] == ["short", "long", "wide"]


def test_qssf_ages_a_long_job_past_later_short_ones() -> None:
    order = create("queue", "qssf", half_life=3_600.0)
    view = ClusterView(gpus_cluster(8))
    s = build(view, PolicySet(queue="qssf", runtime="oracle"), Setting(), order=order)
    big = job("big", submit=0, runtime=16 * 3_600, gpus=1)  # 2^4 times the short ones
    s.submit(big)
    key = s.lanes.pending["big"][0]
    # A one-hour job submitted less than four half-lives later goes first; later, after.
    for k, t in enumerate((3 * 3_600, 5 * 3_600)):
        s.submit(job(f"s{k}", submit=t, runtime=3_600, gpus=1))
    assert s.lanes.pending["s0"][0] < key < s.lanes.pending["s1"][0]


def test_qssf_refuses_a_half_life_that_is_not_positive() -> None:
    with pytest.raises(SpecError, match="half_life"):
        create("queue", "qssf", half_life=0)


# ------------------------------------------------------------------ LAS and SRTF, preemptive


def test_las_preempts_only_when_the_runner_passes_the_queue_split() -> None:
    # One GPU. A (10,000 s) runs from 0; B (100 s) comes at 100, in the same first queue as A
    # (100 GPU-s attained): it waits. At 3,600 s A's service passes the split into the
    # second queue and B evicts it; A kept its two checkpoints and resumes after B with the
    # restart overhead.
    jobs = [
        job("A", submit=0, runtime=10_000, gpus=1, checkpoint_interval=1_800),
        job("B", submit=100, runtime=100, gpus=1, checkpoint_interval=1_800),
    ]
    r = simulate(gpus_cluster(1), jobs, PolicySet.parse("las+best-fit"), preemption=BY_ORDER)
    assert starts(r, "B") == pytest.approx(3_600.0, abs=1.0)
    assert finish(r, "B") == pytest.approx(3_700.0, abs=1.0)
    assert finish(r, "A") == pytest.approx(3_700 + 60 + 10_000 - 3_600, abs=1.0)
    assert r.preemptions == 1


def test_las_jobs_of_one_queue_never_evict_each_other() -> None:
    jobs = [job("A", submit=0, runtime=3_000, gpus=1), job("B", submit=10, runtime=100, gpus=1)]
    r = simulate(gpus_cluster(1), jobs, PolicySet.parse("las+best-fit"), preemption=BY_ORDER)
    assert r.preemptions == 0 and starts(r, "B") == 3_000


def test_a_requeued_las_job_rejoins_in_the_queue_it_reached() -> None:
    order = create("queue", "las", thresholds=(100.0, 1_000.0))
    assert [order.level(x) for x in (0, 99.9, 100, 999, 1_000, 5e6)] == [0, 0, 1, 1, 2, 2]
    view = ClusterView(gpus_cluster(8))
    s = build(view, PolicySet(queue="las"), Setting(preemption=BY_ORDER), order=order)
    s.running.attained["old"] = 500.0
    s.submit(job("old", submit=0))
    s.submit(job("new", submit=50))
    assert [j.id for j in s.pending_jobs()] == ["new", "old"]


@pytest.mark.parametrize("thresholds", [(), (0.0,), (100.0, 50.0), (math.inf,)])
def test_las_refuses_bad_thresholds(thresholds: tuple[float, ...]) -> None:
    with pytest.raises(SpecError, match="queue/las"):
        create("queue", "las", thresholds=thresholds)


def test_srtf_evicts_a_longer_runner_for_a_shorter_job() -> None:
    # A (10,000 s, no checkpoint in its first 1,000 s) is evicted at 1,000 s by B (100 s): it
    # loses those 1,000 s and starts over after B, with the restart overhead.
    jobs = [
        job("A", submit=0, runtime=10_000, gpus=1, checkpoint_interval=1_800),
        job("B", submit=1_000, runtime=100, gpus=1),
        job("C", submit=2_000, runtime=20_000, gpus=1),  # longer than A: never evicts it
    ]
    r = simulate(gpus_cluster(1), jobs, PolicySet.parse("srtf+best-fit"), preemption=BY_ORDER)
    assert starts(r, "B") == 1_000
    assert finish(r, "A") == pytest.approx(1_100 + 60 + 10_000)
    assert starts(r, "C") == pytest.approx(finish(r, "A"))
    assert r.preemptions == 1


def test_srtf_waits_out_a_runners_protection() -> None:
    # B comes at 100 s, while A is within its 600 s of protection: B starts at 600 s.
    jobs = [job("A", submit=0, runtime=10_000), job("B", submit=100, runtime=100)]
    r = simulate(gpus_cluster(1), jobs, PolicySet.parse("srtf+best-fit"), preemption=BY_ORDER)
    assert starts(r, "B") == 600


def test_by_order_never_evicts_a_class_that_is_not_preemptible() -> None:
    jobs = [
        job("A", submit=0, runtime=10_000, priority_class="high"),
        job("B", submit=1_000, runtime=100),
    ]
    r = simulate(gpus_cluster(1), jobs, PolicySet.parse("srtf+best-fit"), preemption=BY_ORDER)
    assert r.preemptions == 0 and starts(r, "B") == 10_000


def test_by_order_needs_an_order_that_ranks_running_jobs() -> None:
    with pytest.raises(SpecError, match="does not rank running jobs"):
        build(ClusterView(gpus_cluster(1)), PolicySet(), Setting(preemption=BY_ORDER))


def test_by_order_does_not_take_quotas() -> None:
    with pytest.raises(SpecError, match="checkpoint-aware"):
        create("preemption", "by-order", config=BY_ORDER, quota=object())


# ------------------------------------------------------------------ honest learning


class _Recorder:
    """A predictor that records what it was told and when it was asked."""

    made: list[_Recorder] = []

    def __init__(self) -> None:
        self.plan_q = 0.9
        self.learned: list[tuple[str, float, float]] = []  # job id, runtime, at
        self.asked: dict[str, int] = {}  # job id -> how many jobs were learned at its first ask
        _Recorder.made.append(self)

    def quantile(self, job, q: float) -> float:  # type: ignore[no-untyped-def]
        self.asked.setdefault(job.id, len(self.learned))
        return 100.0 * (1 + q)

    def duration(self, job) -> float:  # type: ignore[no-untyped-def]
        return self.quantile(job, self.plan_q)

    def learn(self, job, runtime: float, at: float) -> None:  # type: ignore[no-untyped-def]
        self.learned.append((job.id, runtime, at))


register("runtime", "test-recorder")(_Recorder)


def test_a_predictor_learns_each_job_at_its_end_and_never_before() -> None:
    jobs = [
        job(f"j{i:02d}", submit=30.0 * i, runtime=50.0 + 37.0 * (i % 7), gpus=1 + i % 3)
        for i in range(40)
    ]
    r = simulate(gpus_cluster(4), jobs, PolicySet.parse("qssf@test-recorder/easy+best-fit"))
    (rec,) = _Recorder.made[-1:]
    fin = dict(zip(r.records.ids, r.records.finish.tolist(), strict=True))
    by_id = {j.id: j for j in jobs}
    # Every job learned once, at its finish, with its runtime, in time order.
    assert sorted(i for i, _, _ in rec.learned) == sorted(by_id)
    assert all(at == fin[i] and rt == by_id[i].runtime for i, rt, at in rec.learned)
    assert [at for _, _, at in rec.learned] == sorted(at for _, _, at in rec.learned)
    # At each job's first prediction, only jobs that had ended by its submission were known.
    for jid, k in rec.asked.items():
        assert all(at <= by_id[jid].submit for _, _, at in rec.learned[:k]), jid
        assert jid not in {i for i, _, _ in rec.learned[:k]}
    # The per-job record keeps the prediction made at submission.
    assert r.records.predicted is not None
    p50, p90 = r.records.predicted
    assert p50.tolist() == [150.0] * 40 and p90.tolist() == [190.0] * 40


def test_a_queue_order_sees_the_estimator_the_backfill_plans_with() -> None:
    view = ClusterView(gpus_cluster(1))
    s = build(view, PolicySet.parse("qssf@oracle/easy+best-fit"), Setting())
    assert s.backfill is not None and s.backfill.runtime is s.runtime  # type: ignore[attr-defined]
    assert type(s.runtime).__name__ == "TrueRuntime"

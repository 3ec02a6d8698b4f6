"""admission/user-limit: at most N GPUs or N running jobs per user or organisation path.

Alone against a hand-built handle (its keys, check, wake-ups and refusal), its configuration's
errors, and through the simulator and the quota file, as a user would meet it."""

from __future__ import annotations

import pytest

from builders import frac, gpus_cluster, job
from fake_handle import FakeHandle
from suanli.config.tenancy import parse_tenancy
from suanli.core.admission.user_limit import (
    UserLimit,
    UserLimitAdmission,
    UserLimitReached,
    parse_limits,
)
from suanli.core.builder import ImpossibleJobError, PolicySet
from suanli.core.decisions import Skip
from suanli.core.model import KeyPathError, SpecError
from suanli.sim.engine import simulate


def bound(*limits: UserLimit) -> tuple[UserLimitAdmission, FakeHandle]:
    u = UserLimitAdmission(limits=limits)
    h = FakeHandle(gpus_cluster(8), ledgers=(u,))
    u.bind(h, 0)
    return u, h


def test_each_user_is_counted_alone_and_an_org_limit_counts_its_subtree() -> None:
    u, _ = bound(UserLimit(max_gpu_milli=4000), UserLimit("lab", "org", max_jobs=3))
    alice = job("a", tenant="lab/v", user="alice")
    bob = job("b", tenant="lab/v", user="bob")
    other = job("c", tenant="ops", user="carol")
    assert u.lane_key(alice) == ((0, "alice"), (1, ""))
    assert u.lane_key(bob) == ((0, "bob"), (1, ""))
    assert u.lane_key(other) == ((0, "carol"),)
    # No user: the tenant stands in.
    assert u.lane_key(job("d", tenant="ops/x")) == ((0, "ops/x"),)


def test_a_user_at_their_gpu_limit_waits_until_one_of_their_jobs_ends() -> None:
    u, h = bound(UserLimit(max_gpu_milli=3000))
    h.run(job("a1", gpus=2, user="alice"), 0, (0, 1))
    h.run(job("b1", gpus=2, user="bob"), 0, (2, 3))
    wants = job("a2", gpus=2, user="alice")
    lane = h.pend(wants, keys=(u.lane_key(wants),))
    got = u.check(wants, lane)
    assert isinstance(got, Skip)
    assert got.reason == UserLimitReached("user alice", "GPUs", 2, 2, 3)
    assert str(got.reason) == (
        "per-user limit: user alice holds 2 of at most 3 GPUs, the job needs 2 more"
    )
    assert u.check(job("b2", gpus=1, user="bob"), h.pend(job("b2", gpus=1, user="bob"))) is None
    u.ended("b1", 5.0)  # bob's end frees nothing of alice's
    assert h.unblocked == []
    u.ended("a1", 6.0)
    assert h.unblocked == [(lane.index, False)]
    assert u.check(wants, lane) is None


def test_running_jobs_are_counted_and_shares_of_a_gpu_count_as_such() -> None:
    u, h = bound(UserLimit(max_jobs=2, max_gpu_milli=1000))
    h.run(job("f1", t=frac(400), user="u"), 0, (0,))
    h.run(job("f2", t=frac(400), user="u"), 0, (1,))
    assert u.held[(0, "u")] == [800, 2]
    third = job("f3", t=frac(100), user="u")
    got = u.check(third, h.pend(third))
    assert isinstance(got, Skip) and got.reason.resource == "running jobs"  # type: ignore[attr-defined]


def test_a_job_larger_than_a_limit_is_refused_up_front() -> None:
    u, h = bound(UserLimit(max_gpu_milli=4000))
    assert u.refusal(job("ok", gpus=4, user="a"), h.view, h.ctx) is None
    why = u.refusal(job("big", gpus=8, user="a"), h.view, h.ctx)
    assert why == "user a may hold at most 4 GPUs (per-user limit), the job asks 8"


@pytest.mark.parametrize(
    ("raw", "path", "problem"),
    [
        ([], "", "must be a non-empty list of limits"),
        ([{"max_gpu": 4}], "[0].max_gpu", "unknown key (known: org, per, max_gpus, max_jobs)"),
        ([{"per": "team", "max_jobs": 1}], "[0].per", "must be user or org, got 'team'"),
        ([{"max_gpus": -1}], "[0].max_gpus", "must be a number >= 0, got -1"),
        ([{"max_gpus": 0.0005}], "[0].max_gpus", "steps of 0.001 GPU, got 0.0005"),
        ([{"max_jobs": 0}], "[0].max_jobs", "must be a whole number >= 1, got 0"),
        ([{"max_jobs": True}], "[0].max_jobs", "must be a whole number >= 1, got True"),
        ([{"org": "lab"}], "[0]", "needs max_gpus, max_jobs or both"),
        ([{"per": "org", "max_jobs": 2}], "[0].per", "per: org needs an org"),
        (["x"], "[0]", "must be a mapping (org, per, max_gpus, max_jobs)"),
    ],
)
def test_configuration_errors_say_where(raw: object, path: str, problem: str) -> None:
    with pytest.raises(KeyPathError) as e:
        parse_limits(raw)
    assert (e.value.path, e.value.problem) == (path, problem)


QUOTAS = """
queues:
  - {name: lab, nominal: {gpu: 8}}
admission:
  user-limit:
    - {max_gpus: 2}
"""


def test_the_quota_file_configures_it_and_names_the_fault() -> None:
    config = parse_tenancy(QUOTAS)
    assert config.admission == {"user-limit": [{"max_gpus": 2}]}
    with pytest.raises(SpecError) as e:
        parse_tenancy(QUOTAS.replace("max_gpus: 2", "max_gpus: two"))
    assert str(e.value) == (
        "tenancy file '<yaml>': admission.user-limit[0].max_gpus: must be a number >= 0, got 'two'"
    )
    with pytest.raises(SpecError) as e:
        parse_tenancy(QUOTAS.replace("user-limit:", "user-limits:"))
    msg = str(e.value)
    assert "admission.user-limits: unknown admission policy 'user-limits'" in msg
    assert "(known: budget, locality, quota, user-limit)" in msg


def test_in_the_simulator_one_user_at_their_limit_never_holds_back_another() -> None:
    config = parse_tenancy(QUOTAS)
    jobs = [
        job("a1", 0.0, 100.0, gpus=2, user="alice"),
        job("a2", 1.0, 100.0, gpus=2, user="alice"),
        job("b1", 2.0, 100.0, gpus=2, user="bob"),
    ]
    res = simulate(
        gpus_cluster(8),
        jobs,
        PolicySet("fifo", "first-fit", strict=False),
        tenancy=config.tenancy,
        admission=config.admission,
    )
    start = dict(zip(res.records.ids, res.records.start.tolist(), strict=True))
    assert start == {"a1": 0.0, "a2": 100.0, "b1": 2.0}  # a2 waits for a1, b1 does not
    assert res.records.waited[1] == UserLimitReached("user alice", "GPUs", 2, 2, 2)  # why a2 waited
    # Without the limit a2 starts at once: the cluster has room.
    free = simulate(gpus_cluster(8), jobs, PolicySet("fifo", "first-fit"))
    assert dict(zip(free.records.ids, free.records.start.tolist(), strict=True))["a2"] == 1.0


def test_in_the_simulator_a_job_over_the_limit_is_impossible() -> None:
    with pytest.raises(ImpossibleJobError, match="job big can never be admitted: user a may"):
        simulate(
            gpus_cluster(8),
            [job("big", gpus=3, user="a")],
            PolicySet(),
            admission={"user-limit": [{"max_gpus": 2}]},
        )


def test_on_the_philly_trace_with_users_no_user_ever_holds_more_than_the_limit() -> None:
    """The trace's own users: 600 jobs of the Philly cut with user ids on 8 x 8 V100, each
    user limited to 16 GPUs. Without the limit some user holds more; with it none ever does,
    and the jobs held back were told so."""
    from suanli.config.cluster import load_cluster
    from suanli.traces import resolve_trace
    from suanli.traces.errors import TraceNotFoundError

    try:
        jobs = resolve_trace("philly-users").jobs[:600]
    except TraceNotFoundError as e:
        pytest.skip(f"public traces not found ({e}): set SUANLI_TRACE_DIR")
    spec = load_cluster("8x8xV100")
    jobs = [j for j in jobs if j.tasks * j.task.gpus <= 16]

    def most_held(res) -> float:  # type: ignore[no-untyped-def]
        r = res.records
        events: dict[str, list[tuple[float, int]]] = {}
        for i, j in enumerate(jobs):
            if r.start[i] == r.start[i]:
                g = int(r.gpu_milli[i]) // 1000
                events.setdefault(j.user, []).extend([(r.start[i], g), (r.finish[i], -g)])
        peak = 0
        for ev in events.values():
            held = 0
            for _, d in sorted(ev, key=lambda e: (e[0], e[1])):  # ends before starts at a tie
                held += d
                peak = max(peak, held)
        return peak

    free = simulate(spec, jobs, PolicySet("fifo", "best-fit"))
    assert most_held(free) > 16
    capped = simulate(
        spec, jobs, PolicySet("fifo", "best-fit"), admission={"user-limit": [{"max_gpus": 16}]}
    )
    assert capped.finished == len(jobs)
    assert most_held(capped) <= 16
    assert any(isinstance(w, UserLimitReached) for w in capped.records.waited.values())

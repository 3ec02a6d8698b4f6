"""preemption/defrag in the simulator: a gang that waits while the room it needs is free but
scattered starts once checkpointable work moves, when the predicted gain exceeds the cost and
the hour's budget allows, and never otherwise."""

from __future__ import annotations

import json

import pytest

from builders import gpus_cluster
from suanli.cli.main import app as cli
from suanli.core.model import Job, SpecError, TaskRequest
from suanli.core.preemption import PreemptionConfig
from suanli.sim.engine import PolicySet, simulate
from suanli.sim.explain import render
from support import cli_runner

SPREAD = PolicySet.parse("fifo+worst-fit")  # the emptiest node: one-node jobs scatter


def j(id: str, submit: float, runtime: float, gpus: int, ck: float | None = 600.0,
      **kw) -> Job:  # type: ignore[no-untyped-def]  # fmt: skip
    return Job(id, submit, runtime, TaskRequest(gpus=gpus), checkpoint_interval=ck,
               estimate=runtime, **kw)  # fmt: skip


def run(jobs, policy="defrag", nodes=(8, 8), **cfg):  # type: ignore[no-untyped-def]
    r = simulate(gpus_cluster(*nodes), jobs, SPREAD, explain=[x.id for x in jobs],
                 preemption=PreemptionConfig(policy=policy, **cfg))  # fmt: skip
    rec = r.records
    return r, {
        i: (float(s), float(f)) for i, s, f in zip(rec.ids, rec.start, rec.finish, strict=True)
    }


def test_a_gang_starts_once_a_checkpointed_job_moves_to_the_other_node() -> None:
    jobs = [j("a", 0, 10_000, 4), j("b", 0, 10_000, 4), j("g", 1000, 1000, 8)]
    _, without = run(jobs, "checkpoint-aware")
    assert without["g"] == (10_000, 11_000)  # 4 + 4 GPUs free, on two nodes: it waits
    r, got = run(jobs)
    assert got["g"] == (1000, 2000)
    # a kept 600 s (its checkpoint), lost 400 s, restarts at once on n1 with 60 s overhead.
    assert got["a"] == (0, 1000 + 60 + 10_000 - 600)
    assert r.records.preemptions.tolist() == [1, 0, 0]  # type: ignore[union-attr]
    assert r.records.lost_gpu_s.tolist() == pytest.approx([4 * 400, 0, 0])  # type: ignore[union-attr]
    story = render("a", r.explain["a"])
    assert "preempted by job g (defrag)" in story and "on n1" in story.splitlines()[-2]


@pytest.mark.parametrize(
    "jobs, why",
    [
        ([j("a", 0, 10_000, 4, ck=None), j("b", 0, 10_000, 4, ck=None), j("g", 1000, 1000, 8)],
         "no checkpoint to resume from"),
        ([j("a", 0, 10_000, 4, priority_class="online"),
          j("b", 0, 10_000, 4, priority_class="online"), j("g", 1000, 1000, 8)],
         "online work"),
        ([j("a", 0, 1100, 4), j("b", 0, 1100, 4), j("g", 1000, 1000, 8)],
         "the gain (100 s x 8 GPUs) is less than the cost (4 x (400 + 60) GPU-s)"),
        ([j("a", 0, 10_000, 4), j("b", 0, 10_000, 4), j("g", 300, 1000, 8)],
         "the minimum runtime (600 s) protects a and b"),
    ],
)  # fmt: skip
def test_nothing_moves_when_a_rule_says_no(jobs: list[Job], why: str) -> None:
    _, got = run(jobs)
    first_end = min(got["a"][1], got["b"][1])
    assert got["g"][0] == first_end, why


def test_nothing_moves_when_a_moved_job_would_not_fit_again() -> None:
    # n0: a (6), n1: b (6), n2: c (4): 8 GPUs free in all. Emptying n2 makes room for g, but
    # c's 4 GPUs would then fit nowhere: nothing moves.
    jobs = [j("a", 0, 10_000, 6), j("b", 0, 10_000, 6), j("c", 0, 10_000, 4),
            j("g", 1000, 1000, 8)]  # fmt: skip
    _, got = run(jobs, nodes=(8, 8, 8))
    assert got["g"][0] == 10_000


def test_the_budget_caps_moves_per_hour() -> None:
    # Two gangs, each needing a move, ten minutes apart; the budget allows one an hour.
    jobs = [j("a", 0, 20_000, 4), j("b", 0, 20_000, 4), j("c", 0, 20_000, 4),
            j("d", 0, 20_000, 4), j("g", 1000, 5000, 8), j("h", 1600, 5000, 8)]  # fmt: skip
    r, got = run(jobs, nodes=(8, 8, 8, 8), defrag_moves_per_hour=1)
    assert got["g"][0] == 1000 and got["h"][0] > 1600 + 3600 - 1000
    assert int(r.records.preemptions.sum()) >= 1  # type: ignore[union-attr]
    _, more = run(jobs, nodes=(8, 8, 8, 8), defrag_moves_per_hour=6)
    assert more["g"][0] == 1000 and more["h"][0] == 1600
    _, none = run(jobs, nodes=(8, 8, 8, 8), defrag_moves_per_hour=0)
    assert none["g"][0] > 1000


@pytest.mark.parametrize("v", [-1.0, float("inf"), float("nan")])
def test_a_bad_budget_is_refused(v: float) -> None:
    with pytest.raises(SpecError, match="defrag_moves_per_hour must be >= 0"):
        PreemptionConfig(defrag_moves_per_hour=v)


def test_simulate_takes_the_defrag_policy_and_its_budget() -> None:
    args = ["simulate", "-c", "4x8xH100", "-n", "120", "--preempt", "--preemption-policy",
            "defrag", "--json"]  # fmt: skip
    ok = cli_runner().invoke(cli, [*args, "--defrag-moves-per-hour", "3"])
    assert ok.exit_code == 0, ok.output
    assert len(json.loads(ok.stdout)["results"]) >= 1
    bad = cli_runner().invoke(cli, [*args, "--defrag-moves-per-hour", "-1"])
    assert bad.exit_code == 2 and "defrag_moves_per_hour must be >= 0" in bad.output
    alone = cli_runner().invoke(cli, ["simulate", "-n", "20", "--defrag-moves-per-hour", "3"])
    assert alone.exit_code == 2 and "only with --preemption-policy defrag" in alone.output

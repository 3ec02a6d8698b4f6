"""preemption/defrag in the live loop (real store, fake backend and clock): a 4-GPU job that
finds 2 + 2 GPUs free on two nodes starts once a checkpointed 2-GPU job moves, which resumes
on the other node; without defrag it waits for an end."""

from __future__ import annotations

from pathlib import Path

from fake_clock import Clock
from loop_builders import make, spec, state, submit
from suanli.core.decisions import Preempt
from suanli.store import Store
from suanli.store import jobs as js


def scattered(store: Store, preemption: str) -> tuple[str, str, str, list[Preempt]]:
    clock = Clock()
    ctl, _ = make(store, clock, preempt=True, policy="fifo+worst-fit", preemption=preemption)
    ctl.recover()
    a = submit(store, spec(10_000, gpus=2, checkpoint_interval=60, estimate=10_000), clock.t)
    b = submit(store, spec(10_000, gpus=2, checkpoint_interval=60, estimate=10_000), clock.t)
    ctl.step()
    assert state(store, a) == state(store, b) == "running"  # one on each node (worst-fit)
    clock.t += 100
    g = submit(store, spec(500, gpus=4, estimate=500), clock.t)
    moves: list[Preempt] = []
    for _ in range(3):  # the move's stop, then the starts, are seen a step later each
        moves += [d for d in ctl.step() if isinstance(d, Preempt)]
    return a, b, g, moves


def test_a_checkpointed_job_moves_so_that_a_waiting_job_starts(store: Store) -> None:
    a, b, g, moves = scattered(store, "defrag")
    assert [(m.kind, m.by) for m in moves] == [("defrag", g)]
    moved = moves[0].job.id
    assert state(store, g) == "running" and state(store, moved) == "running"
    attempts = js.job_attempts(store, moved)
    assert [x.outcome for x in attempts] == ["preempted", None]
    nodes = {x.attempt: {t["node"] for t in x.placement} for x in attempts}
    g_nodes = {t["node"] for t in js.job_attempts(store, g)[0].placement}
    assert nodes[1] == g_nodes and nodes[2] != g_nodes  # it left the node the job took


def test_without_defrag_the_job_waits(store: Store) -> None:
    a, b, g, moves = scattered(store, "checkpoint-aware")
    assert moves == [] and state(store, g) == "pending"
    assert state(store, a) == state(store, b) == "running"


def test_serve_refuses_a_preemption_policy_without_preempt_or_unknown(tmp_path: Path) -> None:
    from suanli.cli.main import app as cli
    from support import cli_runner

    base = ["serve", "--state-dir", str(tmp_path / "state")]
    alone = cli_runner().invoke(cli, [*base, "--preemption-policy", "defrag"])
    assert alone.exit_code == 2 and "only with --preempt" in alone.output
    unknown = cli_runner().invoke(cli, [*base, "--preempt", "--preemption-policy", "nope"])
    assert unknown.exit_code == 2 and "unknown preemption policy 'nope'" in unknown.output

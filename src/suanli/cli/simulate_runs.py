"""Running ``suanli simulate``'s policy sets: the shared replay, one policy set's run
(wherever ``spread_map`` runs it: this process or a Ray task), all of them, and their
progress bars."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from suanli.core.budget import BudgetBook
from suanli.core.builder import PolicySet
from suanli.core.model import ClusterSpec, Job
from suanli.core.pooling import MemoryPool
from suanli.core.preemption import PreemptionConfig
from suanli.core.seams import OrderContext
from suanli.core.speed import REFERENCE, SpeedBasis
from suanli.core.tenancy import TenancySpec
from suanli.sim.engine import simulate
from suanli.sim.failures import FailureModel
from suanli.sim.results import SimResult, Window
from suanli.sim.spread import spread_map
from suanli.sim.topology import TopologyModel


@dataclasses.dataclass(frozen=True)
class Replay:
    """What every policy set's run shares: the cluster, the jobs and the run's settings
    (``spread_map``'s shared argument: sent once to a Ray cluster, not once per policy set)."""

    cluster: ClusterSpec
    jobs: list[Job]
    seed: int
    cycle_interval: float
    until: float | None
    tenancy: TenancySpec | None = None
    ctx: OrderContext | None = None
    preemption: PreemptionConfig | None = None
    explain: tuple[str, ...] = ()
    admission: dict[str, Any] | None = None
    speed_basis: SpeedBasis = REFERENCE
    window: Window | None = None
    start_estimates: bool = False
    startup_s: float = 0.0
    prestage: bool = False
    failures: FailureModel | None = None
    topology: TopologyModel | None = None
    memory_pool: MemoryPool | None = None


def simulate_one(
    replay: Replay,
    run: tuple[PolicySet, BudgetBook | None, Callable[[int], None] | None],
) -> SimResult:
    """One policy set's simulation (with its own budget book and progress reporter; none
    on Ray), wherever ``spread_map`` runs it."""
    ps, book, report = run
    return simulate(
        replay.cluster,
        replay.jobs,
        ps,
        seed=replay.seed,
        cycle_interval=replay.cycle_interval,
        until=replay.until,
        progress=report,
        tenancy=replay.tenancy,
        ctx=replay.ctx,
        preemption=replay.preemption,
        explain=replay.explain,
        budgets=book,
        admission=replay.admission,
        speed_basis=replay.speed_basis,
        window=replay.window,
        start_estimates=replay.start_estimates,
        startup_s=replay.startup_s,
        prestage=replay.prestage,
        failures=replay.failures,
        topology=replay.topology,
        memory_pool=replay.memory_pool,
    )


def run_all(
    cluster: ClusterSpec,
    jobs: list[Job],
    policies: Sequence[PolicySet],
    *,
    seed: int,
    cycle_interval: float,
    until: float | None,
    progress: Progress | None,
    tenancy: TenancySpec | None = None,
    ctx: OrderContext | None = None,
    preemption: PreemptionConfig | None = None,
    explain: Sequence[str] = (),
    budgets: Callable[[], BudgetBook] | None = None,
    admission: dict[str, Any] | None = None,
    speed_basis: SpeedBasis = REFERENCE,
    window: Window | None = None,
    ray: str | None = None,
    start_estimates: bool = False,
    startup_s: float = 0.0,
    prestage: bool = False,
    failures: FailureModel | None = None,
    topology: TopologyModel | None = None,
    memory_pool: MemoryPool | None = None,
) -> list[SimResult]:
    """Simulate ``jobs`` under each policy set (same jobs, same seed), in this process one
    after another, or each as a task on the Ray cluster at ``ray`` (``suanli.sim.spread``:
    the same results, in the same order); runtimes are measured on ``speed_basis`` (a
    trace's ``LoadedTrace.basis``; ``suanli.core.speed``)."""
    shared = Replay(
        cluster,
        jobs,
        seed,
        cycle_interval,
        until,
        tenancy,
        ctx,
        preemption,
        tuple(explain),
        admission,
        speed_basis,
        window,
        start_estimates,
        startup_s,
        prestage,
        failures,
        topology,
        memory_pool,
    )
    runs = [
        (
            ps,
            budgets() if budgets is not None else None,
            _reporter(progress, ps.label, len(jobs)) if ray is None else None,
        )
        for ps in policies
    ]
    return spread_map(simulate_one, runs, shared, ray=ray)


def _reporter(progress: Progress | None, label: str, total: int) -> Callable[[int], None] | None:
    """A progress callback for one policy set: its bar shows from its first report."""
    if progress is None:
        return None
    task = progress.add_task(label, total=total, detail="", visible=False)

    def report(n: int) -> None:
        progress.update(task, completed=n, detail=f"{n:,}/{total:,} jobs arrived", visible=True)

    return report


@contextmanager
def progress_bars(console: Console, enabled: bool) -> Iterator[Progress | None]:
    """A live progress display on ``console`` (transient), or ``None`` when not ``enabled``.

    When disabled no ``Progress`` is made at all: some rich versions write a blank line on
    stopping even a disabled one, which would break one-line errors and pure JSON output.
    """
    if not enabled:
        yield None
        return
    with Progress(
        TextColumn("{task.description:<24}"),
        BarColumn(),
        TextColumn("{task.fields[detail]}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bars:
        yield bars

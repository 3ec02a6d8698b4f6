"""``suanli simulate``: one workload, several policy sets, compared side by side.

The workload is synthetic (``--jobs``, ``--load``) or a public trace (``--trace philly``,
``--trace openb:gpushare40``, a CSV path; ``suanli.traces``), which then also brings its own
machine list as the default cluster.

Flow: check the options, load the cluster, resolve the policy sets in the registry (all of
this before any work, so bad input fails fast), generate or read the workload once, simulate
it under each policy set (here, one after another, or each as a task on a Ray cluster with
``--ray``), then print a table (or JSON) and optionally write files (``--out``).
"""

from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import Progress

import suanli
from suanli.cli.errors import fail, user_errors
from suanli.cli.simulate_runs import progress_bars, run_all
from suanli.cli.simulate_workload import (
    DEFAULT_TIME_LIMIT,
    synthetic_config,
    trace_duty,
    window_option,
)
from suanli.cli.table import results_table
from suanli.config.budgets import load_budgets
from suanli.config.cluster import load_cluster
from suanli.config.tenancy import load_tenancy
from suanli.core.budget import BudgetBook
from suanli.core.builder import PolicySet, check_feasible
from suanli.core.model import ClusterSpec, Job
from suanli.core.pooling import MemoryPool
from suanli.core.preemption import PreemptionConfig
from suanli.core.registry import UnknownPolicyError, check
from suanli.core.seams import OrderContext
from suanli.core.speed import REFERENCE
from suanli.metering.costmodel import PriceBookCostModel
from suanli.metering.prices import load_price_book
from suanli.metering.simout import DEFAULT_EPOCH, parse_epoch
from suanli.sim.explain import render as render_timeline
from suanli.sim.export import render_json, write_results
from suanli.sim.failures import DETECT_S, GPU_PER_DAY, NODE_PER_DAY, FailureModel
from suanli.sim.pooling import pool_line
from suanli.sim.results import SimResult, Window
from suanli.sim.spread import SpreadError, check_address
from suanli.sim.topology import TopologyModel, parse_step, spread_line
from suanli.traces import LoadedTrace, resolve_trace
from suanli.workload.duty import apply_duty, parse_duty
from suanli.workload.duty import describe as describe_duty
from suanli.workload.info import WorkloadInfo, span_text
from suanli.workload.quotas import MODES, proportional_tenancy
from suanli.workload.synthetic import WorkloadConfig, generate_with_info

DEFAULT_CLUSTER = "64x8xH100"
DEFAULT_POLICIES = (
    "fifo+first-fit",
    "fifo+best-fit",
    "fifo/strict+best-fit",
    "priority+best-fit",
    "sjf+best-fit",
    "smallest-first+packing",
)
SHARING_DEFAULT_POLICY = "fifo+frag-balance"
"""Added to the defaults when jobs ask for shares of GPUs: frag-balance is suanli's default
placement for GPU-sharing clusters (docs/fgd.md)."""
FOOTNOTE = (
    "GPU allocation: the time-weighted share of the GPUs that jobs hold, over the measurement "
    "window. GPU utilisation: the share kept busy. A job keeps the GPUs it holds busy only "
    "part of the time (its duty: declared, or drawn from a measured profile, docs/workload.md), "
    "so utilisation is allocation less the idle time jobs hold. Per GPU model: of that "
    "model's own GPUs. Whole run: first arrival to last finish (or --until). Job figures count "
    "the jobs that arrived in the window. *: best of the row. (oracle): knows the true "
    "runtimes, a reference no real scheduler can reach."
)
NON_TTY_WIDTH = 200
"""Console width when stdout is not a terminal: wide enough for the table not to wrap."""


def resolve_policies(texts: Sequence[str]) -> list[PolicySet]:
    """Parsed policy sets, duplicates dropped (first kept), every name checked in the registry.

    Raises ``SpecError`` (syntax) or ``UnknownPolicyError`` (name, listing the valid ones).
    """
    out: dict[str, PolicySet] = {}
    for text in texts:
        ps = PolicySet.parse(text.strip())
        ps.check()
        out.setdefault(ps.label, ps)
    return list(out.values())


def check_options(seed: int, cycle_interval: float, until: float | None) -> None:
    """``fail`` on the first option out of range (the workload's: ``synthetic_config``)."""
    if seed < 0:
        fail(f"--seed: must be >= 0 (got {seed})")
    if not (math.isfinite(cycle_interval) and cycle_interval >= 0):
        fail(f"--cycle-interval: must be a number >= 0 (got {cycle_interval:g})")
    if until is not None and not (math.isfinite(until) and until > 0):
        fail(f"--until: must be a number > 0 (got {until:g})")


def describe_window(r: SimResult) -> str:
    """``measurement window: 2.1 d to 21.4 d after the first arrival (...); N of M jobs
    arrived in it. Whole run: ...``."""
    t0 = float(r.records.submit.min()) if len(r.records.submit) else 0.0
    w0, w1 = r.window
    return (
        f"measurement window: {span_text(w0 - t0)} to {span_text(w1 - t0)} after the first arrival "
        f"({r.window_rule}); {r.window_jobs:,} of {r.jobs:,} jobs arrived in it. "
        f"Whole run: {span_text(r.makespan)}, GPU allocation {r.gpu_allocation_run:.1%}, "
        f"utilisation {r.gpu_utilisation_run:.1%}."
    )


def describe_cluster(cluster: ClusterSpec) -> str:
    """``64 nodes, 512 GPUs (H100)``."""
    models = ", ".join(m.name for m in cluster.gpu_models) or "CPU only"
    return f"{len(cluster.nodes):,} nodes, {cluster.total_gpus:,} GPUs ({models})"


def run_meta(
    cluster: ClusterSpec,
    config: WorkloadConfig,
    info: WorkloadInfo | None,
    cycle_interval: float,
    until: float | None,
    trace: LoadedTrace | None = None,
    time_scale: float = 1.0,
    window: Window | None = None,
    duty: str | None = None,
) -> dict[str, Any]:
    """What was run, for the JSON output and summary.json."""
    seed = config.seed
    workload: dict[str, Any] = {
        "kind": "synthetic",
        "jobs": info.jobs if info is not None else config.jobs,
        "seed": seed,
        "target_load": config.target_load,
        "horizon_s": config.horizon,
        "derived": info.derived if info is not None else None,
        "arrival_span_s": info.span if info is not None else None,
        "arrival_rate_per_s": info.arrival_rate if info is not None else None,
        "offered_load": info.offered_load if info is not None else None,
        "time_limit_s": config.time_limit,
        "jobs_cut_by_time_limit": info.capped if info is not None else 0,
        "gpu_time_cut_by_time_limit": info.cut if info is not None else 0.0,
        "speed_weighted_load": config.speed_weighted_load,
        "load_window": config.load_window,
    }
    if trace is not None:
        workload = {
            "kind": "trace",
            "trace": trace.spec,
            "files": [str(f) for f in trace.files],
            "source": trace.source,
            "jobs": len(trace.jobs),
            "rows_skipped": trace.skipped.rows_skipped if trace.skipped else 0,
            "time_scale": time_scale,
            "speed_basis": trace.basis.as_dict(cluster),
        }
    workload["duty"] = duty
    return {
        "suanli_version": suanli.__version__,
        "cluster": cluster.name,
        "nodes": len(cluster.nodes),
        "gpus": cluster.total_gpus,
        "gpu_models": [m.name for m in cluster.gpu_models],
        "workload": workload,
        "seed": seed,
        "cycle_interval": cycle_interval,
        "until": until,
        "window": {
            "start_s": window.start if window is not None else None,
            "end_s": window.end if window is not None else None,
            "warmup": window.warmup if window is not None else 0.0,
        },
    }


def generate_workload(
    config: WorkloadConfig, cluster: ClusterSpec, progress: Progress | None
) -> tuple[list[Job], WorkloadInfo]:
    """The synthetic jobs for ``cluster`` and how they came about, with a spinner on
    ``progress`` while they are drawn."""
    if progress is None:
        return generate_with_info(config, cluster)
    size = f"{config.jobs:,} jobs" if config.jobs is not None else "deriving the job count"
    task = progress.add_task("generating workload", total=None, detail=size)
    try:
        return generate_with_info(config, cluster)
    finally:
        progress.remove_task(task)


def scale_arrivals(jobs: Sequence[Job], factor: float) -> list[Job]:
    """``jobs`` with every submit time multiplied by ``factor`` (the same jobs if 1)."""
    if factor == 1.0:
        return list(jobs)
    return [dataclasses.replace(j, submit=j.submit * factor) for j in jobs]


def budget_books(
    budgets: Path | None, prices: Path | None, epoch: str, spec: ClusterSpec
) -> Callable[[], BudgetBook] | None:
    """A maker of fresh budget books (one per policy set), or None without ``--budgets``."""
    if budgets is None:
        if prices is not None:
            fail("--prices: only with --budgets (prices are applied by `suanli bill`)")
        return None
    if prices is None:
        fail("--budgets: needs --prices FILE (budgets are in money)")
    epoch_ms = parse_epoch(epoch)
    if epoch_ms % 1000:
        fail(f"--epoch: budgets need a whole second, got {epoch!r}")
    epoch_s = epoch_ms // 1000
    spec_b = load_budgets(budgets, epoch_s=epoch_s)
    book = load_price_book(prices)
    models = [m.name for m in spec.gpu_models]

    def make() -> BudgetBook:
        return BudgetBook(spec_b, PriceBookCostModel(book, spec.name, epoch_s * 1000, models))

    return make


def check_explain(ids: Sequence[str], jobs: Sequence[Job]) -> None:
    """``--explain`` must name jobs of the workload."""
    if not ids:
        return
    known = {j.id for j in jobs}
    for job_id in ids:
        if job_id not in known:
            sample = ", ".join(j.id for j in jobs[:3])
            fail(f"--explain: no job {job_id!r} in the workload (its ids look like {sample})")


def simulate_command(
    cluster: Annotated[
        str | None,
        typer.Option(
            "--cluster",
            "-c",
            metavar="SPEC",
            help="Short form (64x8xH100, 32x8xH100+16x4xA100[rack=16], "
            "18x4xGB200[nvlink=72,cpu=144,mem=2T]) or a .yaml/.yml file "
            f"(default: {DEFAULT_CLUSTER}, or the trace's own machines with --trace).",
        ),
    ] = None,
    trace: Annotated[
        str | None,
        typer.Option(
            "--trace",
            "-t",
            metavar="TRACE",
            help="Replay a public trace instead of a synthetic workload: philly, "
            "openb[:default|cpu050|gpushare40], itp:cluster01..10, azure-llm:code|conv, or a "
            "CSV path (docs/traces.md).",
        ),
    ] = None,
    trace_dir: Annotated[
        Path | None,
        typer.Option(
            "--trace-dir",
            metavar="DIR",
            help="Folder of the public traces (default: $SUANLI_TRACE_DIR, else ../shared/traces).",
        ),
    ] = None,
    time_scale: Annotated[
        float,
        typer.Option(
            "--time-scale",
            help="Multiply the trace's arrival times by this (0.5 = twice the demand per hour); "
            "runtimes are kept.",
        ),
    ] = 1.0,
    quotas: Annotated[
        str | None,
        typer.Option(
            "--quotas",
            metavar="FILE|static|shared",
            help="Put jobs under queue quotas: a tenancy YAML file (docs/tenancy.md), or "
            "'static' / 'shared' for queues guaranteed their share of the workload's GPU-hours, "
            "alone or lending idle quota in one cohort.",
        ),
    ] = None,
    preempt: Annotated[
        bool,
        typer.Option(
            "--preempt",
            help="Let jobs evict lower-priority ones, and queues reclaim quota they lent "
            "(minimum runtime 600 s, at most 3 preemptions a day per job; docs/tenancy.md).",
        ),
    ] = False,
    preemption_policy: Annotated[
        str,
        typer.Option(
            "--preemption-policy",
            help="With --preempt: the preemption/... plugin that chooses victims: "
            "checkpoint-aware (priorities and quota reclaim), by-order (the queue order's "
            "own ranking of running jobs: queue/las, queue/srtf; docs/predict.md) or defrag "
            "(checkpoint-aware, and moves checkpointed work to make scattered free GPUs whole "
            "for a job that waits; docs/defrag.md).",
        ),
    ] = "checkpoint-aware",
    defrag_moves: Annotated[
        float,
        typer.Option(
            "--defrag-moves-per-hour",
            metavar="N",
            help="With --preemption-policy defrag: at most N jobs moved in any hour.",
        ),
    ] = PreemptionConfig().defrag_moves_per_hour,
    start_estimates: Annotated[
        bool,
        typer.Option(
            "--start-estimates",
            help="Estimate each job's start at its submission, as `suanli queue` tells a "
            "waiting user (P50 and P90, from a plan of the queue on predicted runtimes); the "
            "per-job files get start_p50, start_p90 and start_error (docs/predict.md).",
        ),
    ] = False,
    startup_delay: Annotated[
        float,
        typer.Option(
            "--startup-delay",
            min=0.0,
            metavar="SECONDS",
            help="Seconds every attempt spends starting on its GPUs (pulling its image, "
            "staging its data) before its work begins.",
        ),
    ] = 0.0,
    prestage: Annotated[
        bool,
        typer.Option(
            "--prestage",
            help="With --startup-delay: prepare each job the start-time plan expects to start "
            "soon, so that it starts with less or none of that delay (docs/predict.md).",
        ),
    ] = False,
    failures: Annotated[
        float | None,
        typer.Option(
            "--failures",
            min=0.0,
            metavar="REPAIR_SECONDS",
            help="GPUs, nodes and racks fail (rates per component-day below; defaults from "
            "Llama 3's 54-day run), are found after --failure-detect-s and are back this many "
            "seconds later; the attempts they take down resume from their last checkpoint "
            "(docs/failures.md).",
        ),
    ] = None,
    gpu_failures: Annotated[
        float,
        typer.Option(
            "--gpu-failures-per-day",
            min=0.0,
            metavar="RATE",
            help="With --failures: failures per GPU-day (each drains its node).",
        ),
    ] = GPU_PER_DAY,
    node_failures: Annotated[
        float,
        typer.Option(
            "--node-failures-per-day",
            min=0.0,
            metavar="RATE",
            help="With --failures: failures per node-day.",
        ),
    ] = NODE_PER_DAY,
    rack_failures: Annotated[
        float,
        typer.Option(
            "--rack-failures-per-day",
            min=0.0,
            metavar="RATE",
            help="With --failures: failures per rack-day (no published default).",
        ),
    ] = 0.0,
    failure_detect: Annotated[
        float,
        typer.Option(
            "--failure-detect-s",
            min=0.0,
            metavar="SECONDS",
            help="With --failures: seconds before a failure is found.",
        ),
    ] = DETECT_S,
    topology: Annotated[
        str | None,
        typer.Option(
            "--topology",
            metavar="GRAD_GB:COMPUTE_S",
            help="Multi-GPU jobs run slower the farther apart their GPUs are: each step "
            "computes for COMPUTE_S, then ring-all-reduces GRAD_GB over the slowest link "
            "between its GPUs (NVLink, PCIe, InfiniBand; docs/topology.md); "
            "e.g. 14:0.8 (a 7B model's BF16 gradients).",
        ),
    ] = None,
    memory_pool: Annotated[
        str | None,
        typer.Option(
            "--memory-pool",
            metavar="SOURCES",
            help="A whole-GPU job that asks for more memory a GPU than any GPU it may use has "
            "runs with the overflow on NVLink peers (peer: it also takes free GPUs of its "
            "node as lenders) or in host memory (host), whichever costs fewer GPU-seconds, "
            "slower by a memory-bound bound (docs/pooling.md); e.g. peer,host.",
        ),
    ] = None,
    pool_overlap: Annotated[
        float,
        typer.Option(
            "--pool-overlap",
            metavar="SHARE",
            help="With --memory-pool: the share of the remote memory traffic hidden behind "
            "compute (0: the memory-bound bound).",
        ),
    ] = 0.0,
    skip_bad_rows: Annotated[
        bool,
        typer.Option(
            "--skip-bad-rows",
            help="Skip malformed trace rows (counted and reported) instead of failing.",
        ),
    ] = False,
    jobs: Annotated[
        int | None,
        typer.Option(
            "--jobs",
            "-n",
            help="Synthetic jobs to generate (default: as many as --horizon holds at --load).",
        ),
    ] = None,
    horizon: Annotated[
        str | None,
        typer.Option(
            "--horizon",
            metavar="DURATION",
            help="How long the synthetic jobs keep arriving, e.g. 21d or 36h (default: 21d, "
            "or derived from --jobs and --load). Any two of --jobs, --horizon and --load fix "
            "the third.",
        ),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the workload and the policies.")] = 0,
    load: Annotated[
        float | None,
        typer.Option(
            "--load",
            help="Target offered load: GPU work asked per second over the cluster's "
            "speed-weighted GPU capacity (default 0.9 = 90%).",
        ),
    ] = None,
    time_limit: Annotated[
        str | None,
        typer.Option(
            "--time-limit",
            metavar="DURATION|none",
            help="No synthetic job runs longer than this on the cluster, as a partition's "
            f"time limit (default {DEFAULT_TIME_LIMIT / 3600:g}h; 'none' keeps Philly's "
            "tail of jobs of weeks).",
        ),
    ] = None,
    duty: Annotated[
        str | None,
        typer.Option(
            "--duty",
            metavar="PROFILE",
            help="How busy jobs keep the GPUs they hold: training (Jeon et al., ATC'19), "
            "inference (Alibaba GenAI trace), sharing, synthetic, declared, constant:X or "
            "beta:MEAN,K (default: synthetic for the built-in workload, the trace's own for a "
            "trace; docs/workload.md).",
        ),
    ] = None,
    window: Annotated[
        str | None,
        typer.Option(
            "--window",
            metavar="START:END|arrivals",
            help="What the summaries measure, as durations after the first arrival (2d:12d; "
            "either side may be empty). Default: the arrivals less their first 10% "
            "(warm-up) for a synthetic workload, all the arrivals for a trace; the drain "
            "after the last arrival is left out. The whole run stays in the JSON.",
        ),
    ] = None,
    policy: Annotated[
        list[str] | None,
        typer.Option(
            "--policy",
            "-p",
            metavar="QUEUE[/MODE]+PLACEMENT",
            help="Policy set QUEUE[/MODE]+PLACEMENT (MODE: skip, strict, easy, easy-oracle, "
            "conservative, conservative-oracle), repeatable "
            f"(default: {', '.join(DEFAULT_POLICIES)}; and {SHARING_DEFAULT_POLICY}, the default "
            "placement for GPU-sharing clusters, when jobs ask for shares of GPUs). See "
            "`suanli policies`.",
        ),
    ] = None,
    cycle_interval: Annotated[
        float,
        typer.Option(
            "--cycle-interval",
            help="Seconds between scheduling cycles; 0 runs a cycle at every event.",
        ),
    ] = 0.0,
    until: Annotated[
        float | None,
        typer.Option("--until", help="Stop the clock at this simulated second."),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print only the summaries, as JSON.")
    ] = False,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            metavar="DIR",
            help="Directory for per-job and time-series CSV and JSON, summary.json and allocation.png.",
        ),
    ] = None,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No progress bar and no notes; results only.")
    ] = False,
    budgets: Annotated[
        Path | None,
        typer.Option(
            "--budgets",
            metavar="FILE",
            help="Budgets (YAML, docs/budgets.md) enforced at admission: refuse, demote or "
            "hold jobs off-peak once a department's budget is spent. Needs --prices.",
        ),
    ] = None,
    prices: Annotated[
        Path | None,
        typer.Option("--prices", metavar="FILE", help="Price book (YAML, docs/prices.md)."),
    ] = None,
    epoch: Annotated[
        str,
        typer.Option(
            "--epoch",
            help="Wall-clock instant of simulated second 0, for time-of-day prices and "
            "calendar budget periods.",
        ),
    ] = DEFAULT_EPOCH,
    explain: Annotated[
        list[str] | None,
        typer.Option(
            "--explain",
            metavar="JOB",
            help="Tell the story of job JOB under each policy set: when it waited and why "
            "(with the numbers), started, was preempted, finished. Repeatable.",
        ),
    ] = None,
    ray: Annotated[
        str | None,
        typer.Option(
            "--ray",
            metavar="ADDRESS",
            help="Run each policy set as a task on the running Ray cluster at ADDRESS (its "
            "head's HOST:PORT, ray://HOST:PORT or auto) instead of one after another here; "
            "same results. Every node needs suanli installed; the workload is sent from "
            "here. Needs pip install 'suanli[ray]'.",
        ),
    ] = None,
) -> None:
    """Replay a synthetic workload under several policy sets and compare them side by side."""
    check_options(seed, cycle_interval, until)
    if trace is not None:
        for name, given in (
            ("--jobs", jobs),
            ("--horizon", horizon),
            ("--load", load),
            ("--time-limit", time_limit),
        ):
            if given is not None:
                fail(f"{name}: only for a synthetic workload (a trace brings its own jobs)")
    config = synthetic_config(
        jobs=jobs,
        horizon=horizon,
        load=load,
        time_limit=time_limit if time_limit is not None else f"{DEFAULT_TIME_LIMIT:g}",
        seed=seed,
        duty=duty if trace is None else None,
    )
    if trace is not None and duty is not None:
        with user_errors():
            parse_duty(duty)
    measure = window_option(window, steady=trace is None)
    if prestage and startup_delay == 0:
        fail("--prestage: only with a --startup-delay to save")
    failure_model = None
    if failures is not None:
        with user_errors():
            failure_model = FailureModel(
                repair_s=failures, gpu_per_day=gpu_failures, node_per_day=node_failures,
                rack_per_day=rack_failures, detect_s=failure_detect, seed=seed,
            )  # fmt: skip
    topology_model = None
    if topology is not None:
        with user_errors():
            topology_model = TopologyModel(default=parse_step(topology))
    pool = None
    if memory_pool is not None:
        with user_errors():
            sources = tuple(x.strip() for x in memory_pool.split(",") if x.strip())
            pool = MemoryPool(sources=sources, overlap=pool_overlap)
    elif pool_overlap != 0.0:
        fail("--pool-overlap: only with --memory-pool")
    if preemption_policy != "checkpoint-aware":
        if not preempt:
            fail("--preemption-policy: only with --preempt")
        try:
            check("preemption", preemption_policy)
        except UnknownPolicyError as e:
            fail(f"--preemption-policy: {e}")
    if defrag_moves != PreemptionConfig().defrag_moves_per_hour and preemption_policy != "defrag":
        fail("--defrag-moves-per-hour: only with --preemption-policy defrag")
    preemption_config = None
    if preempt:
        with user_errors():
            preemption_config = PreemptionConfig(
                policy=preemption_policy, defrag_moves_per_hour=defrag_moves
            )
    if not (math.isfinite(time_scale) and time_scale > 0):
        fail(f"--time-scale: must be a number > 0 (got {time_scale:g})")
    if time_scale != 1.0 and trace is None:
        fail("--time-scale: only with --trace (a synthetic workload has --load)")
    if out is not None:
        try:  # fail before the work, not after it
            out.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            fail(f"--out {out}: cannot create the directory: {e.strerror or e}")
    if ray is not None:
        try:
            check_address(ray)
        except SpreadError as e:
            fail(f"--ray: {e}")
    loaded: LoadedTrace | None = None
    info: WorkloadInfo | None = None
    with user_errors():
        err = Console(stderr=True, highlight=False)
        if trace is not None:
            loaded = resolve_trace(trace, trace_dir, skip_bad_rows=skip_bad_rows)
            if loaded.skipped and loaded.skipped.rows_skipped and not (as_json or quiet):
                err.print(f"{trace}: {loaded.skipped}", markup=False)
        if cluster is None and loaded is not None:
            spec = loaded.cluster
        else:
            spec = load_cluster(cluster or DEFAULT_CLUSTER)
        policies = resolve_policies(policy or DEFAULT_POLICIES)
        tenancy_config = (
            load_tenancy(quotas) if quotas is not None and quotas not in MODES else None
        )
        with progress_bars(err, not (quiet or as_json) and err.is_terminal) as bars:
            if loaded is not None:
                profile = parse_duty(duty) if duty is not None else trace_duty(loaded)
                workload = apply_duty(scale_arrivals(loaded.jobs, time_scale), profile, seed)
                check_feasible(spec, workload)
            else:
                workload, info = generate_workload(config, spec, bars)
                profile = parse_duty(config.duty)
            if policy is None and any(j.task.fractional for j in workload):
                # GPU-sharing workload: add suanli's default placement for it (docs/fgd.md).
                policies = resolve_policies((*DEFAULT_POLICIES, SHARING_DEFAULT_POLICY))
            check_explain(explain or [], workload)
            make_book = budget_books(budgets, prices, epoch, spec)
            tenancy = (
                tenancy_config.tenancy
                if tenancy_config is not None
                else proportional_tenancy(workload, spec, quotas)
                if quotas is not None
                else None
            )
            if ray is not None and not (quiet or as_json):
                err.print(
                    f"running {len(policies)} policy set(s) on the Ray cluster at {ray}",
                    markup=False,
                )
            try:
                results = run_all(
                    spec,
                    workload,
                    policies,
                    seed=seed,
                    cycle_interval=cycle_interval,
                    until=until,
                    progress=bars,
                    tenancy=tenancy,
                    ctx=OrderContext(tenancy_config.priority_classes) if tenancy_config else None,
                    preemption=preemption_config,
                    explain=explain or [],
                    budgets=make_book,
                    admission=tenancy_config.admission if tenancy_config else None,
                    window=measure,
                    speed_basis=loaded.basis if loaded is not None else REFERENCE,
                    ray=ray,
                    start_estimates=start_estimates,
                    startup_s=startup_delay,
                    prestage=prestage,
                    failures=failure_model,
                    topology=topology_model,
                    memory_pool=pool,
                )
            except SpreadError as e:
                fail(f"--ray: {e}")
    meta = run_meta(
        spec, config, info, cycle_interval, until, loaded, time_scale, measure, profile.label
    )
    if as_json:
        sys.stdout.write(render_json(results, meta))
    else:
        console = Console(highlight=False)
        if not console.is_terminal:
            console = Console(highlight=False, width=NON_TTY_WIDTH)
        if loaded is not None:
            scaled = f", arrivals × {time_scale:g}" if time_scale != 1.0 else ""
            title = (
                f"{spec.name}: {describe_cluster(spec)} · trace {loaded.spec}: "
                f"{len(workload):,} jobs{scaled}, seed {seed}"
            )
        else:
            assert info is not None
            title = (
                f"{spec.name}: {describe_cluster(spec)} · {info.jobs:,} synthetic jobs, "
                f"seed {seed}: {info.describe()}"
            )
        console.print(title, markup=False)
        if loaded is not None:
            console.print(f"trace time: {loaded.basis.describe(spec)}", markup=False)
        console.print(describe_duty(workload, profile), markup=False)
        if results:
            console.print(describe_window(results[0]), markup=False)
        console.print(results_table(results))
        for r in results:
            for alert in r.budget_alerts:
                console.print(f"[{r.label}] {alert}", markup=False)
            if r.records.failures is not None:
                console.print(f"[{r.label}] {r.records.failures.line()}", markup=False)
            if r.records.pooled is not None:
                console.print(f"[{r.label}] {pool_line(r.records)}", markup=False)
            if r.records.spread_gpu_s is not None:
                console.print(f"[{r.label}] {spread_line(r.records)}", markup=False)
            notes = r.records.budget
            if notes:
                refused = sum(1 for v in notes.values() if v.startswith("refused"))
                console.print(
                    f"[{r.label}] budgets: {refused:,} job(s) refused, "
                    f"{len(notes) - refused:,} demoted (see the per-job CSV's budget column)",
                    markup=False,
                )
        for job_id in explain or []:
            for r in results:
                console.print(
                    f"[{r.label}] " + render_timeline(job_id, r.explain[job_id]), markup=False
                )
        if not quiet:
            console.print(
                FOOTNOTE,
                style="dim",
            )
    if out is not None:
        try:
            written = write_results(results, out, meta)
        except OSError as e:
            fail(f"--out {out}: cannot write results: {e.strerror or e}")
        if not quiet:
            typer.echo(f"wrote {len(written)} files to {out}", err=as_json)

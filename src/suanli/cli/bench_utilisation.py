"""``suanli bench utilisation``: the co-location scenario (``suanli.bench.utilisation``), its
three setups side by side, the utilisation bound and the issue's targets, per seed."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from suanli.bench.utilisation import Report, describe, run_scenario
from suanli.cli.errors import fail, user_errors
from suanli.cli.options import TraceDirOption
from suanli.cli.table import hours
from suanli.traces import find_trace_dir


def table(r: Report) -> Table:
    t = Table(title=f"co-location, one week, seed {r.seed}")
    cols = ("setup", "alloc %", "util %", "useful GPU-h", "SLO %", "P99 s", "JCT h",
            "JCT P99 h", "queue h", "queue P99 h", "preempt", "resize", "lost GPU-h")  # fmt: skip
    for c in cols:
        t.add_column(c, justify="left" if c == "setup" else "right")
    for s in r.summaries:
        t.add_row(
            s.name, f"{s.allocation:.1%}"[:-1], f"{s.utilisation:.1%}"[:-1],
            f"{s.useful_gpu_hours:,.0f}", f"{s.slo_attainment:.2%}"[:-1],
            "inf" if math.isinf(s.p99_latency) else f"{s.p99_latency:.2f}",
            hours(s.jct_mean), hours(s.jct_p99), hours(s.queue_mean), hours(s.queue_p99),
            str(s.preemptions), str(s.resizes), f"{s.lost_gpu_hours:,.1f}",
        )  # fmt: skip
    return t


def plot(reports: list[Report], path: Path) -> None:
    """Allocation and utilisation of each setup over the week, and the service's replicas
    against its demand (the first seed's run)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    r = reports[0]
    sc = r.built.scenario
    x = [i * sc.step / 3600 for i in range(len(sc.demand))]
    fig = Figure(figsize=(11, 7))
    FigureCanvasAgg(fig)
    a1, a2 = fig.subplots(2, 1, sharex=True)
    for s, tr in zip(r.summaries, r.series, strict=True):
        a1.plot(x, tr.busy / sc.gpus * 100, lw=0.7, label=f"{s.name} utilisation")
        a1.plot(x, tr.alloc / sc.gpus * 100, lw=0.7, ls="--", label=f"{s.name} allocation")
    a1.axhline(
        r.bound.utilisation * 100,
        color="k",
        lw=0.8,
        ls=":",
        label="utilisation bound (mean over the week)",
    )
    a1.set_ylabel("% of GPUs")
    a1.legend(fontsize=7, ncol=4)
    for s, tr in zip(r.summaries, r.series, strict=True):
        a2.plot(x, tr.replicas, lw=0.7, label=f"{s.name} replicas ready")
    a2.plot(x, sc.demand / sc.service.mu, lw=0.7, color="k",
            label="demand (replicas' worth of work)")  # fmt: skip
    a2.set_xlabel("hours")
    a2.set_ylabel("replicas")
    a2.legend(fontsize=7)
    fig.suptitle(f"co-location scenario, seed {r.seed}")
    fig.savefig(path, dpi=110)


def utilisation_command(
    seeds: Annotated[str, typer.Option(help="Seeds, e.g. 0 or 0,1,2 or 0-2.")] = "0",
    jitter: Annotated[
        float,
        typer.Option(
            help="A variant the scenario does not fix: day-to-day and step-to-step lognormal "
            "noise of this sigma on the demand (0: the scenario as fixed)."
        ),
    ] = 0.0,
    shift: Annotated[
        int,
        typer.Option(
            help="A variant the scenario does not fix: the training week starts this many "
            "full days later (0: the first full week, as fixed)."
        ),
    ] = 0,
    trace_dir: TraceDirOption = None,
    plot_path: Annotated[
        Path | None, typer.Option("--plot", help="Write a PNG of the week (first seed).")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the reports as JSON.")] = False,
) -> None:
    """Inference co-located with elastic training: static partition, shared pool, suanli."""
    from suanli.cli.bench import parse_seeds

    with user_errors():
        if not (0 <= jitter <= 2 and math.isfinite(jitter)):
            fail(f"--jitter: must be in [0, 2], got {jitter}")
        seed_list = parse_seeds(seeds)
        root = find_trace_dir(trace_dir)
        reports = [run_scenario(root, s, jitter, shift) for s in seed_list]
        if json_out:
            typer.echo(json.dumps([r.to_json() for r in reports], indent=2, allow_nan=False))
        else:
            console = Console(width=None if sys.stdout.isatty() else 170)
            for line in describe(reports[0].built):
                console.print(line, highlight=False)
            if jitter or shift:
                console.print(
                    f"variant: demand jitter sigma {jitter:g}, training week shifted {shift} d",
                    highlight=False,
                )
            for r in reports:
                console.print(table(r))
                b = r.bound
                console.print(
                    f"bound: no policy can pass {b.utilisation:.1%} utilisation here (service "
                    f"{b.service:.1%} + training {b.training:.1%} of the GPU time; "
                    "docs/colocation.md)", highlight=False,
                )  # fmt: skip
                for s in r.summaries:
                    console.print(
                        f"  {s.name}: replicas {s.replicas_mean:.1f} on average, "
                        f"{s.under_provisioned_hours:.1f} h under-provisioned, "
                        f"{s.within_slo:.2%} of requests within {r.built.scenario.service.slo:g} s;"
                        f" shared GPUs {s.shared_gpu_hours:,.0f} GPU-h; idle flagged "
                        f"{s.idle_flagged_gpu_hours:,.0f} GPU-h ({s.idle_warned} warned, "
                        f"{s.idle_reclaimed} reclaimed); {s.finished:,} jobs finished, "
                        f"{s.still_waiting:,} still waiting",
                        highlight=False,
                    )
                for what, met, figures in r.targets():
                    mark = "met" if met else "NOT met"
                    console.print(f"  {what}: {mark} ({figures})", highlight=False)
                console.print(f"seed {r.seed}: {r.wall:.1f} s", highlight=False)
        if plot_path is not None:
            try:
                plot(reports, plot_path)
            except OSError as e:
                fail(f"--plot {plot_path}: cannot write: {e.strerror or e}")
            typer.echo(f"wrote {plot_path}", err=json_out)

"""``suanli bench fgd``: the FGD paper's replay protocol on the openb pod lists.

Every (pod list, policy, seed) is one replay (``suanli.bench.fgd``); replays run on all CPU
cores by default, or on a Ray cluster with ``--ray ADDRESS`` (``suanli.sim.spread``: same
numbers, same order). The table shows medians over the seeds, beside the published medians when
the FGD authors' results file is found (``<trace dir>/openb/`` or ``--published``).
"""

from __future__ import annotations

import csv
import json
import os
import sys
import time
from dataclasses import asdict, fields
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from suanli.bench.fgd import PAPER_POLICIES, WORKLOADS, load_workload, sweep_workloads
from suanli.bench.report import (
    PUBLISHED_FILE,
    SummaryRow,
    load_published,
    summarise,
    to_json,
    write_outputs,
)
from suanli.bench.variants import (
    CellRow,
    cell_rows,
    grid,
    variant_sweep,
    verdict,
    write_variant_lists,
)
from suanli.cli.errors import fail, user_errors
from suanli.cli.options import TraceDirOption, WorkersOption
from suanli.core.registry import create
from suanli.sim.spread import SpreadError, check_address, where
from suanli.traces import find_trace_dir
from suanli.traces.openb_variants import Variant, VariantError

DEFAULT_SHARING_PLACEMENT = "frag-balance"
"""suanli's default placement for GPU-sharing clusters (docs/fgd.md)."""
DEFAULT_POLICIES = (*PAPER_POLICIES, DEFAULT_SHARING_PLACEMENT)

bench_app = typer.Typer(
    name="bench",
    help="Reproducible benchmarks against published results.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)


def parse_seeds(text: str) -> list[int]:
    """``42-51`` or ``42,43,50`` (or a mix) as a sorted list of distinct seeds."""
    seeds: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        try:
            if "-" in part:
                lo, hi = (int(x) for x in part.split("-", 1))
                if hi < lo:
                    raise ValueError
                seeds.update(range(lo, hi + 1))
            elif part:
                seeds.add(int(part))
        except ValueError:
            fail(f"--seeds: expected numbers or ranges like 42-51, got {part!r}")
    if not seeds or min(seeds) < 0:
        fail(f"--seeds: need at least one seed >= 0, got {text!r}")
    return sorted(seeds)


def _split(values: list[str]) -> list[str]:
    return list(dict.fromkeys(v.strip() for item in values for v in item.split(",") if v.strip()))


@bench_app.command("fgd")
def fgd_command(
    pods: Annotated[
        list[str] | None,
        typer.Option(
            "--pods",
            help="openb pod lists: names (default, cpu050, gpushare40, multigpu20) or CSV "
            "paths; repeat or separate by commas. Default: the four with published results.",
        ),
    ] = None,
    policies: Annotated[
        list[str] | None,
        typer.Option(
            "--policies",
            help="Paper names (Random, DotProd, GpuClustering, GpuPacking, BestFit, FGD) or "
            "placement names (e.g. frag-balance). Default: the paper's six and frag-balance.",
        ),
    ] = None,
    seeds: Annotated[
        str | None,
        typer.Option(help="Seeds, e.g. 42-51 or 42,43 (default 42-51; with --variants 42-44)."),
    ] = None,
    order: Annotated[
        str, typer.Option(help="Pod order: shuffle (per seed, as the paper's runs) or trace.")
    ] = "shuffle",
    trace_dir: TraceDirOption = None,
    published: Annotated[
        Path | None,
        typer.Option(help=f"Published medians CSV (default: <trace dir>/openb/{PUBLISHED_FILE})."),
    ] = None,
    workers: WorkersOption = 0,
    ray: Annotated[
        str | None,
        typer.Option(
            "--ray",
            metavar="ADDRESS",
            help="Spread the replays over the running Ray cluster at ADDRESS (its head's "
            "HOST:PORT, ray://HOST:PORT or auto) instead of local processes; same results. "
            "Every node needs suanli installed; only this machine reads the traces "
            "(docs/fgd.md). Needs pip install 'suanli[ray]'.",
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(help="Write runs.csv, summary.csv, summary.json and allocation.png here."),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    variants: Annotated[
        list[str] | None,
        typer.Option(
            "--variants",
            help="Replay variants of one pod list (--pods, default: default) instead: 'grid' "
            "(docs/fgd.md) or cells like 'share=0.6' or 'spec=0.5,cpu=2', separated by ';' "
            "or repeated. Default policies FGD, BestFit and the default placement.",
        ),
    ] = None,
    write_lists: Annotated[
        bool,
        typer.Option(
            "--write-lists",
            help="With --variants and --out: also write each cell's pod list (first seed) "
            "in openb's format, under <out>/lists/, for --pods FILE or other tools.",
        ),
    ] = False,
) -> None:
    """Replay openb pod lists under the FGD paper's protocol; compare with its results."""
    with user_errors():
        if order not in ("shuffle", "trace"):
            fail(f"--order: expected shuffle or trace, got {order!r}")
        if workers < 0:
            fail(f"--workers: must be >= 0 (got {workers})")
        if write_lists and (not variants or out is None):
            fail("--write-lists: needs --variants and --out")
        if ray is not None:
            _check_ray(ray)
        if variants:
            _variants_command(
                variants, pods, policies, seeds, trace_dir, workers, out, json_out, write_lists,
                ray,
            )  # fmt: skip
            return
        seed_list = parse_seeds(seeds or "42-51")
        root = find_trace_dir(trace_dir)
        pod_lists = _split(pods or list(WORKLOADS))
        policy_list = _split(policies or list(DEFAULT_POLICIES))
        for p in policy_list:
            create("placement", PAPER_POLICIES.get(p, p))
        works = [load_workload(root, name) for name in pod_lists]  # fails fast on files
        labels = [w.name for w in works]
        pub_path = published or root / "openb" / PUBLISHED_FILE
        if published is not None and not published.is_file():
            fail(f"--published: no such file {published}")
        try:
            pub = load_published(pub_path) if pub_path.is_file() else None
        except ValueError as e:
            fail(f"--published: {e}")
        if out is not None:
            try:  # fail before the work, not after it
                out.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                fail(f"--out {out}: cannot create the directory: {e.strerror or e}")
        n = workers or os.cpu_count() or 1
        t0 = time.perf_counter()
        try:
            runs = sweep_workloads(works, policy_list, seed_list, order=order, workers=n, ray=ray)
        except SpreadError as e:
            fail(f"--ray: {e}")
        wall = time.perf_counter() - t0
        rows = summarise(runs, pub)
        if json_out:
            typer.echo(to_json(rows))
        else:
            console = Console(width=None if sys.stdout.isatty() else 160)
            console.print(_table(rows, pub is not None))
            console.print(
                f"{len(runs)} replays ({', '.join(labels)} × {len(policy_list)} policies × "
                f"{len(seed_list)} seeds, order {order}) in {wall:.1f} s on {where(n, ray)}"
            )
        if out is not None:
            try:
                written = write_outputs(out, runs, rows)
            except OSError as e:
                fail(f"--out {out}: cannot write results: {e.strerror or e}")
            for path in written:
                typer.echo(f"wrote {path}", err=json_out)


def _variants_command(
    variants: list[str],
    pods: list[str] | None,
    policies: list[str] | None,
    seeds: str | None,
    trace_dir: Path | None,
    workers: int,
    out: Path | None,
    json_out: bool,
    write_lists: bool = False,
    ray: str | None = None,
) -> None:
    seed_list = parse_seeds(seeds or "42-44")
    root = find_trace_dir(trace_dir)
    bases = _split(pods or ["default"])
    if len(bases) != 1:
        fail(f"--variants: give one base pod list with --pods, got {', '.join(bases)}")
    base = bases[0]
    load_workload(root, base)  # fails fast on a missing file
    cells: list[Variant] = []
    for item in variants:
        for text in item.split(";"):
            text = text.strip()
            if text == "grid":
                cells += grid()
            elif text:
                try:
                    cells.append(Variant.parse(text))
                except VariantError as e:
                    fail(f"--variants: {e}")
    cells = list(dict.fromkeys(cells))
    policy_list = _split(policies or ["FGD", "BestFit", DEFAULT_SHARING_PLACEMENT])
    for p in policy_list:
        create("placement", PAPER_POLICIES.get(p, p))
    if out is not None:
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            fail(f"--out {out}: cannot create the directory: {e.strerror or e}")
    n = workers or os.cpu_count() or 1
    t0 = time.perf_counter()
    try:
        runs = variant_sweep(root, base, cells, policy_list, seed_list, workers=n, ray=ray)
    except VariantError as e:
        fail(f"--variants: {e}")
    except SpreadError as e:
        fail(f"--ray: {e}")
    wall = time.perf_counter() - t0
    rows = cell_rows(runs)
    verdicts = [verdict(rows, p) for p in policy_list if p != "FGD" and "FGD" in policy_list]
    if json_out:
        typer.echo(
            json.dumps(
                {"cells": [asdict(r) for r in rows], "verdicts": [asdict(v) for v in verdicts]},
                indent=2,
            )
        )
    else:
        console = Console(width=None if sys.stdout.isatty() else 160)
        console.print(_variant_table(rows, policy_list))
        for v in verdicts:
            console.print(
                f"{v.policy} vs {v.baseline}: at most FGD on {v.at_most_100}/{v.cells} cells at "
                f"100% load and {v.at_most_130}/{v.cells} at 130%; mean ratio "
                f"{v.mean_ratio_100:.3f} / {v.mean_ratio_130:.3f}; worst {v.worst_100[0]} "
                f"{v.worst_100[1]:.3f} / {v.worst_130[0]} {v.worst_130[1]:.3f}"
            )
        console.print(
            f"{len(runs)} replays ({len(cells)} variants of {base} × {len(policy_list)} policies "
            f"× {len(seed_list)} seeds) in {wall:.1f} s on {where(n, ray)}"
        )
    if out is not None:
        path = out / "variants.csv"
        try:
            with path.open("w", newline="") as f:
                w = csv.writer(f)
                w.writerow([fl.name for fl in fields(CellRow)])
                for r in rows:
                    w.writerow([getattr(r, fl.name) for fl in fields(CellRow)])
        except OSError as e:
            fail(f"--out {out}: cannot write results: {e.strerror or e}")
        typer.echo(f"wrote {path}", err=json_out)
        if write_lists:
            for path in write_variant_lists(root, base, cells, seed_list[0], out / "lists"):
                typer.echo(f"wrote {path}", err=json_out)


def _check_ray(address: str) -> None:
    """``--ray``: Ray installed, the address well formed and answering (before any work)."""
    try:
        check_address(address)
    except SpreadError as e:
        fail(f"--ray: {e}")


def _variant_table(rows: list[CellRow], policies: list[str]) -> Table:
    t = Table(title="FGD replay on variants: unallocated GPU % (median over seeds; min-max)")
    t.add_column("cell", justify="left")
    for p in policies:
        t.add_column(f"{p} @100", justify="right")
        t.add_column(f"{p} @130", justify="right")
    by = {(r.cell, r.policy): r for r in rows}
    for cell in dict.fromkeys(r.cell for r in rows):
        cells = [cell]
        for p in policies:
            r = by[(cell, p)]
            cells += [f"{r.unalloc100:.2f} ({r.min100:.2f}-{r.max100:.2f})",
                      f"{r.unalloc130:.2f} ({r.min130:.2f}-{r.max130:.2f})"]  # fmt: skip
        t.add_row(*cells)
    return t


def _table(rows: list[SummaryRow], with_published: bool) -> Table:
    t = Table(title="FGD replay: medians over seeds (% of GPU capacity)")
    for col in ("pod list", "policy", "alloc@100", "unalloc@100"):
        t.add_column(col, justify="left" if col in ("pod list", "policy") else "right")
    if with_published:
        t.add_column("published", justify="right")
        t.add_column("Δ", justify="right")
    for col in ("alloc@130", "unalloc@130", "frag@100", "frag@130", "s/replay"):
        t.add_column(col, justify="right")
    for r in rows:
        cells = [r.workload, r.policy, f"{r.alloc100:.2f}", f"{r.unalloc100:.2f}"]
        if with_published:
            p = r.published
            cells += (
                [f"{p['unalloc100']:.2f}", f"{r.unalloc100 - p['unalloc100']:+.2f}"]
                if p
                else ["", ""]
            )
        cells += [f"{r.alloc130:.2f}", f"{r.unalloc130:.2f}", f"{r.frag100:.2f}", f"{r.frag130:.2f}",
                  f"{r.wall_s:.2f}"]  # fmt: skip
        t.add_row(*cells)
    return t


def _register_utilisation() -> None:
    from suanli.cli.bench_utilisation import utilisation_command

    bench_app.command("utilisation")(utilisation_command)


_register_utilisation()


def _register_predict() -> None:
    from suanli.cli.bench_predict import predict_command

    bench_app.command("predict")(predict_command)


_register_predict()


def _register_hardware() -> None:
    from suanli.cli.bench_hardware import hardware_command

    bench_app.command("hardware")(hardware_command)


_register_hardware()


def _register_network() -> None:
    from suanli.cli.bench_network import network_command

    bench_app.command("network")(network_command)


_register_network()

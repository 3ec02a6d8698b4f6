"""``suanli predict``: how well the runtime estimators predict this control plane's jobs, and
what they say of one job.

It reads the store's latest ended runs (those a restarted control plane learns from:
``suanli.store.jobs.ended_runs``) and replays them online through each estimator
(``suanli.predict.accuracy.replay_runs``): every job predicted at its submission from the
runs that had ended by then, learned at its end. The most recent ``--recent`` are scored
(mean absolute error of the P50, median relative error, coverage of the P50 and the P90).
``--job ID`` adds that job's predicted runtime (P50, P80, P90, P95) from everything in the
history, and, while it waits, the start the scheduler last estimated for it.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

import typer

from suanli.api.schemas import iso
from suanli.cli.client_http import expected_start, print_json, print_rows
from suanli.cli.dbtarget import DbOpt, store_at
from suanli.cli.errors import fail, user_errors
from suanli.cli.table import hours
from suanli.control.attempts import job_of
from suanli.control.repair import HISTORY_JOBS
from suanli.core.model import Job, SpecError
from suanli.core.registry import create
from suanli.predict.accuracy import accuracy, replay_runs
from suanli.store import jobs as js
from suanli.store import predictions as pr

QUANTILES = (0.5, 0.8, 0.9, 0.95)
"""The quantiles ``--job`` shows."""


def _runs(runs: list[pr.EndedRun]) -> list[tuple[Job, float, float]]:
    out = []
    for r in runs:
        try:
            _, job = job_of(r.job)
        except (SpecError, ValueError):
            continue  # a record whose spec no longer reads teaches nothing
        out.append((job, r.runtime_s, r.ended_ms / 1000))
    return out


def predict_command(
    db: DbOpt = None,
    runtime: Annotated[
        list[str] | None,
        typer.Option(
            "--runtime",
            "-r",
            metavar="NAME",
            help="An estimator (runtime/NAME; repeatable). Default: history, learned.",
        ),
    ] = None,
    recent: Annotated[
        int, typer.Option("--recent", min=1, help="Score the last N jobs to end.")
    ] = 1000,
    job_id: Annotated[
        str | None, typer.Option("--job", metavar="ID", help="Also predict this job.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print only JSON on stdout.")] = False,
) -> None:
    """Runtime estimators' accuracy on the store's recent jobs, and one job's estimate."""
    names = runtime or ["history", "learned"]
    with user_errors(), store_at(db, must_exist=True) as (store, shown):
        history = _runs(pr.ended_runs(store, HISTORY_JOBS))
        rec = js.get_job(store, job_id) if job_id is not None else None
    if job_id is not None and rec is None:
        fail(f"--job: no job {job_id!r} in {shown}")
    target = job_of(rec)[1] if rec is not None else None
    scored = [r[0].id for r in sorted(history, key=lambda r: r[2])[-recent:]]
    out: dict[str, Any] = {"store": shown, "history_jobs": len(history), "scored_jobs": len(scored),
                           "estimators": []}  # fmt: skip
    for name in names:
        with user_errors():
            predictor = create("runtime", name)
        row: dict[str, Any] = {"runtime": name, "mae_s": None, "median_rel_error": None,
                               "coverage_p50": None, "coverage_p90": None}  # fmt: skip
        if history:
            true, pred = replay_runs(predictor, history, (0.5, 0.9), scored)
            acc = accuracy(true, pred)
            row.update(mae_s=acc.mae, median_rel_error=acc.median_rel_error,
                       coverage_p50=acc.coverage[0.5], coverage_p90=acc.coverage[0.9])  # fmt: skip
        if target is not None:
            row["job"] = {f"p{round(q * 100)}_s": predictor.quantile(target, q) for q in QUANTILES}
        out["estimators"].append(row)
    if rec is not None:
        out["job"] = {
            "id": rec.id, "state": rec.state,
            "start_estimate": None if rec.state != "pending" or rec.start_planned_ms is None
            else {"p50": iso(rec.start_p50_ms), "p90": iso(rec.start_p90_ms),
                  "planned_at": iso(rec.start_planned_ms)},
        }  # fmt: skip
    if as_json:
        print_json(out)
        return
    typer.echo(f"{shown}: {len(history):,} ended jobs in the history; the last {len(scored):,} "
               "scored, each predicted at its submission from the jobs that had ended by then")  # fmt: skip
    cols = ("ESTIMATOR", "P50 MAE h", "P50 REL ERR", "P50 COVER %", "P90 COVER %")
    print_rows(cols, (
        (r["runtime"], hours(r["mae_s"] if r["mae_s"] is not None else math.nan),
         "-" if r["median_rel_error"] is None else f"{r['median_rel_error']:.2f}",
         "-" if r["coverage_p50"] is None else f"{100 * r['coverage_p50']:.1f}",
         "-" if r["coverage_p90"] is None else f"{100 * r['coverage_p90']:.1f}")
        for r in out["estimators"]
    ), right=cols[1:])  # fmt: skip
    if rec is not None:
        typer.echo(f"\njob {rec.id} ({rec.state}): predicted runtime, hours")
        qcols = ("ESTIMATOR", *(f"P{round(q * 100)}" for q in QUANTILES))
        print_rows(qcols, (
            (r["runtime"], *(hours(v) for v in r["job"].values())) for r in out["estimators"]
        ), right=qcols[1:])  # fmt: skip
        if rec.state == "pending":
            typer.echo(f"expected start: {expected_start(out['job']['start_estimate'])}")

"""The synthetic workload and the measurement window of ``suanli simulate``, from its options.

Three options size the synthetic workload: ``--jobs``, ``--horizon`` (how long the jobs keep
arriving) and ``--load``. Any two fix the third (with the mean job, for the load):

- none of them: ``DEFAULT_HORIZON`` of arrivals at ``DEFAULT_LOAD``, the job count derived;
- ``--jobs`` (and ``--load``): the horizon derived;
- ``--horizon`` (and ``--load``): the job count derived;
- ``--jobs`` and ``--horizon``: the arrival rate (and so the offered load) derived.

``--time-limit`` (default ``DEFAULT_TIME_LIMIT``) cuts runtimes as a partition's time limit
would, so the run reaches a steady state well inside its horizon; ``--time-limit none`` keeps
the whole Philly tail (jobs of weeks), which then dominates the end of any run.
"""

from __future__ import annotations

import math

from suanli.cli.errors import fail
from suanli.config.budgets import BudgetError, parse_duration
from suanli.core.model import SpecError
from suanli.sim.results import WARMUP, Window
from suanli.traces import LoadedTrace
from suanli.workload.duty import DutyProfile, parse_duty, trace_default
from suanli.workload.synthetic import WorkloadConfig

DEFAULT_HORIZON = 21 * 86400.0
"""Arrivals of the default run: three weeks, long against the time limit, so that warm-up and
drain are small parts of the run (window and whole-run allocation within 2.5 to 3.5 points over
seeds 0 to 4 with fifo+best-fit; 2.9 to 5.2 with two weeks)."""
DEFAULT_LOAD = 0.9
DEFAULT_TIME_LIMIT = 86400.0
"""24 h: a common partition time limit on shared GPU clusters."""


def duration_option(name: str, text: str, *, zero: bool = False) -> float:
    """Seconds of a duration option (``14d``, ``36h``, ``90m``, seconds); ``fail`` if bad."""
    if zero and text.strip() in ("0", "0s"):
        return 0.0
    try:
        return parse_duration(text, name)
    except BudgetError as e:
        fail(f"{name}: {e.problem}")


def synthetic_config(
    *,
    jobs: int | None,
    horizon: str | None,
    load: float | None,
    time_limit: str,
    seed: int,
    duty: str | None = None,
) -> WorkloadConfig:
    """The ``WorkloadConfig`` the options ask for (see the module docstring); ``fail`` if the
    options contradict each other."""
    if duty is not None:
        try:
            kind = parse_duty(duty).kind
        except SpecError as e:
            fail(f"--duty: {e}")
        if kind == "declared":
            fail("--duty: 'declared' keeps a trace's own duties; synthetic jobs declare none")
    if jobs is not None and jobs < 1:
        fail(f"--jobs: must be >= 1 (got {jobs})")
    if load is not None and not (math.isfinite(load) and load > 0):
        fail(f"--load: must be a number > 0 (got {load:g})")
    span = duration_option("--horizon", horizon) if horizon is not None else None
    if jobs is not None and span is not None and load is not None:
        fail(
            "--load: with both --jobs and --horizon the arrival rate is derived; "
            "give at most two of --jobs, --horizon and --load"
        )
    limit = (
        None
        if time_limit.strip().lower() == "none"
        else duration_option("--time-limit", time_limit)
    )
    if jobs is None and span is None:
        span = DEFAULT_HORIZON
    if jobs is not None and span is not None:
        return WorkloadConfig(
            jobs=jobs,
            horizon=span,
            target_load=None,
            time_limit=limit,
            seed=seed,
            duty=duty or "synthetic",
        )
    return WorkloadConfig(
        jobs=jobs,
        horizon=span if jobs is None else None,
        target_load=DEFAULT_LOAD if load is None else load,
        time_limit=limit,
        seed=seed,
        duty=duty or "synthetic",
    )


def trace_duty(loaded: LoadedTrace) -> DutyProfile:
    """The duty profile a trace replays with: its family's (named or read from a CSV path)."""
    return trace_default(loaded.kind or loaded.spec)


def window_option(text: str | None, *, steady: bool) -> Window:
    """The measurement window of ``--window``: ``START:END`` (durations after the first
    arrival; either side may be left empty), ``arrivals`` (first to last arrival) or, by
    default, the arrivals less their first ``WARMUP`` for a steady workload (synthetic) and
    the arrivals for a trace."""
    if text is None:
        return Window(warmup=WARMUP if steady else 0.0)
    t = text.strip().lower()
    if t == "arrivals":
        return Window()
    if ":" not in t:
        fail(f"--window: must be START:END (e.g. 2d:12d, 1d: or :10d) or 'arrivals', got {text!r}")
    a, b = t.split(":", 1)
    start = duration_option("--window", a, zero=True) if a else None
    end = duration_option("--window", b) if b else None
    try:
        return Window(start=start, end=end, warmup=WARMUP if steady and start is None else 0.0)
    except ValueError as e:
        fail(f"--window: {e}")

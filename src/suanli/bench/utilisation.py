"""``suanli bench utilisation``: the fixed co-location scenario and its three setups.

The scenario (its parameters are fixed; none is tuned to the result):

- 64 x 8 H100 (512 GPUs of 80 GiB), one simulated week in one-minute steps.
- Inference: the GenAI serving trace's demand (``genai-2026/qps.csv``, summed over
  containers: ``suanli.traces.genai_qps``), stretched onto a 24-hour day and repeated daily,
  scaled so that its peak needs 40% of the GPUs (205 replicas) at the per-replica service
  rate under the SLO: P99 latency at most 5 x the mean service time (M/M/c).
- Training: the first 7 full days of ``philly-users`` (a full day has at least a tenth of
  the busiest day's submissions: the file's first 48 days are a sparse head of 1,064 jobs,
  where the cut's window reaches only a few long jobs), runtimes scaled by the factor that
  makes the offered GPU demand average 60% of the cluster over the week (printed), duties
  from Jeon et al.'s ATC'19 means (``workload.duty``, ``training``), elastic where a job has
  more than one GPU: half to twice its request, within its nodes' 8 GPUs each.
- (a) ``static``: an inference pool sized for the peak under the same SLO (205 GPUs, no
  more), training on the other 307. The service ran the day before the week: the
  autoscalers see that day's demand (the same daily curve) as history. (b) ``shared``: one pool, reactive autoscaling, priority
  preemption of the newest training jobs; nothing else. (c) ``suanli``: predictive
  autoscaling, Lyra's reclaim order, elastic training, GPU sharing and idle reclaim.

Stated assumptions (the trace and the issue do not fix them; the same for all setups):
mean service time 2 s (a diffusion image on an H100), cold start 120 s, headroom 10% for
the autoscalers, 20 GiB of GPU memory per replica, training workers' GPU memory uniform in
[25%, 100%] of the GPU (Philly records none), a checkpoint every 30 min, resize and restart
30 s (``core.elastic``), interference kappa 0.3 (``core.interference``), replicas share only
with workers of duty at most 0.3; idle: under 5% for 30 min, 10 min grace.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from suanli.core.elastic import parse_speedup
from suanli.core.idle import IdlePolicy
from suanli.core.model import KNOWN_GPU_MODELS, SpecError
from suanli.core.serving.queueing import Capacity
from suanli.core.serving.service import ServiceSpec
from suanli.sim.colocation.engine import Trace
from suanli.sim.colocation.engine import run as engine_run
from suanli.sim.colocation.model import PREEMPT_LYRA, Levers, Scenario, Training
from suanli.sim.colocation.outcome import Bound, Summary, bound, summarise
from suanli.traces.catalogue import PHILLY_USER_JOBS
from suanli.traces.genai_qps import QPS_FILE, daily, load_genai_demand
from suanli.traces.philly_users import load_philly_user_jobs
from suanli.workload.duty import DutyProfile

NODES, PER_NODE, MODEL = 64, 8, "H100"
DAYS = 7
STEP = 60.0
PEAK_SHARE = 0.40
TRAINING_SHARE = 0.60
SERVICE_TIME = 2.0
SLO_FACTOR = 5.0
COLD_START = 120.0
HEADROOM = 0.10
REPLICA_MEMORY_MIB = 20 * 1024
FULL_DAY = 0.10


@dataclass(frozen=True, slots=True)
class Built:
    """The scenario and what its derivation printed."""

    scenario: Scenario
    first_day: int
    jobs: int
    runtime_factor: float
    demand_scale: float
    peak_replicas: int
    containers: int
    first_full: int


def full_days(submit: np.ndarray) -> np.ndarray:
    """The days (from the first submission) with at least ``FULL_DAY`` of the busiest day's
    submissions."""
    day = (submit // 86400).astype(int)
    counts = np.bincount(day)
    return np.flatnonzero(counts >= FULL_DAY * counts.max())


def build(trace_dir: Path, seed: int, jitter: float = 0.0, shift: int = 0) -> Built:
    """The fixed scenario from the traces in ``trace_dir`` (duties and memory drawn with
    ``seed``). ``jitter`` > 0 makes a variant the scenario does not fix: each day's demand
    scaled by ``exp(N(0, jitter))`` and each step's by another such draw (seeded), so that
    no day repeats the last (a check that the predictive autoscaler is not fitted to an
    exactly periodic curve). ``shift`` > 0 is another such variant: the training week starts
    that many full days later (another mix of the same users' jobs)."""
    gpus = NODES * PER_NODE
    model = KNOWN_GPU_MODELS[MODEL]
    mu = 1.0 / SERVICE_TIME
    service = ServiceSpec(
        "genai",
        mu=mu,
        slo=SLO_FACTOR * SERVICE_TIME,
        cold_start=COLD_START,
        min_replicas=1,
        max_replicas=gpus,
        headroom=HEADROOM,
        gpu_memory_mib=REPLICA_MEMORY_MIB,
    )
    cap = Capacity(mu, service.slo, gpus)
    peak_replicas = int(round(PEAK_SHARE * gpus))
    curve = load_genai_demand(trace_dir / QPS_FILE, step=STEP)
    curve_days = daily(curve, DAYS + 1, STEP)
    scale = float(cap.rate[peak_replicas]) / float(curve_days.max())
    per_day = int(round(86400 / STEP))
    curve_days = curve_days * scale
    if jitter > 0:
        noise = np.random.default_rng([seed, 0xD3A4D])
        days = noise.lognormal(0.0, jitter, DAYS + 1).repeat(per_day)[: len(curve_days)]
        curve_days = curve_days * days * noise.lognormal(0.0, jitter, len(curve_days))
    history, demand = curve_days[:per_day], curve_days[per_day:]

    jobs = load_philly_user_jobs(trace_dir / PHILLY_USER_JOBS)
    submit = np.array([j.submit for j in jobs])
    days = full_days(submit)
    if not 0 <= shift <= len(days) - DAYS:
        raise SpecError(
            f"shift: philly-users has {len(days)} full days, so a week can start at most "
            f"{len(days) - DAYS} full days after the first, not {shift}"
        )
    first = int(days[shift])
    t0 = first * 86400.0
    pick = [j for j in jobs if t0 <= j.submit < t0 + DAYS * 86400]
    g = np.array([j.task.gpus * j.tasks for j in pick])
    nodes = np.array([j.tasks for j in pick])
    run = np.array([j.runtime for j in pick])
    factor = TRAINING_SHARE * gpus * DAYS * 86400 / float((g * run).sum())
    rng = np.random.default_rng([seed, 0xC010])
    duty = DutyProfile("training").draw(rng, g.astype(float), np.zeros(len(g), bool))
    memory = (rng.uniform(0.25, 1.0, len(g)) * model.memory_mib).astype(np.int64)
    elastic = g > 1
    min_w = np.where(elastic, np.maximum(1, g // 2), g)
    max_w = np.where(elastic, np.maximum(g, np.minimum(2 * g, nodes * PER_NODE)), g)
    training = Training(
        ids=tuple(j.id for j in pick),
        submit=np.array([j.submit - t0 for j in pick]),
        runtime=run * factor,
        gpus=g,
        min_w=min_w,
        max_w=np.minimum(max_w, gpus),
        duty=duty,
        memory_mib=memory,
        spread=nodes > 1,
    )
    scenario = Scenario(
        gpus=gpus,
        gpu_memory_mib=model.memory_mib,
        step=STEP,
        service=service,
        demand=demand,
        training=training,
        pool=peak_replicas,
        history=history,
        gpus_per_node=PER_NODE,
        speedup=parse_speedup("power:0.938"),
    )
    return Built(
        scenario, first, len(pick), factor, scale, peak_replicas, curve.containers, int(days[0])
    )


def setups(built: Built) -> tuple[Levers, ...]:
    """The scenario's three setups, (a), (b) and (c)."""
    return (
        Levers(
            "static",
            partition=True,
            autoscaler="fixed",
            options=(("replicas", built.peak_replicas),),
        ),
        Levers("shared", autoscaler="reactive"),
        Levers(
            "suanli",
            autoscaler="predictive",
            preempt=PREEMPT_LYRA,
            elastic=True,
            sharing=True,
            idle=IdlePolicy(threshold=0.05, window=1800.0, grace=600.0, action="shrink"),
        ),
    )


def describe(b: Built) -> list[str]:
    """The derivation lines the bench prints above its table."""
    sc = b.scenario
    svc = sc.service
    day = f"days {b.first_day}-{b.first_day + DAYS - 1}"
    return [
        f"cluster: {NODES} x {PER_NODE} {MODEL} ({sc.gpus} GPUs), {DAYS} days in "
        f"{sc.step:g} s steps",
        f"inference: genai-2026 qps summed over {b.containers} containers, daily; scaled "
        f"x{b.demand_scale:.4g} so that its peak ({sc.demand.max():.1f} req/s) needs "
        f"{b.peak_replicas} replicas (P99 <= {svc.slo:g} s = {SLO_FACTOR:g} x the "
        f"{SERVICE_TIME:g} s mean service time, M/M/c); mean {sc.demand.mean():.1f} req/s",
        f"training: philly-users {day} ({'the first ' if b.first_day == b.first_full else ''}"
        f"{DAYS} full days), {b.jobs} jobs, runtimes "
        f"x{b.runtime_factor:.3f} so the offered demand averages {TRAINING_SHARE:.0%} of the "
        "cluster; duty: training (Jeon et al., ATC'19); elastic 1/2x-2x where > 1 GPU",
    ]


@dataclass(frozen=True, slots=True)
class Report:
    """One seed's run of the three setups, the bound, and the targets checked."""

    seed: int
    built: Built
    summaries: tuple[Summary, ...]
    series: tuple[Trace, ...]
    bound: Bound
    wall: float

    def by_name(self, name: str) -> Summary:
        return next(s for s in self.summaries if s.name == name)

    def targets(self) -> list[tuple[str, bool, str]]:
        """The issue's targets for (c) against (a): (what, met, the figures)."""
        a, c = self.by_name("static"), self.by_name("suanli")
        b = self.bound.utilisation
        return [
            ("utilisation >= 70%", c.utilisation >= 0.70,
             f"{c.utilisation:.1%}; no policy can pass {b:.1%} here (bound)"),
            ("utilisation >= 1.25 x static", c.utilisation >= 1.25 * a.utilisation,
             f"{c.utilisation / a.utilisation:.3f} x; the bound allows at most "
             f"{b / a.utilisation:.3f} x"),
            ("SLO attainment >= 99.9%", c.slo_attainment >= 0.999, f"{c.slo_attainment:.4%}"),
            ("mean queueing delay <= static / 1.5", c.queue_mean <= a.queue_mean / 1.5,
             f"{c.queue_mean / 3600:.2f} h vs {a.queue_mean / 3600:.2f} h "
             f"(static / {a.queue_mean / max(c.queue_mean, 1e-9):.1f})"),
            ("useful training GPU-hours >= static", c.useful_gpu_hours >= a.useful_gpu_hours,
             f"{c.useful_gpu_hours:,.0f} vs {a.useful_gpu_hours:,.0f}"),
        ]  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "scenario": describe(self.built),
            "runtime_factor": self.built.runtime_factor,
            "demand_scale": self.built.demand_scale,
            "jobs": self.built.jobs,
            "first_day": self.built.first_day,
            "setups": [s.to_json() for s in self.summaries],
            "bound": {"utilisation": self.bound.utilisation, "service": self.bound.service,
                      "training": self.bound.training},
            "targets": [{"target": t, "met": m, "figures": f} for t, m, f in self.targets()],
            "wall_s": self.wall,
        }  # fmt: skip


def run_scenario(trace_dir: Path, seed: int, jitter: float = 0.0, shift: int = 0) -> Report:
    """The three setups on the scenario of ``seed`` (``jitter``, ``shift``: see ``build``)."""
    t0 = time.perf_counter()
    built = build(trace_dir, seed, jitter, shift)
    out, traces = [], []
    for lv in setups(built):
        tr = engine_run(built.scenario, lv)
        traces.append(tr)
        out.append(summarise(lv.name, built.scenario, tr))
    return Report(seed, built, tuple(out), tuple(traces), bound(built.scenario),
                  time.perf_counter() - t0)  # fmt: skip

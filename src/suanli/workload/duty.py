"""GPU duty profiles: how busy a job keeps the GPUs it holds.

A job's duty (``Job.gpu_util``) is the share of its allocated GPU time in which the GPU is
busy with it (what ``nvidia-smi`` reports as GPU utilisation, over the job's life). A task on a
fractional GPU keeps ``share x duty`` of that GPU busy, so the duties of tasks sharing one GPU
add up to at most its allocated shares (never past 100%). Utilisation is allocation weighted by
duty; the difference is GPU time held and left idle.

Where the duties come from, each profile names its source:

- ``training``: DNN training, by job size. Means from Jeon et al., "Analysis of Large-Scale
  Multi-Tenant GPU Clusters for DNN Training Workloads", USENIX ATC'19 (Microsoft Philly),
  mean GPU utilisation by job size: 1 GPU 52.38%, 4 GPUs 45.18%, 8 GPUs 58.63%, 16 GPUs
  40.43%. Jobs of 2-4 GPUs take the 4-GPU figure, 5-8 the 8-GPU one, more than 8 the 16-GPU
  one. The spread around each mean is an ASSUMPTION (Beta with alpha + beta = 3.6: P10 to
  P90 about 0.2 to 0.85 at the 1-GPU mean), the paper's figures being means.
- ``inference``: online inference, from Alibaba's GenAI serving trace (Lin et al., SoCC 2025;
  ``genai-2026/pod_gpu_duty_cycle_anon.csv``): the time-mean GPU utilisation of each of its
  143 pods over about 23 h, as a quantile table (measured once, below; the trace is not read at
  run time). Mean of the pods 6.45%, median 5.78%; over all 157,417 samples the mean is 7.03%
  and the median 0%.
- ``sharing``: a GPU-sharing pod uses the share it asked for (openb's ``gpu_milli``, Alibaba's
  sharing level): duty 1.0 of the allocated share; whole-GPU jobs as ``training``.
- ``synthetic``: the built-in workload's mix: fractional-GPU jobs (the inference services of
  openb) ``inference``, whole-GPU jobs ``training``.
- ``constant:X`` and ``beta:MEAN,K`` (Beta of that mean with alpha + beta = K): stated
  distributions, for what-if runs.
- ``declared``: keep each job's own ``gpu_util`` (a trace column or the job's declaration).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from suanli.core.model import MILLI, Job, SpecError

# Jeon et al., ATC'19: mean GPU utilisation by job size (GPUs), as shares.
TRAINING_MEANS: tuple[tuple[int, float], ...] = (
    (1, 0.5238),
    (4, 0.4518),
    (8, 0.5863),
    (16, 0.4043),
)
TRAINING_CONCENTRATION = 3.6
"""alpha + beta of the Beta around each mean: ASSUMPTION (the paper gives means)."""

# genai-2026/pod_gpu_duty_cycle_anon.csv: per pod (container_ip), the mean of its samples
# (value / 100; samples about 57 s apart, so the plain mean is the time mean); quantiles of the
# 143 pod means (numpy linear): P0, P10, P25, P50, P75, P90, P95, P99, P100.
INFERENCE_PROBS = (0.0, 0.10, 0.25, 0.50, 0.75, 0.90, 0.95, 0.99, 1.0)
INFERENCE_DUTY = (0.0001, 0.0037, 0.0531, 0.0578, 0.0632, 0.1162, 0.1333, 0.2685, 0.2787)

NAMES = ("training", "inference", "sharing", "synthetic", "declared", "constant:X", "beta:MEAN,K")


@dataclass(frozen=True, slots=True)
class DutyProfile:
    """A named way of drawing each job's duty (see the module docstring)."""

    kind: str
    mean: float = math.nan  # constant and beta
    concentration: float = math.nan  # beta

    @property
    def label(self) -> str:
        if self.kind == "constant":
            return f"constant:{self.mean:g}"
        if self.kind == "beta":
            return f"beta:{self.mean:g},{self.concentration:g}"
        return self.kind

    def draw(
        self, rng: np.random.Generator, gpus: np.ndarray, fractional: np.ndarray
    ) -> np.ndarray:
        """Duties of jobs holding ``gpus`` GPUs in all (0: CPU-only, which get 1.0: they hold
        no GPU), ``fractional`` marking the ones on a share of one GPU; rounded to 0.0001.
        ``declared`` has nothing to draw and raises."""
        n = len(gpus)
        u = rng.random(n)  # one uniform per job whatever the profile: streams stay aligned
        if self.kind == "declared":
            raise SpecError("duty profile 'declared' draws nothing: keep the jobs' own gpu_util")
        if self.kind == "constant":
            duty = np.full(n, self.mean)
        elif self.kind == "beta":
            duty = _beta(rng, u, np.full(n, self.mean), self.concentration)
        elif self.kind == "sharing":
            duty = np.where(
                fractional, 1.0, _beta(rng, u, training_mean(gpus), TRAINING_CONCENTRATION)
            )
        elif self.kind == "inference":
            duty = np.interp(u, INFERENCE_PROBS, INFERENCE_DUTY)
        else:  # training, synthetic
            duty = _beta(rng, u, training_mean(gpus), TRAINING_CONCENTRATION)
            if self.kind == "synthetic":
                duty = np.where(fractional, np.interp(u, INFERENCE_PROBS, INFERENCE_DUTY), duty)
        duty = np.clip(np.round(duty, 4), 0.0, 1.0)
        duty[gpus <= 0] = 1.0
        return duty


def training_mean(gpus: np.ndarray) -> np.ndarray:
    """Jeon et al.'s mean duty for jobs of ``gpus`` GPUs (fractional ones count as 1)."""
    sizes = np.array([s for s, _ in TRAINING_MEANS])
    means = np.array([m for _, m in TRAINING_MEANS])
    # 1 -> 1 GPU; 2-4 -> 4; 5-8 -> 8; more -> 16.
    idx = np.searchsorted(sizes, np.maximum(np.ceil(gpus), 1), side="left")
    return means[np.minimum(idx, len(means) - 1)]


def _beta(rng: np.random.Generator, u: np.ndarray, mean: np.ndarray, k: float) -> np.ndarray:
    """Beta draws of the given means and alpha + beta = ``k`` (``u`` unused: Beta has no cheap
    inverse CDF; the stream stays aligned because ``u`` was drawn first)."""
    m = np.clip(mean, 1e-6, 1 - 1e-6)
    return rng.beta(m * k, (1 - m) * k)


TRACE_DEFAULTS = {
    "philly": "training",
    "philly-users": "training",
    "itp": "training",
    "openb": "sharing",
    "azure-llm": "inference",
}
"""The duty profile of each trace family (``LoadedTrace.kind``, or the name before ``:``);
anything else: declared."""


def trace_default(spec: str) -> DutyProfile:
    """The duty profile a trace replays with unless ``--duty`` says otherwise."""
    return DutyProfile(TRACE_DEFAULTS.get(spec.split(":", 1)[0], "declared"))


def parse_duty(text: str) -> DutyProfile:
    """A profile from its name (``training``, ``inference``, ``sharing``, ``synthetic``,
    ``declared``, ``constant:X``, ``beta:MEAN,K``); ``SpecError`` naming the known ones."""
    t = text.strip().lower()
    if t in ("training", "inference", "sharing", "synthetic", "declared"):
        return DutyProfile(t)
    kind, _, args = t.partition(":")
    try:
        if kind == "constant":
            x = float(args)
            if not 0 <= x <= 1:
                raise ValueError
            return DutyProfile("constant", x)
        if kind == "beta":
            a, b = (float(v) for v in args.split(","))
            if not (0 < a < 1 and b > 0 and math.isfinite(b)):
                raise ValueError
            return DutyProfile("beta", a, b)
    except ValueError:
        pass
    raise SpecError(
        f"duty profile {text!r}: known profiles are {', '.join(NAMES)} "
        "(X in [0, 1]; MEAN in (0, 1), K > 0)"
    )


def apply_duty(jobs: Sequence[Job], profile: DutyProfile, seed: int) -> list[Job]:
    """``jobs`` with each ``gpu_util`` drawn from ``profile`` (seeded; the same jobs for
    ``declared``)."""
    if profile.kind == "declared" or not jobs:
        return list(jobs)
    gpus = np.array([j.gpu_demand_milli / MILLI for j in jobs])
    fractional = np.array(
        [j.tasks == 1 and j.task.gpus == 1 and j.task.gpu_milli < MILLI for j in jobs]
    )
    duty = profile.draw(np.random.default_rng([seed, 0xD07]), gpus, fractional).tolist()
    return [
        j if j.gpu_util == d else replace(j, gpu_util=d) for j, d in zip(jobs, duty, strict=True)
    ]


def describe(jobs: Sequence[Job], profile: DutyProfile) -> str:
    """``duty: training (Jeon et al., ATC'19): GPU-time-weighted mean 51.9%``."""
    held = np.array([j.gpu_demand_milli * j.runtime for j in jobs], float)
    duty = np.array([j.gpu_util for j in jobs])
    mean = float((held * duty).sum() / held.sum()) if held.sum() > 0 else math.nan
    source = {
        "training": "Jeon et al., ATC'19",
        "inference": "Alibaba GenAI trace, SoCC'25",
        "sharing": "the share asked is the share used",
        "synthetic": "fractional jobs: Alibaba GenAI trace; whole GPUs: Jeon et al., ATC'19",
        "declared": "the jobs' own",
    }.get(profile.kind, "stated")
    return f"GPU duty: {profile.label} ({source}); mean {mean:.1%} of the GPU time held"

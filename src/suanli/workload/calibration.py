"""Calibrated defaults of the synthetic workload, and the runtime model they parameterise.

Every constant names the public trace file it was measured from and how (see also
``docs/workload.md``); nothing here reads a trace at run time. openb = Alibaba GPU cluster trace
2023 as used by the FGD paper (USENIX ATC'23); Philly = Microsoft Philly (USENIX ATC'19) as
processed by the Pollux artifact (OSDI'21).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from suanli.core.model import SpecError

# --------------------------------------------------------------------------------------------
# Calibrated constants. Each one names the trace file and how it was measured.
# --------------------------------------------------------------------------------------------

# Demand mix. openb_pod_list_default.csv, 8,152 pods: num_gpu == 0 -> 1,088 CPU-only (13.35%);
# num_gpu == 1 and gpu_milli < 1000 -> 3,078 fractional (37.76%); the other 3,986 (48.90%) ask
# for whole GPUs. philly_jobs.csv, 82,247 jobs, splits the whole-GPU jobs by num_gpus:
# 1 GPU 76,627 (93.17%), 2/4/8 GPUs 5,331 (6.48%), more than 8 GPUs 289 (0.351%, gangs).
# multi = 0.4890 * 0.06482 = 0.0317, gang = 0.4890 * 0.003514 = 0.0017, 1-GPU = the rest.
CPU_ONLY_SHARE = 0.1335
FRACTIONAL_SHARE = 0.3776
MULTI_GPU_SHARE = 0.0317
GANG_SHARE = 0.0017

# GPUs of a single-task multi-GPU job. philly_jobs.csv, num_gpus in {2, 4, 8}:
# 1,818 / 1,870 / 1,643 jobs.
MULTI_GPU_SIZES: tuple[tuple[int, float], ...] = ((2, 1818.0), (4, 1870.0), (8, 1643.0))

# Gang width, in 8-GPU tasks. philly_jobs.csv, num_gpus > 8 mapped to ceil(num_gpus / 8) tasks:
# 12 and 16 GPUs -> 2 tasks (7 + 199 jobs), 24 -> 3 (7), 32 -> 4 (67), 64 -> 8 (6), 128 -> 16 (3).
GANG_GPUS_PER_TASK = 8
GANG_TASKS: tuple[tuple[int, float], ...] = ((2, 206.0), (3, 7.0), (4, 67.0), (8, 6.0), (16, 3.0))

# Fractional requests, joint (gpu_milli, cpu_milli, memory_mib) of the pod.
# openb_pod_list_default.csv, the 3,078 pods with num_gpu == 1 and gpu_milli < 1000; CPU
# rounded to 500 milli and memory to 2 GiB, then the 16 combinations holding >= 0.9% of the
# pods kept (90.2% of them) and renormalised. Pod counts as weights. Mean gpu_milli: 591 in
# this table, 563 in the trace (20 distinct values there, 810 the most common at 35%).
FRACTIONAL_SHAPES: tuple[tuple[int, int, int, float], ...] = (
    (810, 3000, 6144, 1047.0),
    (470, 12000, 47104, 388.0),
    (470, 8000, 30720, 360.0),
    (650, 12000, 47104, 237.0),
    (320, 4000, 22528, 111.0),
    (230, 4000, 30720, 84.0),
    (320, 4000, 14336, 78.0),
    (590, 3000, 6144, 75.0),
    (320, 8000, 30720, 72.0),
    (550, 4000, 10240, 72.0),
    (160, 4000, 14336, 53.0),
    (460, 6000, 6144, 51.0),
    (370, 4000, 10240, 45.0),
    (320, 4000, 30720, 43.0),
    (810, 4000, 10240, 31.0),
    (460, 6000, 12288, 29.0),
)

# Whole single-GPU requests, (cpu_milli, memory_mib) per GPU. openb_pod_list_default.csv, the
# 3,911 pods with num_gpu == 1 and gpu_milli == 1000; same rounding; the 14 pairs holding
# >= 2% kept (90.1%). Trace mean 11,078 milli / 42,440 MiB per GPU, table 11,116 / 40,600.
ONE_GPU_SHAPES: tuple[tuple[int, int, float], ...] = (
    (11500, 49152, 1391.0),
    (3000, 6144, 470.0),
    (18500, 65536, 255.0),
    (10000, 40960, 195.0),
    (12000, 47104, 161.0),
    (12000, 24576, 160.0),
    (15500, 57344, 158.0),
    (12000, 16384, 145.0),
    (16000, 32768, 108.0),
    (8000, 16384, 105.0),
    (4000, 24576, 104.0),
    (8000, 32768, 96.0),
    (14000, 57344, 93.0),
    (24000, 94208, 84.0),
)

# Multi-GPU requests (single-task and each gang task), (cpu_milli, memory_mib) PER GPU.
# openb_pod_list_default.csv, the 75 pods with num_gpu in {2, 4, 8}, request divided by
# num_gpu; same rounding; the 5 pairs holding >= 3% kept (96%). Trace mean 9,580 milli /
# 41,940 MiB per GPU, table 9,611 / 42,524.
MULTI_GPU_SHAPES: tuple[tuple[int, int, float], ...] = (
    (8000, 32768, 40.0),
    (11000, 40960, 18.0),
    (15000, 79872, 8.0),
    (15000, 92160, 3.0),
    (3000, 32768, 3.0),
)

# CPU-only requests, (cpu_milli, memory_mib). openb_pod_list_default.csv, the 1,088 pods with
# num_gpu == 0; same rounding; the 7 pairs holding >= 1% kept (97%). Trace mean 17,645 milli /
# 48,851 MiB, table 17,668 / 49,142.
CPU_ONLY_SHAPES: tuple[tuple[int, int, float], ...] = (
    (12500, 57344, 364.0),
    (32000, 49152, 284.0),
    (8000, 30720, 168.0),
    (15500, 51200, 120.0),
    (16500, 51200, 95.0),
    (8000, 16384, 13.0),
    (11500, 57344, 11.0),
)

# Tenant skew. philly_jobs.csv: job counts of the 15 virtual clusters (50.1%, 19.6%, 12.1%,
# 9.0%, 2.4%, ... ; top 3 hold 81.8%). Maximum-likelihood Zipf exponent over ranks 1..15:
# s = 1.75 (fitted shares 55.7%, 16.6%, 8.2%, 5.0%, ...). 15 tenants as in Philly.
TENANTS = 15
TENANT_ZIPF_S = 1.75

# Priority mix. openb_pod_list_default.csv qos: LS 4,647 (57.0%), BE 3,398 (41.7%),
# Burstable 100 (1.2%), Guaranteed 7 (0.1%). Mapping by preemptibility (the model's online and
# high are not preemptible, normal and spot are): non-BE pods (58.3%) -> online + high;
# BE pods (41.7%) -> normal + spot. Within them: online = the LS pods that share a GPU (759,
# 9.3%; a fractional GPU is the typical request of an inference service), high = the other
# non-BE pods (49.0%).
# BE is split evenly between normal and spot: ASSUMPTION, the trace has one best-effort level.
PRIORITY_MIX: tuple[tuple[str, float], ...] = (
    ("online", 0.09),
    ("high", 0.49),
    ("normal", 0.21),
    ("spot", 0.21),
)

# Placement constraints. openb_pod_list_{default,gpushare40,cpu050}.csv: gpu_spec is empty on
# every pod, so the calibrated share of jobs pinned to a GPU model is 0.
MODEL_CONSTRAINED_SHARE = 0.0

# User estimates: ASSUMPTION, no trace here records them. Modelled on the HPC finding that
# user estimates are mostly generous over-estimates (Tsafrir, Etsion and Feitelson, IEEE TPDS
# 2007): estimate = runtime * lognormal factor (median 2, sigma 0.7: 16% of factors are
# below 1), rounded up to whole minutes (then 12% of estimates are under the runtime); 20% of
# jobs give none.
ESTIMATE_MISSING_SHARE = 0.2
ESTIMATE_FACTOR_MEDIAN = 2.0
ESTIMATE_FACTOR_SIGMA = 0.7

# GPU duty (utilisation of the GPUs a job holds): see suanli.workload.duty, which takes it from
# Jeon et al. (ATC'19) for training and from Alibaba's GenAI serving trace for inference.


# --------------------------------------------------------------------------------------------
# Runtime model
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class QuantileTable:
    """An empirical distribution given by its quantiles; sampled by log-linear interpolation.

    ``probs`` rises strictly from 0 to 1 and ``seconds[i]`` is the ``probs[i]`` quantile.
    A uniform ``u`` maps to ``exp(interp(u, probs, log(seconds)))``, so the table reproduces
    the listed quantiles exactly and keeps the heavy tail up to the observed maximum.
    """

    probs: tuple[float, ...]
    seconds: tuple[float, ...]

    def __post_init__(self) -> None:
        p, s = self.probs, self.seconds
        if len(p) < 2 or len(p) != len(s):
            raise SpecError("QuantileTable: probs and seconds need the same length (>= 2)")
        if p[0] != 0.0 or p[-1] != 1.0 or any(b <= a for a, b in pairwise(p)):
            raise SpecError("QuantileTable: probs must rise strictly from 0 to 1")
        if s[0] <= 0 or any(b < a for a, b in pairwise(s)):
            raise SpecError("QuantileTable: seconds must be > 0 and non-decreasing")

    def sample(self, u: np.ndarray) -> np.ndarray:
        """Seconds for uniforms ``u`` in [0, 1)."""
        return np.exp(np.interp(u, self.probs, np.log(self.seconds)))

    def mean(self) -> float:
        """The exact mean of the interpolated distribution (each segment is log-uniform)."""
        total = 0.0
        for i in range(len(self.probs) - 1):
            dp = self.probs[i + 1] - self.probs[i]
            a, b = math.log(self.seconds[i]), math.log(self.seconds[i + 1])
            total += dp * (math.exp(a) if b - a < 1e-12 else (math.exp(b) - math.exp(a)) / (b - a))
        return total

    def quantile(self, p: float) -> float:
        """The ``p`` quantile of the interpolated distribution."""
        return float(self.sample(np.array([p]))[0])


# fmt: off
_P_FINE = (0.0, 0.01, 0.05, 0.10, 0.25, 0.50, 0.75, 0.90, 0.95, 0.98, 0.99, 0.995, 0.999, 0.9999, 1.0)
_P_MID = (0.0, 0.01, 0.05, 0.10, 0.25, 0.50, 0.75, 0.90, 0.95, 0.98, 0.99, 0.995, 1.0)
_P_GANG = (0.0, 0.05, 0.10, 0.25, 0.50, 0.75, 0.90, 0.95, 0.98, 0.99, 1.0)


@dataclass(frozen=True, slots=True)
class RuntimeModel:
    """Runtime tables by the job's requested size, in reference-speed seconds.

    Defaults: ``duration`` of philly_jobs.csv, quantiles (numpy ``quantile``, linear) per
    ``num_gpus`` group. Jobs up to 1 GPU use ``one_gpu`` (CPU-only and fractional ones too:
    ASSUMPTION, openb's deletion - creation spans are not clean runtimes); 2/4/8-GPU jobs
    their own table; gangs ``gang`` (Philly jobs over 8 GPUs). The size that picks the table
    is the one drawn, before any clamping to the cluster.
    """

    # philly_jobs.csv, num_gpus == 1 (76,627 jobs): P10 62 s, P50 1,117 s, P90 8,512 s,
    # P99 135,399 s; mean 8,301 s (table mean 8,858 s).
    one_gpu: QuantileTable = QuantileTable(
        _P_FINE,
        (1.0, 30.0, 52.0, 62.0, 122.0, 1117.0, 2716.0, 8512.0, 19137.0, 68252.0, 135399.0,
         266914.0, 865709.0, 2618276.0, 3256045.0),
    )
    # num_gpus == 2 (1,818 jobs): P10 11 s, P50 21 s, P90 72,740 s, P99 523,316 s; mean 30,942 s.
    two_gpu: QuantileTable = QuantileTable(
        _P_MID,
        (2.0, 5.0, 9.0, 11.0, 16.0, 21.0, 76.0, 72740.0, 197062.0, 343862.0, 523316.0,
         808064.0, 2582803.0),
    )
    # num_gpus == 4 (1,870 jobs): P10 138 s, P50 17,410 s, P90 184,435 s, P99 907,376 s;
    # mean 78,762 s.
    four_gpu: QuantileTable = QuantileTable(
        _P_MID,
        (3.0, 36.0, 75.0, 138.0, 773.0, 17410.0, 89394.0, 184435.0, 273968.0, 533378.0,
         907376.0, 1205990.0, 2750674.0),
    )
    # num_gpus == 8 (1,643 jobs): P10 216 s, P50 23,683 s, P90 351,982 s, P99 1,060,498 s;
    # mean 129,775 s.
    eight_gpu: QuantileTable = QuantileTable(
        _P_MID,
        (1.0, 33.0, 125.0, 216.0, 1876.0, 23683.0, 173248.0, 351982.0, 525618.0, 795161.0,
         1060498.0, 2000448.0, 4628226.0),
    )
    # num_gpus > 8 (289 jobs): P10 72 s, P50 21,137 s, P90 247,972 s, P99 922,629 s;
    # mean 95,326 s.
    gang: QuantileTable = QuantileTable(
        _P_GANG,
        (1.0, 35.0, 72.0, 566.0, 21137.0, 104218.0, 247972.0, 443240.0, 613624.0, 922629.0,
         1710643.0),
    )

    def for_gpus(self, gpus: int) -> QuantileTable:
        """The table for a single-task job of ``gpus`` requested GPUs (0 or 1: ``one_gpu``)."""
        if gpus <= 1:
            return self.one_gpu
        if gpus <= 2:
            return self.two_gpu
        if gpus <= 4:
            return self.four_gpu
        return self.eight_gpu


# fmt: on

PHILLY_RUNTIME = RuntimeModel()
"""Runtime tables calibrated to philly/philly_jobs.csv (the default)."""

"""Hardware failures in the simulator: GPUs, nodes and racks that fail, are found, and are
repaired, and the attempts they take down.

A failure is a Poisson process per component: each GPU fails at ``gpu_per_day`` per GPU-day,
each node at ``node_per_day`` per node-day, each rack (``NodeSpec.rack``) at
``rack_per_day`` per rack-day; the cluster's failures are their superposition, drawn one at a
time from a generator seeded by ``seed`` (so a replay with failures is deterministic). A
failure at ``t`` is *found* ``detect_s`` later: until then the scheduler does not know, and
may even start work on the broken hardware. When it is found:

- a **GPU** failure interrupts the attempts holding that GPU and drains its node (no new work
  lands there; the node's other attempts run on), as a GPU health check that fails does
  (an XID error or an ECC fault is cleared by resetting or replacing the GPU, with the node
  out of service);
- a **node** failure interrupts every attempt on the node and takes it out;
- a **rack** failure does so for every node of the rack.

The hardware is back ``repair_s`` after it was found. An interrupted attempt keeps the work
its last checkpoint saved *before the failure* (``Job.checkpoint_interval``; none: it starts
over), held its GPUs until the failure was found, and is queued again; its next attempt pays
the restart overhead, as a preempted one does. Failures that overlap each hold their nodes
out until their own repair.

Defaults, per component-day:

- ``gpu_per_day`` 2.2e-4: Llama 3's training run (Meta, "The Llama 3 Herd of Models", 2024)
  had 419 unexpected interruptions in 54 days on 16,384 H100s (4.7e-4 per GPU-day), of
  which faulty GPUs were 30.1% and HBM3 memory 17.2%: 47.3% of 4.7e-4.
- ``node_per_day`` 2.0e-3: the rest of those interruptions (52.7%: software, network, host)
  per 8-GPU node; Kokolis et al. (HPCA'25, arXiv 2410.21680) report 2.34 and 6.50 failures
  per 1,000 node-days, of every cause, on two A100 clusters.
- ``rack_per_day`` 0: no published rate found; give one to study rack failures.
- ``detect_s`` 30: dedicated probers locate network faults within ~20-30 s (Kokolis et al.).
- ``repair_s``: no published figure found for how long a failed server is out; it must be
  given.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

import numpy as np

from suanli.core.model import ClusterSpec, SpecError

DAY_S = 86_400.0

GPU_PER_DAY = 0.473 * 4.7e-4
"""Failures per GPU-day that take a GPU out (Llama 3: faulty GPU and HBM3 shares of 4.7e-4)."""
NODE_PER_DAY = 0.527 * 4.7e-4 * 8
"""Failures per node-day of the node itself (Llama 3's other causes, per 8-GPU node)."""
DETECT_S = 30.0
"""Seconds from a failure to its detection (probers: ~20-30 s; Kokolis et al., HPCA'25)."""

LEVELS = ("gpu", "node", "rack")


@dataclass(frozen=True, slots=True)
class FailureModel:
    """How often GPUs, nodes and racks fail (per component-day), how long a failure goes
    unseen (``detect_s``) and how long repair takes once it is seen (``repair_s``); ``seed``
    seeds the draws. See the module docstring for the defaults' sources."""

    repair_s: float
    gpu_per_day: float = GPU_PER_DAY
    node_per_day: float = NODE_PER_DAY
    rack_per_day: float = 0.0
    detect_s: float = DETECT_S
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("gpu_per_day", "node_per_day", "rack_per_day", "detect_s"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v < math.inf:
                raise SpecError(f"failures: {name} must be a number >= 0, got {v!r}")
        r = self.repair_s
        if isinstance(r, bool) or not isinstance(r, int | float) or not 0 < r < math.inf:
            raise SpecError(f"failures: repair_s must be a number of seconds > 0, got {r!r}")


@dataclass(frozen=True, slots=True)
class Failure:
    """One failure: its ``level`` (``gpu``, ``node``, ``rack``), what failed (``target``: a
    node's name, ``node/gpu index`` or a rack's name), when it happened, was found and was
    repaired, the node indices it took out, and the attempts it interrupted."""

    level: str
    target: str
    at: float
    found: float
    repaired: float
    nodes: tuple[int, ...]
    interrupted: int = 0


@dataclass(slots=True)
class FailureLog:
    """What failed in a replay, in the order found, and what it cost: GPU-seconds held by
    interrupted attempts that their checkpoints did not save (``lost_gpu_s``) and GPU-seconds
    of capacity out of service (``down_gpu_s``, up to the end of the replay)."""

    failures: list[Failure] = field(default_factory=list)
    lost_gpu_s: float = 0.0
    down_gpu_s: float = 0.0

    @property
    def interrupted(self) -> int:
        return sum(f.interrupted for f in self.failures)

    def by_level(self) -> dict[str, int]:
        out = dict.fromkeys(LEVELS, 0)
        for f in self.failures:
            out[f.level] += 1
        return out

    def summary(self) -> dict[str, object]:
        """Plain data: counts by level, attempts interrupted, GPU-hours lost and out of
        service, and each failure."""
        return {
            "count": len(self.failures),
            "by_level": self.by_level(),
            "interrupted_attempts": self.interrupted,
            "lost_gpu_hours": self.lost_gpu_s / 3600.0,
            "down_gpu_hours": self.down_gpu_s / 3600.0,
            "failures": [
                {
                    "level": f.level,
                    "target": f.target,
                    "at_s": f.at,
                    "found_s": f.found,
                    "repaired_s": f.repaired,
                    "interrupted": f.interrupted,
                }
                for f in self.failures
            ],  # fmt: skip
        }

    def line(self) -> str:
        """One line for a report."""
        lv = self.by_level()
        return (
            f"failures: {len(self.failures):,} (GPU {lv['gpu']:,}, node {lv['node']:,}, rack "
            f"{lv['rack']:,}); {self.interrupted:,} attempt(s) interrupted; "
            f"{self.lost_gpu_s / 3600:,.1f} GPU-h of work lost; "
            f"{self.down_gpu_s / 3600:,.1f} GPU-h out of service"
        )


@dataclass(frozen=True, slots=True)
class Found:
    """A failure the clock says was just found: its level, target, when it happened, the
    node indices it takes out, and the GPU index for a GPU failure (-1 otherwise)."""

    level: str
    target: str
    at: float
    nodes: tuple[int, ...]
    gpu: int = -1


class FailureClock:
    """The failures of one replay, as events in time: the next failure to be found, and
    the repairs due. ``next_at`` is the time of the earliest event (inf: none)."""

    def __init__(self, model: FailureModel, cluster: ClusterSpec) -> None:
        self.model = model
        self.rng = np.random.default_rng(model.seed)
        nodes = cluster.nodes
        self.node_names = [nd.name for nd in nodes]
        self.node_gpus = np.array([nd.gpus for nd in nodes], np.int64)
        racks: dict[str, list[int]] = {}
        for i, nd in enumerate(nodes):
            racks.setdefault(nd.rack, []).append(i)
        self.racks = list(racks.items())
        self.gpu_cum = np.cumsum(self.node_gpus)
        rates = np.array([
            model.gpu_per_day * float(self.node_gpus.sum()),
            model.node_per_day * len(nodes),
            model.rack_per_day * len(self.racks),
        ])  # fmt: skip
        self.total_per_s = float(rates.sum()) / DAY_S
        self.share = rates / rates.sum() if rates.sum() > 0 else rates
        self.down = np.zeros(len(nodes), np.int64)  # failures holding each node out
        self.down_since = np.zeros(len(nodes))
        self._events: list[tuple[float, int, Found | int]] = []  # (time, seq, found or repair)
        self._seq = 0
        self.log = FailureLog()
        self._draw(0.0)

    @property
    def next_at(self) -> float:
        return self._events[0][0] if self._events else math.inf

    def _push(self, t: float, what: Found | int) -> None:
        self._seq += 1
        heapq.heappush(self._events, (t, self._seq, what))

    def _draw(self, after: float) -> None:
        """The next failure after ``after`` (nothing where every rate is 0)."""
        if self.total_per_s <= 0:
            return
        at = after + float(self.rng.exponential(1.0 / self.total_per_s))
        level = LEVELS[int(self.rng.choice(3, p=self.share))]
        if level == "gpu":
            g = int(self.rng.integers(int(self.gpu_cum[-1])))
            node = int(np.searchsorted(self.gpu_cum, g, side="right"))
            gpu = g - (int(self.gpu_cum[node - 1]) if node else 0)
            what = Found("gpu", f"{self.node_names[node]}/{gpu}", at, (node,), gpu)
        elif level == "node":
            node = int(self.rng.integers(len(self.node_names)))
            what = Found("node", self.node_names[node], at, (node,))
        else:
            name, members = self.racks[int(self.rng.integers(len(self.racks)))]
            what = Found("rack", name, at, tuple(members))
        self._push(at + self.model.detect_s, what)

    def pop(self) -> Found | int:
        """The earliest event: a failure just found (the next one is drawn), or the index
        into ``log.failures`` of one just repaired."""
        _, _, what = heapq.heappop(self._events)
        if isinstance(what, Found):
            self._draw(what.at)
        return what

    def taken_out(self, f: Found, found: float, interrupted: int) -> int:
        """Record failure ``f``, found at ``found`` with ``interrupted`` attempts on its
        hardware, and schedule its repair; the returned index names it."""
        nodes = f.nodes
        for n in nodes:
            if self.down[n] == 0:
                self.down_since[n] = found
            self.down[n] += 1
        k = len(self.log.failures)
        repaired = found + self.model.repair_s
        self.log.failures.append(
            Failure(f.level, f.target, f.at, found, repaired, nodes, interrupted)
        )
        self._push(repaired, k)
        return k

    def back(self, k: int) -> list[int]:
        """Failure ``k`` is repaired: the nodes that are in service again."""
        f = self.log.failures[k]
        up = []
        for n in f.nodes:
            self.down[n] -= 1
            if self.down[n] == 0:
                self.log.down_gpu_s += float(self.node_gpus[n]) * (f.repaired - self.down_since[n])
                up.append(n)
        return up

    def close(self, stop: float) -> None:
        """The replay ended at ``stop``: capacity still out counts as down until then."""
        for n in np.flatnonzero(self.down > 0).tolist():
            self.log.down_gpu_s += float(self.node_gpus[n]) * max(0.0, stop - self.down_since[n])

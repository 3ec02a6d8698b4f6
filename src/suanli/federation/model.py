"""The federation: its regions (member clusters), the network between them, the data sets
jobs read, and the jobs with what they ask of the federation.

- ``Region``: a member cluster with its own policy set (each gets its own scheduler, built
  by the core builder), its GPU prices per model, its data-egress price, its site and its
  jurisdiction (for data residency).
- ``Network``: between two regions, a round trip from their sites' great-circle distance
  (``RTT = 2 d / 200,000 km/s``, light in fibre, a lower bound of the real one), a
  transfer's bandwidth share and the link's price an hour; egress is the source region's.
- ``Dataset``: a size, the region it lives in and, for data that may not leave a
  jurisdiction, the jurisdictions it may be in.
- ``FedJob``: a core ``Job`` (its task names the GPU models it accepts) with its home region
  (its users and submitter), the data sets it reads, the regions its owner allows, a budget
  and time limit, and for online work its users' latency bound; a divisible job may be split.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from suanli.core.model import ClusterSpec, Job, SpecError
from suanli.federation.prices import DC_PORT_HOUR_USD, LINK_GBPS, Reservation

__all__ = [
    "REROUTE_AFTER", "REROUTE_MIN_S", "TRIED", "Dataset", "FedJob", "Federation", "Network",
    "Outage", "Region", "Site", "not_allowed", "over_budget", "residency", "round_trip_ms",
    "too_far",
]  # fmt: skip

FIBRE_KM_PER_MS = 200.0
"""Light in fibre, about two thirds of c: 200 km a millisecond."""
EARTH_KM = 6371.0


@dataclass(frozen=True)
class Region:
    """A member cluster (module docstring)."""

    name: str
    cluster: ClusterSpec
    prices: Mapping[str, float]
    """USD per GPU-hour on demand, by GPU model (every model of the cluster)."""
    egress_usd_gb: float
    site: tuple[float, float]
    """Latitude and longitude of the region's data centres (degrees)."""
    jurisdiction: str
    policy: str = "fifo+best-fit"

    def __post_init__(self) -> None:
        models = {n.gpu_model.name for n in self.cluster.nodes if n.gpu_model is not None}
        missing = sorted(models - set(self.prices))
        if missing:
            raise SpecError(f"region {self.name}: no price for GPU model(s) {', '.join(missing)}")
        if not self.egress_usd_gb >= 0:
            raise SpecError(f"region {self.name}: egress price must be >= 0")


@functools.lru_cache(maxsize=4096)
def great_circle_km(a: tuple[float, float], b: tuple[float, float]) -> float:
    """Distance between two sites (haversine; kept per pair, as routing asks again and
    again)."""
    la1, lo1, la2, lo2 = map(math.radians, (*a, *b))
    h = math.sin((la2 - la1) / 2) ** 2 + math.cos(la1) * math.cos(la2) * math.sin((lo2 - lo1) / 2) ** 2
    return 2 * EARTH_KM * math.asin(math.sqrt(h))


class Site(Protocol):
    """A member as the network and the rules see it: a ``Region`` of the simulator, or a live
    front's member (``suanli.federation.front``), whose site may be unknown (None)."""

    @property
    def name(self) -> str: ...
    @property
    def site(self) -> tuple[float, float] | None: ...
    @property
    def egress_usd_gb(self) -> float: ...
    @property
    def jurisdiction(self) -> str: ...


def round_trip_ms(a: tuple[float, float], b: tuple[float, float]) -> float:
    """The fibre bound of a round trip between two sites (``RTT = 2 d / 200,000 km/s``)."""
    return 2.0 * great_circle_km(a, b) / FIBRE_KM_PER_MS


@dataclass(frozen=True)
class Network:
    """The links between regions (module docstring); every figure overridable."""

    gbps: float = LINK_GBPS
    hour_usd: float = DC_PORT_HOUR_USD

    def __post_init__(self) -> None:
        if not self.gbps > 0 or not self.hour_usd >= 0:
            raise SpecError("network: gbps must be > 0 and hour_usd >= 0")

    def latency_ms(self, a: Site, b: Site) -> float:
        """Round trip between two regions (0 within one, and where a site is not known)."""
        if a.name == b.name or a.site is None or b.site is None:
            return 0.0
        return round_trip_ms(a.site, b.site)

    def transfer_s(self, gb: float, a: Site, b: Site) -> float:
        """Seconds to move ``gb`` from ``a`` to ``b`` (0 within one region)."""
        if a.name == b.name or gb <= 0:
            return 0.0
        return gb * 8.0 / self.gbps + self.latency_ms(a, b) / 1000.0

    def transfer_usd(self, gb: float, a: Site, b: Site) -> tuple[float, float]:
        """Egress (charged by the source) and the link's time for moving ``gb``."""
        if a.name == b.name or gb <= 0:
            return 0.0, 0.0
        return gb * a.egress_usd_gb, self.transfer_s(gb, a, b) / 3600.0 * self.hour_usd


@dataclass(frozen=True, slots=True)
class Dataset:
    """A data set: its size, where it lives, and where it may be (None: anywhere)."""

    name: str
    size_gb: float
    home: str
    jurisdictions: frozenset[str] | None = None

    def __post_init__(self) -> None:
        if not self.size_gb >= 0:
            raise SpecError(f"data set {self.name}: size_gb must be >= 0")


@dataclass(frozen=True, slots=True)
class FedJob:
    """A job as the federation sees it (module docstring)."""

    job: Job
    home: str
    data: tuple[str, ...] = ()
    regions: frozenset[str] = frozenset()
    """The regions its owner allows (empty: any)."""
    budget_usd: float | None = None
    """The most the job may cost; it needs a time limit (its worst case is priced on it)."""
    limit_s: float | None = None
    """Its time limit at reference speed: the job never runs past it (as a scheduler stops a
    job at its limit)."""
    online: bool = False
    max_latency_ms: float | None = None
    """An online job's users' round-trip bound from its home region."""
    divisible: bool = False
    """Its tasks are independent (batch inference, a sweep) or data-parallel: it may be split
    across members, each part ``split_slowdown`` times slower than the whole at home."""
    split_slowdown: float = 1.0

    @property
    def id(self) -> str:
        return self.job.id

    def __post_init__(self) -> None:
        if self.budget_usd is not None and self.limit_s is None:
            raise SpecError(f"job {self.job.id}: a budget needs a time limit to price its "
                            "worst case on")  # fmt: skip
        if self.limit_s is not None and not self.limit_s > 0:
            raise SpecError(f"job {self.job.id}: limit_s must be > 0")
        if not self.split_slowdown >= 1:
            raise SpecError(f"job {self.job.id}: split_slowdown must be >= 1")


@dataclass(frozen=True, slots=True)
class Outage:
    """A member that takes no new job over ``[start, end)`` (its control plane is down; what
    runs there runs on)."""

    region: str
    start: float
    end: float


@dataclass(frozen=True)
class Federation:
    """Regions in their fixed order (first-admit tries them in it), the network, the data
    sets, capacity bought ahead and outages."""

    regions: tuple[Region, ...]
    network: Network = field(default_factory=Network)
    datasets: Mapping[str, Dataset] = field(default_factory=dict)
    reservations: tuple[Reservation, ...] = ()
    outages: tuple[Outage, ...] = ()

    def __post_init__(self) -> None:
        names = [r.name for r in self.regions]
        if not names or len(set(names)) != len(names):
            raise SpecError("federation: region names must be given and unique")
        known = set(names)
        for d in self.datasets.values():
            if d.home not in known:
                raise SpecError(f"data set {d.name}: home {d.home!r} is not a region")
        for r in self.reservations:
            if r.region not in known:
                raise SpecError(f"reservation {r.org}@{r.region}: not a region")
        for o in self.outages:
            if o.region not in known or not o.end > o.start:
                raise SpecError(f"outage of {o.region!r}: not a region, or it ends before it starts")

    def region(self, name: str) -> Region:
        for r in self.regions:
            if r.name == name:
                return r
        raise SpecError(f"no region {name!r} (regions: {', '.join(r.name for r in self.regions)})")

    def residency(self, fj: FedJob, region: Region) -> str:
        """Why ``fj``'s data may not be taken to ``region`` ("" if it may)."""
        return residency(self.datasets, fj.data, region)

    def check_jobs(self, jobs: Sequence[FedJob]) -> None:
        """Every job's home, regions and data sets exist; ids are unique."""
        known = {r.name for r in self.regions}
        seen: set[str] = set()
        for fj in jobs:
            if fj.id in seen:
                raise SpecError(f"job {fj.id}: id given twice")
            seen.add(fj.id)
            if fj.home not in known:
                raise SpecError(f"job {fj.id}: home {fj.home!r} is not a region")
            bad = sorted(fj.regions - known)
            if bad:
                raise SpecError(f"job {fj.id}: regions {', '.join(bad)} are not regions")
            for d in fj.data:
                if d not in self.datasets:
                    raise SpecError(f"job {fj.id}: no data set {d!r}")


# The federation's rules, as the simulator and a live front (``suanli.federation.front``)
# both apply them to a member: each says why the member is excluded, "" where it is not.

REROUTE_AFTER = 3.0
"""A job still waiting this many times its predicted wait after it was sent may be routed
again (at most once)."""
REROUTE_MIN_S = 1800.0
"""... but never before it has waited this long."""
TRIED = "already tried: the job waited there far longer than predicted"
"""Why the member a job is taken back from is not a candidate when it is routed again."""


def residency(datasets: Mapping[str, Dataset], names: Iterable[str], member: Site) -> str:
    """Why the data sets ``names`` may not be taken to ``member``'s jurisdiction."""
    for name in names:
        d = datasets[name]
        if d.jurisdictions is not None and member.jurisdiction not in d.jurisdictions:
            return (f"data residency: data set {name} may stay only in "
                    f"{', '.join(sorted(d.jurisdictions))}")  # fmt: skip
    return ""


def not_allowed(regions: frozenset[str], member: str) -> str:
    """Why the owner, who allows only ``regions`` (empty: any), excludes ``member``."""
    if regions and member not in regions:
        return f"the owner allows only {', '.join(sorted(regions))}"
    return ""


def too_far(round_trip: float, bound: float | None) -> str:
    """Why a member ``round_trip`` ms from an online job's users passes their ``bound``."""
    if bound is not None and round_trip > bound:
        return f"{round_trip:.0f} ms from its users, more than {bound:.0f} ms"
    return ""


def over_budget(worst: float, budget: float | None) -> str:
    """Why a job whose worst case there is ``worst`` passes its ``budget``."""
    if budget is not None and worst > budget:
        return f"budget: its worst case ${worst:,.2f} passes ${budget:,.2f}"
    return ""

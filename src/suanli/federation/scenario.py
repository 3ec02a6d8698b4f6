"""The compute-network scenario of ``suanli bench network``: one week over four regions built
from the shared inventories, training from the Philly and ITP traces, online services, data
sets in set regions, AWS prices (``docs/network.md``, "The scenario").

Fixed here, before any router was measured on it; ``seed`` draws only what a real week would
leave to chance (data set sizes, which data a job reads, which jobs are spot, sweeps, under a
budget or kept to their jurisdiction), never the regions, prices, homes or the week.

**Regions** (in this fixed order: first-admit tries them in it), each priced as an AWS region
(``suanli.federation.prices``) at that region's site:

==============  ===============  ===================================================  =====
region          AWS prices       inventory                                            where
==============  ===============  ===================================================  =====
``us-east``     us-east-1        Alibaba spot-GPU 2026 nodes (A10, A100, A800, H800)  us
``us-west``     us-west-2        the ten ITP clusters' nodes (V100; derived by the    us
                                 ITP reader's rule, at its 0.8 load)
``eu-west``     eu-west-1        openb's GPU nodes (T4, P100, V100, A10, G2, G3)      eu
``ap-northeast`` ap-northeast-1  PAI 2020's GPU machines (P100, T4, V100, MISC)       jp
==============  ===============  ===================================================  =====

The three published inventories are far larger than this week's work: each keeps one node in
``k`` of every node type (at least one of each), one ``k`` for all three, the smallest at
which the federation's offered load over the week (its jobs' GPU-hours at reference speed
over its GPUs' reference-speed hours) is at least ``load`` (0.8, the figure the ITP reader
sizes its clusters at). The ITP clusters are sized by that rule already and kept whole.

**Jobs.** Every job of the week ``[week_day, week_day + 7)`` days of each trace: the ten ITP
clusters' (tenant ``itp/clusterNN``, home ``us-west``: ITP is Microsoft's) and Philly's
(tenant ``philly/<vc>``; its fifteen virtual clusters, in order of their ids, homed in turn
in ``us-east``, ``eu-west`` and ``ap-northeast``), their runtimes at reference speed
(Philly's recorded on its own GPUs, scaled by their speed), submitted as recorded from the
week's start. Three online services run the whole week, each as many one-GPU replicas as its
trace's deployment over ``k`` (at least one): the GenAI serving pods (143, Alibaba; users in
``ap-northeast``, on T4s) and Azure's LLM conversation and code services (8 and 2 GPUs, the
Azure reader's server; users in ``us-east``, on A10s), within 60 ms of their users.

**Drawn by the seed**: each tenant's ``datasets`` data sets, log-uniform in
``dataset_gb`` and kept in its home region; in ``eu-west``, each one EU-resident with
probability ``eu_resident``; each job reads one of its tenant's; ``spot_share`` of the
training jobs run in the ``spot`` class; ``sweep_share`` of the multi-task ones are sweeps
(divisible, no slowdown apart); ``budget_share`` carry a budget of their worst case at home
on demand, with a time limit of their runtime rounded up to an hour and doubled (users ask
for more than they use); ``restricted_share`` are kept to their home jurisdiction's regions.

**Fixed**: ``itp/cluster04``, the largest tenant, bought ahead ``reserved_share`` of its
week's compute in ``us-east``; ``ap-northeast`` takes no new job from day 3.5 to day 4
(``outage``).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from suanli.core.model import ClusterSpec, Job, NodeSpec, TaskRequest
from suanli.federation.model import Dataset, Federation, FedJob, Network, Outage, Region
from suanli.federation.prices import EGRESS_USD_GB, Reservation, gpu_hour_prices
from suanli.federation.units import units_per_gpu_hour
from suanli.traces.catalogue import resolve_trace
from suanli.traces.itp import itp_cluster
from suanli.traces.locate import find_trace_dir
from suanli.traces.openb import load_openb_nodes
from suanli.traces.pai2020 import load_pai2020_machines
from suanli.traces.spot2026 import load_spot2026_nodes

__all__ = ["REGIONS", "NetworkScenario", "build"]

DAY = 86400.0
WEEK = 7 * DAY

REGIONS: tuple[tuple[str, str, tuple[float, float], str], ...] = (
    ("us-east", "us-east-1", (38.9, -77.5), "us"),  # Ashburn, Virginia
    ("us-west", "us-west-2", (45.8, -119.7), "us"),  # Boardman, Oregon
    ("eu-west", "eu-west-1", (53.3, -6.3), "eu"),  # Dublin
    ("ap-northeast", "ap-northeast-1", (35.7, 139.7), "jp"),  # Tokyo
)
"""(name, AWS region, site, jurisdiction), in the federation's fixed order."""

ONLINE: tuple[tuple[str, int, str, str], ...] = (
    ("genai", 143, "ap-northeast", "T4"),
    ("azure-conv", 8, "us-east", "A10"),
    ("azure-code", 2, "us-east", "A10"),
)
"""Online services: name, replicas (GPUs), users' region and GPU model."""


@dataclass(frozen=True)
class NetworkScenario:
    """The scenario's fixed figures (module docstring)."""

    week_day: int = 28
    load: float = 0.8
    datasets: int = 2
    dataset_gb: tuple[float, float] = (10.0, 2000.0)
    eu_resident: float = 0.5
    spot_share: float = 0.1
    sweep_share: float = 0.2
    budget_share: float = 0.05
    restricted_share: float = 0.05
    reserved_share: float = 0.2
    online_latency_ms: float = 60.0
    outage: Outage = Outage("ap-northeast", 3.5 * DAY, 4.0 * DAY)
    policy: str = "fifo+best-fit"


def _inventories(root: Path) -> dict[str, ClusterSpec]:
    return {
        "us-east": load_spot2026_nodes(root / "alibaba-spot-2026" / "node_info_df.csv"),
        "eu-west": load_openb_nodes(root / "openb" / "openb_node_list_gpu_node.csv"),
        "ap-northeast": load_pai2020_machines(root / "pai2020" / "pai_machine_spec.csv"),
    }


def thin(cluster: ClusterSpec, k: int, name: str) -> ClusterSpec:
    """One node in ``k`` of every node type of ``cluster`` (at least one), GPU nodes only."""
    types: dict[tuple[object, ...], list[NodeSpec]] = defaultdict(list)
    for n in cluster.nodes:
        if n.gpus and n.gpu_model is not None:
            types[(n.gpu_model.name, n.gpus, n.cpu_milli, n.memory_mib)].append(n)
    kept = [n for nodes in types.values() for n in nodes[: max(1, math.ceil(len(nodes) / k))]]
    return ClusterSpec(name, tuple(replace(n, name=f"{name}-{i:04d}", rack="rack-0")
                                   for i, n in enumerate(kept)))  # fmt: skip


def _speed_hours(cluster: ClusterSpec) -> float:
    return sum(n.gpus * n.gpu_model.speed for n in cluster.nodes if n.gpu_model is not None) * WEEK / 3600


def _week(jobs: Sequence[Job], day: int, speed: float) -> list[Job]:
    lo, hi = day * DAY, day * DAY + WEEK
    return [replace(j, submit=j.submit - lo, runtime=j.runtime * speed)
            for j in jobs if lo <= j.submit < hi]  # fmt: skip


def build(
    sc: NetworkScenario = NetworkScenario(), seed: int = 0, trace_dir: str | Path | None = None
) -> tuple[Federation, list[FedJob], dict[str, object]]:
    """The federation, its jobs, and what the scenario worked out (``k``, the offered load,
    each region's GPUs and home demand), for ``seed``."""
    root = find_trace_dir(trace_dir)
    # Training: the week of every ITP cluster and of Philly, at reference speed.
    itp_jobs: list[Job] = []
    itp_nodes: list[NodeSpec] = []
    homes: dict[str, str] = {}
    for c in range(1, 11):
        t = resolve_trace(f"itp:cluster{c:02d}", root)
        itp_nodes.extend(itp_cluster(t.jobs, name=f"us-west-c{c:02d}").nodes)
        tenant = f"itp/cluster{c:02d}"
        homes[tenant] = "us-west"
        itp_jobs.extend(replace(j, id=f"itp{c:02d}-{j.id}", tenant=tenant, queue=tenant)
                        for j in _week(t.jobs, sc.week_day, t.basis.speed))  # fmt: skip
    philly = resolve_trace("philly", root)
    vcs = sorted({j.tenant for j in philly.jobs})
    for i, vc in enumerate(vcs):
        homes[vc] = ("us-east", "eu-west", "ap-northeast")[i % 3]
    training = itp_jobs + _week(philly.jobs, sc.week_day, philly.basis.speed)
    training.sort(key=lambda j: (j.submit, j.id))

    # Regions: the published inventories thinned by one k, the load rule.
    full = _inventories(root)
    us_west = ClusterSpec("us-west", tuple(itp_nodes))
    demand = sum(j.runtime * j.gpu_demand_milli / 1000 for j in training) / 3600
    k = 1
    while True:
        clusters = {r: thin(c, k, r) for r, c in full.items()}
        cap = sum(_speed_hours(c) for c in clusters.values()) + _speed_hours(us_west)
        online = sum(max(1, round(g / k)) * WEEK / 3600 for _, g, _, _ in ONLINE)
        if (demand + online) / cap >= sc.load or k >= 10_000:
            break
        k += 1
    clusters["us-west"] = us_west
    regions = tuple(
        Region(name, clusters[name], gpu_hour_prices(aws, _models(clusters[name])),
               EGRESS_USD_GB[aws], site, juris, policy=sc.policy)
        for name, aws, site, juris in REGIONS
    )  # fmt: skip

    rng = np.random.default_rng(seed)
    # Data sets: per tenant, in its home region.
    datasets: dict[str, Dataset] = {}
    by_tenant: dict[str, list[str]] = {}
    lo, hi = sc.dataset_gb
    for tenant in sorted(homes):
        names = []
        for d in range(sc.datasets):
            name = f"{tenant}/data{d}"
            size = float(np.exp(rng.uniform(math.log(lo), math.log(hi))))
            resident = homes[tenant] == "eu-west" and rng.random() < sc.eu_resident
            datasets[name] = Dataset(name, round(size, 1), homes[tenant],
                                     frozenset({"eu"}) if resident else None)  # fmt: skip
            names.append(name)
        by_tenant[tenant] = names
    juris = {name: j for name, _, _, j in REGIONS}
    prices = {r.name: r.prices for r in regions}

    jobs: list[FedJob] = []
    for j in training:
        home = homes[j.tenant]
        data = (by_tenant[j.tenant][int(rng.integers(sc.datasets))],)
        spot = rng.random() < sc.spot_share
        sweep = j.tasks >= 2 and rng.random() < sc.sweep_share
        budget = rng.random() < sc.budget_share
        restricted = rng.random() < sc.restricted_share
        job = j.with_class("spot") if spot else j
        limit = budget_usd = None
        if budget:
            limit = 2.0 * math.ceil(j.runtime / 3600.0) * 3600.0
            r = regions[[x[0] for x in REGIONS].index(home)]
            slowest = min(n.gpu_model.speed for n in r.cluster.nodes if n.gpu_model)  # type: ignore[union-attr]
            dearest = max(prices[home].values())
            worst = j.gpu_demand_milli / 1000 * dearest * limit / slowest / 3600
            budget_usd = math.ceil(worst * 100) / 100  # to the cent above
        allowed = (frozenset(n for n, jj in juris.items() if jj == juris[home])
                   if restricted else frozenset())  # fmt: skip
        jobs.append(FedJob(job, home, data, allowed, budget_usd, limit, divisible=sweep))
    for name, gpus, home, model in ONLINE:
        n = max(1, round(gpus / k))
        speed = _speed_of(regions, model)
        job = Job(f"online-{name}", 0.0, WEEK * speed, TaskRequest(gpus=1, gpu_models=frozenset({model})),
                  tasks=n, gang_min=1, tenant=f"online/{name}", queue=f"online/{name}",
                  priority_class="online")  # fmt: skip
        homes[job.tenant] = home
        jobs.append(FedJob(job, home, online=True, max_latency_ms=sc.online_latency_ms))
    # Capacity bought ahead: a share of the largest tenant's week, in common units.
    big = "itp/cluster04"
    east = regions[0]
    units = sum(j.job.runtime * j.job.gpu_demand_milli / 1000 for j in jobs if j.job.tenant == big) / 3600
    units *= _mean_units(east.cluster) / _mean_speed(east.cluster) * sc.reserved_share
    fed = Federation(regions, Network(), datasets,
                     (Reservation(big, "us-east", round(units, 1)),), (sc.outage,))  # fmt: skip
    home_demand: dict[str, float] = defaultdict(float)
    for fj in jobs:
        home_demand[fj.home] += fj.job.runtime * fj.job.gpu_demand_milli / 1000 / 3600
    info = {
        "k": k, "offered_load": (demand + sum(max(1, round(g / k)) * WEEK / 3600 for _, g, _, _ in ONLINE))
        / (sum(_speed_hours(r.cluster) for r in regions)),
        "gpus": {r.name: r.cluster.total_gpus for r in regions},
        "home_load": {r.name: home_demand[r.name] / _speed_hours(r.cluster) for r in regions},
        "jobs": len(jobs), "homes": homes,
    }  # fmt: skip
    return fed, jobs, info


def _models(c: ClusterSpec) -> frozenset[str]:
    return frozenset(n.gpu_model.name for n in c.nodes if n.gpu_model is not None)


def _speed_of(regions: Sequence[Region], model: str) -> float:
    for r in regions:
        for n in r.cluster.nodes:
            if n.gpu_model is not None and n.gpu_model.name == model:
                return n.gpu_model.speed
    return 1.0


def _mean_units(c: ClusterSpec) -> float:
    gpus = units = 0.0
    for n in c.nodes:
        if n.gpu_model is not None:
            gpus += n.gpus
            units += n.gpus * units_per_gpu_hour(n.gpu_model.name)
    return units / gpus


def _mean_speed(c: ClusterSpec) -> float:
    gpus = speed = 0.0
    for n in c.nodes:
        if n.gpu_model is not None:
            gpus += n.gpus
            speed += n.gpus * n.gpu_model.speed
    return speed / gpus

"""The bill of a federation run: every use rated in the region that provided it, and every
cross-region use settled (``docs/network.md``, "The ledger").

- **Compute.** Every attempt in every member becomes a usage record (``org`` the job's
  tenant, ``cluster`` the region) rated by the region's price book
  (``region_book``): its GPU prices per model on demand, and for spot use a version every
  ``SPOT_PERIOD_S`` whose class multiplier carries the spot price set then (``spot``);
  nothing for use that capacity bought ahead covers (``reserved``); CPU, memory and storage
  are in the GPU price (the instances' price includes the host).
- **Data.** Each move's egress is a ``network`` record rated by the source region's book
  (its egress price a GB); the link's time is a ``link`` charge, hours at the network's
  price an hour, provided by the source.
- **Bought ahead.** Each reservation is a ``reserved`` charge for all its unit-hours at its
  ratio of the region's mean on-demand price a unit, used or not.
- **Settlement.** Every charge whose region is not its org's home region is a cross-region
  use: its settlement credits the providing region's account (``region/<name>``) with the
  same amount (``suanli.store.ledger.post_settlements``).

Nothing here writes: the caller posts ``Bill.records``, ``Bill.charges`` and
``Bill.settlements`` to a store (``suanli.bench.network``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_EVEN, Decimal

from suanli.federation.engine import FedResult
from suanli.federation.member import RESERVED
from suanli.federation.model import Federation, Region
from suanli.federation.units import units_per_gpu_hour
from suanli.metering.charges import MONEY_QUANTUM, QUANTITY_QUANTUM, Charge, charge_key
from suanli.metering.prices import PriceBook, price_book_from_dict
from suanli.metering.rating import rate
from suanli.metering.simout import DEFAULT_EPOCH, parse_epoch
from suanli.metering.usage import Attempt, UsageRecord, usage_records
from suanli.sim.attempts import OUTCOMES
from suanli.store.ledger import provider

__all__ = ["Bill", "bill", "mean_unit_price", "provider", "region_book"]

CURRENCY = "USD"
MS_PER_HOUR = 3_600_000


def _money(x: float | Decimal, places: str = "0.000001") -> str:
    return str(Decimal(str(x)).quantize(Decimal(places), ROUND_HALF_EVEN))


def _iso(ms: int) -> str:
    return (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)).isoformat()


def region_book(
    region: Region, spot: list[tuple[float, float]], epoch_ms: int, reserved_ratio: float | None = None
) -> PriceBook:
    """The region's price book: its GPU prices and egress, a version per spot price set."""
    rates: list[dict[str, object]] = [
        {"resource": "gpu", "gpu_model": m, "price": _money(p)} for m, p in sorted(region.prices.items())
    ]
    rates.append({"resource": "network", "price": _money(region.egress_usd_gb)})
    versions = [
        {"name": f"{region.name}-{k:04d}", "effective": _iso(epoch_ms + round(t * 1000)),
         "class_multipliers": {"spot": _money(m, "0.0001"), RESERVED: "0"}, "rates": rates}
        for k, (t, m) in enumerate(spot)
    ]  # fmt: skip
    return price_book_from_dict(
        {"currency": CURRENCY, "timezone": "UTC", "free": ["cpu", "memory", "storage"],
         "versions": versions},  # fmt: skip
        f"the price book of {region.name}",
    )


def _charge(job_id: str, org: str, cluster: str, resource: str, start_ms: int, end_ms: int,
            quantity: Decimal, price: Decimal, raw: int) -> Charge:  # fmt: skip
    key = charge_key(f"{job_id}#0@{start_ms}", resource, "", start_ms, False)
    return Charge(key, f"{job_id}#0@{start_ms}", job_id, 0, org, "federation", "normal", cluster,
                  resource, "", "all", start_ms, end_ms, raw,
                  quantity.quantize(QUANTITY_QUANTUM, ROUND_HALF_EVEN), price,
                  (quantity * price).quantize(MONEY_QUANTUM, ROUND_HALF_EVEN), CURRENCY,
                  "federation")  # fmt: skip


@dataclass
class Bill:
    """What a federation run puts in the ledger."""

    records: list[UsageRecord] = field(default_factory=list)
    charges: list[Charge] = field(default_factory=list)
    settlements: list[tuple[Charge, str]] = field(default_factory=list)


def bill(result: FedResult, fed: Federation, homes: Mapping[str, str],
         epoch: str = DEFAULT_EPOCH) -> Bill:  # fmt: skip
    """The bill of ``result`` (module docstring); ``homes``: each org's home region."""
    epoch_ms = parse_epoch(epoch)
    out = Bill()
    # Spot use is rated on a version per spot price set; the rest on one version (the same
    # on-demand prices): a job's charge is cut only where its price could change.
    books = {m.name: region_book(m.region, result.spot[m.name], epoch_ms) for m in result.members}
    flat = {m.name: region_book(m.region, result.spot[m.name][:1], epoch_ms)
            for m in result.members}  # fmt: skip

    def ms(s: float) -> int:
        return epoch_ms + round(s * 1000)

    for m in result.members:
        rep = m.rep
        (jidx, starts, ends), use = rep.log.arrays()
        nth: dict[int, int] = {}
        attempts = []
        for a, (i, s, e) in enumerate(zip(jidx.tolist(), starts.tolist(), ends.tolist(), strict=True)):
            job = rep.jobs[i]
            nth[i] = nth.get(i, 0) + 1
            attempts.append(Attempt(
                job.id, nth[i], ms(s), ms(e), job.tenant, job.queue, job.priority_class, m.name,
                use.gpu_by_model(a), int(use.cpu_milli[a]), int(use.memory_mib[a]),
                outcome=OUTCOMES[int(use.outcome[a])],
            ))  # fmt: skip
        records = list(usage_records(attempts))
        out.records.extend(records)
        out.charges.extend(rate([r for r in records if r.priority_class == "spot"], books[m.name]))
        out.charges.extend(rate([r for r in records if r.priority_class != "spot"], flat[m.name]))
    for k, mv in enumerate(result.moves):
        job_id = f"{mv.job}/move/{mv.dataset}/{k}"
        rec = UsageRecord(f"{job_id}#0@{ms(mv.start)}", job_id, 0, ms(mv.start), ms(mv.arrive),
                          mv.org, "federation", "normal", mv.source, (), 0, 0, 0,
                          round(mv.gb * 1000))  # fmt: skip
        out.records.append(rec)
        out.charges.extend(rate([rec], flat[mv.source]))
        raw = ms(mv.arrive) - ms(mv.start)
        out.charges.append(_charge(job_id, mv.org, mv.source, "link", ms(mv.start), ms(mv.arrive),
                                   Decimal(raw) / MS_PER_HOUR, Decimal(_money(fed.network.hour_usd)),
                                   raw))  # fmt: skip
    for r in fed.reservations:
        region = fed.region(r.region)
        unit_price = mean_unit_price(region)
        hours = Decimal(_money(r.units, "0.000001"))
        out.charges.append(_charge(f"reservation/{r.org}/{r.region}", r.org, r.region, "reserved",
                                   epoch_ms, ms(result.horizon), hours,
                                   Decimal(_money(unit_price * r.ratio)), round(r.units * 1000)))  # fmt: skip
    for c in out.charges:
        home = homes.get(c.org)
        if home is not None and home != c.cluster:
            out.settlements.append((c, provider(c.cluster)))
    return out


def mean_unit_price(region: Region) -> float:
    """The region's on-demand price of one common unit-hour, over its GPUs."""
    price = units = 0.0
    for n in region.cluster.nodes:
        if n.gpu_model is not None:
            price += n.gpus * region.prices[n.gpu_model.name]
            units += n.gpus * units_per_gpu_hour(n.gpu_model.name)
    return price / units if units else 0.0

"""Prices of the federation's regions: GPU-hours per model, data leaving a region, the link's
time, spot prices that follow a region's utilisation, and capacity bought ahead.

**GPU-hours.** AWS on-demand prices, per region, from the SkyPilot catalogue
(``skypilot-org/skypilot-catalog : catalogs/v7/aws/vms.csv`` at commit
``001367d22a0033fac286a8c71aeac7109e431bcb``), an 8- or 4-GPU instance's hourly price over
its GPUs (the host's share included): T4 ``g4dn.12xlarge``, A10 ``g5.48xlarge`` (A10G),
V100 ``p3.16xlarge``, V100 32 GB ``p3dn.24xlarge``, A100 ``p4d.24xlarge``, H100
``p5.48xlarge``. A model AWS does not sell takes the price of the part it is sold as an
export or a variant of (A800 as A100, H800 as H100, V100M16 as V100), or, for the P100, the
V100's price times the P100/V100 price ratio of Google Cloud (1.46 / 2.48 in us-central1,
``catalogs/v7/gcp/vms.csv`` of the same repository at ``017e2502``); the anonymised models
as their readers' class (``suanli.federation.units``).

**Data.** AWS charges data moved between regions to the source region (AWS Global Network
FAQ): $0.02 a GB from the US and EU regions, $0.09 from Tokyo (AWS EC2 pricing, "Data
transfer to another region"). A transfer holds a 10 Gb/s share of the link for its time,
priced at a dedicated 10 Gb/s AWS Direct Connect port's $2.25 an hour.

**Spot.** A region's spot price of a GPU-hour is its on-demand price times
``SPOT_FLOOR + (1 − SPOT_FLOOR) · u²``, ``u`` the share of its GPUs allocated when the price
is set, every ``SPOT_PERIOD_S``: a tenth of on-demand when idle (AWS advertises spot "up to
90% off"), on-demand when full. Stated rule, not a market's.

**Bought ahead.** A department may buy unit-hours of a region ahead (``Reservation``), at
``RESERVED_RATIO`` of the on-demand price (AWS's 1-year reserved p5.48xlarge, $55.04 an
hour against $98.32 on demand); its jobs' use there draws on them first and costs nothing
more, the rest is on demand.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from suanli.core.model import SpecError

__all__ = [
    "AWS_GPU_HOUR",
    "DC_PORT_HOUR_USD",
    "EGRESS_USD_GB",
    "LINK_GBPS",
    "RESERVED_RATIO",
    "SPOT_FLOOR",
    "SPOT_PERIOD_S",
    "Reservation",
    "gpu_hour_prices",
    "spot_multiplier",
]

AWS_GPU_HOUR: Mapping[str, Mapping[str, float]] = {
    "us-east-1": {"T4": 3.912 / 4, "A10": 16.288 / 8, "V100": 24.48 / 8,
                  "V100M32": 31.212 / 8, "A100": 32.7726 / 8, "H100": 98.32 / 8},
    "us-west-2": {"T4": 3.912 / 4, "A10": 16.288 / 8, "V100": 24.48 / 8,
                  "V100M32": 31.212 / 8, "A100": 32.7726 / 8, "H100": 98.32 / 8},
    "eu-west-1": {"T4": 4.362 / 4, "A10": 18.18233 / 8, "V100": 26.44 / 8,
                  "V100M32": 33.711 / 8, "A100": 35.39655 / 8},
    "ap-northeast-1": {"T4": 5.281 / 4, "A10": 23.62246 / 8, "V100": 33.552 / 8,
                       "V100M32": 42.783 / 8, "A100": 44.92215 / 8, "H100": 123.19496 / 8},
}  # fmt: skip
"""USD per GPU-hour, on demand, per AWS region and GPU model (module docstring)."""

P100_OF_V100 = 1.46 / 2.48
"""Google Cloud's P100 price over its V100 price (us-central1; module docstring)."""

SOLD_AS: Mapping[str, str] = {
    "A800": "A100", "H800": "H100", "V100M16": "V100", "A100-40G": "A100",
    "G2": "V100M32", "G3": "V100M32", "GPU-series-1": "A100", "GPU-series-2": "A100",
}  # fmt: skip
"""Models AWS does not sell, priced as the part they are a variant of (module docstring;
openb's G2 and G3 are 32 GiB parts of V100 speed, ``suanli.traces.openb``)."""

EGRESS_USD_GB: Mapping[str, float] = {
    "us-east-1": 0.02, "us-west-2": 0.02, "eu-west-1": 0.02, "ap-northeast-1": 0.09,
}  # fmt: skip
"""USD per GB leaving each region for another (charged to the source)."""

LINK_GBPS = 10.0
DC_PORT_HOUR_USD = 2.25
"""A transfer's share of the link (Gb/s) and that share's price an hour (a dedicated 10 Gb/s
AWS Direct Connect port)."""

SPOT_FLOOR = 0.1
SPOT_PERIOD_S = 6 * 3600.0
RESERVED_RATIO = 55.04 / 98.32


def gpu_hour_prices(aws_region: str, models: set[str] | frozenset[str]) -> dict[str, float]:
    """USD per GPU-hour of each of ``models`` in ``aws_region`` (module docstring);
    ``SpecError`` naming a model the region has no price for."""
    book = AWS_GPU_HOUR.get(aws_region)
    if book is None:
        raise SpecError(f"no GPU prices for region {aws_region!r} (known: "
                        f"{', '.join(AWS_GPU_HOUR)})")  # fmt: skip
    out: dict[str, float] = {}
    for m in sorted(models):
        if m in ("P100", "MISC"):
            out[m] = book["V100"] * P100_OF_V100
            continue
        sold = SOLD_AS.get(m, m)
        if sold not in book:
            raise SpecError(f"region {aws_region}: no price for GPU model {m!r}"
                            + (f" (sold as {sold})" if sold != m else ""))  # fmt: skip
        out[m] = book[sold]
    return out


def spot_multiplier(utilisation: float, floor: float = SPOT_FLOOR) -> float:
    """Spot price over on-demand at a region's GPU ``utilisation`` (0-1)."""
    if not 0 <= floor <= 1:
        raise SpecError(f"spot floor must be in [0, 1], got {floor}")
    u = min(1.0, max(0.0, utilisation))
    return floor + (1.0 - floor) * u * u


@dataclass(frozen=True, slots=True)
class Reservation:
    """``units`` common unit-hours a department (``org``) bought ahead in ``region``, at
    ``ratio`` of the region's on-demand unit price."""

    org: str
    region: str
    units: float
    ratio: float = RESERVED_RATIO

    def __post_init__(self) -> None:
        if not self.units > 0:
            raise SpecError(f"reservation {self.org}@{self.region}: units must be > 0")
        if not 0 < self.ratio <= 1:
            raise SpecError(f"reservation {self.org}@{self.region}: ratio must be in (0, 1]")

"""Return on the GPUs: what the capacity of a simulated run cost, what it delivered, what a
policy saves against another.

``load_capacity(path)`` reads a capacity-cost file (``examples/capacity.yaml``): per GPU model
the purchase price, its amortisation lifetime and the power a GPU draws; the facility's power
usage effectiveness (PUE) and the price of electricity. ``roi(...)`` computes a result's
figures, ``compare(x, y)`` what result ``x`` saves against ``y``. The formulas, with their
symbols, are in ``docs/billing.md``:

- hourly cost of one GPU of model m: ``c_m = P_m / (L_m × 8760) + W_m / 1000 × PUE × E``
  (price per GPU, lifetime in years of 365 days, watts per GPU, price per kWh);
- span ``T``: simulated second 0 to the end of the last attempt, in hours;
- capacity cost ``C = Σ_m G_m × T × c_m`` (``G_m`` GPUs of model m in the cluster);
- delivered GPU-hours ``A = Σ_m A_m`` (allocated to attempts); cost per delivered GPU-hour
  ``k = C / A``;
- idle capacity ``I_m = G_m × T − A_m`` GPU-hours, costing ``Σ_m I_m × c_m``;
- allocated but idle (waste) ``w_m`` GPU-hours, costing ``Σ_m w_m × c_m`` at capacity cost;
  busy GPU-hours ``B = A − Σ_m w_m`` (where the bill split used from idle), utilisation
  ``B / (G T)`` beside allocation ``A / (G T)``, and cost per busy GPU-hour ``C / B``;
- revenue ``R`` (the bill's total), margin ``R − C``, cost recovery ``R / C``;
- ``x`` against ``y``: savings ``S = (k_y − k_x) × A_x`` (what ``x``'s delivered hours would
  have cost at ``y``'s cost per delivered hour, less what they cost), and the capacity cost
  of the extra time ``(T_y − T_x) × H`` with ``H = Σ_m G_m c_m``; the two agree when
  ``A_x = A_y``.

Arithmetic is exact (``Fraction``) until the end; money is then rounded half-even to
``MONEY_QUANTUM``, hours to ``QUANTITY_QUANTUM`` and ratios to ``RATIO_QUANTUM``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from pathlib import Path
from typing import Any

from suanli.config.yamldoc import yaml_mapping
from suanli.core.model import SpecError
from suanli.metering.charges import MONEY_QUANTUM, QUANTITY_QUANTUM
from suanli.metering.usage import GPU_HOUR, MS_PER_HOUR

__all__ = [
    "HOURS_PER_YEAR",
    "CapacityCosts",
    "CapacityError",
    "Comparison",
    "ModelCost",
    "Roi",
    "capacity_from_dict",
    "compare",
    "load_capacity",
    "roi",
    "round_half_even",
]

HOURS_PER_YEAR = 8760
"""A year of amortisation: 365 days of 24 hours."""
RATIO_QUANTUM = Decimal("0.000001")

_TOP_KEYS = ("currency", "electricity_per_kwh", "pue", "models")
_MODEL_KEYS = (
    "price_per_gpu",
    "price_per_node",
    "gpus_per_node",
    "lifetime_years",
    "watts_per_gpu",
)
_YAML_SUFFIXES = (".yaml", ".yml")


class CapacityError(SpecError):
    """An invalid capacity-cost file, or a run it cannot price (one line, naming the file)."""


@dataclass(frozen=True, slots=True)
class ModelCost:
    """What one GPU of a model costs: its share of the purchase price, amortised over
    ``lifetime_years``, and the power it draws (``watts_per_gpu``, at the wall, with its
    share of the host)."""

    model: str
    price_per_gpu: Fraction
    lifetime_years: Fraction
    watts_per_gpu: Fraction

    def amortisation_per_hour(self) -> Fraction:
        """``P / (L × 8760)``."""
        return self.price_per_gpu / (self.lifetime_years * HOURS_PER_YEAR)

    def power_per_hour(self, pue: Fraction, price_per_kwh: Fraction) -> Fraction:
        """``W / 1000 × PUE × E``."""
        return self.watts_per_gpu / 1000 * pue * price_per_kwh


@dataclass(frozen=True, slots=True)
class CapacityCosts:
    """A capacity-cost file: ``currency``, ``electricity_per_kwh``, ``pue`` and per model costs."""

    currency: str
    electricity_per_kwh: Fraction
    pue: Fraction
    models: Mapping[str, ModelCost]
    where: str = ""

    def hourly(self, model: str) -> Fraction:
        """``c_m``: the cost of one GPU of ``model`` for one hour, amortisation plus power."""
        m = self.models.get(model)
        if m is None:
            known = ", ".join(sorted(self.models)) or "none"
            at = f"{self.where}: " if self.where else ""
            raise CapacityError(
                f"{at}models: no costs for GPU model {model!r} (models: {known}); add it"
            )
        return m.amortisation_per_hour() + m.power_per_hour(self.pue, self.electricity_per_kwh)


# --------------------------------------------------------------------------------------------
# The file
# --------------------------------------------------------------------------------------------


def _number(value: Any, path: str, where: str, *, positive: bool = False) -> Fraction:
    """A YAML number or decimal string as an exact ``Fraction`` (``Decimal(str(x))``: what
    the file says, not its binary float), >= 0 (> 0 with ``positive``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise CapacityError(f"{where}: {path}: expected a number, got {value!r}")
    try:
        d = Decimal(str(value).strip())
    except InvalidOperation:
        raise CapacityError(f"{where}: {path}: expected a number, got {value!r}") from None
    if not d.is_finite() or d < 0 or (positive and d == 0):
        need = "> 0" if positive else ">= 0"
        raise CapacityError(f"{where}: {path}: must be a number {need}, got {value!r}")
    return Fraction(d)


def _unknown_keys(doc: Mapping[Any, Any], allowed: tuple[str, ...], path: str, where: str) -> None:
    for k in doc:
        if k not in allowed:
            at = f"{path}.{k}" if path else str(k)
            raise CapacityError(f"{where}: {at}: unknown key (keys: {', '.join(allowed)})")


def capacity_from_dict(doc: Mapping[Any, Any], where: str = "<capacity>") -> CapacityCosts:
    """The capacity costs of a parsed document (format: ``docs/billing.md``)."""
    _unknown_keys(doc, _TOP_KEYS, "", where)
    for key in ("currency", "electricity_per_kwh", "models"):
        if key not in doc:
            raise CapacityError(f"{where}: {key}: required")
    currency = doc["currency"]
    if not isinstance(currency, str) or not currency or any(c.isspace() for c in currency):
        raise CapacityError(f"{where}: currency: must be a code such as USD, got {currency!r}")
    kwh = _number(doc["electricity_per_kwh"], "electricity_per_kwh", where)
    pue = _number(doc.get("pue", 1), "pue", where, positive=True)
    if pue < 1:
        raise CapacityError(f"{where}: pue: must be >= 1 (facility power / IT power), got {pue}")
    models_doc = doc["models"]
    if not isinstance(models_doc, dict) or not models_doc:
        raise CapacityError(f"{where}: models: expected a mapping of GPU model to its costs")
    models: dict[str, ModelCost] = {}
    for name, m in models_doc.items():
        at = f"models.{name}"
        if not isinstance(m, dict):
            raise CapacityError(f"{where}: {at}: expected a mapping ({', '.join(_MODEL_KEYS)})")
        _unknown_keys(m, _MODEL_KEYS, at, where)
        if ("price_per_gpu" in m) == ("price_per_node" in m):
            raise CapacityError(
                f"{where}: {at}: give price_per_gpu, or price_per_node with gpus_per_node"
            )
        if "price_per_gpu" in m:
            if "gpus_per_node" in m:
                raise CapacityError(f"{where}: {at}.gpus_per_node: only with price_per_node")
            price = _number(m["price_per_gpu"], f"{at}.price_per_gpu", where)
        else:
            per_node = m.get("gpus_per_node")
            if isinstance(per_node, bool) or not isinstance(per_node, int) or per_node < 1:
                raise CapacityError(
                    f"{where}: {at}.gpus_per_node: a whole number >= 1 is required with "
                    f"price_per_node, got {per_node!r}"
                )
            price = _number(m["price_per_node"], f"{at}.price_per_node", where) / per_node
        if "lifetime_years" not in m:
            raise CapacityError(f"{where}: {at}.lifetime_years: required")
        if "watts_per_gpu" not in m:
            raise CapacityError(f"{where}: {at}.watts_per_gpu: required")
        models[str(name)] = ModelCost(
            model=str(name),
            price_per_gpu=price,
            lifetime_years=_number(
                m["lifetime_years"], f"{at}.lifetime_years", where, positive=True
            ),
            watts_per_gpu=_number(m["watts_per_gpu"], f"{at}.watts_per_gpu", where),
        )
    return CapacityCosts(currency, kwh, pue, models, where)


def load_capacity(path: str | os.PathLike[str]) -> CapacityCosts:
    """The capacity costs in a ``.yaml``/``.yml`` file; errors name the file, then the key."""
    where = os.fspath(path)
    p = Path(where)
    if not p.is_file():
        raise CapacityError(f"{where}: {'is not a file' if p.exists() else 'not found'}")
    if p.suffix.lower() not in _YAML_SUFFIXES:
        raise CapacityError(f"{where}: expected a .yaml or .yml file")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise CapacityError(f"{where}: cannot read: {e}") from None
    try:
        doc = yaml_mapping(text, where, "currency, electricity_per_kwh, pue and models")
    except SpecError as e:
        raise CapacityError(str(e)) from None
    return capacity_from_dict(doc, where)


# --------------------------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------------------------


def _money(x: Fraction) -> Decimal:
    return round_half_even(x, MONEY_QUANTUM)


def round_half_even(x: Fraction, quantum: Decimal) -> Decimal:
    """``x`` rounded half-even to ``quantum`` (a power of ten), exactly: integer arithmetic."""
    exp = int(quantum.as_tuple().exponent)
    scaled = x * Fraction(10) ** -exp
    q, r = divmod(scaled.numerator, scaled.denominator)
    twice = 2 * r
    if twice > scaled.denominator or (twice == scaled.denominator and q & 1):
        q += 1
    return Decimal(q).scaleb(exp)


@dataclass(frozen=True, slots=True)
class Roi:
    """The capacity figures of one simulated result (see the module docstring).

    Exact inputs: ``inventory`` (GPUs per model), ``span_ms`` (simulated ms), ``delivered``
    and ``wasted`` (milli-GPU × ms allocated, and allocated but idle, per model), ``revenue``
    (the bill's total, in ``revenue_currency``). Everything else is derived."""

    policy: str
    costs: CapacityCosts
    inventory: Mapping[str, int]
    span_ms: int
    delivered: Mapping[str, int]
    wasted: Mapping[str, int]
    revenue: Decimal | None = None
    revenue_currency: str | None = None
    busy_known: bool = True
    """Whether ``wasted`` holds all the idle time (the bill split used from idle); else the
    busy figures are undefined."""

    # Exact values -------------------------------------------------------------------------

    @property
    def span_h(self) -> Fraction:
        return Fraction(self.span_ms, MS_PER_HOUR)

    def hourly_cluster(self) -> Fraction:
        """``H = Σ_m G_m c_m``: the capacity cost of the whole cluster per hour."""
        return sum(
            (g * self.costs.hourly(m) for m, g in sorted(self.inventory.items()) if g),
            Fraction(0),
        )

    def capacity_exact(self) -> Fraction:
        """``C = H × T``."""
        return self.hourly_cluster() * self.span_h

    def delivered_exact(self) -> Fraction:
        """``A`` in GPU-hours."""
        return Fraction(sum(self.delivered.values()), int(GPU_HOUR))

    def capacity_hours_exact(self) -> Fraction:
        """``Σ_m G_m × T`` GPU-hours."""
        return sum(self.inventory.values()) * self.span_h

    def cost_per_delivered_exact(self) -> Fraction | None:
        """``k = C / A``; ``None`` when nothing was delivered."""
        a = self.delivered_exact()
        return self.capacity_exact() / a if a else None

    def idle_capacity_hours_exact(self) -> Fraction:
        """``Σ_m I_m`` with ``I_m = G_m T − A_m``."""
        return self.capacity_hours_exact() - self.delivered_exact()

    def idle_capacity_cost_exact(self) -> Fraction:
        """``Σ_m I_m c_m``."""
        t = self.span_h
        total = Fraction(0)
        for m, g in self.inventory.items():
            idle = g * t - Fraction(self.delivered.get(m, 0), int(GPU_HOUR))
            if idle:
                total += idle * self.costs.hourly(m)
        return total

    def waste_cost_exact(self) -> Fraction:
        """``Σ_m w_m c_m``: allocated but idle GPU time at capacity cost."""
        return sum(
            (
                Fraction(raw, int(GPU_HOUR)) * self.costs.hourly(m)
                for m, raw in sorted(self.wasted.items())
                if raw
            ),
            Fraction(0),
        )

    @property
    def same_currency(self) -> bool:
        return self.revenue is not None and self.revenue_currency == self.costs.currency

    # Rounded figures ----------------------------------------------------------------------

    def figures(self) -> dict[str, Any]:
        """The figures, rounded (money ``MONEY_QUANTUM``, hours ``QUANTITY_QUANTUM``, ratios
        ``RATIO_QUANTUM``), as ``Decimal`` or ``None`` where undefined."""
        c = self.capacity_exact()
        a = self.delivered_exact()
        k = self.cost_per_delivered_exact()
        cap_h = self.capacity_hours_exact()
        out: dict[str, Any] = {
            "span_hours": round_half_even(self.span_h, QUANTITY_QUANTUM),
            "gpus": sum(self.inventory.values()),
            "hourly_cluster_cost": _money(self.hourly_cluster()),
            "capacity_gpu_hours": round_half_even(cap_h, QUANTITY_QUANTUM),
            "capacity_cost": _money(c),
            "delivered_gpu_hours": round_half_even(a, QUANTITY_QUANTUM),
            "allocation": round_half_even(a / cap_h, RATIO_QUANTUM) if cap_h else None,
            "cost_per_delivered_gpu_hour": _money(k) if k is not None else None,
            "busy_gpu_hours": None,
            "utilisation": None,
            "cost_per_busy_gpu_hour": None,
            "idle_capacity_gpu_hours": round_half_even(
                self.idle_capacity_hours_exact(), QUANTITY_QUANTUM
            ),
            "idle_capacity_cost": _money(self.idle_capacity_cost_exact()),
            "waste_gpu_hours": round_half_even(
                Fraction(sum(self.wasted.values()), int(GPU_HOUR)), QUANTITY_QUANTUM
            ),
            "waste_cost": _money(self.waste_cost_exact()),
            "revenue": self.revenue,
            "margin": None,
            "cost_recovery": None,
        }
        if self.busy_known:
            busy = a - Fraction(sum(self.wasted.values()), int(GPU_HOUR))
            out["busy_gpu_hours"] = round_half_even(busy, QUANTITY_QUANTUM)
            out["utilisation"] = round_half_even(busy / cap_h, RATIO_QUANTUM) if cap_h else None
            out["cost_per_busy_gpu_hour"] = _money(c / busy) if busy else None
        if self.same_currency and self.revenue is not None:
            r = Fraction(self.revenue)
            out["margin"] = _money(r - c)
            out["cost_recovery"] = round_half_even(r / c, RATIO_QUANTUM) if c else None
        return out


def roi(
    policy: str,
    costs: CapacityCosts,
    inventory: Mapping[str, int],
    span_ms: int,
    delivered: Mapping[str, int],
    wasted: Mapping[str, int] | None = None,
    *,
    revenue: Decimal | None = None,
    revenue_currency: str | None = None,
    busy_known: bool = True,
) -> Roi:
    """The figures of one result. ``CapacityError`` when a model the attempts used is not in
    the inventory or has no costs, or when the attempts held more GPU time than the cluster
    had over the span (the inventory is wrong)."""
    if span_ms < 0:
        raise CapacityError(f"{policy}: negative span {span_ms} ms")
    for m, g in inventory.items():
        if g < 0:
            raise CapacityError(f"{policy}: {g} GPUs of model {m!r}")
        if g:
            costs.hourly(m)  # every model of the cluster needs costs
    for m, raw in delivered.items():
        if not raw:
            continue
        if inventory.get(m, 0) == 0:
            raise CapacityError(
                f"{policy}: the attempts used GPU model {m!r}, which the cluster "
                f"({', '.join(f'{g} {n}' for n, g in sorted(inventory.items()))}) has none of"
            )
        if raw > inventory[m] * 1000 * span_ms:
            raise CapacityError(
                f"{policy}: the attempts held more {m} GPU time than {inventory[m]} GPUs have "
                f"over the run; is the cluster right?"
            )
    return Roi(
        policy=policy,
        costs=costs,
        inventory=dict(inventory),
        span_ms=span_ms,
        delivered=dict(delivered),
        wasted=dict(wasted or {}),
        revenue=revenue,
        revenue_currency=revenue_currency,
        busy_known=busy_known,
    )


@dataclass(frozen=True, slots=True)
class Comparison:
    """What result ``x`` saves against result ``y`` (same trace, same cluster)."""

    x: Roi
    y: Roi

    def figures(self) -> dict[str, Any]:
        """``delta_*`` are ``x − y``; ``savings`` is ``(k_y − k_x) × A_x`` and
        ``extra_time_cost`` is ``(T_y − T_x) × H`` (positive: ``x`` is cheaper)."""
        x, y = self.x, self.y
        kx, ky = x.cost_per_delivered_exact(), y.cost_per_delivered_exact()
        savings = (ky - kx) * x.delivered_exact() if kx is not None and ky is not None else None
        return {
            "policy": x.policy,
            "baseline": y.policy,
            "delta_delivered_gpu_hours": round_half_even(
                x.delivered_exact() - y.delivered_exact(), QUANTITY_QUANTUM
            ),
            "delta_span_hours": round_half_even(x.span_h - y.span_h, QUANTITY_QUANTUM),
            "cost_per_delivered_gpu_hour": _money(kx) if kx is not None else None,
            "baseline_cost_per_delivered_gpu_hour": _money(ky) if ky is not None else None,
            "savings": _money(savings) if savings is not None else None,
            "extra_time_cost": _money((y.span_h - x.span_h) * x.hourly_cluster()),
        }


def compare(x: Roi, y: Roi) -> Comparison:
    """What ``x`` saves against ``y``; ``CapacityError`` unless both ran on the same cluster
    inventory and capacity costs (only then is the comparison about the policy)."""
    if dict(x.inventory) != dict(y.inventory) or x.costs != y.costs:
        raise CapacityError(
            f"{x.policy} and {y.policy} ran on different clusters or costs: not comparable"
        )
    return Comparison(x, y)

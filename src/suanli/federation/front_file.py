"""A federation file for a live front (``suanli.federation.front``): its members (URL, admin
token, prices, speeds, site, jurisdiction, egress), its data sets and where each has a copy,
and the network between the members, checked field by field: a ``SpecError`` names the file
and the member, data set or field at fault. Names are taken only as a member's API paths take
them, sizes only as its API does.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

from suanli.core.model import SpecError
from suanli.federation.model import Dataset, Network
from suanli.store import datasets as datasets_store

__all__ = [
    "MAX_GB", "FrontFederation", "FrontMember", "finite", "load_federation", "load_members",
    "unknown_keys",
]  # fmt: skip


@dataclass(frozen=True)
class FrontMember:
    """One member as the front reaches it (module docstring)."""

    name: str
    url: str
    token: str
    prices: dict[str, float]
    speeds: dict[str, float] = field(default_factory=dict)
    site: tuple[float, float] | None = None
    """Latitude and longitude of its data centres (None: not given)."""
    jurisdiction: str = ""
    egress_usd_gb: float = 0.0


@dataclass(frozen=True)
class FrontFederation:
    """A federation file: its members in order, its data sets and where each has a copy, and
    the network between the members."""

    members: tuple[FrontMember, ...]
    datasets: Mapping[str, Dataset] = field(default_factory=dict)
    copies: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Per data set, the members that hold a copy (the first is its home)."""
    network: Network = field(default_factory=Network)


def load_members(path: Path) -> list[FrontMember]:
    """The members of a federation file (``load_federation``)."""
    return list(load_federation(path).members)


def load_federation(path: Path) -> FrontFederation:
    """A federation file; ``SpecError`` naming the file and the member, data set or field at
    fault."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text())
    except OSError as e:
        raise SpecError(f"{path}: cannot read it: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise SpecError(f"{path}: not UTF-8 text: {e.reason} at byte {e.start}") from None
    except yaml.YAMLError as e:
        raise SpecError(f"{path}: not valid YAML: {e}") from None
    rows = data.get("members") if isinstance(data, dict) else None
    if not isinstance(rows, list) or not rows:
        raise SpecError(f"{path}: needs 'members:', a list of at least one member")
    unknown = unknown_keys(data, {"members", "datasets", "network"})
    if unknown:
        raise SpecError(f"{path}: unknown field(s) {unknown}")
    members = _members(path, rows)
    datasets, copies = _datasets(path, data.get("datasets") or [], {m.name for m in members})
    net = data.get("network") or {}
    try:
        if not isinstance(net, dict) or set(net) - {"gbps", "hour_usd"}:
            raise SpecError("a mapping of gbps and hour_usd")
        network = Network(**{k: finite(v, k, None if k == "gbps" else 0.0)
                             for k, v in net.items()})  # fmt: skip
    except SpecError as e:
        raise SpecError(f"{path}: network: {e}") from None
    return FrontFederation(tuple(members), datasets, copies, network)


MEMBER_FIELDS = {"name", "url", "token", "token_file", "prices", "speeds", "site",
                 "jurisdiction", "egress_usd_gb"}  # fmt: skip


def _members(path: Path, rows: list[Any]) -> list[FrontMember]:
    out: list[FrontMember] = []
    for k, row in enumerate(rows):
        where = f"{path}: member {k + 1}"
        if not isinstance(row, dict):
            raise SpecError(f"{where}: a mapping of name, url, token or token_file, prices")
        unknown = unknown_keys(row, MEMBER_FIELDS)
        if unknown:
            raise SpecError(f"{where}: unknown field(s) {unknown}")
        name, url = row.get("name"), row.get("url")
        if not _named(name) or any(m.name == name for m in out):
            raise SpecError(f"{where}: 'name' must be letters, digits, '.', '_' or '-' (not "
                            "first), unique in the file")  # fmt: skip
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise SpecError(f"{where} ({name}): 'url' must be an http:// or https:// URL")
        token = row.get("token")
        if token is None and isinstance(row.get("token_file"), str):
            try:
                token = Path(row["token_file"]).expanduser().read_text().strip()
            except OSError as e:
                raise SpecError(f"{where} ({name}): token_file: {e.strerror}") from None
            except UnicodeDecodeError:
                raise SpecError(f"{where} ({name}): token_file: not UTF-8 text") from None
        if not isinstance(token, str) or not token:
            raise SpecError(f"{where} ({name}): give 'token' or 'token_file' (an admin token)")
        where = f"{where} ({name})"
        prices = _figures(row.get("prices"), f"{where}: prices", 0.0)
        speeds = _figures(row.get("speeds") or {}, f"{where}: speeds", None)
        site = row.get("site")
        if site is not None:
            site = _site(site, f"{where}: site")
        jurisdiction = row.get("jurisdiction", "")
        if not isinstance(jurisdiction, str):
            raise SpecError(f"{where}: jurisdiction: a text, e.g. EU")
        try:
            egress = finite(row.get("egress_usd_gb", 0.0), "egress_usd_gb", 0.0)
        except SpecError as e:
            raise SpecError(f"{where}: {e}") from None
        out.append(FrontMember(name, url.rstrip("/"), token, prices, speeds, site, jurisdiction,
                               egress))  # fmt: skip
    return out


def _datasets(
    path: Path, rows: Any, members: set[str]
) -> tuple[dict[str, Dataset], dict[str, tuple[str, ...]]]:
    """The file's data sets and the members holding a copy of each."""
    if not isinstance(rows, list):
        raise SpecError(f"{path}: datasets: a list of data sets (name, gb, at, jurisdictions)")
    datasets: dict[str, Dataset] = {}
    copies: dict[str, tuple[str, ...]] = {}
    for k, row in enumerate(rows):
        where = f"{path}: data set {k + 1}"
        if not isinstance(row, dict):
            raise SpecError(f"{where}: a mapping of name, gb, at and jurisdictions")
        unknown = unknown_keys(row, {"name", "gb", "at", "jurisdictions"})
        if unknown:
            raise SpecError(f"{where}: unknown field(s) {unknown}")
        name = row.get("name")
        if not _named(name) or name in datasets:
            raise SpecError(f"{where}: 'name' must be letters, digits, '.', '_' or '-' (not "
                            "first), unique in the file")  # fmt: skip
        where = f"{where} ({name})"
        try:
            gb = finite(row.get("gb"), "gb", 0.0)
        except SpecError as e:
            raise SpecError(f"{where}: {e}") from None
        if gb > MAX_GB:
            raise SpecError(f"{where}: gb: at most {MAX_GB:.0e} (an exabyte), got {gb:g}")
        at = row.get("at")
        if isinstance(at, str):
            at = [at]
        if not isinstance(at, list) or not at or not all(isinstance(x, str) for x in at):
            raise SpecError(f"{where}: 'at': the members holding a copy, at least one")
        strangers = sorted(set(at) - members)
        if strangers:
            raise SpecError(f"{where}: 'at' names no member of the file: {', '.join(strangers)}")
        juris = row.get("jurisdictions")
        if juris is not None and (not isinstance(juris, list) or not juris
                                  or not all(isinstance(x, str) and x for x in juris)):  # fmt: skip
            raise SpecError(f"{where}: 'jurisdictions': a list of the jurisdictions it may be in")
        datasets[name] = Dataset(name, gb, at[0], None if juris is None else frozenset(juris))
        copies[name] = tuple(dict.fromkeys(at))
    return datasets, copies


NAME = re.compile(datasets_store.NAME)
"""A member's or a data set's name: as the API's paths take a data set's."""
MAX_GB = datasets_store.MAX_GB
"""As the API takes a data set's size (``suanli.api.datasets``)."""


def _named(x: Any) -> TypeGuard[str]:
    return isinstance(x, str) and NAME.fullmatch(x) is not None


def unknown_keys(mapping: dict[Any, Any], known: set[str]) -> str:
    """The keys of ``mapping`` not in ``known``, whatever their type, for a message."""
    return ", ".join(sorted(map(str, set(mapping) - known)))


def finite(x: Any, what: str, low: float | None) -> float:
    """``x`` as a finite number >= ``low`` (None: > 0); ``SpecError`` naming ``what``."""
    try:
        ok = isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
    except OverflowError:  # an integer past a float's range
        ok = False
    if not ok or (x < low if low is not None else x <= 0):
        bound = f">= {low:g}" if low is not None else "> 0"
        shown = repr(x) if len(repr(x)) <= 40 else repr(x)[:40] + "..."
        raise SpecError(f"{what}: must be a finite number {bound}, got {shown}")
    return float(x)


def _site(x: Any, where: str) -> tuple[float, float]:
    ok = (isinstance(x, list) and len(x) == 2
          and all(isinstance(v, int | float) and not isinstance(v, bool) for v in x))  # fmt: skip
    if not ok or not (-90 <= x[0] <= 90 and -180 <= x[1] <= 180):
        raise SpecError(f"{where}: [latitude, longitude] in degrees, got {x!r}")
    return float(x[0]), float(x[1])


def _figures(value: Any, where: str, low: float | None) -> dict[str, float]:
    """A mapping of GPU model to a finite number, >= ``low`` (None: > 0)."""
    if not isinstance(value, dict) or (not value and low is not None):
        raise SpecError(f"{where}: a mapping of GPU model to a number")
    try:
        return {str(model): finite(x, str(model), low) for model, x in value.items()}
    except SpecError as e:
        raise SpecError(f"{where}: {e}") from None

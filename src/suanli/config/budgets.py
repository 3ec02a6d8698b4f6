"""Budgets from a YAML file, as a ``BudgetsSpec`` (the rules: ``suanli.core.budget``).

``load_budgets(path)`` reads a ``.yaml``/``.yml`` file, ``parse_budgets(text, where)`` YAML
text and ``budgets_from_dict(doc, where)`` a parsed document. Every error is a
``BudgetError`` (a ``SpecError``) with one line naming the file, then the key path, then the
problem: ``budgets.yaml: budgets[1].action: unknown action 'refuze' (did you mean 'refuse'?)``.
The format is described in ``docs/budgets.md``:

::

    currency: USD              # the currency of every limit (the price book's)
    default_runtime: 24h       # optional: the maximum runtime of a job without an estimate
    budgets:
      - org: vision            # an org path; "" or / for everyone
        period: monthly        # monthly | weekly | daily | fixed (with start and end)
        limit: "25000.00"      # a decimal string or a number, > 0
        thresholds: [0.5, 0.8, 1.0]   # optional: fractions or "80%" (default 50/80/100%)
        action: demote         # optional: none (default) | demote | off-peak | refuse
        demote_to: spot        # optional, demote only (default spot)

``epoch_s`` (an argument, not part of the file: the same file serves a live cluster, where
it is 0, and simulations of any date) is the UTC POSIX second that caller time 0 stands for.
"""

from __future__ import annotations

import difflib
import math
import os
import re
from collections.abc import Mapping
from datetime import UTC, date, datetime, time
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from suanli.config.yamldoc import yaml_mapping
from suanli.core.budget import (
    ACTIONS,
    DEFAULT_RUNTIME_S,
    DEFAULT_THRESHOLDS,
    PERIODS,
    BudgetError,
    BudgetSpec,
    BudgetsSpec,
)
from suanli.core.model import SpecError

__all__ = ["budgets_from_dict", "load_budgets", "parse_budgets", "parse_duration"]

_YAML_SUFFIXES = (".yaml", ".yml")
_TOP_KEYS = ("currency", "default_runtime", "budgets")
_BUDGET_KEYS = (
    "org",
    "name",
    "period",
    "start",
    "end",
    "limit",
    "thresholds",
    "action",
    "demote_to",
)
_UNITS = {"w": 604_800, "d": 86_400, "h": 3_600, "m": 60, "s": 1}
_DURATION_RE = re.compile(r"^(?:\d+(?:\.\d+)?[wdhms])+$")
_PART_RE = re.compile(r"(\d+(?:\.\d+)?)([wdhms])")
_MAX_FRACTION = 10.0  # above this a threshold is surely a percentage written as a number


def _did_you_mean(word: str, choices: Any) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _known_keys(doc: Mapping[Any, Any], allowed: tuple[str, ...], path: str) -> None:
    for key in doc:
        if key not in allowed:
            hint = _did_you_mean(str(key), allowed) or " (keys: " + ", ".join(allowed) + ")"
            raise BudgetError(path, f"unknown key {key!r}{hint}")


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _required(doc: Mapping[Any, Any], key: str, path: str) -> Any:
    if key not in doc or doc[key] is None:
        raise BudgetError(_join(path, key), "required key is missing")
    return doc[key]


def _text(value: Any, path: str, *, empty: bool = False) -> str:
    if not isinstance(value, str):
        raise BudgetError(path, f"must be a string, got {value!r}")
    if not empty and not value.strip():
        raise BudgetError(path, "must not be empty")
    return value.strip()


def _choice(value: Any, choices: tuple[str, ...], what: str, path: str) -> str:
    text = _text(value, path)
    if text not in choices:
        hint = _did_you_mean(text, choices) or f" ({what}s: {', '.join(choices)})"
        raise BudgetError(path, f"unknown {what} {text!r}{hint}")
    return text


def parse_duration(value: Any, path: str) -> float:
    """Seconds in a duration: a number of seconds, or text such as ``24h``, ``90m``,
    ``1h30m``, ``7d``, ``2w`` (units w, d, h, m, s); > 0."""
    bad = f"must be a duration such as 24h, 90m or 1h30m (or seconds), got {value!r}"
    if isinstance(value, bool):
        raise BudgetError(path, bad)
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip().replace(" ", "").lower()
        try:
            seconds = float(text)
        except ValueError:
            if not _DURATION_RE.match(text):
                raise BudgetError(path, bad) from None
            seconds = sum(float(n) * _UNITS[u] for n, u in _PART_RE.findall(text))
    else:
        raise BudgetError(path, bad)
    if not (math.isfinite(seconds) and seconds > 0):
        raise BudgetError(path, f"must be a duration > 0, got {value!r}")
    return seconds


def _limit(value: Any, path: str) -> Decimal:
    """An amount as written: ``Decimal(str(x))`` of a number or a decimal string."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise BudgetError(path, f'must be an amount such as "25000.00", got {value!r}')
    text = str(value).strip().replace("_", "").replace(",", "")
    try:
        amount = Decimal(text)
    except InvalidOperation:
        raise BudgetError(path, f'must be an amount such as "25000.00", got {value!r}') from None
    if not amount.is_finite() or amount <= 0:
        raise BudgetError(path, f"must be an amount > 0, got {value!r}")
    return amount


def _threshold(value: Any, path: str) -> float:
    """A fraction of the limit (``0.8``) or a percentage (``"80%"``)."""
    if isinstance(value, str) and value.strip().endswith("%"):
        try:
            fraction = float(value.strip()[:-1]) / 100
        except ValueError:
            raise BudgetError(path, f"must be a fraction or a percentage, got {value!r}") from None
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        fraction = float(value)
        if fraction > _MAX_FRACTION:
            raise BudgetError(
                path,
                f"must be a fraction of the limit (0.8 is 80%) or a percentage such as "
                f"'{value}%', got {value!r}",
            )
    else:
        raise BudgetError(path, f"must be a fraction (0.8) or a percentage ('80%'), got {value!r}")
    if not (math.isfinite(fraction) and fraction > 0):
        raise BudgetError(path, f"must be > 0, got {value!r}")
    return fraction


def _thresholds(value: Any, path: str) -> tuple[float, ...]:
    items = value if isinstance(value, list) else [value]
    out = tuple(
        _threshold(v, f"{path}[{k}]" if isinstance(value, list) else path)
        for k, v in enumerate(items)
    )
    for k, th in enumerate(out):
        if th in out[:k]:
            raise BudgetError(f"{path}[{k}]", f"{th:g} is listed twice")
    return out


def _instant(value: Any, path: str) -> int:
    """POSIX seconds of an instant with a UTC offset, or of 00:00 UTC of a bare date."""
    if isinstance(value, str):
        text = value.strip()
        try:
            value = date.fromisoformat(text) if len(text) == 10 else datetime.fromisoformat(text)
        except ValueError:
            raise BudgetError(
                path,
                f"must be a date (2026-11-01) or an instant (2026-11-01T00:00:00Z), got {text!r}",
            ) from None
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise BudgetError(
                path,
                f"{value.isoformat()} needs a UTC offset (e.g. 2026-11-01T00:00:00Z), or give a "
                "date for 00:00 UTC",
            )
        dt = value
    elif isinstance(value, date):
        dt = datetime.combine(value, time(0), tzinfo=UTC)
    else:
        raise BudgetError(
            path, f"must be a date (2026-11-01) or an instant (2026-11-01T00:00:00Z), got {value!r}"
        )
    seconds = dt.timestamp()
    if seconds != int(seconds):
        raise BudgetError(path, f"must be a whole second, got {value}")
    return int(seconds)


def _org(value: Any, path: str) -> str:
    if value is None:
        raise BudgetError(path, 'required key is missing (an org path, or "*" for everyone)')
    text = _text(value, path, empty=True)
    return "" if text == "*" else text


def _budget(doc: Any, path: str) -> BudgetSpec:
    if not isinstance(doc, Mapping):
        raise BudgetError(path, f"must be a mapping with org, period and limit, got {doc!r}")
    _known_keys(doc, _BUDGET_KEYS, path)
    org = _org(doc.get("org"), _join(path, "org"))
    period = _choice(_required(doc, "period", path), PERIODS, "period", _join(path, "period"))
    limit = _limit(_required(doc, "limit", path), _join(path, "limit"))
    thresholds = (
        _thresholds(doc["thresholds"], _join(path, "thresholds"))
        if doc.get("thresholds") is not None
        else DEFAULT_THRESHOLDS
    )
    action = (
        _choice(doc["action"], ACTIONS, "action", _join(path, "action"))
        if doc.get("action") is not None
        else "none"
    )
    demote_to = "spot"
    if doc.get("demote_to") is not None:
        if action != "demote":
            raise BudgetError(
                _join(path, "demote_to"),
                f"only a demote budget demotes (this one's action is {action})",
            )
        demote_to = _text(doc["demote_to"], _join(path, "demote_to"))
    start = end = None
    if period == "fixed":
        start = _instant(_required(doc, "start", path), _join(path, "start"))
        end = _instant(_required(doc, "end", path), _join(path, "end"))
    else:
        for key in ("start", "end"):
            if doc.get(key) is not None:
                raise BudgetError(
                    _join(path, key),
                    f"only a fixed period has a {key} ({period} periods follow the UTC calendar)",
                )
    name = _text(doc["name"], _join(path, "name")) if doc.get("name") is not None else ""
    try:
        return BudgetSpec(
            org=org,
            period=period,
            limit=limit,
            thresholds=thresholds,
            action=action,
            demote_to=demote_to,
            start=start,
            end=end,
            name=name,
        )
    except BudgetError as e:
        raise e.within(path) from None


def _spec(doc: Mapping[Any, Any], epoch_s: int) -> BudgetsSpec:
    _known_keys(doc, _TOP_KEYS, "")
    currency = _text(_required(doc, "currency", ""), "currency")
    runtime = (
        parse_duration(doc["default_runtime"], "default_runtime")
        if doc.get("default_runtime") is not None
        else DEFAULT_RUNTIME_S
    )
    rows = _required(doc, "budgets", "")
    if not isinstance(rows, list):
        raise BudgetError("budgets", f"must be a list of budgets, got {rows!r}")
    if not rows:
        raise BudgetError("budgets", "must list at least one budget")
    budgets = tuple(_budget(row, f"budgets[{k}]") for k, row in enumerate(rows))
    return BudgetsSpec(budgets, currency, epoch_s, runtime)


# --------------------------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------------------------


def budgets_from_dict(doc: Mapping[Any, Any], where: str, epoch_s: int = 0) -> BudgetsSpec:
    """The budgets of a parsed YAML document; ``where`` names it in errors, ``epoch_s`` is
    the UTC POSIX second that caller time 0 stands for. Raises ``BudgetError``:
    ``<where>: <key path>: <problem>``."""
    try:
        if not isinstance(doc, Mapping):
            raise BudgetError("", "expected a mapping with currency and budgets")
        return _spec(doc, int(epoch_s))
    except BudgetError as e:
        raise BudgetError(e.path, e.problem, where) from None


def parse_budgets(text: str, where: str = "<yaml>", epoch_s: int = 0) -> BudgetsSpec:
    """The budgets described by YAML ``text``; ``where`` names it in errors."""
    try:
        doc = yaml_mapping(text, where, "currency and budgets")
    except SpecError as e:
        raise BudgetError("", str(e).removeprefix(f"{where}: "), where) from None
    return budgets_from_dict(doc, where, epoch_s)


def load_budgets(path: str | os.PathLike[str], epoch_s: int = 0) -> BudgetsSpec:
    """The budgets in a ``.yaml``/``.yml`` file (format: ``docs/budgets.md``). Errors name
    the file as given, then the key path: ``budgets.yaml: budgets[0].limit: ...``."""
    where = os.fspath(path)
    p = Path(where)
    if not p.is_file():
        raise BudgetError("", "is not a file" if p.exists() else "not found", where)
    if p.suffix.lower() not in _YAML_SUFFIXES:
        raise BudgetError("", "expected a .yaml or .yml file", where)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise BudgetError("", f"cannot read: {e}", where) from None
    return parse_budgets(text, where, epoch_s)

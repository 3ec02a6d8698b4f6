"""Queues, quotas and priority classes of a cluster from a YAML file, as a ``TenancyConfig``.

``load_tenancy(path)`` reads a ``.yaml``/``.yml`` file; ``parse_tenancy(text)`` reads YAML text.
Every error is a ``SpecError`` with a one-line message that names the file, then the key path
of the offending value: ``tenancy file 't.yaml': queues[2].nominal.gpu: must be >= 0, got -1``.

YAML file
---------
::

    priority_classes:              # optional; default: DEFAULT_PRIORITY_CLASSES
      online: {value: 1000, preemptible: false}
      spot: {value: -100, preemptible: true}
    queues:                        # at least one
      - name: vision               # unique
        org: ai-lab/vision         # optional: the organisation subtree served (default: all)
        cohort: ai-lab             # optional: queues of one cohort lend each other idle quota
        weight: 2                  # optional fair-share weight, > 0 (default 1)
        nominal: {gpu: 64, "gpu:H100": 32, cpu: 512, memory: 4Ti}
        borrowing_limit: {gpu: 32} # optional; needs a cohort
        lending_limit: {gpu: 16}   # optional; needs a cohort; at most the nominal
    admission:                     # optional: admission plugins configured here, by name
      user-limit:                  # admission/user-limit (suanli.core.admission.user_limit)
        - {max_gpus: 16, max_jobs: 8}

Resources and units: ``gpu`` (GPUs of any model) and ``gpu:<MODEL>`` (GPUs of one model; the
cluster decides which names exist) in GPUs, ``cpu`` in cores, both in steps of 0.001 (stored
as milli-GPU and milli-CPU); ``memory`` as a size with a binary unit (``512Gi``, ``4Ti``; ``K``,
``M``, ``G``, ``T`` with or without ``i``/``iB``/``B``, read as by ``parse_size``) or a bare
whole number of MiB (stored in MiB). Every amount is >= 0. Unknown keys are errors.
"""

from __future__ import annotations

import difflib
import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, ValidationError

from suanli.config.cluster import parse_size
from suanli.config.yamldoc import yaml_mapping
from suanli.core.model import (
    DEFAULT_PRIORITY_CLASSES,
    MILLI,
    KeyPathError,
    PriorityClass,
    SpecError,
)
from suanli.core.tenancy import CPU, GPU, GPU_MODEL_PREFIX, MEMORY, QueueSpec, TenancySpec

__all__ = ["TenancyConfig", "load_tenancy", "parse_tenancy"]

_YAML_SUFFIXES = (".yaml", ".yml")
_SIZE_RE = re.compile(r"^\s*([+-]?)(\d+(?:\.\d+)?|\.\d+)\s*([KMGT])(?:i|iB|B)?\s*$", re.IGNORECASE)
_RESOURCES = (CPU, MEMORY, GPU)
_RESOURCE_HINT = f"resources: {', '.join(_RESOURCES)}, {GPU_MODEL_PREFIX}<MODEL>"


@dataclass(frozen=True)
class TenancyConfig:
    """The tenancy of one cluster: its queues, its priority classes (by name) and the
    admission plugins it configures (``admission/<name>`` -> its configuration)."""

    tenancy: TenancySpec
    priority_classes: dict[str, PriorityClass] = field(
        default_factory=lambda: dict(DEFAULT_PRIORITY_CLASSES)
    )
    admission: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------------------------
# The document, as pydantic checks its shape
# --------------------------------------------------------------------------------------------


class _Doc(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PriorityClassDoc(_Doc):
    """``priority_classes.<name>``: one priority level."""

    value: StrictInt
    preemptible: StrictBool = False


class QueueDoc(_Doc):
    """``queues[i]``: one queue. Resource maps are checked after pydantic (see ``_amounts``)."""

    name: str = Field(min_length=1)
    org: str = ""
    cohort: str | None = Field(default=None, min_length=1)
    weight: float = Field(default=1.0, gt=0, allow_inf_nan=False, strict=True)
    nominal: dict[Any, Any] = Field(default_factory=dict)
    borrowing_limit: dict[Any, Any] = Field(default_factory=dict)
    lending_limit: dict[Any, Any] = Field(default_factory=dict)


class TenancyDoc(_Doc):
    """The whole file."""

    priority_classes: dict[str, PriorityClassDoc] | None = Field(default=None, min_length=1)
    queues: list[QueueDoc] = Field(min_length=1)
    admission: dict[str, Any] | None = Field(default=None, min_length=1)


_DOC_BY_SECTION: dict[str, type[_Doc]] = {
    "queues": QueueDoc,
    "priority_classes": PriorityClassDoc,
}


# --------------------------------------------------------------------------------------------
# Amounts
# --------------------------------------------------------------------------------------------


def _amounts(raw: Mapping[Any, Any], path: str) -> dict[str, int]:
    """A resource map as written (``{gpu: 0.5, memory: 4Ti}``) in spec units."""
    out: dict[str, int] = {}
    for key, value in raw.items():
        resource = _resource(key, path)
        out[resource] = _amount(resource, value, f"{path}.{resource}")
    return out


def _resource(key: Any, path: str) -> str:
    if isinstance(key, str) and (
        key in _RESOURCES
        or (key.startswith(GPU_MODEL_PREFIX) and key[len(GPU_MODEL_PREFIX) :].strip())
    ):
        return key
    if key == GPU_MODEL_PREFIX or (isinstance(key, str) and key.startswith(GPU_MODEL_PREFIX)):
        raise SpecError(f"{path}: unknown resource {key!r} (the GPU model name is missing)")
    hint = _did_you_mean(str(key).lower(), _RESOURCES) or f" ({_RESOURCE_HINT})"
    raise SpecError(f"{path}: unknown resource {key!r}{hint}")


def _amount(resource: str, value: Any, path: str) -> int:
    """GPUs or cores in milli-units; memory in MiB."""
    if resource == MEMORY:
        return _memory_mib(value, path)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SpecError(f"{path}: must be a number, got {value!r}")
    _check_number(value, path)
    milli = Decimal(repr(value)) * MILLI
    if milli != milli.to_integral_value():
        raise SpecError(f"{path}: must be a multiple of 0.001, got {value!r}")
    return int(milli)


def _memory_mib(value: Any, path: str) -> int:
    """A size with a unit (``4Ti``, ``512G``) or a bare whole number of MiB, in MiB."""
    bad = f"{path}: must be a size such as 512Gi or 4Ti, or a whole number of MiB, got {value!r}"
    if isinstance(value, bool):
        raise SpecError(bad)
    if isinstance(value, str):
        m = _SIZE_RE.match(value)
        if m:
            sign, number, unit = m.groups()
            if sign == "-" and float(number) > 0:
                raise SpecError(f"{path}: must be >= 0, got {value!r}")
            if float(number) == 0:
                return 0
            try:
                return parse_size(f"{number}{unit}")
            except ValueError:  # less than 1 MiB once rounded
                raise SpecError(f"{path}: must be 0 or at least 1 MiB, got {value!r}") from None
        try:
            value = float(value)
        except ValueError:
            raise SpecError(bad) from None
    if not isinstance(value, (int, float)):
        raise SpecError(bad)
    _check_number(value, path)
    if value != int(value):
        raise SpecError(
            f"{path}: a bare number is MiB and must be whole (or give a unit, e.g. 512Gi), "
            f"got {value!r}"
        )
    return int(value)


def _check_number(value: float, path: str) -> None:
    if not math.isfinite(value):
        raise SpecError(f"{path}: must be a finite number, got {value!r}")
    if value < 0:
        raise SpecError(f"{path}: must be >= 0, got {value!r}")


def _org(text: str, path: str) -> str:
    """An organisation path without leading or trailing slashes (``""``: all of it)."""
    org = text.strip("/")
    if org and not all(part.strip() for part in org.split("/")):
        raise SpecError(f"{path}: {text!r} has an empty part (write e.g. ai-lab/vision)")
    return org


# --------------------------------------------------------------------------------------------
# From the document to the spec
# --------------------------------------------------------------------------------------------


def _queue(doc: QueueDoc, path: str) -> QueueSpec:
    nominal = _amounts(doc.nominal, f"{path}.nominal")
    borrowing = _amounts(doc.borrowing_limit, f"{path}.borrowing_limit")
    lending = _amounts(doc.lending_limit, f"{path}.lending_limit")
    if doc.cohort is None:
        for key, limit in (("borrowing_limit", borrowing), ("lending_limit", lending)):
            if limit:
                raise SpecError(
                    f"{path}.{key}: needs a cohort (a queue without one can neither borrow "
                    f"nor lend)"
                )
    for r, v in lending.items():
        if v > nominal.get(r, 0):
            raise SpecError(
                f"{path}.lending_limit.{r}: must be <= the nominal "
                f"({doc.nominal.get(r, 0)!r}), got {doc.lending_limit[r]!r}"
            )
    return QueueSpec(
        name=doc.name,
        org=_org(doc.org, f"{path}.org"),
        cohort=doc.cohort,
        nominal=nominal,
        borrowing_limit=borrowing,
        lending_limit=lending,
        weight=float(doc.weight),
    )


def _config(doc: TenancyDoc) -> TenancyConfig:
    queues: list[QueueSpec] = []
    first: dict[str, int] = {}
    for i, q in enumerate(doc.queues):
        path = f"queues[{i}]"
        if q.name in first:
            raise SpecError(f"{path}.name: {q.name!r} is defined twice")
        first[q.name] = i
        queues.append(_queue(q, path))
    if doc.priority_classes is None:
        classes = dict(DEFAULT_PRIORITY_CLASSES)
    else:
        classes = {
            name: PriorityClass(name, p.value, p.preemptible)
            for name, p in doc.priority_classes.items()
        }
    return TenancyConfig(TenancySpec(tuple(queues)), classes, _admission(doc.admission or {}))


def _admission(section: Mapping[str, Any]) -> dict[str, Any]:
    """``admission``: each key a registered ``admission/<name>`` plugin that takes its
    configuration from here (checked now, by making one: errors carry their key path)."""
    from suanli.core.registry import UnknownPolicyError, create

    out: dict[str, Any] = {}
    for name, config in section.items():
        if name in ("quota", "budget"):
            raise SpecError(
                f"admission.{name}: configured elsewhere (quotas by queues:, budgets by --budgets)"
            )
        try:
            create("admission", str(name), config=config)
        except UnknownPolicyError as e:
            raise SpecError(f"admission.{name}: {e}") from None
        except KeyPathError as e:
            raise SpecError(str(e.within(f"admission.{name}"))) from None
        out[str(name)] = config
    return out


# --------------------------------------------------------------------------------------------
# Validation errors as one line
# --------------------------------------------------------------------------------------------


def _path(loc: Iterable[int | str]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _first_error(e: ValidationError) -> str:
    """``key.path: message`` of the first validation error, plus how many more there are."""
    # An unknown key first: a misspelt key is also the reason its right spelling is missing.
    errors = sorted(e.errors(include_url=False), key=lambda x: x["type"] != "extra_forbidden")
    err = errors[0]
    loc = tuple(err["loc"])
    kind = err["type"]
    if kind == "extra_forbidden":
        path, text = _path(loc[:-1]), _unknown_key(loc)
    elif loc and loc[-1] == "[key]":
        path, text = _path(loc[:-2]), f"name {loc[-2]!r}: {_error_text(err)}"
    else:
        path, text = _path(loc), _error_text(err)
    line = f"{path}: {text}" if path else text
    if len(errors) > 1:
        line += f" (and {len(errors) - 1} more error{'s' if len(errors) > 2 else ''})"
    return line


def _unknown_key(loc: tuple[int | str, ...]) -> str:
    key = str(loc[-1])
    doc: type[_Doc] | None = TenancyDoc
    if len(loc) == 3:
        doc = _DOC_BY_SECTION.get(str(loc[0]))
    elif len(loc) != 1:
        doc = None
    if doc is None:
        return f"unknown key {key!r}"
    keys = list(doc.model_fields)
    hint = _did_you_mean(key, keys) or " (keys: " + ", ".join(keys) + ")"
    return f"unknown key {key!r}{hint}"


def _error_text(err: Mapping[str, Any]) -> str:
    kind, ctx, value = err["type"], err.get("ctx") or {}, err.get("input")
    got = "" if isinstance(value, (dict, list)) else f", got {value!r}"
    bounds = {
        "greater_than_equal": (">=", "ge"),
        "greater_than": (">", "gt"),
        "less_than_equal": ("<=", "le"),
        "less_than": ("<", "lt"),
    }
    if kind in bounds:
        op, key = bounds[kind]
        limit = ctx.get(key)
        return (
            f"must be {op} {limit:g}{got}"
            if isinstance(limit, float)
            else f"must be {op} {limit}{got}"
        )
    simple = {
        "missing": "required key is missing",
        "int_type": "must be an integer",
        "int_parsing": "must be an integer",
        "int_from_float": "must be an integer",
        "float_type": "must be a number",
        "float_parsing": "must be a number",
        "finite_number": "must be a finite number",
        "bool_type": "must be true or false",
        "bool_parsing": "must be true or false",
        "string_type": "must be a string",
        "string_too_short": "must not be empty",
        "too_short": "must not be empty",
        "list_type": "must be a list",
        "dict_type": "must be a mapping",
        "model_type": "must be a mapping",
        "model_attributes_type": "must be a mapping",
    }
    if kind == "missing":
        return simple[kind]
    if kind in simple:
        return simple[kind] + got
    msg = str(err["msg"])
    return msg[:1].lower() + msg[1:] + got


def _did_you_mean(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


# --------------------------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------------------------


def parse_tenancy(text: str, source: str = "<yaml>") -> TenancyConfig:
    """The tenancy described by YAML ``text``; ``source`` names it in error messages."""
    where = f"tenancy file {source!r}"
    data = yaml_mapping(text, where, "queues")
    try:
        doc = TenancyDoc.model_validate(data)
    except ValidationError as e:
        raise SpecError(f"{where}: {_first_error(e)}") from None
    try:
        return _config(doc)
    except SpecError as e:
        raise SpecError(f"{where}: {e}") from None


def load_tenancy(source: str | os.PathLike[str]) -> TenancyConfig:
    """A ``TenancyConfig`` from a ``.yaml``/``.yml`` file (see the module docstring).

    All errors are ``SpecError`` with a one-line message. YAML text goes to ``parse_tenancy``.
    """
    text = os.fspath(source)
    path = Path(text)
    if not path.is_file():
        what = "is not a file" if path.exists() else "not found"
        raise SpecError(f"tenancy file {text!r} {what}")
    if path.suffix.lower() not in _YAML_SUFFIXES:
        raise SpecError(f"tenancy file {text!r}: expected a .yaml or .yml file")
    try:
        content = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise SpecError(f"tenancy file {text!r}: cannot read: {e}") from None
    return parse_tenancy(content, source=text)

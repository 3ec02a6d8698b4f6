"""Cluster specs from the command line (short form) or a YAML file, as a ``ClusterSpec``.

``load_cluster(text_or_path)``: a path to an existing ``.yaml``/``.yml`` file is read as YAML;
any other text is the short form. Every error is a ``SpecError`` with a one-line message that
says what is wrong and where (the spec text or the file, then the group/option or key path).

Short form
----------
``GROUP[+GROUP...]`` with ``GROUP = NODESxGPUS[xMODEL][[key=value,...]]``::

    64x8xH100                               64 nodes with 8 H100 each
    32x8xH100+16x4xA100                     two groups
    18x4xGB200[nvlink=72,rack=18,cpu=144,mem=2T]
    8x8xMYGPU[gpumem=40G,speed=1.2]         a custom GPU model
    16x0                                    16 CPU-only nodes

Options: ``nvlink`` GPUs per NVLink domain (a multiple of GPUS; the domain spans
``nvlink / GPUS`` nodes), ``rack`` nodes per rack, ``cpu`` cores per node, ``mem`` memory per
node, ``gpumem`` memory per GPU and ``speed`` relative speed (both override the model's, or
define a custom model). Sizes need a binary unit: ``K``, ``M``, ``G`` or ``T`` (``512G``,
``2T``; ``GiB``/``GB`` spellings accepted, all binary). Known model names match case-insensitively.

Defaults (both forms), per node:
- CPU: 12 cores per GPU, at least 8 cores (a CPU-only node: 8 cores);
- memory: 128 GiB per GPU, at least 64 GiB;
- racks of 32 nodes; with ``nvlink`` and no rack size, one NVLink domain per rack;
- a node is its own NVLink domain unless ``nvlink`` is given.

Naming: nodes ``<model>-<i>`` (``cpu-<i>`` without GPUs; ``i`` counts on across groups of the
same model), racks ``rack-<j>`` and NVLink domains ``nvl-<k>``, numbered across the whole
cluster. Each group starts a new rack; racks and NVLink domains must line up (a rack holds
whole domains, or a domain whole racks), and a group must hold whole domains. A cluster has at
most ``MAX_NODES`` nodes and a node at most ``MAX_GPUS_PER_NODE`` GPUs (typo guards).

YAML file
---------
::

    name: lab                      # optional; default: the file name without extension
    models:                        # optional: custom GPU models, or overrides of known ones
      - name: MYGPU
        memory: 40G                # per GPU, with a unit
        speed: 1.2                 # relative to V100 = 1.0 (default 1.0)
    groups:                        # node groups, expanded as in the short form
      - count: 32                  # nodes, >= 1
        gpus: 8                    # GPUs per node, >= 0
        model: H100                # required when gpus > 0
        cpu: 96                    # cores per node (optional)
        memory: 1T                 # per node (optional)
        rack_size: 32              # nodes per rack (optional)
        nvlink_gpus: 72            # GPUs per NVLink domain (optional)
        labels: {zone: a}          # optional
        prefix: h100               # node name prefix (optional; default the model name)
    nodes:                         # explicit nodes (optional), after the groups
      - name: big-0
        gpus: 8
        model: H200
        cpu: 224                   # optional, defaults as above
        memory: 2T                 # optional, defaults as above
        rack: rack-9               # optional; default: one shared rack after the groups' racks
        nvlink_domain: nvl-big     # optional; default: the node itself
        labels: {}                 # optional
        healthy: true              # optional

At least one of ``groups`` and ``nodes`` is needed. Unknown keys are errors. Error messages
name the file and the key path, e.g. ``cluster file 'c.yaml': groups[1].gpus: must be >= 0
(got -1)``.
"""

from __future__ import annotations

import difflib
import math
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from suanli.config.yamldoc import yaml_mapping
from suanli.core.model import KNOWN_GPU_MODELS, ClusterSpec, GpuModel, NodeSpec, SpecError

__all__ = [
    "DEFAULT_CPU_CORES_PER_GPU",
    "DEFAULT_MEMORY_GIB_PER_GPU",
    "DEFAULT_RACK_SIZE",
    "MAX_GPUS_PER_NODE",
    "MAX_NODES",
    "MIN_CPU_CORES",
    "MIN_MEMORY_GIB",
    "load_cluster",
    "parse_short_form",
    "parse_size",
    "parse_yaml",
]

DEFAULT_CPU_CORES_PER_GPU = 12
MIN_CPU_CORES = 8
DEFAULT_MEMORY_GIB_PER_GPU = 128
MIN_MEMORY_GIB = 64
DEFAULT_RACK_SIZE = 32
MAX_NODES = 100_000
MAX_GPUS_PER_NODE = 1024

_YAML_SUFFIXES = (".yaml", ".yml")
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?|\.\d+)\s*([KMGT])(?:i?B)?\s*$", re.IGNORECASE)
_UNIT_MIB = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}
_GROUP_RE = re.compile(
    r"^(?P<count>[^x×\[\]]*)[x×](?P<gpus>[^x×\[\]]*)(?:[x×](?P<model>[^\[\]]*))?"
    r"(?:\[(?P<opts>[^\[\]]*)\])?$"
)
_SHORT_OPTIONS = {
    "nvlink": "nvlink",
    "rack": "rack_size",
    "cpu": "cpu",
    "mem": "memory",
    "gpumem": "gpumem",
    "speed": "speed",
}
_SHORT_FIELD_NAMES = {
    "count": "node count",
    "gpus": "GPUs per node",
    "model": "model",
    **{v: k for k, v in _SHORT_OPTIONS.items()},
}
_SHORT_FORM_HINT = (
    "expected NODESxGPUS[xMODEL][[key=value,...]], e.g. 64x8xH100, or a .yaml/.yml file"
)


# --------------------------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------------------------


def parse_size(text: str) -> int:
    """A size with a binary unit (``512G``, ``2T``, ``1.5TiB``) in MiB, rounded; >= 1 MiB.

    Raises ``ValueError`` (not ``SpecError``: callers add where the value came from).
    """
    m = _SIZE_RE.match(text)
    if not m:
        raise ValueError(f"{text!r} is not a size with a unit K, M, G or T (e.g. 512G)")
    mib = round(float(m.group(1)) * _UNIT_MIB[m.group(2).upper()])
    if mib < 1:
        raise ValueError(f"{text!r} is less than 1 MiB")
    return mib


def _parse_cores(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number of cores") from None
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"must be > 0 (got {text})")
    return v


def _parse_int(text: str) -> int:
    t = text.strip()
    if not re.fullmatch(r"[+-]?\d+", t):
        raise ValueError(f"{text!r} is not a whole number")
    return int(t)


def _parse_speed(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number") from None
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"must be > 0 (got {text})")
    return v


# --------------------------------------------------------------------------------------------
# Node groups: the common form of both sources, expanded into nodes
# --------------------------------------------------------------------------------------------


Where = Callable[[str], str]
"""Where a field of a group or node came from, for error messages (``groups[1].gpus``)."""


@dataclass(frozen=True, slots=True)
class _Group:
    """One node group as written (``None``: use the default)."""

    count: int
    gpus: int
    model: str | None = None
    cpu_cores: float | None = None
    memory_mib: int | None = None
    rack_size: int | None = None
    nvlink: int | None = None
    gpumem_mib: int | None = None
    speed: float | None = None
    labels: tuple[tuple[str, str], ...] = ()
    prefix: str | None = None


@dataclass(slots=True)
class _Builder:
    """Expands groups and explicit nodes into ``NodeSpec``s, numbering names across groups."""

    custom_models: Mapping[str, GpuModel] = field(default_factory=dict)
    nodes: list[NodeSpec] = field(default_factory=list)
    models: dict[str, GpuModel] = field(default_factory=dict)
    name_origin: dict[str, str] = field(default_factory=dict)
    next_index: dict[str, int] = field(default_factory=dict)
    next_rack: int = 0
    next_domain: int = 0

    def model(
        self, name: str | None, gpus: int, gpumem: int | None, speed: float | None, at: Where
    ) -> GpuModel | None:
        """The GPU model of a node with ``gpus`` GPUs; one definition per name per cluster."""
        if gpus == 0:
            for key, v in (("gpumem", gpumem), ("speed", speed)):
                if v is not None:
                    raise SpecError(f"{at(key)}: given for nodes without GPUs")
            return None
        if not name:
            raise SpecError(f"{at('model')}: required for nodes with GPUs")
        base = self.custom_models.get(name) or _known_model(name)
        if base is None:
            if gpumem is None:
                known = ", ".join(KNOWN_GPU_MODELS)
                raise SpecError(
                    f"{at('model')}: unknown GPU model {name!r} (known: {known}; "
                    f"for a custom model give its GPU memory and speed)"
                )
            model = GpuModel(name, gpumem, 1.0 if speed is None else speed)
        elif gpumem is not None or speed is not None:
            model = GpuModel(
                base.name,
                base.memory_mib if gpumem is None else gpumem,
                base.speed if speed is None else speed,
            )
        else:
            model = base
        seen = self.models.get(model.name)
        if seen is not None and seen != model:
            raise SpecError(
                f"{at('model')}: GPU model {model.name!r} defined twice, with "
                f"{_model_text(seen)} and with {_model_text(model)}; give the variant its own name"
            )
        self.models.setdefault(model.name, model)
        return model

    def add_group(self, g: _Group, at: Where, origin: str) -> None:
        """Append the nodes of ``g``; racks and NVLink domains continue the cluster's numbering.

        ``origin`` names the group in messages about duplicate node names.
        """
        if g.count < 1:
            raise SpecError(f"{at('count')}: must be >= 1 (got {g.count})")
        if g.gpus < 0:
            raise SpecError(f"{at('gpus')}: must be >= 0 (got {g.gpus})")
        if g.gpus > MAX_GPUS_PER_NODE:
            raise SpecError(f"{at('gpus')}: at most {MAX_GPUS_PER_NODE} (got {g.gpus})")
        if len(self.nodes) + g.count > MAX_NODES:
            raise SpecError(
                f"{at('count')}: the cluster would have more than {MAX_NODES} nodes "
                f"({len(self.nodes) + g.count})"
            )
        if g.rack_size is not None and g.rack_size < 1:
            raise SpecError(f"{at('rack_size')}: must be >= 1 (got {g.rack_size})")
        model = self.model(g.model, g.gpus, g.gpumem_mib, g.speed, at)
        per_domain = self._nodes_per_domain(g, at)
        rack_size = g.rack_size
        if rack_size is None:
            rack_size = per_domain if per_domain > 1 else DEFAULT_RACK_SIZE
        elif per_domain > 1 and rack_size % per_domain and per_domain % rack_size:
            raise SpecError(
                f"{at('rack_size')}: racks of {rack_size} nodes and NVLink domains of "
                f"{per_domain} nodes do not line up (one must be a multiple of the other)"
            )
        cpu_milli = _cpu_milli(g.cpu_cores, g.gpus, at)
        memory_mib = _memory_mib(g.memory_mib, g.gpus)
        prefix = g.prefix or (model.name if model else "cpu")
        first = self.next_index.get(prefix, 0)
        self.next_index[prefix] = first + g.count
        for k in range(g.count):
            domain = f"nvl-{self.next_domain + k // per_domain}" if g.nvlink else ""
            self._append(
                NodeSpec(
                    name=f"{prefix}-{first + k}",
                    gpus=g.gpus,
                    gpu_model=model,
                    cpu_milli=cpu_milli,
                    memory_mib=memory_mib,
                    rack=f"rack-{self.next_rack + k // rack_size}",
                    nvlink_domain=domain,
                    labels=g.labels,
                ),
                origin,
            )
        self.next_rack += -(-g.count // rack_size)
        if g.nvlink:
            self.next_domain += g.count // per_domain

    def add_node(self, node: NodeSpec, at: Where, origin: str) -> None:
        """Append an explicit node; ``origin`` names it in messages about duplicate names."""
        if node.name in self.name_origin:
            raise SpecError(
                f"{at('name')}: duplicate node name {node.name!r} "
                f"(also in {self.name_origin[node.name]})"
            )
        self._append(node, origin)

    def _append(self, node: NodeSpec, origin: str) -> None:
        self.name_origin[node.name] = origin
        self.nodes.append(node)

    @staticmethod
    def _nodes_per_domain(g: _Group, at: Where) -> int:
        if g.nvlink is None:
            return 1
        if g.nvlink < 1:
            raise SpecError(f"{at('nvlink')}: must be >= 1 (got {g.nvlink})")
        if g.gpus == 0:
            raise SpecError(f"{at('nvlink')}: given for nodes without GPUs")
        if g.nvlink % g.gpus:
            raise SpecError(
                f"{at('nvlink')}: GPUs per NVLink domain must be a multiple of the "
                f"{g.gpus} GPUs per node (got {g.nvlink})"
            )
        per_domain = g.nvlink // g.gpus
        if g.count % per_domain:
            raise SpecError(
                f"{at('nvlink')}: NVLink domains of {g.nvlink} GPUs span {per_domain} nodes; "
                f"{g.count} nodes is not a whole number of domains"
            )
        return per_domain


def _known_model(name: str) -> GpuModel | None:
    if name in KNOWN_GPU_MODELS:
        return KNOWN_GPU_MODELS[name]
    lower = name.lower()
    for key, model in KNOWN_GPU_MODELS.items():
        if key.lower() == lower:
            return model
    return None


def _model_text(m: GpuModel) -> str:
    return f"{m.memory_mib} MiB/speed {m.speed:g}"


def _cpu_milli(cores: float | None, gpus: int, at: Where) -> int:
    if cores is None:
        cores = max(MIN_CPU_CORES, DEFAULT_CPU_CORES_PER_GPU * gpus)
    milli = round(cores * 1000)
    if milli < 1:
        raise SpecError(f"{at('cpu')}: must be > 0 (got {cores})")
    return milli


def _memory_mib(memory_mib: int | None, gpus: int) -> int:
    if memory_mib is not None:
        return memory_mib
    return max(MIN_MEMORY_GIB, DEFAULT_MEMORY_GIB_PER_GPU * gpus) * 1024


def _finish(builder: _Builder, name: str, where: str) -> ClusterSpec:
    if not builder.nodes:
        raise SpecError(f"{where}: no nodes")
    try:
        return ClusterSpec(name, tuple(builder.nodes))
    except SpecError as e:  # should not happen: every rule is checked above
        raise SpecError(f"{where}: {e}") from None


# --------------------------------------------------------------------------------------------
# Short form
# --------------------------------------------------------------------------------------------


def parse_short_form(text: str) -> ClusterSpec:
    """The cluster described by a short form such as ``32x8xH100+16x4xA100[rack=16]``.

    The cluster is named by the (whitespace-stripped) text. See the module docstring.
    """
    spec = "".join(text.split())
    where = f"cluster spec {spec!r}"
    if not spec:
        raise SpecError(f"cluster spec is empty: {_SHORT_FORM_HINT}")
    parts = _split_groups(spec)
    builder = _Builder()
    for i, part in enumerate(parts, 1):
        loc = where if len(parts) == 1 else f"{where}, group {i} ({part or 'empty'})"

        def at(key: str, loc: str = loc) -> str:
            return f"{loc}: {_SHORT_FIELD_NAMES.get(key, key)}"

        builder.add_group(_parse_group(part, loc, at), at, f"group {i}")
    return _finish(builder, spec, where)


def _split_groups(spec: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(spec):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "+" and depth == 0:
            parts.append(spec[start:i])
            start = i + 1
    parts.append(spec[start:])
    return parts


def _parse_group(part: str, loc: str, at: Where) -> _Group:
    m = _GROUP_RE.match(part)
    if not part or not m:
        raise SpecError(f"{loc}: {_SHORT_FORM_HINT}")
    values: dict[str, Any] = {}
    for key, raw in (("count", m.group("count")), ("gpus", m.group("gpus"))):
        try:
            values[key] = _parse_int(raw)
        except ValueError as e:
            raise SpecError(f"{at(key)}: {e}") from None
    model = m.group("model")
    if model is not None and not model:
        raise SpecError(f"{at('model')}: empty model name")
    opts = m.group("opts")
    if opts is not None:
        values.update(_parse_options(opts, at, loc))
    return _Group(model=model, **values)


def _parse_options(opts: str, at: Where, loc: str) -> dict[str, Any]:
    parsers: dict[str, Callable[[str], Any]] = {
        "nvlink": _parse_int,
        "rack_size": _parse_int,
        "cpu": _parse_cores,
        "memory": parse_size,
        "gpumem": parse_size,
        "speed": _parse_speed,
    }
    dest = {"memory": "memory_mib", "gpumem": "gpumem_mib", "cpu": "cpu_cores"}
    out: dict[str, Any] = {}
    for item in opts.split(","):
        key, eq, raw = item.partition("=")
        if not item or not eq:
            raise SpecError(f"{loc}: option {item!r}: expected key=value")
        name = _SHORT_OPTIONS.get(key)
        if name is None:
            raise SpecError(
                f"{loc}: unknown option {key!r}{_did_you_mean(key, _SHORT_OPTIONS)} "
                f"(options: {', '.join(_SHORT_OPTIONS)})"
            )
        if dest.get(name, name) in out:
            raise SpecError(f"{at(name)}: given twice")
        if not raw:
            raise SpecError(f"{at(name)}: empty value")
        try:
            out[dest.get(name, name)] = parsers[name](raw)
        except ValueError as e:
            raise SpecError(f"{at(name)}: {e}") from None
    return out


def _did_you_mean(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


# --------------------------------------------------------------------------------------------
# YAML
# --------------------------------------------------------------------------------------------


def _size_field(v: Any) -> Any:
    if isinstance(v, bool) or not isinstance(v, str):
        raise ValueError(f"must be a size with a unit K, M, G or T, e.g. 512G (got {v!r})")
    return parse_size(v)


def _label_value(v: Any) -> Any:
    if isinstance(v, (str, int, float, bool)):
        return str(v).lower() if isinstance(v, bool) else str(v)
    raise ValueError(f"label values must be strings or numbers (got {v!r})")


Size = Annotated[int, BeforeValidator(_size_field)]
LabelValue = Annotated[str, BeforeValidator(_label_value)]


class _Doc(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelDoc(_Doc):
    """``models[i]``: a custom GPU model or an override of a known one."""

    name: str = Field(min_length=1)
    memory: Size
    speed: float = Field(default=1.0, gt=0, allow_inf_nan=False)


class GroupDoc(_Doc):
    """``groups[i]``: ``count`` identical nodes."""

    count: int = Field(ge=1, le=MAX_NODES)
    gpus: int = Field(ge=0, le=MAX_GPUS_PER_NODE)
    model: str | None = Field(default=None, min_length=1)
    cpu: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    memory: Size | None = None
    rack_size: int | None = Field(default=None, ge=1)
    nvlink_gpus: int | None = Field(default=None, ge=1)
    labels: dict[str, LabelValue] = Field(default_factory=dict)
    prefix: str | None = Field(default=None, min_length=1)


class NodeDoc(_Doc):
    """``nodes[i]``: one explicit node."""

    name: str = Field(min_length=1)
    gpus: int = Field(ge=0, le=MAX_GPUS_PER_NODE)
    model: str | None = Field(default=None, min_length=1)
    cpu: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    memory: Size | None = None
    rack: str | None = Field(default=None, min_length=1)
    nvlink_domain: str | None = Field(default=None, min_length=1)
    labels: dict[str, LabelValue] = Field(default_factory=dict)
    healthy: bool = True


class ClusterDoc(_Doc):
    """The whole file."""

    name: str | None = Field(default=None, min_length=1)
    models: list[ModelDoc] = Field(default_factory=list)
    groups: list[GroupDoc] = Field(default_factory=list)
    nodes: list[NodeDoc] = Field(default_factory=list)


_DOC_BY_SECTION: dict[str, type[_Doc]] = {"models": ModelDoc, "groups": GroupDoc, "nodes": NodeDoc}


def parse_yaml(text: str, source: str = "<yaml>", default_name: str = "cluster") -> ClusterSpec:
    """The cluster described by YAML ``text``; ``source`` names it in error messages."""
    where = f"cluster file {source!r}"
    data = yaml_mapping(text, where, "groups and/or nodes")
    try:
        doc = ClusterDoc.model_validate(data)
    except ValidationError as e:
        raise SpecError(f"{where}: {_first_error(e)}") from None
    if not doc.groups and not doc.nodes:
        raise SpecError(f"{where}: no nodes (give groups and/or nodes)")

    custom: dict[str, GpuModel] = {}
    for i, m in enumerate(doc.models):
        if m.name in custom:
            raise SpecError(f"{where}: models[{i}].name: model {m.name!r} defined twice")
        custom[m.name] = GpuModel(m.name, m.memory, m.speed)
    builder = _Builder(custom_models=custom)
    total = sum(g.count for g in doc.groups) + len(doc.nodes)
    if total > MAX_NODES:
        raise SpecError(f"{where}: more than {MAX_NODES} nodes ({total})")

    group_fields = {"nvlink": "nvlink_gpus", "memory_mib": "memory", "cpu_cores": "cpu"}
    for i, g in enumerate(doc.groups):

        def at(key: str, i: int = i) -> str:
            return f"{where}: groups[{i}].{group_fields.get(key, key)}"

        group = _Group(
            count=g.count,
            gpus=g.gpus,
            model=g.model,
            cpu_cores=g.cpu,
            memory_mib=g.memory,
            rack_size=g.rack_size,
            nvlink=g.nvlink_gpus,
            labels=tuple(sorted(g.labels.items())),
            prefix=g.prefix,
        )
        builder.add_group(group, at, f"groups[{i}]")

    loose_rack = f"rack-{builder.next_rack}"
    for i, n in enumerate(doc.nodes):

        def at(key: str, i: int = i) -> str:
            return f"{where}: nodes[{i}].{key}"

        model = builder.model(n.model, n.gpus, None, None, at)
        builder.add_node(
            NodeSpec(
                name=n.name,
                gpus=n.gpus,
                gpu_model=model,
                cpu_milli=_cpu_milli(n.cpu, n.gpus, at),
                memory_mib=_memory_mib(n.memory, n.gpus),
                rack=n.rack or loose_rack,
                nvlink_domain=n.nvlink_domain or "",
                labels=tuple(sorted(n.labels.items())),
                healthy=n.healthy,
            ),
            at,
            f"nodes[{i}]",
        )
    return _finish(builder, doc.name or default_name, where)


def _first_error(e: ValidationError) -> str:
    """``key.path: message`` of the first validation error, plus how many more there are."""
    errors = e.errors(include_url=False)
    err = errors[0]
    path = ""
    for part in err["loc"]:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    text = f"{path or 'top level'}: {_error_text(err)}"
    if len(errors) > 1:
        text += f" (and {len(errors) - 1} more error{'s' if len(errors) > 2 else ''})"
    return text


def _error_text(err: Mapping[str, Any]) -> str:
    kind, ctx, value = err["type"], err.get("ctx") or {}, err.get("input")
    got = f" (got {value!r})" if not isinstance(value, (dict, list)) else ""
    bounds = {
        "greater_than_equal": (">=", "ge"),
        "greater_than": (">", "gt"),
        "less_than_equal": ("<=", "le"),
        "less_than": ("<", "lt"),
    }
    if kind in bounds:
        op, key = bounds[kind]
        return f"must be {op} {ctx.get(key)}{got}"
    if kind == "extra_forbidden":
        loc = err["loc"]
        doc = _DOC_BY_SECTION.get(str(loc[0]), ClusterDoc) if len(loc) > 1 else ClusterDoc
        keys = list(doc.model_fields)
        hint = _did_you_mean(str(loc[-1]), keys) or f" (keys: {', '.join(keys)})"
        return f"unknown key{hint}"
    if kind == "missing":
        return "required key is missing"
    if kind == "value_error":
        return str(ctx.get("error", err["msg"]))
    simple = {
        "int_parsing": "must be a whole number",
        "int_from_float": "must be a whole number",
        "int_type": "must be a whole number",
        "float_parsing": "must be a number",
        "float_type": "must be a number",
        "finite_number": "must be a finite number",
        "bool_parsing": "must be true or false",
        "bool_type": "must be true or false",
        "string_type": "must be a string",
        "string_too_short": "must not be empty",
        "list_type": "must be a list",
        "dict_type": "must be a mapping",
        "model_type": "must be a mapping",
        "model_attributes_type": "must be a mapping",
    }
    if kind in simple:
        return simple[kind] + got
    msg = str(err["msg"])
    return (msg[:1].lower() + msg[1:]) + got


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------


def load_cluster(text_or_path: str | os.PathLike[str]) -> ClusterSpec:
    """A ``ClusterSpec`` from a short form or a path to a ``.yaml``/``.yml`` file.

    A ``Path`` or text ending in ``.yaml``/``.yml`` is a file (an error if missing); any other
    text is the short form. All errors are ``SpecError`` with a one-line message.
    """
    is_path = isinstance(text_or_path, os.PathLike)
    text = os.fspath(text_or_path)
    path = Path(text)
    if is_path or text.strip().lower().endswith(_YAML_SUFFIXES):
        if not path.is_file():
            what = "is not a file" if path.exists() else "not found"
            raise SpecError(f"cluster file {text!r} {what}")
        if path.suffix.lower() not in _YAML_SUFFIXES:
            raise SpecError(f"cluster file {text!r}: expected a .yaml or .yml file")
        try:
            content = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise SpecError(f"cluster file {text!r}: cannot read: {e}") from None
        return parse_yaml(content, source=text, default_name=path.stem)
    return parse_short_form(text)

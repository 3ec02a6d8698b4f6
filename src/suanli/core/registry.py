"""Plugins by name: ``seam/name`` (e.g. ``placement/best-fit``), one registry for all seams.

Built-in plugins register themselves with ``@register("placement", "best-fit")`` when their
module is imported; ``BUILTIN`` names those modules, imported on the first look-up. Plugins
from other packages register through Python entry points, one group per seam
(``suanli.queue``, ``suanli.placement``, ``suanli.admission``, ``suanli.backfill``,
``suanli.preemption``, ``suanli.runtime``, ``suanli.autoscaler``, ``suanli.router``): the entry point's name is
the plugin's name, its object the class (or factory). In a package's ``pyproject.toml``::

    [project.entry-points."suanli.placement"]
    tightest = "my_package.tightest:Tightest"

An entry point is loaded when its plugin is first created or listed, so a broken plugin fails
only where it is used, with an error that names it. Callers look plugins up with
``create(seam, name, **options)``; nothing dispatches on a plugin-name string anywhere else.
``catalogue()`` lists every plugin with the first line of its docstring (a plugin that does
not load is listed with the error).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points
from typing import Any, TypeVar

T = TypeVar("T")

SEAMS: dict[str, str] = {
    "queue": "the order of pending jobs (seams.QueueOrder)",
    "placement": "the nodes and GPUs a job's tasks take (seams.Placement)",
    "admission": "whether a job may start now, and why not (seams.Admission)",
    "backfill": "which jobs may pass one that cannot start (seams.Backfill)",
    "preemption": "which running jobs to evict for one that cannot start (seams.Preemptor)",
    "runtime": "how long a job is expected to run (seams.RuntimeEstimator)",
    "autoscaler": "how many replicas an online service runs (serving.autoscaler.Autoscaler)",
    "router": "which member of a federation a job goes to (routing.Router)",
}
"""Every seam, and what its plugins decide."""

BUILTIN = (
    "suanli.core.policies.fifo",
    "suanli.core.policies.priority",
    "suanli.core.policies.sjf",
    "suanli.core.policies.qssf",
    "suanli.core.policies.las",
    "suanli.core.policies.srtf",
    "suanli.core.policies.smallest_first",
    "suanli.core.policies.fair_share",
    "suanli.core.policies.first_fit",
    "suanli.core.policies.best_fit",
    "suanli.core.policies.worst_fit",
    "suanli.core.policies.random_fit",
    "suanli.core.policies.dot_product",
    "suanli.core.policies.packing",
    "suanli.core.policies.fgd",
    "suanli.core.policies.fgd_baselines",
    "suanli.core.policies.frag_balance",
    "suanli.core.policies.topology",
    "suanli.core.policies.runtime_estimate",
    "suanli.core.policies.runtime_oracle",
    "suanli.core.admission.quota",
    "suanli.core.admission.budget",
    "suanli.core.admission.user_limit",
    "suanli.core.admission.locality",
    "suanli.core.backfill",
    "suanli.core.conservative",
    "suanli.core.eviction",
    "suanli.core.defrag",
    "suanli.core.eviction_order",
    "suanli.core.autoscalers.fixed",
    "suanli.core.autoscalers.reactive",
    "suanli.core.autoscalers.predictive",
    "suanli.core.routers.first_admit",
    "suanli.core.routers.least_loaded",
    "suanli.core.routers.cheapest",
    "suanli.core.routers.scored",
)
"""The modules of the built-in plugins (imported by name: a module registers itself)."""

ENTRY_POINT_PREFIX = "suanli."

_REGISTRY: dict[str, dict[str, Callable[..., Any] | EntryPoint]] = {}
_IGNORED: list[tuple[str, EntryPoint]] = []  # entry points whose name was taken
_loaded = False


class UnknownPolicyError(LookupError):
    """A plugin name that is not registered (the message lists the valid ones)."""


class PluginError(RuntimeError):
    """A plugin from another package that fails to load."""


def register(seam: str, name: str) -> Callable[[T], T]:
    """Class decorator: make ``cls`` available as ``seam/name``."""

    def deco(cls: T) -> T:
        _add(seam, name, cls)  # type: ignore[arg-type]
        return cls

    return deco


def _add(seam: str, name: str, obj: Callable[..., Any] | EntryPoint) -> None:
    if seam not in SEAMS:
        raise ValueError(f"unknown seam {seam!r} (seams: {', '.join(SEAMS)})")
    entries = _REGISTRY.setdefault(seam, {})
    if name in entries:
        raise ValueError(f"plugin {seam}/{name} registered twice")
    entries[name] = obj


def load() -> None:
    """Import the built-in plugins and find the entry points (once). An entry point whose
    name is taken (by a built-in plugin, or another package's) is not registered: it is
    listed by ``catalogue`` as ignored, and everything else works as before."""
    global _loaded
    if _loaded:
        return
    for module in BUILTIN:
        importlib.import_module(module)
    for seam in SEAMS:
        entries = _REGISTRY.setdefault(seam, {})
        for ep in entry_points(group=ENTRY_POINT_PREFIX + seam):
            held = entries.get(ep.name)
            if held is None:
                entries[ep.name] = ep
            elif not (isinstance(held, EntryPoint) and held.value == ep.value):
                _IGNORED.append((seam, ep))  # (the same one, found twice on the path: kept)
    _loaded = True


def _resolve(seam: str, name: str) -> Callable[..., Any]:
    obj = _REGISTRY[seam][name]
    if isinstance(obj, EntryPoint):
        try:
            loaded = obj.load()
        except Exception as e:  # noqa: BLE001 - any import failure of a foreign package
            raise PluginError(
                f"plugin {seam}/{name} (entry point {obj.group}: {obj.value}) failed to "
                f"load: {type(e).__name__}: {e}"
            ) from e
        _REGISTRY[seam][name] = loaded
        return loaded  # type: ignore[no-any-return]
    return obj


def create(seam: str, name: str, **kwargs: Any) -> Any:
    """An instance of plugin ``seam/name``; ``UnknownPolicyError`` lists the valid names."""
    load()
    entries = _REGISTRY.get(seam, {})
    if name not in entries:
        known = ", ".join(sorted(entries)) or "none"
        raise UnknownPolicyError(f"unknown {seam} policy {name!r} (known: {known})")
    return _resolve(seam, name)(**kwargs)


def check(seam: str, name: str) -> None:
    """``UnknownPolicyError`` (listing the valid names) unless ``seam/name`` is registered."""
    load()
    entries = _REGISTRY.get(seam, {})
    if name not in entries:
        known = ", ".join(sorted(entries)) or "none"
        raise UnknownPolicyError(f"unknown {seam} policy {name!r} (known: {known})")


def names(seam: str) -> list[str]:
    """Registered names of one seam, sorted."""
    load()
    return sorted(_REGISTRY.get(seam, {}))


def catalogue() -> list[tuple[str, str]]:
    """``(seam/name, one-line description)`` for every registered plugin, by seam then name."""
    load()
    out = []
    for seam in SEAMS:
        for name in sorted(_REGISTRY.get(seam, {})):
            try:
                doc = (_resolve(seam, name).__doc__ or "").strip().splitlines()
            except PluginError as e:  # listed, so that the broken one is seen
                doc = [f"(does not load: {e.__cause__})"]
            out.append((f"{seam}/{name}", doc[0] if doc else ""))
        for ignored_seam, ep in _IGNORED:
            if ignored_seam == seam:
                out.append(
                    (f"{seam}/{ep.name}", f"(entry point {ep.value} ignored: the name is taken)")
                )
    return out

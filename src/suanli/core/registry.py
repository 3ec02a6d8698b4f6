"""Policies by name: ``seam/name`` (e.g. ``placement/best-fit``).

Policies register themselves with ``@register("placement", "best-fit")``; callers look them up
with ``create("placement", "best-fit")``. Nothing dispatches on a policy-name string anywhere
else. ``catalogue()`` lists every registered policy with the first line of its docstring.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_REGISTRY: dict[str, dict[str, Callable[..., Any]]] = {}


class UnknownPolicyError(LookupError):
    """A policy name that is not registered."""


def register(seam: str, name: str) -> Callable[[T], T]:
    """Class decorator: make ``cls`` available as ``seam/name``."""

    def deco(cls: T) -> T:
        entries = _REGISTRY.setdefault(seam, {})
        if name in entries:
            raise ValueError(f"policy {seam}/{name} registered twice")
        entries[name] = cls  # type: ignore[assignment]
        return cls

    return deco


def create(seam: str, name: str, **kwargs: Any) -> Any:
    """An instance of the policy ``seam/name``; ``UnknownPolicyError`` lists the valid names."""
    _load_builtins()
    entries = _REGISTRY.get(seam, {})
    if name not in entries:
        known = ", ".join(sorted(entries)) or "none"
        raise UnknownPolicyError(f"unknown {seam} policy {name!r} (known: {known})")
    return entries[name](**kwargs)


def names(seam: str) -> list[str]:
    """Registered names of one seam, sorted."""
    _load_builtins()
    return sorted(_REGISTRY.get(seam, {}))


def catalogue() -> list[tuple[str, str]]:
    """``(seam/name, one-line description)`` for every registered policy, sorted."""
    _load_builtins()
    out = []
    for seam in sorted(_REGISTRY):
        for name in sorted(_REGISTRY[seam]):
            doc = (_REGISTRY[seam][name].__doc__ or "").strip().splitlines()
            out.append((f"{seam}/{name}", doc[0] if doc else ""))
    return out


def _load_builtins() -> None:
    # Importing the package registers the built-in policies (each module registers itself).
    import suanli.core.policies  # noqa: F401

"""Routing a job to one member of a federation of clusters: each member described for the job
as plain data (``Candidate``), the ``Router`` seam (``router/<name>``) and the decision with
its explanation (``Route``).

A federation layer (the simulator's ``suanli.federation``; later a live front) describes every
member for the job at hand: whether it may take the job at all and why not (the member is
down, the job's data may not go there, the user ruled the region out, it is too far for an
online service's users, the job's worst case would pass its budget, no node of it could ever
hold the job), whether it could start the job now, its load, when the job would start there
(its queue planned on the member's runtime estimator, the data's arrival included), how long
it would run there (its GPUs' speed), what an hour of it costs the job there, and the data to
move there with its time and price. A router only reads these: it is a pure function, and it
never picks an excluded member.

``Route`` says which member won (None: none may take the job), every eligible candidate with
its score broken into named parts, in ranking order, each excluded member with its reason,
and one line on why the winner won. The simulator's per-job CSV and ``suanli show`` print it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "Candidate", "Route", "RouteRequest", "Router", "Score", "decide", "eligible", "winner",
]  # fmt: skip


@dataclass(frozen=True, slots=True)
class Candidate:
    """One member of the federation as the job at hand would find it (times in seconds from
    now, money in the federation's currency)."""

    member: str
    order: int
    """The member's place in the federation's fixed order (ties go to the lowest)."""
    model: str = ""
    """The GPU model the job would be held to there ("": any the member gives it). A router
    that picks a model too (``per_model``) is also given, for each member, one candidate per
    GPU model that could start the job now."""
    excluded: str = ""
    """Why the member may not take the job ("" = it may)."""
    admits_now: bool = False
    """The job could start there now (free room for its gang minimum)."""
    load: float = 0.0
    """GPUs held and GPUs the queue asks for, over GPUs in service."""
    start_s: float = 0.0
    """Predicted wait before the job starts there (P50), its data's arrival included."""
    run_s: float = 0.0
    """Predicted runtime there, at its GPUs' speed."""
    price_hour: float = 0.0
    """What an hour of the job costs there (its GPUs at the member's price for it: on demand,
    spot, or nothing more where capacity bought ahead covers it)."""
    list_price_hour: float = 0.0
    """The same hour on demand (what an hour of the job is worth, whoever pays)."""
    unit_price: float = 0.0
    """The member's price of one common compute unit-hour for the job's GPU model."""
    move_gb: float = 0.0
    move_s: float = 0.0
    move_cost: float = 0.0
    """Data to move there: GB, seconds on the link, and price (egress and transfer time)."""
    latency_ms: float = 0.0
    """Round trip from the job's users (online work)."""

    @property
    def key(self) -> str:
        """``member``, or ``member/model`` for a candidate held to one GPU model."""
        return f"{self.member}/{self.model}" if self.model else self.member

    @property
    def ok(self) -> bool:
        return not self.excluded

    @property
    def compute_cost(self) -> float:
        return self.price_hour * self.run_s / 3600.0

    @property
    def cost(self) -> float:
        """Predicted cost there: compute for the predicted runtime, and the data's move."""
        return self.compute_cost + self.move_cost

    @property
    def finish_s(self) -> float:
        """Predicted completion, from now: the wait (data included), then the run."""
        return self.start_s + self.run_s


@dataclass(frozen=True, slots=True)
class RouteRequest:
    """What a router knows of the job beyond its candidates."""

    job_id: str
    gpus: int
    online: bool = False


@dataclass(frozen=True, slots=True)
class Score:
    """A candidate's score and the named parts it is made of (``member``: the candidate's
    ``key``). Candidates rank by ``key`` (by ``total`` where it is empty), lowest first."""

    member: str
    total: float
    parts: tuple[tuple[str, float], ...] = ()
    key: tuple[float, ...] = ()


@dataclass(frozen=True)
class Route:
    """A routing decision and its explanation."""

    member: str | None
    """The winning candidate's ``key``: a member, or ``member/model``."""
    router: str
    why: str
    scores: tuple[Score, ...] = ()
    """The eligible candidates, best first."""
    excluded: tuple[tuple[str, str], ...] = ()
    """(member, why) of each member that may not take the job."""

    def explain(self) -> str:
        """Several lines: the decision, each scored candidate, each excluded member."""
        head = f"routed to {self.member} by {self.router}: {self.why}" if self.member else (
            f"not routed ({self.router}): {self.why}")  # fmt: skip
        lines = [head]
        for s in self.scores:
            parts = ", ".join(f"{k} {v:,.4g}" for k, v in s.parts)
            lines.append(f"  {s.member}: score {s.total:,.4g}" + (f" ({parts})" if parts else ""))
        lines.extend(f"  {m}: excluded: {why}" for m, why in self.excluded)
        return "\n".join(lines)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Route:
        """The route ``as_dict`` gave (as a job's spec keeps it)."""
        return cls(
            d.get("member"), str(d["router"]), str(d["why"]),
            tuple(Score(str(x["member"]), float(x["total"]),
                        tuple((str(k), float(v)) for k, v in (x.get("parts") or {}).items()))
                  for x in d.get("scores") or ()),
            tuple((str(x["member"]), str(x["why"])) for x in d.get("excluded") or ()),
        )  # fmt: skip

    def as_dict(self) -> dict[str, Any]:
        return {
            "member": self.member, "router": self.router, "why": self.why,
            "scores": [{"member": s.member, "total": s.total, "parts": dict(s.parts)}
                       for s in self.scores],
            "excluded": [{"member": m, "why": w} for m, w in self.excluded],
        }  # fmt: skip


class Router(Protocol):
    """Picks one eligible candidate for a job, or none, and says why."""

    name: str

    def route(self, job: RouteRequest, candidates: Sequence[Candidate]) -> Route: ...


def eligible(candidates: Sequence[Candidate]) -> list[Candidate]:
    """The candidates that may take the job, in the federation's order."""
    return sorted((c for c in candidates if c.ok), key=lambda c: c.order)


def winner(route: Route, candidates: Sequence[Candidate]) -> Candidate | None:
    """The candidate ``route`` chose."""
    return next((c for c in candidates if c.key == route.member), None)


def decide(
    router: str,
    candidates: Sequence[Candidate],
    scores: Sequence[Score],
    why: str,
) -> Route:
    """The ``Route`` of ``scores`` (one per eligible candidate; lowest wins, ties to the
    member first in the federation's order) with ``why`` naming the winner's edge."""
    order = {c.key: (c.order, k) for k, c in enumerate(candidates)}
    ranked = tuple(sorted(scores, key=lambda s: (*(s.key or (s.total,)), order[s.member])))
    excluded = tuple((c.key, c.excluded) for c in sorted(candidates, key=lambda c: c.order)
                     if c.excluded)  # fmt: skip
    if not ranked:
        reasons = "; ".join(f"{m}: {w}" for m, w in excluded) or "the federation has no member"
        return Route(None, router, f"no member may take it ({reasons})", (), excluded)
    return Route(ranked[0].member, router, why, ranked, excluded)

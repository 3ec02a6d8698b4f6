"""router/least-loaded: the member with the least load."""

from __future__ import annotations

from collections.abc import Sequence

from suanli.core.registry import register
from suanli.core.routing import Candidate, Route, RouteRequest, Score, decide, eligible


@register("router", "least-loaded")
class LeastLoaded:
    """The eligible member whose GPUs held and asked for by its queue are the smallest share
    of its GPUs in service."""

    name = "least-loaded"
    uses_start = False

    def route(self, job: RouteRequest, candidates: Sequence[Candidate]) -> Route:
        scores = [Score(c.key, c.load, (("load", c.load),)) for c in eligible(candidates)]
        return decide(self.name, candidates, scores, "the least loaded eligible member")

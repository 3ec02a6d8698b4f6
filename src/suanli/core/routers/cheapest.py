"""router/cheapest: SkyPilot's optimizer, the cheapest member with capacity."""

from __future__ import annotations

from collections.abc import Sequence

from suanli.core.registry import register
from suanli.core.routing import Candidate, Route, RouteRequest, Score, decide, eligible


@register("router", "cheapest")
class Cheapest:
    """The eligible member where an hour of the job costs least among those that could
    start it now (SkyPilot picks the cheapest region and GPU with capacity, failing over to
    the next); if none could, the cheapest eligible member, where it waits."""

    name = "cheapest"
    uses_start = False

    def route(self, job: RouteRequest, candidates: Sequence[Candidate]) -> Route:
        ok = eligible(candidates)
        scores = [Score(c.key, c.price_hour, (("price/h", c.price_hour),
                                                 ("admits now", float(c.admits_now))),
                        key=(0.0 if c.admits_now else 1.0, c.price_hour))
                  for c in ok]  # fmt: skip
        now = any(c.admits_now for c in ok)
        why = ("the cheapest member that admits it now" if now
               else "no member admits it now: the cheapest eligible member")  # fmt: skip
        return decide(self.name, candidates, scores, why)

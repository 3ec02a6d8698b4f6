"""router/suanli: the member where the job's predicted completion and cost weigh least."""

from __future__ import annotations

from collections.abc import Sequence

from suanli.core.registry import register
from suanli.core.routing import Candidate, Route, RouteRequest, Score, decide, eligible

TIME_WEIGHT = 0.3
"""What an hour of a job's delay weighs, in hours of its cheapest on-demand compute: the
middle of the three weights measured on seed 0 of the network bench's scenario, then run on
seeds 1 and 2 and on six variants of the scenario (``docs/network.md``: 0.1, 0.3 and 1.0 give
0.904, 0.872 and 0.867 times the cheapest-member baseline's mean JCT at 0.983, 0.977 and
1.026 times its cost)."""


@register("router", "suanli")
class Scored:
    """Each eligible member (and each GPU model of it that could start the job now) scores
    what the job would cost there, its compute for the
    predicted runtime and its data's move (egress and the link's time), plus the price of
    the time until it would finish there (its predicted wait, the data's arrival included,
    and its predicted runtime on that member's GPUs), each hour at ``time_weight`` times the
    job's cheapest on-demand hour among the eligible members (``TIME_WEIGHT``). The lowest score wins; its explanation names each part."""

    name = "suanli"
    uses_start = True
    per_model = True

    def __init__(self, time_weight: float = TIME_WEIGHT) -> None:
        if not time_weight >= 0:
            raise ValueError(f"router/suanli: time_weight must be >= 0, got {time_weight}")
        self.time_weight = time_weight

    def route(self, job: RouteRequest, candidates: Sequence[Candidate]) -> Route:
        ok = eligible(candidates)
        if not ok:
            return decide(self.name, candidates, [], "")
        value = self.time_weight * min(c.list_price_hour for c in ok)
        scores = []
        for c in ok:
            time_cost = value * c.finish_s / 3600.0
            scores.append(Score(c.key, c.cost + time_cost, (
                ("wait h", c.start_s / 3600.0), ("move h", c.move_s / 3600.0),
                ("run h", c.run_s / 3600.0), ("compute $", c.compute_cost),
                ("move $", c.move_cost), ("time $", time_cost),
            )))  # fmt: skip
        best = min(scores, key=lambda s: s.total)
        win = next(c for c in ok if c.key == best.member)
        why = (f"finishes in {win.finish_s / 3600:.2f} h for ${win.cost:,.2f} "
               f"(an hour weighs ${value:,.2f})")  # fmt: skip
        return decide(self.name, candidates, scores, why)

"""router/first-admit: Kueue MultiKueue's dispatch, the first member that admits the job."""

from __future__ import annotations

from collections.abc import Sequence

from suanli.core.registry import register
from suanli.core.routing import Candidate, Route, RouteRequest, Score, decide, eligible


@register("router", "first-admit")
class FirstAdmit:
    """The first member, in the federation's fixed order, that could start the job now (Kueue
    MultiKueue dispatches to the first worker cluster that admits it); if none could, the
    first eligible member, where the job waits."""

    name = "first-admit"
    uses_start = False

    def route(self, job: RouteRequest, candidates: Sequence[Candidate]) -> Route:
        ok = eligible(candidates)
        scores = [Score(c.key, float(c.order), (("order", float(c.order)),
                                                   ("admits now", float(c.admits_now))),
                        key=(0.0 if c.admits_now else 1.0, float(c.order)))
                  for c in ok]  # fmt: skip
        now = [c.key for c in ok if c.admits_now]
        why = (f"the first member in the fixed order that admits it now ({now[0]})" if now
               else "no member admits it now: it waits at the first eligible member in the "
               "fixed order")  # fmt: skip
        return decide(self.name, candidates, scores, why)

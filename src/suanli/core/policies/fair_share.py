"""queue/drf and queue/fair-share: fair sharing between queues, within each priority class.

Both order pending jobs by priority class first (an ``online`` job never waits behind a
``normal`` one for fairness), then, within a class, the job of the queue with the smallest
*share* first, then FIFO. A queue is the job's quota queue (with tenancy) or its ``queue``
name; its ``weight`` (tenancy) divides its share.

* ``drf``: dominant resource fairness (Ghodsi et al., NSDI'11) on what the queue holds now:
  the largest, over GPU, CPU and memory, of its allocation over the cluster's capacity.
* ``fair-share``: decayed historical usage, as Slurm's fair-share factor: the integral of the
  queue's dominant share over time, halved every ``half_life`` seconds (7 days by default).

The share changes as jobs start and finish: its one owner is ``suanli.core.shares.Shares``,
which the order makes when it is bound to a scheduler (``bind``) and which the cycle reads
keys from as it takes each lane's head (``seams.DynamicKeys``); the ``key`` here is the
static part.
"""

from __future__ import annotations

import math
from typing import Any

from suanli.core.model import Job, SpecError
from suanli.core.registry import register
from suanli.core.seams import Handle, OrderContext
from suanli.core.shares import Shares

WEEK = 7 * 86_400.0


class _Fair:
    mode = "drf"
    half_life = math.inf

    def key(self, job: Job, ctx: OrderContext) -> tuple[Any, ...]:
        return (-ctx.priority(job), job.submit, job.id)

    def bind(self, h: Handle) -> Shares:
        return Shares.of_view(self.mode, self.half_life, h.view, h.ctx.tenancy)


@register("queue", "drf")
class Drf(_Fair):
    """Priority class, then the queue with the least dominant resource share now (÷ weight), then FIFO."""

    mode = "drf"


@register("queue", "fair-share")
class FairShare(_Fair):
    """Priority class, then the queue with the least decayed usage (half-life 7 d, ÷ weight), then FIFO."""

    mode = "usage"

    def __init__(self, half_life: float = WEEK) -> None:
        if not (half_life > 0):
            raise SpecError(f"fair-share half_life must be > 0 seconds, got {half_life}")
        self.half_life = half_life

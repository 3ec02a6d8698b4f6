"""``--explain JOB``: the story of chosen jobs through a replay, one line per change.

``Explainer`` keeps, for each job it was asked about, the instants at which something
happened to it: submitted, each new reason it was given while pending (a reason repeated at
the next cycle is not repeated here), started (where), preempted (by whom, why, what it
lost), finished, or still pending when the run ended. Only the jobs asked about cost anything.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from suanli.core.decisions import Admit, Preempt
from suanli.core.model import ClusterSpec

Timeline = list[tuple[float, str]]


class Explainer:
    """Collects the timelines of the jobs in ``ids`` (see the module docstring)."""

    def __init__(self, ids: Collection[str] = ()) -> None:
        self.events: dict[str, Timeline] = {j: [] for j in ids}
        self.waiting: set[str] = set()
        """The jobs asked about that are pending now."""
        self._told: set[str] = set()  # told why they wait at this instant

    def __bool__(self) -> bool:
        return bool(self.events)

    def note(self, job_id: str, t: float, text: str) -> None:
        events = self.events.get(job_id)
        if events is not None and (not events or events[-1][1] != text):
            events.append((t, text))

    def submitted(self, job_id: str, t: float) -> None:
        if job_id in self.events:
            self.waiting.add(job_id)
            self.note(job_id, t, "submitted")

    def pending(self, job_id: str, t: float, reason: object) -> None:
        """Why a job asked about waits after the cycle at ``t`` (None: not known yet)."""
        if reason is not None:
            self._told.add(job_id)
            self.note(job_id, t, f"pending: {reason}")

    def after_cycle(self, t: float, reason: Callable[[str], object]) -> None:
        """Jobs asked about that wait but were not tried at ``t``: ask the scheduler why."""
        for job_id in sorted(self.waiting - self._told):
            self.pending(job_id, t, reason(job_id))
        self._told.clear()

    def started(self, d: Admit, t: float, cluster: ClusterSpec) -> None:
        if d.job.id not in self.events:
            return
        self.waiting.discard(d.job.id)
        nodes = ", ".join(cluster.nodes[n].name for n in d.placement.nodes)
        p = d.placement
        self.note(
            d.job.id,
            t,
            f"started: {len(p.tasks)} task(s), {p.gpu_milli / 1000:g} GPU(s) on {nodes}",
        )

    def preempted(self, d: Preempt, t: float) -> None:
        if d.job.id in self.events:
            self.waiting.add(d.job.id)
        self.note(
            d.job.id,
            t,
            f"preempted by job {d.by} ({d.kind}): {d.lost_gpu_s / 3600:.3g} GPU-hours of work "
            "lost since its last checkpoint; requeued",
        )


def render(job_id: str, events: Timeline) -> str:
    """A timeline as text, one event per line (times in seconds and hours)."""
    if not events:
        return f"job {job_id}: never submitted in this run"
    lines = [f"job {job_id}:"]
    for t, text in events:
        lines.append(f"  t={t:>12,.1f} s ({t / 3600:>8.2f} h)  {text}")
    return "\n".join(lines)

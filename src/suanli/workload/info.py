"""How a generated workload's size and pace came about: the line a run's header prints."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class WorkloadInfo:
    """How a generated workload's size and pace came about, for the run's header."""

    jobs: int
    span: float
    """Seconds from the first to the last arrival."""
    arrival_rate: float
    """Jobs per second."""
    offered_load: float
    """Mean GPU-seconds asked per second over the capacity (as ``target_load`` counts it)."""
    derived: str
    """What was derived: ``"horizon"`` (from the job count and the load or rate), ``"jobs"``
    (from the horizon and the load or rate), ``"arrival rate"`` (from the job count and the
    horizon) or ``"load window"`` (the burst basis of ``load_window``)."""
    capped: int = 0
    """Jobs whose runtime the time limit cut."""
    cut: float = 0.0
    """Share of the drawn GPU-seconds the time limit cut."""
    time_limit: float | None = None

    def describe(self) -> str:
        """One line: what was asked, what was derived and what the time limit cut."""
        span = span_text(self.span)
        how = {
            "horizon": f"arrivals over {span} (derived from the job count at offered load "
            f"{self.offered_load:.2f}: {self.arrival_rate * 3600:,.1f} jobs/h)",
            "jobs": f"arrivals over {span} (job count derived from the horizon at offered load "
            f"{self.offered_load:.2f}: {self.arrival_rate * 3600:,.1f} jobs/h)",
            "arrival rate": f"arrivals over {span} (arrival rate derived from the job count and "
            f"the horizon: {self.arrival_rate * 3600:,.1f} jobs/h, offered load "
            f"{self.offered_load:.2f})",
            "load window": f"arrivals over {span} (a burst: rate set so that the cluster is "
            "busy while the jobs arrive, load_window)",
        }[self.derived]
        if self.time_limit is not None:
            how += (
                f"; runtimes cut at the {span_text(self.time_limit)} time limit: "
                f"{self.capped:,} jobs, {self.cut:.1%} of the GPU time"
            )
            if self.span < 5 * self.time_limit:
                how += (
                    ". Note: the jobs arrive over less than 5 x the time limit, so the cluster "
                    "never reaches a steady state: ask for more jobs or a longer --horizon"
                )
        return how


def span_text(seconds: float) -> str:
    """A span in the unit that reads best: ``3.5 d``, ``5.2 h``, ``12.0 min``, ``40 s`` (a unit
    from twice its size)."""
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= 2 * size:
            return f"{seconds / size:,.1f} {unit}"
    return f"{seconds:,.0f} s"

"""The loop's hardware holds: GPUs out of service on a health fault, nodes an operator has
cordoned or drained (``Hardware``, a part of ``suanli.control.loop.Controller``).

The store says what is held (``suanli.store.nodes.holds``): GPUs that the health watch
(``suanli.control.health_watch``, over NVML) found faulty, and nodes an operator holds
(``suanli nodes cordon|drain|uncordon``, the API's ``/v1/nodes/{name}/...``). Every
``ControlConfig.holds_interval_s``, and at once when a task failed or was lost (the fault
may be why: the health watch is asked to look again first), the loop reads it and makes the
scheduler agree, level-triggered:

- a faulty GPU is out of service in the view (``ClusterView.set_gpu_health``): nothing is
  placed on it, whatever its holders release stays held; every attempt on it is
  *interrupted*: its claims go back, it is requeued in its place in line, keeping the
  service it attained (``Scheduler.interrupted``), and its tasks are stopped as a
  preemption's are (the stop signal, the grace, the kill); its next attempt resumes from its
  checkpoint. A task that exits because of the fault (a GPU that falls off the bus kills its
  processes) is not its job's failure: the attempt is interrupted first. An interruption is
  not a preemption: the anti-thrash cap does not count it. When the fault clears, the GPU is
  back in service.
- a cordoned node takes no new work; what runs there runs on (Slurm's ``DRAIN``). A drained
  node is cordoned and every attempt on it interrupted (``kubectl drain``). Uncordoned, it
  is back in service. A node's service is also the inventory's: a node that left stays out
  whatever its hold.

The holds are applied again after every rebuild of the scheduler (a restart, a node that
joined), so they survive both.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from suanli.control.attempts import INTERRUPTED, LiveAttempt, to_ms
from suanli.store import jobs as js
from suanli.store import nodes as sn

if TYPE_CHECKING:
    from suanli.control.loop import Controller

log = logging.getLogger("suanli.control")


class Hardware:
    """The hardware-holding part of ``Controller`` (see the module docstring). Its state:
    ``gpus_out`` ((node, GPU) -> fault) and ``cordoned`` (node -> hold), by index."""

    def _watch_holds(self: Controller, now: float, at_once: bool = False) -> None:
        """Read the holds if the interval has passed, or ``at_once`` (a task failed or was
        lost: the health watch looks again first, so a GPU fault is found before the task's
        end is taken as its job's failure)."""
        if not at_once and now - self.holds_at < self.config.holds_interval_s:
            return
        self.holds_at = now
        if at_once and self.health_probe is not None:
            try:
                self.health_probe()
            except Exception:  # noqa: BLE001 - a probe that fails is the watch's to report
                log.exception("health: probing the GPUs again failed")
        try:
            holds = sn.holds(self.store)
        except Exception:  # noqa: BLE001 - the store may be down; the next pass reads again
            log.exception("holds: the store could not say them; kept as they were")
            return
        self.apply_holds(holds, now)

    def apply_holds(self: Controller, holds: sn.Holds, now: float) -> None:
        """Make the view and the live attempts agree with ``holds`` (the module docstring)."""
        index, view = self.node_index, self.view
        out: dict[tuple[int, int], str] = {}
        for (name, gpu), (fault, _) in holds.faults.items():
            n = index.get(name)
            if n is not None and 0 <= gpu < view.node_gpus[n]:
                out[(n, gpu)] = fault
        for n, gpu in [k for k in self.gpus_out if k not in out]:
            view.set_gpu_health(n, gpu, True)
            log.info("health: GPU %d of node %s is back in service", gpu, self.node_names[n])
        for (n, gpu), fault in out.items():
            if self.gpus_out.get((n, gpu)) != fault:
                log.warning("health: GPU %d of node %s is out of service: %s", gpu,
                            self.node_names[n], fault)  # fmt: skip
        cordoned = {index[name]: mode for name, (mode, _, _) in holds.cordons.items()
                    if name in index}  # fmt: skip
        for n in set(cordoned) | set(self.cordoned):
            if cordoned.get(n) != self.cordoned.get(n):
                log.info("holds: node %s %s", self.node_names[n],
                         f"{cordoned[n]}ed" if n in cordoned else "back in service")  # fmt: skip
        touched = set(cordoned) | set(self.cordoned)
        self.gpus_out, self.cordoned = out, cordoned
        for n in touched:
            self._set_usable(n)
        if not out and "drain" not in cordoned.values():
            return
        reasons = {name: reason for name, (_, reason, _) in holds.cordons.items()}
        for live in list(self.live.values()):
            if live.state == "stopping":
                continue
            why = self._hardware_fault(live, reasons)
            if why is not None:
                with self._guard(live.job.id, "interrupting it"):
                    self._interrupt(live, why, now)
        # After the interruptions: what they released is held now, not free.
        for n, gpu in out:
            view.set_gpu_health(n, gpu, False)

    def _set_usable(self: Controller, n: int) -> None:
        """Node ``n`` takes new work if the inventory has it and no operator holds it."""
        usable = self.config.cluster.nodes[n].healthy and n not in self.cordoned
        if bool(self.view.healthy[n]) != usable:
            self.view.set_health(n, usable)

    def _hardware_fault(self: Controller, live: LiveAttempt, reasons: dict[str, str]) -> str | None:
        """Why ``live`` must come off its hardware (None: it may stay)."""
        for tp in live.placement.tasks:
            name = self.node_names[tp.node]
            if self.cordoned.get(tp.node) == "drain":
                why = reasons.get(name) or "maintenance"
                return f"{INTERRUPTED}: node {name} is drained ({why})"
            for gpu in tp.gpus:
                fault = self.gpus_out.get((tp.node, gpu))
                if fault is not None:
                    return f"{INTERRUPTED}: GPU {gpu} of node {name} is out of service ({fault})"
        return None

    def _interrupt(self: Controller, live: LiveAttempt, why: str, now: float) -> None:
        """Take ``live`` off its hardware: claims back, requeued in its place with what it
        attained (``Scheduler.interrupted``), its tasks stopped as a preemption's."""
        ms = to_ms(now)
        with self.store.begin() as conn:
            js.release_claims(conn, live.job.id, live.attempt)
            js.attempt_stopping(conn, live.job.id, live.attempt, ms, why)
            js.set_job_state(conn, live.job.id, "pending", ms, reason=f"requeued: {why}",
                             event="interrupted")  # fmt: skip
        job = live.job  # as it asked (an elastic job's size, not the one it ran at)
        self.sched.interrupted(job, live.placement, now, now)
        self._requeued(live, job)
        if self.metrics is not None:
            self.metrics.preempted(job.queue, "hardware")
        live.interrupted = why  # its ended row's detail
        self._stop_requeued(live, now)

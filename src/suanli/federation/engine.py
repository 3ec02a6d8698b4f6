"""The federation simulator: jobs arrive at the federation, a router sends each to a member
(its data moved first where it runs away from it), members schedule them with their own
schedulers, and every use is recorded for settlement (``suanli.federation.settle``).

One clock for all members. At each instant, in order: attempts that end (in every member),
spot prices set (every ``SPOT_PERIOD_S``), data that arrives (the jobs waiting on it are
submitted to their member), re-routing checks, new arrivals (routed), then a scheduling
cycle in every member where something changed. Deterministic for a seed.

For each job the router gets one ``Candidate`` per member (``suanli.core.routing``): a
member is excluded when it is down, when the job's owner does not allow its region, when a
data set the job reads may not be in its jurisdiction, when an online job's users are too
far from it, when no node of it could ever hold the job, or when the job's worst case there
(its time limit on the member's slowest usable GPUs at its dearest price, and its data's
move) would pass its budget. Otherwise the candidate carries: whether the job could start
now, the member's load, when the job would start there (its queue planned by the member's
start-time estimator on the federation's shared predictor, from the data's arrival; asked
only of routers that read it), how long it would run (the shared predictor's median over the
mean speed of the GPUs it could use there), what an hour of it costs there (on demand, at the
member's spot price for a ``spot`` job, nothing more while capacity its owner bought ahead
there covers it) and the data to move. A router that picks a GPU model too (``per_model``)
also gets, for a member that could start the job now, one candidate per GPU model of it that
could: the job is then held to that model, at its speed and price.

Data: a data set is read where it lives or where a copy has arrived; a job sent elsewhere
waits for a copy, moved from the copy it is cheapest to move from (egress from the source,
and the link's time), and the copy stays for later jobs. Jobs sent to a member while a copy
is on its way wait for that copy.

Re-routing (``reroute``): a job still waiting at its member ``REROUTE_AFTER`` times its
predicted wait after it was sent there (at least ``REROUTE_MIN_S``) is routed again among the
other members, its data's move counted again, and is taken back and sent to the winner if
that would finish it sooner than staying would (its place in its member's plan, then its
run there); at most once.

Splitting (``split``): a divisible job whose best single member would finish it later than
two halves on two members would, by more than ``SPLIT_GAIN``, at a cost at most
``SPLIT_COST`` above the single member's, runs as two halves (its completion is the later
half's).
"""

from __future__ import annotations

import functools
import heapq
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from suanli.core.model import MILLI, Job, TaskRequest
from suanli.core.registry import create
from suanli.core.routing import Candidate, Route, RouteRequest, winner
from suanli.federation.member import RESERVED, Member, Offer
from suanli.federation.model import (
    REROUTE_AFTER,
    REROUTE_MIN_S,
    TRIED,
    Federation,
    FedJob,
    Region,
    not_allowed,
    over_budget,
    too_far,
)
from suanli.federation.prices import SPOT_PERIOD_S, spot_multiplier

__all__ = ["FedResult", "JobOutcome", "Move", "federate"]

SPLIT_GAIN = 0.2
SPLIT_COST = 0.1

ARRIVE, DELIVER, CHECK = 2, 1, 3
"""Event kinds, in the order they are handled at one instant (after ends and prices)."""


@dataclass(frozen=True, slots=True)
class Move:
    """A data set's copy to a region: from where, when it left and arrived, GB, egress and
    the link's time, and the job it was moved for."""

    dataset: str
    source: str
    target: str
    start: float
    arrive: float
    gb: float
    egress_usd: float
    link_usd: float
    job: str
    org: str


@dataclass
class JobOutcome:
    """What became of one job (its parts' figures combined)."""

    fed: FedJob
    route: Route | None = None
    member: str | None = None
    parts: list[tuple[str, Job]] = field(default_factory=list)
    """(member, the job it ran there as): one, or two halves."""
    reroute: Route | None = None
    sent_at: float = math.nan
    predicted_start: float = math.nan
    start: float = math.nan
    finish: float = math.nan
    moved_gb: float = 0.0
    move_usd: float = 0.0
    split_why: str = ""

    @property
    def routed(self) -> bool:
        return self.member is not None


@dataclass
class FedResult:
    """A federation run: every job's outcome, the moves, the members, the spot prices set."""

    router: str
    outcomes: list[JobOutcome]
    moves: list[Move]
    members: list[Member]
    spot: dict[str, list[tuple[float, float]]]
    """Per region, (from when, spot multiplier)."""
    util: dict[str, float]
    """Per region, time-averaged share of its GPUs allocated."""
    horizon: float
    """From 0 to the last end."""
    wall_s: float


@dataclass(frozen=True, slots=True)
class _Copy:
    """A data set to move for a job: from where, GB, its arrival, egress and link price."""

    name: str
    source: Region
    gb: float
    arrive: float
    egress: float
    link: float


class _Data:
    """Where each data set's copies are and when each arrives (inf: on its way, unknown)."""

    def __init__(self, fed: Federation) -> None:
        self.fed = fed
        self.at: dict[tuple[str, str], float] = {(d.name, d.home): -math.inf
                                                 for d in fed.datasets.values()}  # fmt: skip

    def plan(self, names: Sequence[str], target: Region, now: float) -> tuple[float, list[_Copy]]:
        """When the job's data would be at ``target``, and what must move there for it:
        copies there or on their way are used; the rest is moved from the copy cheapest to
        move from (ties: the one that arrives first)."""
        fed, net = self.fed, self.fed.network
        ready = now
        todo: list[_Copy] = []
        for name in names:
            there = self.at.get((name, target.name))
            if there is not None:
                ready = max(ready, there)
                continue
            size = fed.datasets[name].size_gb
            best: _Copy | None = None
            for r in fed.regions:
                a = self.at.get((name, r.name))
                if a is None or a > now:
                    continue  # no copy there yet
                e, lk = net.transfer_usd(size, r, target)
                c = _Copy(name, r, size, now + net.transfer_s(size, r, target), e, lk)
                if best is None or (e + lk, c.arrive) < (best.egress + best.link, best.arrive):
                    best = c
            assert best is not None, f"data set {name} has no copy"
            ready = max(ready, best.arrive)
            todo.append(best)
        return ready, todo


@functools.lru_cache(maxsize=4096)
def _task_on(task: TaskRequest, model: str) -> TaskRequest:
    """``task`` held to GPU model ``model`` (one object per pair: plans key on tasks)."""
    return replace(task, gpu_models=frozenset({model}))


def _on(job: Job, model: str) -> Job:
    """``job`` held to GPU model ``model``."""
    return replace(job, task=_task_on(job.task, model))


def federate(
    fed: Federation,
    jobs: Sequence[FedJob],
    router: str,
    *,
    seed: int = 0,
    reroute: bool = False,
    split: bool = False,
    router_options: dict[str, object] | None = None,
) -> FedResult:
    """Run ``jobs`` on ``fed`` with ``router/<router>`` (module docstring)."""
    return _Run(fed, jobs, router, seed, reroute, split, router_options or {}).run()


class _Run:
    """One federation run's state and steps (``federate``)."""

    def __init__(
        self,
        fed: Federation,
        jobs: Sequence[FedJob],
        router: str,
        seed: int,
        reroute: bool,
        split: bool,
        options: dict[str, object],
    ) -> None:
        fed.check_jobs(jobs)
        self.wall0 = time.perf_counter()
        self.fed = fed
        self.router = router
        self.rt = create("router", router, **options)
        self.uses_start = bool(getattr(self.rt, "uses_start", False))
        self.per_model = bool(getattr(self.rt, "per_model", False))
        self.reroute = reroute
        self.split = split
        # One runtime predictor for the federation: a job runs as long wherever it runs (at
        # the GPUs' speed), so every member's plans and the router read the same figures,
        # learned from every job that ended anywhere.
        self.runtime = create("runtime", "history")
        self.members: list[Member] = []
        for k, r in enumerate(fed.regions):
            first = self.members[0].starts if self.members else None
            self.members.append(Member(r, seed + k, self.runtime, fed.outages, first))
        self.by_name = {m.name: m for m in self.members}
        net = fed.network
        self.rtt = {(a.name, b.name): net.latency_ms(a, b) for a in fed.regions
                    for b in fed.regions}  # fmt: skip
        self.data = _Data(fed)
        self.outcomes = [JobOutcome(fj) for fj in jobs]
        self.moves: list[Move] = []
        self.events: list[tuple[float, int, int, object]] = []
        self.seq = 0
        for k, fj in enumerate(jobs):
            self.push(fj.job.submit, ARRIVE, k)
        # Capacity bought ahead: unit-hours left per (org, region), claimed at routing.
        self.left = {(r.org, r.region): r.units for r in fed.reservations}
        self.claims: dict[str, tuple[tuple[str, str], float]] = {}
        self.spot = {m.name: [(0.0, spot_multiplier(0.0))] for m in self.members}
        self.waiting: dict[int, tuple[str, Job]] = {}

    def push(self, t: float, kind: int, payload: object) -> None:
        self.seq += 1
        heapq.heappush(self.events, (t, kind, self.seq, payload))

    # ---------------------------------------------------------------- candidates
    def exclusion(self, fj: FedJob, job: Job, m: Member, now: float, skip: str) -> str:
        if m.name == skip:
            return TRIED
        if not m.up(now):
            return "down"
        return (not_allowed(fj.regions, m.name) or self.fed.residency(fj, m.region)
                or m.never(job))  # fmt: skip

    def candidates(self, fj: FedJob, job: Job, now: float, skip: str = "") -> list[Candidate]:
        """One candidate per member, and for a router that picks a GPU model too
        (``per_model``) one per GPU model of a member that could start the job now, for
        running ``job`` (module docstring)."""
        gpus = job.gpu_demand_milli / MILLI
        median = self.runtime.quantile(job, 0.5)  # at reference speed, the same everywhere
        out = []
        for order, m in enumerate(self.members):
            lat = self.rtt[(fj.home, m.name)]
            why = self.exclusion(fj, job, m, now, skip)
            if not why and fj.online:
                why = too_far(lat, fj.max_latency_ms)
            if why:
                out.append(Candidate(m.name, order, excluded=why, latency_ms=lat))
                continue
            of = m.offer(job)
            ready, todo = self.data.plan(fj.data, m.region, now)
            gb = sum(c.gb for c in todo)
            move_cost = sum(c.egress + c.link for c in todo)
            if fj.budget_usd is not None and fj.limit_s is not None:
                worst = gpus * of.dearest * fj.limit_s / of.slowest / 3600.0 + move_cost
                why = over_budget(worst, fj.budget_usd)
                if why:
                    out.append(Candidate(m.name, order, excluded=why, latency_ms=lat))
                    continue
            wait = ready - now
            ways: list[tuple[str, Offer]] = [("", of)]
            if self.per_model and wait <= 0 and of.admits_now:
                # Each GPU model that could start it now: the job may be held to it.
                for model in m.models(job):
                    mo = m.offer(job, _task_on(job.task, model))
                    if mo.admits_now:
                        ways.append((model, mo))
            reserved = (job.tenant, m.name) in self.left
            for model, wo in ways:
                list_hour = gpus * wo.price
                hour = (list_hour * self.spot[m.name][-1][1] if job.priority_class == "spot"
                        else list_hour)  # fmt: skip
                # The job held to the model is made only where it is read (it is a copy).
                if reserved and self.covered(_on(job, model) if model else job, m) is not None:
                    hour = 0.0
                start = wait
                if self.uses_start and not (wo.admits_now and wait <= 0):
                    est = m.what_if(_on(job, model) if model else job, now)
                    start = max(est.p50 - now, wait) if est.known else math.inf
                out.append(Candidate(
                    m.name, order, model, admits_now=wo.admits_now and wait <= 0, load=m.load(),
                    start_s=start, run_s=median / wo.speed, price_hour=hour,
                    list_price_hour=list_hour, unit_price=wo.price / wo.units, move_gb=gb,
                    move_s=wait, move_cost=move_cost, latency_ms=lat,
                ))  # fmt: skip
        return out

    def covered(self, job: Job, m: Member) -> float | None:
        """The unit-hours of its owner's capacity bought ahead at ``m`` the job would draw
        (its predicted runtime on the member's GPUs), if what is left covers it."""
        res = (job.tenant, m.name)
        if res not in self.left or job.priority_class in ("spot", "online"):
            return None
        o = m.offer(job)
        need = job.gpu_demand_milli / MILLI * o.units * m.predict(job) / o.speed / 3600.0
        return need if self.left[res] >= need else None

    # ---------------------------------------------------------------- routing
    def claim(self, job: Job, m: Member) -> Job:
        """The job as it runs at ``m``: in the reserved class while its owner's capacity
        bought ahead there covers it (claimed now, given back if it is taken back)."""
        need = self.covered(job, m)
        if need is None:
            return job
        res = (job.tenant, m.name)
        self.left[res] -= need
        self.claims[job.id] = (res, need)
        return job.with_class(RESERVED)

    def unclaim(self, job_id: str) -> None:
        c = self.claims.pop(job_id, None)
        if c is not None:
            res, need = c
            self.left[res] += need

    def send(self, k: int, job: Job, m: Member, now: float) -> None:
        """Move the job's data to ``m`` (recording each move) and submit it there when the
        data is there."""
        o = self.outcomes[k]
        ready, todo = self.data.plan(o.fed.data, m.region, now)
        for c in todo:
            self.data.at[(c.name, m.name)] = c.arrive
            self.moves.append(Move(c.name, c.source.name, m.name, now, c.arrive, c.gb, c.egress,
                                   c.link, o.fed.id, job.tenant))  # fmt: skip
            o.move_usd += c.egress + c.link
            o.moved_gb += c.gb
        if ready <= now:
            m.submit(job, now)
        else:
            self.seq += 1
            self.waiting[self.seq] = (m.name, job)
            heapq.heappush(self.events, (ready, DELIVER, self.seq, self.seq))

    def decide(self, fj: FedJob, now: float, skip: str = "") -> tuple[Route, list[Candidate]]:
        """The router's decision for ``fj`` at ``now`` (``skip``: a member it may not go to),
        and the candidates it chose among."""
        job = fj.job
        cands = self.candidates(fj, job, now, skip)
        return self.rt.route(RouteRequest(fj.id, job.gpu_demand_milli // MILLI, fj.online),
                             cands), cands  # fmt: skip

    def route(self, k: int, now: float) -> None:
        o = self.outcomes[k]
        fj = o.fed
        r, cands = self.decide(fj, now)
        o.route = r
        if r.member is None:
            back = [m.back_at(now) for m in self.members
                    if any(c.member == m.name and c.excluded == "down" for c in cands)]
            if back:
                # A member that may take it is down: the job waits for it at the federation.
                self.push(min(back), ARRIVE, k)
            return
        win = winner(r, cands)
        assert win is not None
        if self.split and fj.divisible and fj.job.tasks >= 2 and self.halves(k, win, now):
            return
        self.place(k, win, now)
        if self.reroute and self.uses_start and math.isfinite(win.start_s):
            self.push(now + max(REROUTE_AFTER * win.start_s, REROUTE_MIN_S), CHECK, k)

    def place(self, k: int, win: Candidate, now: float) -> None:
        """Send job ``k`` whole to the candidate ``win``."""
        o = self.outcomes[k]
        job = o.fed.job
        m = self.by_name[win.member]
        run = self.claim(_on(job, win.model) if win.model else job, m)
        o.member, o.parts = m.name, [(m.name, run)]
        o.sent_at = now
        o.predicted_start = now + win.start_s
        self.send(k, run, m, now)

    def halves(self, k: int, whole: Candidate, now: float) -> bool:
        """Run job ``k`` as two halves on two members if that finishes sooner by
        ``SPLIT_GAIN`` at a cost at most ``SPLIT_COST`` above ``whole``'s (module docstring)."""
        o = self.outcomes[k]
        fj, job = o.fed, o.fed.job
        n1 = job.tasks // 2
        halves = [replace(job, id=f"{job.id}/{p}", tasks=s, gang_min=min(job.gang_min, s),
                          runtime=job.runtime * fj.split_slowdown)
                  for p, s in enumerate((job.tasks - n1, n1))]  # fmt: skip
        best: list[Candidate] = []
        for h in halves:
            taken = {b.member for b in best}
            ok = [c for c in self.candidates(fj, h, now) if c.ok and c.member not in taken]
            if not ok:
                return False
            best.append(min(ok, key=lambda c: (c.finish_s, c.cost, c.order)))
        finish = max(c.finish_s for c in best)
        cost = sum(c.cost for c in best)
        if not (finish < (1 - SPLIT_GAIN) * whole.finish_s
                and cost <= (1 + SPLIT_COST) * whole.cost):  # fmt: skip
            return False
        o.split_why = (f"split in two: finishes in {finish / 3600:.2f} h for ${cost:,.2f} "
                       f"against {whole.finish_s / 3600:.2f} h for ${whole.cost:,.2f} whole")  # fmt: skip
        o.member = "+".join(c.member for c in best)
        o.sent_at = now
        o.predicted_start = now + min(c.start_s for c in best)
        for h, c in zip(halves, best, strict=True):
            m = self.by_name[c.member]
            run = self.claim(_on(h, c.model) if c.model else h, m)
            o.parts.append((m.name, run))
            self.send(k, run, m, now)
        return True

    def check(self, k: int, now: float) -> None:
        """Re-route job ``k`` if it still waits where it was sent and another member would
        finish it sooner than staying would (at most once; module docstring)."""
        o = self.outcomes[k]
        if o.reroute is not None or len(o.parts) != 1:
            return
        name, job = o.parts[0]
        m = self.by_name[name]
        if job.id not in m.sched.lanes.pending:
            return
        r, cands = self.decide(o.fed, now, skip=name)
        win = winner(r, cands)
        if win is None or win.finish_s >= self.staying_s(m, job, now):
            return  # nowhere else would finish it sooner: it waits where it is
        taken = m.withdraw(job.id)
        assert taken, job.id  # it was pending there
        self.unclaim(job.id)
        o.reroute = r
        self.place(k, win, now)

    def staying_s(self, m: Member, job: Job, now: float) -> float:
        """When ``job``, waiting at ``m``, would finish there (from now): its place in
        ``m``'s plan, then its predicted run at ``m``'s speed."""
        est = m.starts.estimate(now, m.running_rows, m.sched.pending_jobs, (job,)).get(job.id)
        if est is None or not est.known:
            return math.inf
        return max(est.p50 - now, 0.0) + self.runtime.quantile(job, 0.5) / m.offer(job).speed

    # ---------------------------------------------------------------- the clock
    def run(self) -> FedResult:
        members, events = self.members, self.events
        area = dict.fromkeys(self.by_name, 0.0)
        last = 0.0
        next_price = SPOT_PERIOD_S
        while True:
            t_ev = events[0][0] if events else math.inf
            t_fin = min(m.next_finish() for m in members)
            t_wake = min(m.wake_at() for m in members)
            busy = bool(events) or any(len(m.sched) or m.rep.running for m in members)
            t = min(t_ev, t_fin, t_wake, next_price if busy else math.inf)
            if t == math.inf:
                break
            for m in members:
                area[m.name] += m.view.allocated_milli * (t - last)
            last = t
            for m in members:
                for job in m.finish(t):
                    self.runtime.learn(job, job.runtime, t)
            if t == next_price:
                for m in members:
                    self.spot[m.name].append((t, spot_multiplier(m.utilisation())))
                next_price += SPOT_PERIOD_S
            while events and events[0][0] == t:
                _, kind, _, payload = heapq.heappop(events)
                if kind == DELIVER:
                    name, job = self.waiting.pop(int(payload))  # type: ignore[call-overload]
                    self.by_name[name].submit(job, t)
                elif kind == CHECK:
                    self.check(payload, t)  # type: ignore[arg-type]
                else:
                    self.route(payload, t)  # type: ignore[arg-type]
            for m in members:
                if m.changed or m.wake_at() <= t:
                    m.cycle(t)
        for o in self.outcomes:
            starts, ends = [], []
            for name, job in o.parts:
                rep = self.by_name[name].rep
                i = rep.index[job.id]
                starts.append(rep.start[i])
                ends.append(rep.finish[i])
            if starts:
                o.start = min(starts)
                o.finish = max(ends)
        # Over the span that had work: from 0 to the last end.
        span = max((o.finish for o in self.outcomes if o.finish == o.finish), default=last)
        util = {m.name: area[m.name] / (m.capacity_milli * span) if span > 0 else 0.0
                for m in members}  # fmt: skip
        return FedResult(self.router, self.outcomes, self.moves, members, self.spot, util, span,
                         time.perf_counter() - self.wall0)  # fmt: skip

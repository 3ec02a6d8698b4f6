"""A live federation front: routes a job among member control planes (``suanli serve``) over
their APIs, with the routers of the simulated federation (``suanli.core.routing``), and
submits it to the winner with its decision attached (``suanli route``).

The members are listed in a YAML file, in the federation's fixed order::

    members:
      - name: us-east
        url: http://10.0.0.1:8000
        token_file: /etc/suanli/us-east.token   # an admin token of that member (or token:)
        prices: {H100: 12.29}                    # USD per GPU-hour, per GPU model it has
        speeds: {H100: 1.0}                      # runtime divisor per model (default 1)

For a job the front asks each member, as ``docs/network.md`` ("A live member") lists:

- ``GET /v1/nodes``: the GPU models it has, for the job's price and speed there (the mean
  over the GPUs of the models the job accepts, weighted by how many there are, as the
  simulated members' offers are);
- ``POST /v1/what-if`` with the job: whether it is up and could ever hold the job (a refusal,
  4xx, excludes it with the member's own words; a member that cannot be reached in time, or
  answers 5xx, is down), whether it has room now, its load, and when the job would start.

Each member is one ``Candidate``: its predicted start is the what-if's P50 from now (or the
data's arrival, if later), its run the job's own estimate (``estimate``, else
``max_runtime``, else ``DEFAULT_RUN_S``) over its speed there, its hour the job's GPUs at that
price. The router picks; ``POST /v1/jobs`` sends the job to the winner with ``routing`` (an
admin token: only a front attaches one).

The federation's rules (``suanli.federation.model``, the simulator's own) apply where the file
and the job give what they need. A member may also carry its ``site`` (latitude, longitude),
``jurisdiction`` and ``egress_usd_gb``; the file may list ``datasets`` (name, ``gb``, the
members that hold a copy ``at``, and the ``jurisdictions`` it may be in) and the
``network`` (``gbps``, ``hour_usd``). A job's spec may carry a ``federation`` block, read by the
front and never sent to a member::

    federation:
      home: eu-west          # the member its users are at (for an online job's latency)
      regions: [eu-west]     # the members its owner allows
      data: [imagenet]       # the data sets it reads
      max_latency_ms: 60     # an online job's users' round-trip bound
      budget_usd: 500        # the most it may cost (it needs max_runtime)

A member is then excluded, with the reason and never told of the job, where the owner does not
allow it, where a data set may not be in its jurisdiction, or where an online job's users are
farther than their bound; after its GPUs are known, where the job's worst case there (its
GPUs at the dearest price it accepts for ``max_runtime``, the member's limit on it, plus the
data's move) would pass its budget. Where the job reads data, every member is first asked
which copies it holds (``GET /v1/datasets``, item 6 of a live member): a copy counts where
the file's ``at`` lists it or a member says it is present, and a copy on its way counts from
when it is due. A data set not held at a member is priced as moved there from the copy
cheapest to move from (the source's egress and the link's time), and the job starts there no
sooner than it arrives. Once the job is sent, each data set to move is recorded at the
winner as arriving (``PUT /v1/datasets/{name}``), so a later job finds it on its way and none
is moved twice; moving the bytes is left to the data's owners.

A ``spot`` job's hour at a member is its on-demand hour times the federation's spot rule
(``suanli.federation.prices.spot_multiplier``) at the share of the member's GPUs in service
allocated now (``GET /v1/nodes``); the simulated federation sets it every six hours.

``Front.reroute`` (``suanli reroute``) routes again a job a front sent that waits far longer
than predicted, at most once, taking it back only while it has never started (``POST
/v1/jobs/{id}/withdraw``); the decision a front attaches keeps the predicted wait (``wait_s``)
and what the job asked of the federation (``asks``) for it.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar
from urllib.parse import quote

import httpx

from suanli.core.model import SpecError
from suanli.core.registry import create
from suanli.core.routing import Candidate, Route, RouteRequest, winner
from suanli.federation.front_file import (
    FrontFederation,
    FrontMember,
    finite,
    load_federation,
    load_members,
    unknown_keys,
)
from suanli.federation.model import (
    REROUTE_AFTER,
    REROUTE_MIN_S,
    TRIED,
    not_allowed,
    over_budget,
    residency,
    too_far,
)
from suanli.federation.prices import spot_multiplier
from suanli.federation.units import units_per_gpu_hour

__all__ = [
    "DEFAULT_RUN_S", "Asks", "DataMove", "Front", "FrontFederation", "FrontMember", "Rerouted",
    "Routed", "load_federation", "load_members",
]  # fmt: skip

_T = TypeVar("_T")

Copies = dict[str, dict[str, float]]
"""Per data set a job reads, the members holding a copy and when each is there (epoch
seconds; 0 for a copy there now)."""

DEFAULT_RUN_S = 3600.0
"""A job's run where it gives neither ``estimate`` nor ``max_runtime``."""
TIMEOUT_S = 15.0
"""How long a member has to answer one request (its what-if waits up to 10 s for a pass)."""
MAX_ASKING = 16
"""The most members asked at once."""


@dataclass(frozen=True)
class Routed:
    """A front's decision for one job, and where it went (``job_id`` None: not sent)."""

    route: Route
    candidates: tuple[Candidate, ...]
    job_id: str | None = None
    moves: tuple[DataMove, ...] = ()
    """The data sets to move to the winner (each recorded there as arriving once sent)."""
    notes: tuple[str, ...] = ()
    """What went wrong after the job was taken (a copy the winner was not told of)."""


class Refused(SpecError):
    """A member refused a job in so many words (a 4xx): it does not hold it."""


@dataclass(frozen=True)
class Rerouted:
    """What ``Front.reroute`` did: why, and where the job went (``routed``: the decision
    among the other members, if one was made; its ``job_id``: the job there, if sent)."""

    why: str
    routed: Routed | None = None

    @property
    def moved(self) -> bool:
        return self.routed is not None and self.routed.job_id is not None


@dataclass(frozen=True)
class DataMove:
    """One data set to move for a job: from where, how much, how long and at what price."""

    name: str
    source: str
    target: str
    gb: float
    seconds: float
    usd: float


@dataclass(frozen=True)
class Asks:
    """What a job asks of the federation: its spec's ``federation`` block (module
    docstring)."""

    home: str | None = None
    regions: frozenset[str] = frozenset()
    data: tuple[str, ...] = ()
    max_latency_ms: float | None = None
    budget_usd: float | None = None


ASKS_FIELDS = ("home", "regions", "data", "max_latency_ms", "budget_usd")


class Front:
    """Routes jobs among the members of ``federation`` (or a list of members) with router
    ``router`` (module docstring)."""

    def __init__(
        self,
        federation: FrontFederation | Sequence[FrontMember],
        router: str = "suanli",
        **options: Any,
    ):
        fed = (federation if isinstance(federation, FrontFederation)
               else FrontFederation(tuple(federation)))  # fmt: skip
        if not fed.members:
            raise SpecError("a front needs at least one member")
        self.fed = fed
        self.members = list(fed.members)
        self.by_name = {m.name: m for m in fed.members}
        self.router = create("router", router, **options)

    def asks(self, spec: dict[str, Any]) -> tuple[Asks, dict[str, Any]]:
        """The job's ``federation`` block, checked against the file, and the spec the members
        are sent (without it); ``SpecError`` naming the field at fault."""
        block = spec.get("federation")
        body = {k: v for k, v in spec.items() if k != "federation"}
        if block is None:
            return Asks(), body
        if not isinstance(block, dict):
            raise SpecError(f"the job's federation: a mapping of {', '.join(ASKS_FIELDS)}")
        unknown = unknown_keys(block, set(ASKS_FIELDS))
        if unknown:
            raise SpecError(f"the job's federation: unknown field(s) {unknown}")
        names = {}
        for key in ("regions", "data"):
            v = block.get(key)
            if v is None:
                v = []
            elif isinstance(v, str):
                v = [v]
            if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                raise SpecError(f"the job's federation: {key}: a list of names")
            known = self.by_name if key == "regions" else self.fed.datasets
            strangers = sorted(set(v) - set(known))
            if strangers:
                what = "member" if key == "regions" else "data set"
                raise SpecError(f"the job's federation: {key}: no {what} {', '.join(strangers)} "
                                "in the federation file")  # fmt: skip
            names[key] = v
        home = block.get("home")
        if home is not None and (not isinstance(home, str) or home not in self.by_name):
            raise SpecError(f"the job's federation: home: {home!r} is not a member of the file")
        figures: dict[str, float | None] = {}
        for key, low in (("max_latency_ms", 0.0), ("budget_usd", 0.0)):
            x = block.get(key)
            try:
                figures[key] = None if x is None else finite(x, key, low)
            except SpecError as e:
                raise SpecError(f"the job's federation: {e}") from None
        if figures["max_latency_ms"] is not None:
            if spec.get("priority_class") != "online":
                raise SpecError("the job's federation: max_latency_ms bounds an online job's "
                                "users (priority_class: online)")  # fmt: skip
            if home is None:
                raise SpecError("the job's federation: max_latency_ms needs home, the member "
                                "its users are at")  # fmt: skip
        if figures["budget_usd"] is not None:
            if spec.get("max_runtime") is None:
                raise SpecError("the job's federation: budget_usd needs the job's max_runtime: "
                                "its worst case is priced on it")  # fmt: skip
            finite(spec["max_runtime"], "max_runtime", None)
        asks = Asks(home, frozenset(names["regions"]), tuple(dict.fromkeys(names["data"])),
                    figures["max_latency_ms"], figures["budget_usd"])  # fmt: skip
        return asks, body

    def candidates(
        self,
        spec: dict[str, Any],
        asks: Asks | None = None,
        copies: Copies | None = None,
        skip: str = "",
        down: Mapping[str, str] | None = None,
    ) -> list[Candidate]:
        """Each member as the job at hand finds it, in the federation's order: all asked at
        once, so that a slow or unreachable member costs the front one timeout, not one
        each (``copies``: where each data set the job reads is, as ``survey`` finds it; ``skip``: the
        member a job is being taken back from; ``down``: members found down just now, with
        why, not asked again)."""
        asks = Asks() if asks is None else asks
        if copies is None:
            copies, down = self.survey(asks)
        down = down or {}

        def one(k: int, m: FrontMember) -> Candidate:
            if m.name == skip:
                return Candidate(m.name, k, excluded=TRIED)
            if m.name in down:  # the federation's rules first: they hold, up or down
                why, lat = self._rules(m, asks)
                return Candidate(m.name, k, excluded=why or down[m.name], latency_ms=lat)
            return self._candidate(k, m, spec, asks, copies)

        return self._each(one)

    def survey(self, asks: Asks) -> tuple[Copies, dict[str, str]]:
        """Where each data set ``asks`` reads is, and from when (``Copies``), from the
        file's ``at`` and what each member says it holds (``GET
        /v1/datasets``, asked of all at once where the job reads data; one that refuses, an
        older member, adds nothing), and the members found down on the way, with why."""
        out: Copies = {name: dict.fromkeys(self.fed.copies[name], 0.0) for name in asks.data}
        down: dict[str, str] = {}
        if not asks.data:
            return out, down
        for m, held in zip(self.members, self._each(lambda k, m: self._held(m)), strict=True):
            if isinstance(held, str):
                down[m.name] = held
                continue
            for name, at in held.items():
                if name in out:
                    out[name][m.name] = min(out[name].get(m.name, math.inf), at)
        return out, down

    def _each(self, ask: Callable[[int, FrontMember], _T]) -> list[_T]:
        """``ask`` of every member at once (up to ``MAX_ASKING``), in the file's order."""
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=min(len(self.members), MAX_ASKING)) as pool:
            return list(pool.map(lambda km: ask(*km), enumerate(self.members)))

    def _held(self, m: FrontMember) -> dict[str, float] | str:
        """The copies ``m`` says it holds (0: there now) or is being sent (when due), or why
        it is down."""
        r = self._call(m, "GET", "/v1/datasets")
        if isinstance(r, str):
            return r if r.startswith("down:") else {}
        try:
            rows = list(r.json()["datasets"])
        except (ValueError, TypeError, KeyError, AttributeError):
            return {}  # not the API's answer: the file's copies still count
        out = {}
        for d in rows:  # a row that is not the API's is skipped, alone
            try:
                if d["state"] == "present":
                    out[str(d["name"])] = 0.0
                elif d["state"] == "arriving":
                    out[str(d["name"])] = _epoch(d["arrives_at"])
            except (ValueError, TypeError, KeyError, AttributeError):
                continue
        return out

    def route(self, spec: dict[str, Any]) -> Routed:
        """The router's decision for ``spec`` (a job spec, its tenant named), sending
        nothing."""
        return self._route(*self.asks(spec))

    def _route(
        self,
        asks: Asks,
        body: dict[str, Any],
        skip: str = "",
        surveyed: tuple[Copies, dict[str, str]] | None = None,
    ) -> Routed:
        copies, down = self.survey(asks) if surveyed is None else surveyed
        cands = self.candidates(body, asks, copies, skip, down)
        gpus = _gpus(body)
        req = RouteRequest(str(body.get("name") or "job"), max(1, math.ceil(gpus)),
                           body.get("priority_class") == "online")  # fmt: skip
        r = self.router.route(req, cands)
        moves = () if r.member is None else self._plan(self.by_name[r.member], asks, copies)[1]
        return Routed(r, tuple(cands), moves=tuple(moves))

    def submit(self, spec: dict[str, Any]) -> Routed:
        """Route ``spec`` and submit it to the winner with its decision; ``SpecError`` if no
        member may take it (every member's reason in the message) or the winner refuses.
        Each data set to move there is then recorded at the winner as arriving (``PUT
        /v1/datasets``), so that a later job finds the copy on its way and none is sent
        twice; a member that does not take that record leaves a note, not a lost job."""
        asks, body = self.asks(spec)
        routed = self._route(asks, body)
        if routed.route.member is None:
            raise SpecError(f"no member may take the job: {routed.route.why}")
        return self._send(routed, body, spec.get("federation"))

    def reroute(self, member: str, job_id: str, force: bool = False) -> Rerouted:
        """Route again job ``job_id`` of ``member``, sent there by a front, if it still waits
        there ``REROUTE_AFTER`` times the wait predicted when it was sent (at least
        ``REROUTE_MIN_S``; ``force``: whatever it has waited): among the other members, what
        it asked of the federation and its data's move counted again, it goes to the winner
        if the winner would finish it sooner than staying would (its start as ``member``
        now plans it, then its run there). It is taken back only while it has never started
        (``POST /v1/jobs/{id}/withdraw``), and then sent with ``rerouted_from``: at most
        once, as the simulated federation's rule. A job no front sent, or whose predicted
        wait was unknown, stays. ``SpecError`` where ``member`` cannot say, or where a job
        taken back could not be placed again (its spec is in the message)."""
        if member not in self.by_name:
            raise SpecError(f"no member {member!r} in the federation file")
        m = self.by_name[member]
        path = f"/v1/jobs/{quote(job_id, safe='')}"
        got = self._call(m, "GET", path)
        if isinstance(got, str):
            raise SpecError(f"member {member}: job {job_id}: {got}")
        try:
            job = got.json()["job"]
            stored, state = dict(job["spec"]), str(job["state"])
            waited = time.time() - _epoch(job["submitted_at"])
            est = (job.get("start_estimate") or {}).get("p50")
            start = None if est is None else max(_epoch(est) - time.time(), 0.0)
            note = stored.pop("routing", None) or {}
            if not isinstance(note, dict):
                raise TypeError(f"routing: {note!r}")
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            raise SpecError(f"member {member} answered with something that is not the API's "
                            f"({type(e).__name__}: {e})") from None  # fmt: skip
        if state != "pending":
            return Rerouted(f"it stays: it is {state} at {member}")
        if note.get("asks") is None:
            return Rerouted("it stays: no front of this version sent it there (its routing "
                            "decision does not keep what it asked of the federation)")  # fmt: skip
        if note.get("rerouted_from"):
            return Rerouted(f"it stays: it was re-routed once already (from "
                            f"{note['rerouted_from']})")  # fmt: skip
        if note.get("wait_s") is None:
            return Rerouted("it stays: its wait was not known when it was sent")
        due = max(REROUTE_AFTER * float(note["wait_s"]), REROUTE_MIN_S)
        if waited < due and not force:
            return Rerouted(f"it stays: it has waited {waited / 3600:.2f} h of the "
                            f"{due / 3600:.2f} h after which it may be routed again")  # fmt: skip
        body = {k: v for k, v in stored.items() if v is not None and k != "queue"}
        asks, body = self.asks({**body, "federation": note["asks"]} if note["asks"] else body)
        surveyed = self.survey(asks)  # once: for the decision and for staying
        routed = self._route(asks, body, skip=member, surveyed=surveyed)
        win = winner(routed.route, routed.candidates)
        if win is None:
            return Rerouted(f"it stays: no other member may take it ({routed.route.why})",
                            routed)  # fmt: skip
        # Staying: its start as the member plans it now, then its run there.
        here = self._candidate(self.members.index(m), m, body, asks, surveyed[0])
        if start is None or not here.ok:
            why = "its start there is not known" if start is None else here.excluded
            return Rerouted(f"it stays: {member} cannot say when it would finish it ({why})",
                            routed)  # fmt: skip
        staying = start + here.run_s
        if not win.finish_s < staying:
            return Rerouted(f"it stays: {win.member} would finish it in "
                            f"{win.finish_s / 3600:.2f} h, staying in {staying / 3600:.2f} h",
                            routed)  # fmt: skip
        why = (f"re-routed to {win.member} by the federation front: finishes in "
               f"{win.finish_s / 3600:.2f} h there against {staying / 3600:.2f} h here")  # fmt: skip
        taken = self._call(m, "POST", path + "/withdraw", {"reason": why[:500]})
        if isinstance(taken, str) and not self._withdrawn(m, path, why[:500]):
            return Rerouted(f"it stays: {member} did not give it back: {taken}", routed)
        try:
            sent = self._send(routed, body, note["asks"], rerouted_from=member)
        except Refused as e:
            # Taken back, and refused in so many words: back where it waited, a new job
            # there in its queue, never to be routed again.
            back_body = {**body, "queue": stored.get("queue"),
                         "routing": {**note, "rerouted_from": member}}  # fmt: skip
            back = self._call(m, "POST", "/v1/jobs", back_body)
            if isinstance(back, str):
                raise SpecError(f"{e}; and {member} did not take it back ({back}): submit it "
                                f"again: {json.dumps(back_body)}") from None  # fmt: skip
            raise SpecError(f"{e}; the job was sent back to {member} as job "
                            f"{_id_of(back)}") from None  # fmt: skip
        except SpecError as e:
            # The winner's answer was lost: it may hold the job. Sending it back too could
            # run it twice; nothing more is sent.
            raise SpecError(f"{e}; the job was taken back from {member}, and {win.member} may "
                            f"hold it: look there before sending it again: "
                            f"{json.dumps(body)}") from None  # fmt: skip
        return Rerouted(why, sent)

    def reroute_all(self, member: str, force: bool = False) -> list[tuple[str, Rerouted]]:
        """``reroute`` every job a front sent to ``member`` that is pending there, in
        submission order (for an operator's periodic run); each job's outcome, or its
        ``SpecError`` as a ``Rerouted`` that did not move it."""
        if member not in self.by_name:
            raise SpecError(f"no member {member!r} in the federation file")
        m = self.by_name[member]
        ids: list[str] = []
        after: str | None = None
        while True:
            query = "/v1/jobs?state=pending&limit=1000" + (f"&after={after}" if after else "")
            page = self._call(m, "GET", query)
            if isinstance(page, str):
                raise SpecError(f"member {member}: its pending jobs: {page}")
            try:
                data = page.json()
                ids += [str(j["id"]) for j in data["jobs"]
                        if isinstance((j.get("spec") or {}).get("routing"), dict)]  # fmt: skip
                after = data.get("next")
            except (ValueError, TypeError, KeyError, AttributeError) as e:
                raise SpecError(f"member {member} answered with something that is not the "
                                f"API's ({type(e).__name__}: {e})") from None  # fmt: skip
            if not after:
                break
        out = []
        for job_id in ids:
            try:
                out.append((job_id, self.reroute(member, job_id, force)))
            except SpecError as e:
                out.append((job_id, Rerouted(f"not re-routed: {e}")))
        return out

    def _withdrawn(self, m: FrontMember, path: str, why: str) -> bool:
        """Whether the job at ``path`` is cancelled with ``why`` (a withdrawal whose answer
        was lost may still have been carried out)."""
        again = self._call(m, "GET", path)
        if isinstance(again, str):
            return False
        try:
            job = again.json()["job"]
            return bool(job["state"] == "cancelled" and job["reason"] == why)
        except (ValueError, TypeError, KeyError, AttributeError):
            return False

    def _send(
        self, routed: Routed, body: dict[str, Any], asks: Any, rerouted_from: str | None = None
    ) -> Routed:
        """Submit ``body`` to ``routed``'s winner with the decision (the predicted wait there
        and what the job asked of the federation kept with it), then record each data set to
        move there as arriving. ``Refused`` where the winner refuses it in so many words (a
        4xx), ``SpecError`` where its answer was lost or unreadable (it may hold the job)."""
        r = routed.route
        assert r.member is not None
        member = self.by_name[r.member]
        win = winner(r, routed.candidates)
        assert win is not None
        note: dict[str, Any] = {**r.as_dict(), "asks": asks or {}}
        if math.isfinite(win.start_s):
            note["wait_s"] = win.start_s
        if rerouted_from is not None:
            note["rerouted_from"] = rerouted_from
        answer = self._call(member, "POST", "/v1/jobs", {**body, "routing": note})
        if isinstance(answer, str) and answer.startswith("refused (422)") and "routing." in answer:
            # A member of an older version keeps the decision alone (it cannot be re-routed).
            answer = self._call(member, "POST", "/v1/jobs", {**body, "routing": r.as_dict()})
        if isinstance(answer, str):
            cls = Refused if answer.startswith("refused") else SpecError
            raise cls(f"member {member.name} did not take the job: {answer}")
        try:
            job_id = _id_of(answer)
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            raise SpecError(f"member {member.name} answered the submission with something "
                            f"that is not the API's ({type(e).__name__}: {e})") from None  # fmt: skip
        notes = []
        for mv in routed.moves:
            told = self._call(member, "PUT", f"/v1/datasets/{quote(mv.name, safe='')}", {
                "gb": mv.gb, "state": "arriving", "arrives_in_s": mv.seconds,
                "source": mv.source})  # fmt: skip
            if isinstance(told, str):
                notes.append(f"{member.name} was not told that data set {mv.name} is on its "
                             f"way: {told}")  # fmt: skip
        return Routed(r, routed.candidates, job_id, routed.moves, tuple(notes))

    # ------------------------------------------------------------------ one member
    def _call(
        self, m: FrontMember, method: str, path: str, body: Any = None
    ) -> httpx.Response | str:
        """The member's answer, or why there is none (a text: ``down: ...`` where it could
        not be reached or failed, else its refusal in its own words)."""
        try:
            r = httpx.request(method, m.url + path, json=body, timeout=TIMEOUT_S,
                              headers={"Authorization": f"Bearer {m.token}"})  # fmt: skip
        except httpx.HTTPError as e:
            return f"down: {type(e).__name__}: {e}"
        if r.status_code >= 500:
            return f"down: it answered {r.status_code}: {_error(r)}"
        if r.status_code >= 400:
            return f"refused ({r.status_code}): {_error(r)}"
        return r

    def _candidate(
        self, order: int, m: FrontMember, spec: dict[str, Any], asks: Asks, copies: Copies
    ) -> Candidate:
        try:
            return self._ask(order, m, spec, asks, copies)
        except (ValueError, TypeError, KeyError, AttributeError, ArithmeticError) as e:
            # Not the API's answer (odd JSON, a figure out of range): this member alone is out.
            return Candidate(m.name, order, excluded=(
                f"down: its answer is not the API's ({type(e).__name__}: {e})"))  # fmt: skip

    def _rules(self, m: FrontMember, asks: Asks) -> tuple[str, float]:
        """Why the federation's rules exclude ``m`` before it is asked ("" if they do not),
        and the round trip from the job's users to it (ms)."""
        why = not_allowed(asks.regions, m.name) or residency(self.fed.datasets, asks.data, m)
        if asks.home is None:
            return why, 0.0
        home = self.by_name[asks.home]
        lat = self.fed.network.latency_ms(home, m)
        if why or asks.max_latency_ms is None:  # only an online job has a bound (``asks``)
            return why, lat
        if m is not home and (m.site is None or home.site is None):
            unsited = m.name if m.site is None else home.name
            return (f"the federation file gives no site for {unsited}: the round trip from "
                    "the job's users cannot be checked", lat)  # fmt: skip
        return too_far(lat, asks.max_latency_ms), lat

    def _plan(self, m: FrontMember, asks: Asks, copies: Copies) -> tuple[float, list[DataMove]]:
        """When the data the job reads would be at ``m`` (seconds from now) and what must
        move there for it. A copy there, or on its way there, is used (from when it is due);
        the rest is moved from the copy there cheapest to move from (ties: the one that
        arrives first), as the simulated federation does. The moves run together."""
        net, now = self.fed.network, time.time()
        ready = 0.0
        moves: list[DataMove] = []
        for name in asks.data:
            at = copies[name]
            if m.name in at:
                ready = max(ready, at[m.name] - now)
                continue
            size = self.fed.datasets[name].size_gb
            ways = []
            for x, due in at.items():
                if due > now:
                    continue  # no copy there yet, as the simulated federation holds
                egress, link = net.transfer_usd(size, self.by_name[x], m)
                ways.append((egress + link, net.transfer_s(size, self.by_name[x], m), x))
            if not ways:  # only copies on their way: from the first due, once it is there
                x = min(at, key=lambda k: (at[k], k))
                egress, link = net.transfer_usd(size, self.by_name[x], m)
                ways.append((egress + link,
                             at[x] - now + net.transfer_s(size, self.by_name[x], m), x))  # fmt: skip
            usd, secs, source = min(ways)
            moves.append(DataMove(name, source, m.name, size, secs, usd))
            ready = max(ready, secs)
        return ready, moves

    def _ask(
        self, order: int, m: FrontMember, spec: dict[str, Any], asks: Asks, copies: Copies
    ) -> Candidate:
        why, lat = self._rules(m, asks)
        if why:
            return Candidate(m.name, order, excluded=why, latency_ms=lat)
        nodes = self._call(m, "GET", "/v1/nodes")
        if isinstance(nodes, str):
            return Candidate(m.name, order, excluded=nodes, latency_ms=lat)
        listed = spec.get("gpu_models")
        accepts = set(listed) if isinstance(listed, list) else set()  # else: the member judges
        gpus_by_model: dict[str, int] = {}
        in_service = used_milli = 0
        for n in nodes.json().get("nodes", []):
            if n.get("state", "up") != "up":
                continue
            count = _count(n.get("gpu_count", 0), "gpu_count")
            in_service += count
            used_milli += sum(
                _count(g.get("used_milli", 0), "used_milli") for g in n.get("gpus", [])
            )
            model = n.get("gpu_model")
            if model and (not accepts or model in accepts):
                gpus_by_model[model] = gpus_by_model.get(model, 0) + count
        unpriced = sorted(x for x in gpus_by_model if x not in m.prices)
        if unpriced:
            return Candidate(m.name, order, latency_ms=lat, excluded=(
                f"the federation file gives no price for its {', '.join(unpriced)}"))  # fmt: skip
        total = sum(gpus_by_model.values())
        if not total:
            return Candidate(m.name, order, latency_ms=lat,
                             excluded="it has no GPU of a model the job accepts")  # fmt: skip
        move_s, moves = self._plan(m, asks, copies)
        gb, move_usd = sum(x.gb for x in moves), sum(x.usd for x in moves)
        if asks.budget_usd is not None:
            # The member stops the job at max_runtime: its bill can never pass that.
            dearest = max(m.prices[x] for x in gpus_by_model)
            worst = _gpus(spec, most=True) * dearest * float(spec["max_runtime"]) / 3600.0
            worst += move_usd
            why = over_budget(worst, asks.budget_usd)
            if why:
                return Candidate(m.name, order, excluded=why, latency_ms=lat)
        asked = self._call(m, "POST", "/v1/what-if", spec)
        if isinstance(asked, str):
            return Candidate(m.name, order, excluded=asked, latency_ms=lat)
        got = asked.json()
        if not isinstance(got["room_now"], bool):
            raise ValueError(f"room_now: {got['room_now']!r} is not true or false")
        load = float(got["load"])
        if not (math.isfinite(load) and load >= 0):
            raise ValueError(f"load: {got['load']!r} is not a finite figure >= 0")
        price = sum(m.prices[x] * n for x, n in gpus_by_model.items()) / total
        speed = sum(m.speeds.get(x, 1.0) * n for x, n in gpus_by_model.items()) / total
        units = sum(_units(x) * n for x, n in gpus_by_model.items()) / total
        p50 = got["start_estimate"]["p50"]
        start = math.inf if p50 is None else max(
            _epoch(p50) - time.time(), 0.0)  # fmt: skip
        hour = _gpus(spec) * price
        paid = hour
        if spec.get("priority_class") == "spot":  # the federation's rule, at its use now
            paid = hour * spot_multiplier(used_milli / 1000 / in_service if in_service else 0.0)
        run = float(spec.get("estimate") or spec.get("max_runtime") or DEFAULT_RUN_S) / speed
        return Candidate(
            m.name, order, admits_now=got["room_now"] and move_s <= 0, load=load,
            start_s=max(start, move_s), run_s=run, price_hour=paid, list_price_hour=hour,
            unit_price=price / units if units > 0 and all(map(_units, gpus_by_model)) else 0.0,
            move_gb=gb, move_s=move_s, move_cost=move_usd, latency_ms=lat,
        )  # fmt: skip


def _units(model: str) -> float:
    """Common units an hour of ``model`` gives (0 for a model without a published figure:
    its price per unit is then not given)."""
    try:
        return units_per_gpu_hour(model)
    except SpecError:
        return 0.0


def _gpus(spec: dict[str, Any], most: bool = False) -> float:
    """The GPUs a job holds: per task times tasks (``most``: an elastic job's at its
    ``max_workers``, the most it may grow to); 0 for figures that are not numbers (the
    members judge the spec, and refuse it)."""
    try:
        tasks = int(spec.get("tasks") or 1)
        if most:
            tasks = max(tasks, int(spec.get("max_workers") or 0))
        gpus = float(spec.get("gpus") or 0) * tasks
    except (TypeError, ValueError, OverflowError):
        return 0.0
    return gpus if math.isfinite(gpus) and gpus >= 0 else 0.0


def _id_of(r: httpx.Response) -> str:
    """The job id a member's answer to a submission gives."""
    return str(r.json()["id"])


def _epoch(iso: Any) -> float:
    """An API time (ISO 8601) as epoch seconds; one without a zone is UTC, as the API's are."""
    t = datetime.fromisoformat(str(iso))
    return (t if t.tzinfo is not None else t.replace(tzinfo=UTC)).timestamp()


def _count(x: Any, what: str) -> int:
    """A member's count (GPUs, thousandths of one): an integer >= 0, else ``ValueError``."""
    if not isinstance(x, int) or isinstance(x, bool) or x < 0:
        raise ValueError(f"{what}: {x!r} is not a count")
    return x


def _error(r: httpx.Response) -> str:
    try:
        return str(r.json().get("error") or r.reason_phrase)[:500]
    except ValueError:
        return r.reason_phrase

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

Each member is one ``Candidate``: its predicted start is the what-if's P50 from now, its run
the job's own estimate (``estimate``, else ``max_runtime``, else ``DEFAULT_RUN_S``) over its
speed there, its hour the job's GPUs at that price. The router picks; ``POST /v1/jobs`` sends
the job to the winner with ``routing`` (an admin token: only a front attaches one).

Not here (item 6 of a live member): the data sets a member holds copies of, so no move is
priced, and no residency or latency rule applies; a member answers for itself only.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from suanli.core.model import SpecError
from suanli.core.registry import create
from suanli.core.routing import Candidate, Route, RouteRequest
from suanli.federation.units import units_per_gpu_hour

__all__ = ["DEFAULT_RUN_S", "Front", "FrontMember", "Routed", "load_members"]

DEFAULT_RUN_S = 3600.0
"""A job's run where it gives neither ``estimate`` nor ``max_runtime``."""
TIMEOUT_S = 15.0
"""How long a member has to answer one request (its what-if waits up to 10 s for a pass)."""
MAX_ASKING = 16
"""The most members asked at once."""


@dataclass(frozen=True)
class FrontMember:
    """One member as the front reaches it (module docstring)."""

    name: str
    url: str
    token: str
    prices: dict[str, float]
    speeds: dict[str, float] = field(default_factory=dict)


def load_members(path: Path) -> list[FrontMember]:
    """The members of a federation file; ``SpecError`` naming the file and the member at
    fault."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text())
    except OSError as e:
        raise SpecError(f"{path}: cannot read it: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise SpecError(f"{path}: not valid YAML: {e}") from None
    rows = data.get("members") if isinstance(data, dict) else None
    if not isinstance(rows, list) or not rows:
        raise SpecError(f"{path}: needs 'members:', a list of at least one member")
    out: list[FrontMember] = []
    for k, row in enumerate(rows):
        where = f"{path}: member {k + 1}"
        if not isinstance(row, dict):
            raise SpecError(f"{where}: a mapping of name, url, token or token_file, prices")
        unknown = sorted(set(row) - {"name", "url", "token", "token_file", "prices", "speeds"})
        if unknown:
            raise SpecError(f"{where}: unknown field(s) {', '.join(unknown)}")
        name, url = row.get("name"), row.get("url")
        if not isinstance(name, str) or not name or any(m.name == name for m in out):
            raise SpecError(f"{where}: 'name' must be a text, unique in the file")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise SpecError(f"{where} ({name}): 'url' must be an http:// or https:// URL")
        token = row.get("token")
        if token is None and isinstance(row.get("token_file"), str):
            try:
                token = Path(row["token_file"]).expanduser().read_text().strip()
            except OSError as e:
                raise SpecError(f"{where} ({name}): token_file: {e.strerror}") from None
        if not isinstance(token, str) or not token:
            raise SpecError(f"{where} ({name}): give 'token' or 'token_file' (an admin token)")
        prices = _figures(row.get("prices"), f"{where} ({name}): prices", 0.0)
        speeds = _figures(row.get("speeds") or {}, f"{where} ({name}): speeds", None)
        out.append(FrontMember(name, url.rstrip("/"), token, prices, speeds))
    return out


def _figures(value: Any, where: str, low: float | None) -> dict[str, float]:
    """A mapping of GPU model to a finite number, >= ``low`` (None: > 0)."""
    if not isinstance(value, dict) or (not value and low is not None):
        raise SpecError(f"{where}: a mapping of GPU model to a number")
    out = {}
    for model, x in value.items():
        ok = isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
        if not ok or (x < low if low is not None else x <= 0):
            bound = f">= {low:g}" if low is not None else "> 0"
            raise SpecError(f"{where}: {model}: must be a finite number {bound}, got {x!r}")
        out[str(model)] = float(x)
    return out


@dataclass(frozen=True)
class Routed:
    """A front's decision for one job, and where it went (``job_id`` None: not sent)."""

    route: Route
    candidates: tuple[Candidate, ...]
    job_id: str | None = None


class Front:
    """Routes jobs among ``members`` with router ``router`` (module docstring)."""

    def __init__(self, members: Sequence[FrontMember], router: str = "suanli", **options: Any):
        if not members:
            raise SpecError("a front needs at least one member")
        self.members = list(members)
        self.router = create("router", router, **options)

    def candidates(self, spec: dict[str, Any]) -> list[Candidate]:
        """Each member as the job at hand finds it, in the federation's order: all asked at
        once, so that a slow or unreachable member costs the front one timeout, not one
        each."""
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=min(len(self.members), MAX_ASKING)) as pool:
            return list(pool.map(lambda km: self._candidate(km[0], km[1], spec),
                                 enumerate(self.members)))  # fmt: skip

    def route(self, spec: dict[str, Any]) -> Routed:
        """The router's decision for ``spec`` (a job spec, its tenant named), sending
        nothing."""
        cands = self.candidates(spec)
        gpus = _gpus(spec)
        req = RouteRequest(str(spec.get("name") or "job"), max(1, math.ceil(gpus)),
                           spec.get("priority_class") == "online")  # fmt: skip
        return Routed(self.router.route(req, cands), tuple(cands))

    def submit(self, spec: dict[str, Any]) -> Routed:
        """Route ``spec`` and submit it to the winner with its decision; ``SpecError`` if no
        member may take it (every member's reason in the message) or the winner refuses."""
        routed = self.route(spec)
        r = routed.route
        if r.member is None:
            raise SpecError(f"no member may take the job: {r.why}")
        member = next(m for m in self.members if m.name == r.member)
        answer = self._call(member, "POST", "/v1/jobs", {**spec, "routing": r.as_dict()})
        if isinstance(answer, str):
            raise SpecError(f"member {member.name} did not take the job: {answer}")
        try:
            job_id = str(answer.json()["id"])
        except (ValueError, TypeError, KeyError) as e:
            raise SpecError(f"member {member.name} answered the submission with something "
                            f"that is not the API's ({type(e).__name__}: {e})") from None  # fmt: skip
        return Routed(r, routed.candidates, job_id)

    # ------------------------------------------------------------------ one member
    def _call(self, m: FrontMember, method: str, path: str, body: Any = None) -> httpx.Response | str:
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

    def _candidate(self, order: int, m: FrontMember, spec: dict[str, Any]) -> Candidate:
        try:
            return self._ask(order, m, spec)
        except (ValueError, TypeError, KeyError, AttributeError) as e:  # not the API's JSON
            return Candidate(m.name, order, excluded=(
                f"down: its answer is not the API's ({type(e).__name__}: {e})"))  # fmt: skip

    def _ask(self, order: int, m: FrontMember, spec: dict[str, Any]) -> Candidate:
        nodes = self._call(m, "GET", "/v1/nodes")
        if isinstance(nodes, str):
            return Candidate(m.name, order, excluded=nodes)
        listed = spec.get("gpu_models")
        accepts = set(listed) if isinstance(listed, list) else set()  # else: the member judges
        gpus_by_model: dict[str, int] = {}
        for n in nodes.json().get("nodes", []):
            model = n.get("gpu_model")
            if model and n.get("state", "up") == "up" and (not accepts or model in accepts):
                gpus_by_model[model] = gpus_by_model.get(model, 0) + int(n.get("gpu_count", 0))
        unpriced = sorted(x for x in gpus_by_model if x not in m.prices)
        if unpriced:
            return Candidate(m.name, order, excluded=(
                f"the federation file gives no price for its {', '.join(unpriced)}"))  # fmt: skip
        asked = self._call(m, "POST", "/v1/what-if", spec)
        if isinstance(asked, str):
            return Candidate(m.name, order, excluded=asked)
        got = asked.json()
        total = sum(gpus_by_model.values())
        if not total:
            return Candidate(m.name, order, excluded="it has no GPU of a model the job accepts")
        price = sum(m.prices[x] * n for x, n in gpus_by_model.items()) / total
        speed = sum(m.speeds.get(x, 1.0) * n for x, n in gpus_by_model.items()) / total
        units = sum(_units(x) * n for x, n in gpus_by_model.items()) / total
        p50 = got["start_estimate"]["p50"]
        start = math.inf if p50 is None else max(
            datetime.fromisoformat(p50).timestamp() - time.time(), 0.0)  # fmt: skip
        hour = _gpus(spec) * price
        run = float(spec.get("estimate") or spec.get("max_runtime") or DEFAULT_RUN_S) / speed
        return Candidate(
            m.name, order, admits_now=bool(got["room_now"]), load=float(got["load"]),
            start_s=start, run_s=run, price_hour=hour, list_price_hour=hour,
            unit_price=price / units if units > 0 and all(map(_units, gpus_by_model)) else 0.0,
        )  # fmt: skip


def _units(model: str) -> float:
    """Common units an hour of ``model`` gives (0 for a model without a published figure:
    its price per unit is then not given)."""
    try:
        return units_per_gpu_hour(model)
    except SpecError:
        return 0.0


def _gpus(spec: dict[str, Any]) -> float:
    """The GPUs a job holds: per task times tasks (0 for figures that are not numbers: the
    members judge the spec, and refuse it)."""
    try:
        gpus = float(spec.get("gpus") or 0) * int(spec.get("tasks") or 1)
    except (TypeError, ValueError, OverflowError):
        return 0.0
    return gpus if math.isfinite(gpus) and gpus >= 0 else 0.0


def _error(r: httpx.Response) -> str:
    try:
        return str(r.json().get("error") or r.reason_phrase)[:500]
    except ValueError:
        return r.reason_phrase

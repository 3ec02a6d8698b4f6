"""A hostile tenant against ``suanli serve``: the real server on a loopback port, real processes,
on SQLite and on PostgreSQL.

The server runs as ``tests/serving.py`` starts it (two declared GPUs), with a quota
file of two queues, ``vision`` (organisation ``vision``) and ``nlp`` (``nlp``), so that queue
ownership applies, and ``preempt=True, min_runtime=0``. The hostile tenant is ``ana``, a
plain ``user`` of tenant ``vision``; ``tests/hostile_cases.py`` holds the corpus: more than 20
inputs for each write route (``POST /v1/jobs``, ``POST /v1/jobs/{id}/cancel``, ``POST
/v1/tokens``, ``DELETE /v1/tokens/{id}``), and every job body again as ``POST /v1/what-if``
(the same refusal; nothing stored), each with the answer it must get.

For every input: never a 5xx (nor a hang: every request has a 10 s timeout) and nothing in
the server's log at ERROR; the documented status, in the one error shape ``{"error": str,
"fields": [...]}``, a 422 naming the field at fault; nothing stored or changed beyond what the
case allows (the job list, the token list, the watched jobs' cancel flags); and afterwards a
normal job (``print('ok')``, no GPU or half of one) still starts and finishes, and
``/healthz`` is well. Each database's run ends with one summary line (``-s`` shows it).

Then schemathesis over every operation of the server's own OpenAPI document, fetched from
the running server (``schemathesis.openapi.from_url``), valid and invalid inputs, with a plain
user's token: no 5xx, and the server is still healthy and runs a normal job. The document
has no OpenAPI links (no operation's response names the parameters of another), so there is
no stateful run (``schema.as_state_machine()`` would have no transitions to follow); the
corpus above covers the sequences that matter (cancel twice, revoke then use, ...).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis

import hostile_cases as hc
from fuzzing import describe, fuzz, operations, request_of
from pg import BACKENDS, fresh_schema, postgres_server  # noqa: F401  (postgres_server: a fixture)
from serving import start
from tasks import ROOT, TASK_PY, open_dir

DEADLINE_S = 30.0
TIMEOUT_S = 10.0
FUZZ_EXAMPLES = 25
"""Examples per operation and mode against the real server (about 700 inputs, 10 s, per database)."""
QUOTAS = """\
queues:
  - {name: vision, org: vision, nominal: {gpu: 2}}
  - {name: nlp, org: nlp, nominal: {gpu: 2}}
"""
SLEEPER = {"command": ["sleep", "600"], "cpu": 0.01, "memory": "16M", "grace": 1}


class ServerLog(logging.Handler):
    """What the server logs at ERROR and above (uvicorn's "Exception in ASGI application"
    with its traceback, the loop's failures), in order."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = f"{record.name}: {record.getMessage()}"
        if record.exc_info:
            text += "\n" + "".join(traceback.format_exception(*record.exc_info))
        self.records.append(text)


@dataclass
class Tally:
    inputs: dict[str, int] = field(default_factory=lambda: {r: 0 for r in hc.ROUTES})
    server_errors: list[str] = field(default_factory=list)
    known_errors: list[str] = field(default_factory=list)
    normal_jobs: int = 0
    fuzzed: int = 0
    fuzz_errors: int = 0
    fuzz_statuses: dict[int, int] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)


@dataclass
class WireResponse:
    status_code: int
    text: str

    def json(self) -> Any:
        return json.loads(self.text)


@dataclass
class Hostile:
    """The running server, the world the cases refer to, and the run's tally."""

    db: str
    url: str
    running: Any
    world: hc.World
    server_log: ServerLog
    tally: Tally
    clients: dict[str, httpx.Client] = field(default_factory=dict)
    last_seq: int = 0
    """The newest job seen (``snapshot`` lists the jobs after it)."""

    def client(self, token: str | None) -> httpx.Client:
        key = token or ""
        if key not in self.clients:
            headers = {}
            if token == "bogus":
                headers["Authorization"] = "Bearer sl_" + "A" * 43
            elif token is not None:
                headers["Authorization"] = f"Bearer {self.world.tokens[token]}"
            self.clients[key] = httpx.Client(base_url=self.url, headers=headers, timeout=TIMEOUT_S)
        return self.clients[key]

    def call(
        self,
        method: str,
        path: str,
        *,
        token: str | None = "admin",
        content: Any = None,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        try:
            r = self.client(token).request(method, path, content=content, headers=headers)
        except httpx.TimeoutException as e:
            raise AssertionError(f"the server hung: {method} {path[:200]}: {e!r}") from None
        if r.status_code >= 500:
            self.tally.server_errors.append(
                f"{method} {path[:200]}: {r.status_code} {r.text[:300]}"
            )
        return r

    def send_wire(self, raw: bytes, token: str | None) -> WireResponse:
        """``raw`` on a socket of its own; the answer's status line and body."""
        secret = self.world.tokens[token].encode() if token else b""
        host, port = self.url.removeprefix("http://").split(":")
        data = b""
        with socket.create_connection((host, int(port)), timeout=TIMEOUT_S) as sock:
            sock.sendall(raw.replace(b"{token}", secret))
            try:
                while chunk := sock.recv(65536):
                    data += chunk
            except TimeoutError:
                raise AssertionError(f"the server hung on {raw[:200]!r}") from None
        head, _, body = data.partition(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        if status >= 500:
            self.tally.server_errors.append(f"{raw[:200]!r}: {status} {body[:300]!r}")
        return WireResponse(status, body.decode("utf-8", "replace"))

    def get(self, path: str, token: str = "admin") -> Any:
        r = self.call("GET", path, token=token)
        assert r.status_code == 200, f"GET {path}: {r.status_code} {r.text[:500]}"
        return r.json()

    def submit(self, token: str, spec: dict[str, Any]) -> str:
        r = self.call("POST", "/v1/jobs", token=token, content=hc.encode(spec), headers=hc.JSON)
        assert r.status_code == 201, r.text
        return str(r.json()["id"])

    def wait(self, job_id: str, *states: str) -> dict[str, Any]:
        deadline = time.monotonic() + DEADLINE_S
        while True:
            job = self.get(f"/v1/jobs/{job_id}")["job"]
            if job["state"] in states:
                return dict(job)
            assert time.monotonic() < deadline, f"job {job_id} stuck in {job['state']}: {job}"
            time.sleep(0.02)

    def log(self, job_id: str) -> str:
        """Task 0's stdout of the job's latest attempt."""
        r = self.call("GET", f"/v1/jobs/{job_id}/logs")
        assert r.status_code == 200, r.text
        return r.text

    def start_normal_job(self, patient: bool = False) -> str:
        """Submit a normal job of tenant vision (``probe``'s: no GPU or half of one)."""
        gpus = 0.5 if self.tally.normal_jobs % 2 else 0
        spec = {
            "command": [TASK_PY, "-c", "print('ok')"],
            "gpus": gpus,
            "cpu": 0.1,
            "memory": "64M",
        }
        deadline = time.monotonic() + DEADLINE_S
        while True:
            r = self.call(
                "POST", "/v1/jobs", token="probe", content=hc.encode(spec), headers=hc.JSON
            )
            if r.status_code == 429 and patient and time.monotonic() < deadline:
                time.sleep(float(r.headers.get("Retry-After", "1")))
                continue
            break
        assert r.status_code == 201, f"a normal job was refused: {r.status_code} {r.text}"
        return str(r.json()["id"])

    def finish_normal_job(self, job_id: str) -> None:
        """The normal job started and finished, with its output; the server is healthy."""
        done = self.wait(job_id, "succeeded", "failed", "cancelled", "lost")
        assert done["state"] == "succeeded", f"a normal job did not succeed: {done}"
        assert self.log(job_id) == "ok\n"
        assert self.call("GET", "/healthz", token=None).json() == {"status": "ok"}
        self.tally.normal_jobs += 1

    def normal_job(self, patient: bool = False) -> None:
        self.finish_normal_job(self.start_normal_job(patient))

    def snapshot(self) -> dict[str, Any]:
        """The jobs stored since ``mark_jobs``, every token, the watched jobs' cancel flags,
        the copies of data sets held."""
        jobs = [
            j
            for j in self.get(f"/v1/jobs?limit=1000&after={self.last_seq}")["jobs"]
            if j["user"] != "probe"
        ]
        tokens = {t["id"]: t for t in self.get("/v1/tokens")["tokens"]}
        watched = {
            k: self.get(f"/v1/jobs/{v}")["job"]["cancel_requested"]
            for k, v in self.world.jobs.items()
        }
        datasets = {d["name"]: d for d in self.get("/v1/datasets")["datasets"]}
        return {"new_jobs": jobs, "tokens": tokens, "watched": watched, "datasets": datasets}

    def mark_jobs(self) -> None:
        """Remember the newest job (ids are the submission numbers)."""
        while page := self.get(f"/v1/jobs?limit=1000&after={self.last_seq}")["jobs"]:
            self.last_seq = int(page[-1]["id"])


def _ids(world: hc.World) -> dict[str, str]:
    names = dict(world.jobs)
    names.update({f"id_{holder}": str(i) for holder, i in world.token_ids.items()})
    return names


@pytest.fixture(scope="module", params=BACKENDS)
def hostile(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Hostile]:
    tmp = tmp_path_factory.mktemp(f"hostile-{request.param}")
    quotas = tmp / "quotas.yaml"
    quotas.write_text(QUOTAS)
    with open_dir("suanli-hostile-") as opened:
        if request.param == "sqlite":
            yield from _serve(request.param, tmp, str(tmp / "suanli.db"), quotas, opened)
        else:
            with fresh_schema(request.getfixturevalue("postgres_server")) as url:
                yield from _serve(request.param, tmp, url, quotas, opened)


def _serve(db: str, tmp: Path, where: str, quotas: Path, opened: Path) -> Iterator[Hostile]:
    state = tmp / "state"
    running = start(state, where, quotas=quotas, preempt=True, min_runtime=0)
    log = ServerLog()
    # uvicorn's error logger does not propagate to the root logger; the loop's loggers do.
    watched = [logging.getLogger(), logging.getLogger("uvicorn.error")]
    for logger in watched:
        logger.addHandler(log)
    dirs = {"open": str(opened), "link": str(opened / "to-state"), "file": str(opened / "a-file")}
    (opened / "to-state").symlink_to(state)
    (opened / "a-file").write_text("")
    if ROOT:
        locked = opened / "locked"
        locked.mkdir(mode=0o700)
        os.chmod(locked, 0o700)
        (locked / "inner").mkdir()
        os.chmod(locked / "inner", 0o777)
        dirs.update(locked=str(locked), behind_locked=str(locked / "inner"))
    world = hc.World(state, {"admin": running.admin}, {}, {}, dirs, TASK_PY)
    h = Hostile(db, running.url, running, world, log, Tally())
    try:
        world.token_ids["admin"] = h.get("/v1/whoami")["token_id"]
        for holder, role, tenant in (
            ("ana", "user", "vision"), ("bo", "user", "vision"), ("vlead", "tenant-admin", "vision"),
            ("nina", "user", "nlp"), ("probe", "user", "vision"), ("selfish", "user", "vision"),
            ("doomed", "user", "vision"), ("fuzz", "user", "nlp"),
        ):  # fmt: skip
            body = {"name": holder, "role": role, "tenant": tenant, "user": holder}
            r = h.call("POST", "/v1/tokens", content=hc.encode(body), headers=hc.JSON)
            assert r.status_code == 201, r.text
            world.tokens[holder] = r.json()["token"]
            world.token_ids[holder] = r.json()["id"]
        for key, holder in (("nlp_sleeper", "nina"), ("bo_sleeper", "bo"), ("ana_sleeper", "ana")):
            world.jobs[key] = h.submit(holder, SLEEPER)
        world.jobs["ana_done"] = h.submit(
            "ana", {"command": ["true"], "cpu": 0.01, "memory": "16M"}
        )
        h.wait(world.jobs["ana_done"], "succeeded")
        for key in ("nlp_sleeper", "bo_sleeper", "ana_sleeper"):
            h.wait(world.jobs[key], "running")
        h.mark_jobs()
        yield h
    finally:
        try:
            for job in h.get("/v1/jobs?limit=1000&state=pending,admitted,running")["jobs"]:
                h.call("POST", f"/v1/jobs/{job['id']}/cancel")
            deadline = time.monotonic() + DEADLINE_S
            while h.get("/v1/jobs?limit=1000&state=pending,admitted,running")["jobs"]:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.05)
        finally:
            for c in h.clients.values():
                c.close()
            for logger in watched:
                logger.removeHandler(log)
            running.stop()


def _params() -> list[Any]:
    out = []
    for case in hc.CASES:
        marks: list[Any] = []
        if case.defect:
            marks.append(pytest.mark.xfail(strict=True, reason=case.defect))
        if case.root_only:
            marks.append(
                pytest.mark.skipif(not ROOT, reason="a root-owned 0700 directory needs root")
            )
        out.append(pytest.param(case, id=case.id, marks=marks))
    return out


def _request(h: Hostile, case: hc.Case) -> tuple[str, str, Any, dict[str, str]]:
    method = case.method or case.route.split()[0]
    if callable(case.path):
        path = case.path(h.world)
    elif case.path:
        path = case.path.format(**_ids(h.world))
    else:
        path = case.route.split()[1]
    headers = dict(case.headers)
    content: Any = None
    if case.raw is not None:
        content = case.raw() if callable(case.raw) else case.raw  # a function: chunks
    elif case.body is not None:
        body = case.body(h.world) if callable(case.body) else case.body
        content = hc.encode(body)
        headers.setdefault("Content-Type", "application/json")
    return method, path, content, headers


def _check_error_shape(r: Any) -> dict[str, Any]:
    body = r.json()
    assert isinstance(body, dict) and set(body) == {"error", "fields"}, body
    assert isinstance(body["error"], str) and body["error"] and "\n" not in body["error"], body
    assert isinstance(body["fields"], list), body
    for f in body["fields"]:
        assert set(f) == {"field", "problem"} and all(isinstance(v, str) for v in f.values()), f
    return dict(body)


def _check_effect(h: Hostile, case: hc.Case, before: dict[str, Any], after: dict[str, Any]) -> None:
    effect = case.effect or ""
    new_jobs = after["new_jobs"]
    if effect == "job":
        assert len(new_jobs) == 1, new_jobs
        assert (new_jobs[0]["tenant"], new_jobs[0]["user"]) == ("vision", case.token), new_jobs[0]
    else:
        assert new_jobs == [], f"stored for a refused input: {new_jobs}"
    old, new = before["tokens"], after["tokens"]
    added = sorted(set(new) - set(old))
    if effect == "token":
        assert len(added) == 1, added
    else:
        assert added == [], f"a token was made: {[new[i] for i in added]}"
    revoked = sorted(
        i for i in old if old[i]["revoked_at"] is None and new[i]["revoked_at"] is not None
    )
    if effect.startswith("revoke:"):
        assert revoked == [h.world.token_ids[effect.split(":", 1)[1]]], revoked
    else:
        assert revoked == [], f"tokens revoked: {revoked}"
    changed = sorted(k for k in {**before["datasets"], **after["datasets"]}
                     if before["datasets"].get(k) != after["datasets"].get(k))  # fmt: skip
    if effect.startswith("dataset:"):
        assert changed == [effect.split(":", 1)[1]], changed
    else:
        assert changed == [], f"data set copies changed: {changed}"
    for key, was in before["watched"].items():
        now = after["watched"][key]
        if effect == f"cancel:{key}" and key != "ana_done":
            assert now is True, key
        else:
            assert now == was, f"job {key}: cancel_requested {was} -> {now}"


@pytest.mark.parametrize("case", _params())
def test_a_hostile_input(hostile: Hostile, case: hc.Case) -> None:
    h = hostile
    h.mark_jobs()
    seen = len(h.server_log.records)
    before = h.snapshot()
    method, path, content, headers = _request(h, case)
    h.tally.inputs[case.route] += 1
    errors = len(h.tally.server_errors)
    failure: AssertionError | None = None
    r: Any = None
    try:
        if case.wire is not None:
            r = h.send_wire(case.wire, case.token)
        else:
            r = h.call(method, path, token=case.token, content=content, headers=headers)
    except AssertionError as e:  # it hung
        failure = e
    # Whatever the answer, the tenant's work goes on: a normal job starts and finishes
    # (submitted now; the answer is judged while it runs).
    try:
        normal = h.start_normal_job()
    except AssertionError as e:
        raise AssertionError(f"after {case.id}: {e}") from failure
    if failure is None:
        try:
            _judge(h, case, r, errors, before, seen, method, path)
        except AssertionError as e:
            failure = e
    try:
        h.finish_normal_job(normal)
    except AssertionError as e:
        raise AssertionError(f"after {case.id}: {e}") from failure
    if failure is not None:
        raise failure
    logged = h.server_log.records[seen:]  # what uvicorn logs after it has answered
    assert not logged, "the server logged errors:\n" + "\n".join(logged)


def _judge(
    h: Hostile,
    case: hc.Case,
    r: Any,
    errors: int,
    before: dict[str, Any],
    seen: int,
    method: str,
    path: str,
) -> None:
    if len(h.tally.server_errors) > errors and case.defect:
        h.tally.known_errors.append(h.tally.server_errors[-1])
    logged = h.server_log.records[seen:]
    assert r.status_code < 500, (
        f"server error: {method} {path[:200]} -> {r.status_code} {r.text[:500]}\n"
        + "\n".join(logged)
    )
    assert not logged, "the server logged errors:\n" + "\n".join(logged)
    assert r.status_code == case.status, (
        f"{method} {path[:200]}: expected {case.status}, got {r.status_code}: {r.text[:500]}"
    )
    if r.status_code >= 400 and case.wire is not None and not r.text.startswith("{"):
        text = r.text  # answered by the protocol layer, before the app
    elif r.status_code >= 400:
        body = _check_error_shape(r)
        text = body["error"]
        if r.status_code == 422:
            assert case.field != "-", body
            fields = [f["field"] for f in body["fields"]]
            if case.field is None:
                assert fields == [], body
            else:
                assert case.field in fields, f"expected field {case.field!r}: {body}"
    else:
        text = r.text
    for word in case.says:
        assert word in text, f"{word!r} not in {text!r}"
    for word in case.never_says:
        assert word not in text, f"{word!r} in {text!r}"
    _check_effect(h, case, before, h.snapshot())
    if case.then is not None:
        case.then(h, r)


def test_schemathesis_against_the_running_server(hostile: Hostile) -> None:
    """Every operation, valid and invalid inputs, with nlp's plain user token (its own tenant,
    so that its submissions do not count against vision's fair use)."""
    h = hostile
    url = h.url
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
    ops = operations(schema)
    auth = {"Authorization": f"Bearer {h.world.tokens['fuzz']}"}
    errors: list[str] = []
    client = httpx.Client(base_url=url, timeout=TIMEOUT_S)
    seen_log = len(h.server_log.records)

    def send(case: Any) -> None:
        try:
            response = client.request(**request_of(case, url, auth))
        except httpx.TimeoutException as e:
            errors.append(f"hang: {case.method} {case.formatted_path}: {e!r}")
            return
        except (UnicodeEncodeError, httpx.InvalidURL, httpx.LocalProtocolError):
            return  # not sendable over HTTP (the client refuses it): not an input
        h.tally.fuzzed += 1
        code = response.status_code
        h.tally.fuzz_statuses[code] = h.tally.fuzz_statuses.get(code, 0) + 1
        if code >= 500:
            errors.append(describe(case, code, response.text))

    try:
        for mode in schemathesis.GenerationMode:
            unsatisfiable = [op.label for op in ops if not fuzz(op, mode, send, FUZZ_EXAMPLES)]
            assert len(unsatisfiable) < len(ops) // 2, unsatisfiable
    finally:
        client.close()
    logged = h.server_log.records[seen_log:]
    h.tally.fuzz_errors = len(errors)
    print(
        f"\nschemathesis [{h.db}]: {h.tally.fuzzed} inputs over {len(ops)} operations, "
        f"{len(errors)} server errors, statuses {dict(sorted(h.tally.fuzz_statuses.items()))}"
    )
    assert not errors, "\n".join(errors[:20]) + "\n" + "\n".join(logged[:5])
    assert not logged, "\n".join(logged[:5])
    assert any(200 <= code < 300 for code in h.tally.fuzz_statuses), h.tally.fuzz_statuses
    h.mark_jobs()
    h.normal_job(patient=True)


def test_the_corpus_covered_every_write_route(hostile: Hostile) -> None:
    """Runs last for its database (pytest keeps the file's order within a module-scoped
    parameter): the tally of what was tried."""
    t = hostile.tally
    total = sum(t.inputs.values())
    unknown = [e for e in t.server_errors if e not in t.known_errors]
    print(
        f"\nhostile corpus [{hostile.db}]: {total} inputs "
        f"({', '.join(f'{r}: {n}' for r, n in t.inputs.items())}), "
        f"{len(t.server_errors)} server errors ({len(t.known_errors)} known), "
        f"{t.normal_jobs} normal jobs ran; schemathesis {t.fuzzed} inputs, "
        f"{t.fuzz_errors} server errors; "
        f"{time.monotonic() - t.started:.1f} s"
    )
    for route, n in hc.per_route(hc.CASES).items():
        assert n >= 20, (route, n)
        assert t.inputs[route] >= 20, (route, t.inputs)
    assert not unknown, "\n".join(unknown)
    assert t.normal_jobs >= total

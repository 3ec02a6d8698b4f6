"""A corpus of hostile inputs for the write routes of ``suanli serve`` (``tests/cli/test_hostile.py``),
``POST /v1/what-if``, which takes a job's body and must refuse what a submission refuses, and
``/v1/datasets``, the copies of data sets a member holds, and ``POST /v1/jobs/{id}/withdraw``,
a federation front's taking back of a pending job (both an admin's only).

Each ``Case`` is one request a hostile tenant (by default ``ana``, a plain ``user`` of tenant
``vision``) sends, and what the server must answer: the status, for a 422 the field at fault
(``None``: the request as a whole, ``fields == []``), words the error must contain, and what
the request may change in the store (``effect``; ``None``: nothing at all).

Requests are built against a ``World`` (the running server's tokens, token ids, jobs and
directories), so a case may name another tenant's job or a directory inside the server's
state directory. Bodies are sent as bytes exactly as built here: JSON is serialised by
``encode`` (lone surrogates and NUL escaped, ``NaN``/``Infinity`` written as JSON tokens), and
``raw`` bodies go as they are.

A known defect is a ``Case`` with ``defect`` set: the test marks it
``xfail(strict=True, reason=defect)``, so it documents the bug until it is fixed.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

JOBS = "POST /v1/jobs"
CANCEL = "POST /v1/jobs/{job_id}/cancel"
TOKENS = "POST /v1/tokens"
REVOKE = "DELETE /v1/tokens/{token_id}"
WHAT_IF = "POST /v1/what-if"
DATASETS = "PUT /v1/datasets/{name}"
WITHDRAW = "POST /v1/jobs/{job_id}/withdraw"
ROUTES = (JOBS, CANCEL, TOKENS, REVOKE, WHAT_IF, DATASETS, WITHDRAW)
MAX_BODY = 1_048_576
"""The server's request-body limit (``create_app``'s default)."""

JSON = {"Content-Type": "application/json"}


@dataclass
class World:
    """What the cases may refer to on the running server."""

    state: Path
    """The server's state directory (0700, root's when tests run as root)."""
    tokens: dict[str, str]
    """Secrets by holder: ana, bo (users of vision), vlead (tenant admin of vision), nina
    (user of nlp), probe (vision: runs the normal jobs), selfish (vision: revokes itself),
    doomed (vision: revoked by vlead), admin."""
    token_ids: dict[str, int]
    jobs: dict[str, str]
    """Job ids: nlp_sleeper (nina's, running), bo_sleeper (bo's, running), ana_sleeper
    (ana's, running until a case cancels it), ana_done (ana's, succeeded)."""
    dirs: dict[str, str]
    """open (0777), link (a symlink in an open directory to the state directory), file (a
    plain file), locked (0700 root's, when root), behind_locked (0777, inside locked)."""
    task_py: str


Build = Callable[[World], Any]


@dataclass(frozen=True)
class Case:
    route: str
    name: str
    status: int
    path: str | Callable[[World], str] = ""
    """The path; a template formatted with ``jobs`` and ``token_ids`` (``{nlp_sleeper}``,
    ``{id_nina}``), or a function of the world. Empty: the route's own path (for JOBS and
    TOKENS)."""
    method: str | None = None
    """Default: the route's method."""
    body: Any = None
    """A JSON value, or a function of the world returning one (None: no JSON body)."""
    raw: bytes | Callable[[], Iterator[bytes]] | None = None
    """Bytes sent as they are, or a function making chunks (sent chunked, no length)."""
    headers: dict[str, str] = field(default_factory=dict)
    wire: bytes | None = None
    """The whole request as bytes on a socket of its own (``{token}``: the token's secret),
    for what an HTTP client will not send; the protocol layer (uvicorn) may answer it, in
    its own words rather than the JSON error shape."""
    token: str | None = "ana"
    """Whose token (a key of ``World.tokens``); None: no Authorization header; ``"bogus"``:
    a token that was never issued."""
    field: str | None = "-"
    """For a 422: the field the error must name; None: the request as a whole (no fields).
    ``"-"``: not a 422."""
    says: tuple[str, ...] = ()
    """Words the error (or, for a success, the body) must contain."""
    never_says: tuple[str, ...] = ()
    effect: str | None = None
    """What the request changes: None (nothing), "job" (one job stored, the submitter's
    tenant and user), "token" (one token stored), "revoke:<holder>" (that token revoked),
    "cancel:<job>" (that job's cancel requested, or a no-op for a finished one),
    "dataset:<name>" (that data set's copy recorded)."""
    then: Callable[[Any, Any], None] | None = None
    """A further check, ``then(hostile, response)``, with the running server at hand."""
    defect: str | None = None
    """A known defect (the case is an ``xfail(strict=True)``): what is wrong."""
    root_only: bool = False

    @property
    def id(self) -> str:
        short = {JOBS: "jobs", CANCEL: "cancel", TOKENS: "tokens", REVOKE: "revoke",
                 WHAT_IF: "what-if", DATASETS: "datasets", WITHDRAW: "withdraw"}[self.route]  # fmt: skip
        return f"{short}:{self.name}"


def encode(value: Any) -> bytes:
    """JSON as Python writes it: ASCII (so lone surrogates and NUL travel as escapes), and
    non-finite floats as the ``NaN``/``Infinity`` tokens."""
    return json.dumps(value).encode("ascii")


def job(**fields: Any) -> dict[str, Any]:
    return {"command": ["true"], **fields}


def raw_job(tail: str) -> bytes:
    """A job body with ``tail`` (raw JSON text: ``"gpus": NaN``) after its command."""
    return ('{"command": ["true"], ' + tail + "}").encode()


def deep(n: int) -> bytes:
    return b'{"command": ["true"], "env": ' + b"[" * n + b"]" * n + b"}"


def chunked_over_limit() -> Iterator[bytes]:
    yield b'{"command": ["true"], "env": {"PAD": "'
    for _ in range(MAX_BODY // 65536 + 2):
        yield b"x" * 65536
    yield b'"}}'


def _wire(length_headers: bytes) -> bytes:
    body = encode(job())
    assert len(body) == 21
    return (
        b"POST /v1/jobs HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\n"
        b"Content-Type: application/json\r\n"
        + length_headers
        + b"\r\nConnection: close\r\n\r\n"
        + body
    )


def over_limit(prefix: dict[str, Any]) -> bytes:
    return encode({**prefix, "pad": "x" * (MAX_BODY + 10)})


# --- POST /v1/jobs ----------------------------------------------------------------------------

_S = "\ud800"  # a lone surrogate: valid JSON (as an escape), not storable text
LONG_COMPONENTS = "/" + "/".join(["a" * 255] * 15)  # 3840 characters: under MAX_PATH


def _stored_workdir(expected: Callable[[World], str]) -> Callable[[Any, Any], None]:
    def check(h: Any, r: Any) -> None:
        assert r.json()["spec"]["workdir"] == expected(h.world), r.json()["spec"]

    return check


def _neutralised_gpus(h: Any, r: Any) -> None:
    """The task sees suanli's CUDA_VISIBLE_DEVICES (none: it asked for no GPU) and job id,
    not the ones its env asked for."""
    job_id = r.json()["id"]
    done = h.wait(job_id, "succeeded", "failed")
    assert done["state"] == "succeeded", done
    assert h.log(job_id).split() == ["''", job_id]


def _ended(h: Any, r: Any) -> None:
    """An accepted job whose task cannot start ends (failed), it does not hang."""
    done = h.wait(r.json()["id"], "succeeded", "failed")
    assert done["state"] == "failed", done


def _online(h: Any, r: Any) -> None:
    assert r.json()["priority_class"] == "online"
    h.wait(r.json()["id"], "succeeded")


SPOOF_ENV = (
    "import os; print(repr(os.environ.get('CUDA_VISIBLE_DEVICES')), os.environ['SUANLI_JOB_ID'])"
)

# fmt: off
JOB_CASES: list[Case] = [
    # Huge, negative and non-finite numbers.
    Case(JOBS, "memory-20-digit-terabytes", 422, body=job(memory="99999999999999999999T"), field="memory"),
    Case(JOBS, "memory-1e400-string", 422, body=job(memory="1e400"), field="memory"),
    Case(JOBS, "memory-negative", 422, body=job(memory="-5G"), field="memory"),
    Case(JOBS, "memory-unit-only", 422, body=job(memory="G"), field="memory"),
    Case(JOBS, "memory-hex", 422, body=job(memory="0x10"), field="memory"),
    Case(JOBS, "gpus-1e308", 422, body=job(gpus=1e308), field="gpus"),
    Case(JOBS, "gpus-1e400-token", 422, raw=raw_job('"gpus": 1e400'), headers=JSON, field="gpus"),
    Case(JOBS, "cpu-minus-1", 422, body=job(cpu=-1), field="cpu"),
    # A gang of tasks that ask for nothing would fit any node without bound: a task asks at
    # least a thousandth of a core, so 4096 of them are refused (2000 fit).
    Case(JOBS, "tasks-4096-cpu-0", 422, body=job(tasks=4096, cpu=0, memory=0), field="cpu"),
    Case(JOBS, "tasks-1e9", 422, body=job(tasks=10**9), field="tasks"),
    Case(JOBS, "tasks-2**64", 422, body=job(tasks=2**64), field="tasks"),
    Case(JOBS, "tasks-fraction", 422, body=job(tasks=1.5), field="tasks"),
    Case(JOBS, "gpu_memory-negative", 422, body=job(gpus=0.5, gpu_memory="-1G"), field="gpu_memory"),
    Case(JOBS, "gpus-too-small-share", 422, body=job(gpus=0.0001), field="gpus"),
    Case(JOBS, "gpus-fractional-above-one", 422, body=job(gpus=1.5), field="gpus"),
    Case(JOBS, "max_runtime-zero", 422, body=job(max_runtime=0), field="max_runtime"),
    # Seconds are bounded (ten years), so the loop and the supervisor never see 1e308.
    Case(JOBS, "max_runtime-1e308", 422, body=job(max_runtime=1e308), field="max_runtime"),
    Case(JOBS, "estimate-1e308", 422, body=job(estimate=1e308), field="estimate"),
    Case(JOBS, "checkpoint_interval-1e308", 422, body=job(checkpoint_interval=1e308),
         field="checkpoint_interval"),
    Case(JOBS, "max_runtime-ten-years", 201, body=job(max_runtime=10 * 366 * 86_400),
         effect="job", then=lambda h, r: h.wait(r.json()["id"], "succeeded")),
    Case(JOBS, "grace-1e9", 422, body=job(grace=1e9), field="grace"),
    Case(JOBS, "huge-integer-literal", 400, raw=raw_job('"tasks": ' + "9" * 5000), headers=JSON,
         says=("parsing the body",)),
    # NaN and Infinity, as strings and as JSON tokens.
    Case(JOBS, "gpus-NaN-string", 422, body=job(gpus="NaN"), field="gpus"),
    Case(JOBS, "cpu-Infinity-string", 422, body=job(cpu="Infinity"), field="cpu"),
    Case(JOBS, "memory-NaN-string", 422, body=job(memory="NaN"), field="memory"),
    Case(JOBS, "memory-Infinity-string", 422, body=job(memory="Infinity"), field="memory"),
    Case(JOBS, "gpus-NaN-token", 422, raw=raw_job('"gpus": NaN'), headers=JSON, field="gpus"),
    Case(JOBS, "grace-Infinity-token", 422, raw=raw_job('"grace": Infinity'), headers=JSON, field="grace"),
    Case(JOBS, "max_runtime-minus-Infinity-token", 422, raw=raw_job('"max_runtime": -Infinity'),
         headers=JSON, field="max_runtime"),
    Case(JOBS, "gpu_memory-NaN-token", 422, raw=raw_job('"gpus": 0.5, "gpu_memory": NaN'),
         headers=JSON, field="gpu_memory"),
    # Booleans for numbers, wrong types, nested objects.
    Case(JOBS, "gpus-true", 422, body=job(gpus=True), field="gpus"),
    Case(JOBS, "tasks-false", 422, body=job(tasks=False), field="tasks"),
    Case(JOBS, "memory-true", 422, body=job(memory=True), field="memory"),
    Case(JOBS, "gpu_memory-true", 422, body=job(gpus=0.5, gpu_memory=True), field="gpu_memory"),
    Case(JOBS, "command-a-string", 422, body={"command": "rm -rf /"}, field="command"),
    Case(JOBS, "command-nested-object", 422, body={"command": [{"$ne": {"$gt": ""}}]}, field="command.0"),
    Case(JOBS, "env-a-list", 422, body=job(env=["LD_PRELOAD=/x.so"]), field="env"),
    Case(JOBS, "env-nested-object", 422, body=job(env={"A": {"B": "C"}}), field="env.A"),
    Case(JOBS, "gpu_models-a-string", 422, body=job(gpu_models="H100"), field="gpu_models"),
    Case(JOBS, "tenant-an-object", 422, body=job(tenant={"$ne": None}), field="tenant"),
    Case(JOBS, "nested-100k-deep", 400, raw=deep(100_000), headers=JSON, says=("parsing the body",)),
    # Long arrays (under the body limit) and a body over it.
    Case(JOBS, "command-100k-args", 422, body={"command": ["x"] * 100_000}, field="command"),
    Case(JOBS, "gpu_models-100k", 422, body=job(gpu_models=["H100"] * 100_000), field="gpu_models"),
    Case(JOBS, "env-50k-variables", 422, body=job(env={f"V{i}": "" for i in range(50_000)}), field="env"),
    Case(JOBS, "body-over-1MiB", 413, raw=over_limit(job()), headers=JSON, says=("too large",)),
    Case(JOBS, "chunked-body-over-1MiB", 413, raw=chunked_over_limit, headers=JSON, says=("too large",)),
    # NUL bytes and lone surrogates.
    Case(JOBS, "name-NUL", 422, body=job(name="a\0b"), field="name"),
    Case(JOBS, "command-NUL", 422, body={"command": ["true", "a\0b"]}, field="command"),
    Case(JOBS, "env-key-NUL", 422, body=job(env={"A\0B": "1"}), field="env"),
    Case(JOBS, "env-value-NUL", 422, body=job(env={"A": "1\0"}), field="env"),
    Case(JOBS, "name-lone-surrogate", 422, body=job(name=f"a{_S}"), field="name"),
    Case(JOBS, "command-lone-surrogate", 422, body={"command": ["true", _S]}, field="command.1"),
    Case(JOBS, "env-key-lone-surrogate", 422, body=job(env={f"A{_S}": "1"}), field="env"),
    Case(JOBS, "env-value-lone-surrogate", 422, body=job(env={"A": _S}), field="env.A"),
    Case(JOBS, "workdir-lone-surrogate", 422, body=job(workdir=f"/tmp/{_S}"), field="workdir"),
    Case(JOBS, "invalid-utf8-bytes", 400, raw=b'{"command": ["true", "\xff\xfe"]}', headers=JSON,
         says=("parsing the body",)),
    Case(JOBS, "env-key-with-equals", 422, body=job(env={"A=B": "1"}), field="env"),
    # Directories.
    Case(JOBS, "workdir-empty", 422, body=job(workdir=""), field="workdir"),
    Case(JOBS, "workdir-relative", 422, body=job(workdir="runs/../.."), field="workdir"),
    Case(JOBS, "workdir-dotdot-into-state", 422,
         body=lambda w: job(workdir=f"{w.dirs['open']}/../..{w.state}/runs"), field="workdir",
         says=("state directory",)),
    Case(JOBS, "workdir-dotdot-normalised", 201,
         body=lambda w: job(workdir=f"{w.dirs['open']}/no/such/../../."), effect="job",
         then=_stored_workdir(lambda w: w.dirs["open"])),
    Case(JOBS, "workdir-5000-chars", 422, body=job(workdir="/" + "a" * 5000), field="workdir"),
    Case(JOBS, "workdir-long-components", 422, body=job(workdir=LONG_COMPONENTS), field="workdir"),
    Case(JOBS, "workdir-state-runs", 422, body=lambda w: job(workdir=f"{w.state}/runs"),
         field="workdir", says=("state directory",)),
    Case(JOBS, "workdir-state-itself", 422, body=lambda w: job(workdir=str(w.state)),
         field="workdir", says=("state directory",)),
    Case(JOBS, "workdir-symlink-to-state", 422, body=lambda w: job(workdir=w.dirs["link"]),
         field="workdir", says=("state directory",)),
    Case(JOBS, "workdir-does-not-exist", 422, body=job(workdir="/nonexistent/suanli-hostile"),
         field="workdir"),
    Case(JOBS, "workdir-a-file", 422, body=lambda w: job(workdir=w.dirs["file"]), field="workdir",
         says=("not a directory",)),
    Case(JOBS, "workdir-root-0700", 422, body=lambda w: job(workdir=w.dirs["locked"]),
         field="workdir", says=("cannot enter",), root_only=True),
    Case(JOBS, "workdir-behind-root-0700", 422, body=lambda w: job(workdir=w.dirs["behind_locked"]),
         field="workdir", says=("cannot enter",), root_only=True),
    Case(JOBS, "checkpoint_dir-in-state", 422, body=lambda w: job(checkpoint_dir=f"{w.state}/x"),
         field="checkpoint_dir", says=("state directory",)),
    Case(JOBS, "checkpoint_dir-relative", 422, body=job(checkpoint_dir="ckpt"), field="checkpoint_dir"),
    Case(JOBS, "checkpoint_dir-dotdot-into-state", 422,
         body=lambda w: job(checkpoint_dir=f"/tmp/../{w.state}/../{w.state.name}"),
         field="checkpoint_dir", says=("state directory",)),
    # The environment.
    Case(JOBS, "env-LD_PRELOAD", 422, body=job(env={"LD_PRELOAD": "/tmp/evil.so"}), field="env.LD_PRELOAD"),
    Case(JOBS, "env-LD_AUDIT", 422, body=job(env={"LD_AUDIT": "/tmp/evil.so"}), field="env.LD_AUDIT"),
    Case(JOBS, "env-LD_LIBRARY_PATH", 422, body=job(env={"LD_LIBRARY_PATH": "/tmp"}),
         field="env.LD_LIBRARY_PATH"),
    Case(JOBS, "env-spoofs-suanli-variables", 201,
         body=lambda w: {"command": [w.task_py, "-c", SPOOF_ENV], "gpus": 0,
                         "env": {"CUDA_VISIBLE_DEVICES": "0,1", "SUANLI_JOB_ID": "spoof"}},
         effect="job", then=_neutralised_gpus),
    # Queues, tenants, users and classes.
    Case(JOBS, "queue-of-another-tenant", 403, body=job(queue="nlp"), field="queue", says=("nlp",)),
    Case(JOBS, "queue-unknown", 422, body=job(queue="nowhere"), field="queue"),
    Case(JOBS, "queue-dotdot", 422, body=job(queue="../nlp"), field="queue"),
    Case(JOBS, "tenant-spoofed", 403, body=job(tenant="nlp")),
    Case(JOBS, "tenant-dotdot", 403, body=job(tenant="vision/../nlp")),
    Case(JOBS, "tenant-duplicate-key", 403, raw=b'{"command": ["true"], "tenant": "vision", "tenant": "nlp"}',
         headers=JSON),
    Case(JOBS, "user-field", 422, body=job(user="bo"), field="user", says=("unknown field",)),
    # Documented (docs/serve.md, control/spec.py): any token may ask for any of the four
    # classes; nothing reserves `online` (not preemptible, value 1000) to some tenants.
    Case(JOBS, "priority_class-online", 201, body=job(priority_class="online"), effect="job",
         then=_online),
    Case(JOBS, "priority_class-unknown", 422, body=job(priority_class="root"), field="priority_class"),
    Case(JOBS, "stop_signal-unknown", 422, body=job(stop_signal="SIGFOO"), field="stop_signal"),
    Case(JOBS, "stop_signal-empty", 422, body=job(stop_signal=""), field="stop_signal"),
    Case(JOBS, "gpu_models-sql", 422, body=job(gpu_models=["H100'; DROP TABLE jobs;--"]),
         field="gpu_models.0"),
    Case(JOBS, "gpu_models-path", 422, body=job(gpu_models=["../../etc/passwd"]), field="gpu_models.0"),
    Case(JOBS, "gpu_models-empty-name", 422, body=job(gpu_models=[""]), field="gpu_models.0"),
    Case(JOBS, "gpu_models-absent-model", 422, body=job(gpus=1, gpu_models=["A100"]), field=None,
         says=("refused",)),
    Case(JOBS, "gpus-larger-than-the-cluster", 422, body=job(gpus=4), field=None, says=("refused",)),
    Case(JOBS, "gpu_memory-larger-than-a-gpu", 422, body=job(gpus=0.5, gpu_memory="99999T"),
         field=None, says=("refused",)),
    Case(JOBS, "gang_min-above-tasks", 422, body=job(tasks=2, gang_min=5), field="gang_min"),
    Case(JOBS, "name-201-chars", 422, body=job(name="n" * 201), field="name"),
    Case(JOBS, "command-empty-program", 422, body={"command": [""]}, field="command"),
    Case(JOBS, "command-empty", 422, body={"command": []}, field="command"),
    Case(JOBS, "command-200k-argument", 201, body={"command": ["true", "x" * 200_000]}, effect="job",
         then=_ended),
    # Bodies that are not a job.
    Case(JOBS, "malformed-json", 422, raw=b'{"command": ["true"], "gpus": 1,', headers=JSON,
         field="body", says=("invalid JSON",)),
    Case(JOBS, "text-plain", 422, raw=encode(job()), headers={"Content-Type": "text/plain"}, field="body"),
    Case(JOBS, "form-urlencoded", 422, raw=b"command=true&gpus=1",
         headers={"Content-Type": "application/x-www-form-urlencoded"}, field="body"),
    Case(JOBS, "gzip-body", 400, raw=gzip.compress(encode(job())),
         headers={**JSON, "Content-Encoding": "gzip"}, says=("parsing the body",)),
    Case(JOBS, "empty-body", 422, raw=b"", headers=JSON, field="body"),
    Case(JOBS, "json-array", 422, raw=b'[{"command": ["true"]}]', headers=JSON, field="body"),
    Case(JOBS, "json-null", 422, raw=b"null", headers=JSON, field="body"),
    Case(JOBS, "json-string", 422, raw=b'"true"', headers=JSON, field="body"),
    Case(JOBS, "content-length-not-a-number", 400, wire=_wire(b"Content-Length: abc")),
    Case(JOBS, "content-length-twice", 400, wire=_wire(b"Content-Length: 21\r\nContent-Length: 5")),
    Case(JOBS, "content-length-and-chunked", 400,
         wire=_wire(b"Content-Length: 21\r\nTransfer-Encoding: chunked")),
    Case(JOBS, "content-length-23-digits", 400, wire=_wire(b"Content-Length: " + b"9" * 23)),
    Case(JOBS, "no-token", 401, body=job(), token=None),
    Case(JOBS, "bogus-token", 401, body=job(), token="bogus"),
    Case(JOBS, "put-method", 405, method="PUT", body=job()),
]
# fmt: on


# --- POST /v1/jobs/{job_id}/cancel --------------------------------------------------------------


def _cancel(job_id: str) -> str:
    return f"/v1/jobs/{job_id}/cancel"


def _same_as_missing(h: Any, r: Any) -> None:
    """Another tenant's job is answered exactly as a job that does not exist."""
    theirs = h.world.jobs["nlp_sleeper"]
    missing = h.call("POST", _cancel("999999"), token="ana")
    assert r.json()["error"].replace(theirs, "X") == missing.json()["error"].replace("999999", "X")
    assert r.json()["fields"] == missing.json()["fields"] == []


def _no_op(h: Any, r: Any) -> None:
    assert r.json()["state"] == "succeeded" and r.json()["cancel_requested"] is False


def _requested(h: Any, r: Any) -> None:
    assert r.json()["cancel_requested"] is True


# fmt: off
CANCEL_CASES: list[Case] = [
    Case(CANCEL, "another-tenants-job", 404, "/v1/jobs/{nlp_sleeper}/cancel", then=_same_as_missing),
    Case(CANCEL, "nonexistent", 404, _cancel("999999")),
    Case(CANCEL, "another-users-job", 403, "/v1/jobs/{bo_sleeper}/cancel", says=("bo",)),
    Case(CANCEL, "dotdot", 404, _cancel("%2E%2E")),
    Case(CANCEL, "dotdot-slash-dotdot", 404, _cancel("%2E%2E%2F%2E%2E")),
    Case(CANCEL, "slash-then-their-id", 404, "/v1/jobs/%2F{nlp_sleeper}/cancel"),
    Case(CANCEL, "NUL", 404, _cancel("%00")),
    Case(CANCEL, "NUL-after-their-id", 404, "/v1/jobs/{nlp_sleeper}%00/cancel"),
    Case(CANCEL, "newline", 404, _cancel("1%0A2")),
    Case(CANCEL, "lone-surrogate-bytes", 404, _cancel("%ED%A0%80")),
    Case(CANCEL, "invalid-utf8", 404, _cancel("%FF%FE")),
    Case(CANCEL, "5000-chars", 422, _cancel("9" * 5000), field="job_id"),
    Case(CANCEL, "201-chars", 422, _cancel("1" * 201), field="job_id"),
    Case(CANCEL, "200-chars", 404, _cancel("1" * 200)),
    Case(CANCEL, "unicode", 404, _cancel("作业🚀")),
    Case(CANCEL, "negative", 404, _cancel("-1")),
    Case(CANCEL, "2**64", 404, _cancel(str(2**64))),
    Case(CANCEL, "sql-or", 404, _cancel("1%20OR%201=1")),
    Case(CANCEL, "sql-quote", 404, _cancel("1'%20OR%20'1'='1")),
    Case(CANCEL, "sql-drop", 404, _cancel("1;DROP%20TABLE%20jobs;--")),
    Case(CANCEL, "like-wildcard", 404, _cancel("%25")),
    Case(CANCEL, "leading-zero-their-id", 404, "/v1/jobs/0{nlp_sleeper}/cancel"),
    Case(CANCEL, "space-their-id", 404, "/v1/jobs/%20{nlp_sleeper}/cancel"),
    Case(CANCEL, "float-their-id", 404, "/v1/jobs/{nlp_sleeper}.0/cancel"),
    Case(CANCEL, "get-method", 405, "/v1/jobs/{ana_sleeper}/cancel", method="GET"),
    Case(CANCEL, "no-token", 401, "/v1/jobs/{ana_sleeper}/cancel", token=None),
    Case(CANCEL, "bogus-token", 401, "/v1/jobs/{ana_sleeper}/cancel", token="bogus"),
    Case(CANCEL, "a-finished-job", 202, "/v1/jobs/{ana_done}/cancel", effect="cancel:ana_done",
         then=_no_op),
    Case(CANCEL, "a-body-where-none-expected", 202, "/v1/jobs/{ana_done}/cancel",
         body=lambda w: {"job_id": w.jobs["nlp_sleeper"], "force": True, "tenant": "nlp"},
         effect="cancel:ana_done", then=_no_op),
    Case(CANCEL, "own-job", 202, "/v1/jobs/{ana_sleeper}/cancel", effect="cancel:ana_sleeper",
         then=_requested),
    Case(CANCEL, "own-job-twice", 202, "/v1/jobs/{ana_sleeper}/cancel", effect="cancel:ana_sleeper",
         then=_requested),
]
# fmt: on


# --- POST /v1/tokens -------------------------------------------------------------------------------


def tok(**fields: Any) -> dict[str, Any]:
    return {"name": "x", "user": "x", **fields}


# fmt: off
TOKEN_CASES: list[Case] = [
    Case(TOKENS, "user-makes-a-user-token", 403, body=tok(), says=("tenant admins make tokens",)),
    Case(TOKENS, "user-makes-an-admin-token", 403, body=tok(role="admin")),
    Case(TOKENS, "user-makes-a-tenant-admin-token", 403, body=tok(role="tenant-admin")),
    Case(TOKENS, "user-makes-a-token-for-nlp", 403, body=tok(tenant="nlp")),
    Case(TOKENS, "user-makes-a-metrics-token", 403, body=tok(role="metrics")),
    Case(TOKENS, "tenant-admin-makes-an-admin-token", 403, body=tok(role="admin"), token="vlead",
         says=("admin",)),
    Case(TOKENS, "tenant-admin-makes-a-metrics-token", 403, body=tok(role="metrics"), token="vlead"),
    Case(TOKENS, "admin-makes-a-metrics-token", 201, body=tok(name="prom", user="prom", role="metrics"),
         token="admin", effect="token"),
    Case(TOKENS, "tenant-admin-makes-a-token-for-nlp", 403, body=tok(tenant="nlp"), token="vlead"),
    Case(TOKENS, "tenant-admin-makes-a-token-for-a-subtenant", 403, body=tok(tenant="vision/sub"),
         token="vlead"),
    Case(TOKENS, "admin-token-with-a-tenant", 422, body=tok(role="admin", tenant="vision"),
         token="admin", field="tenant"),
    Case(TOKENS, "name-dotdot-path", 422, body=tok(name="../../etc/passwd"), token="vlead", field="name"),
    Case(TOKENS, "name-NUL", 422, body=tok(name="a\0b"), token="vlead", field="name"),
    Case(TOKENS, "name-10k-chars", 422, body=tok(name="n" * 10_000), token="vlead", field="name"),
    Case(TOKENS, "name-trailing-newline", 422, body=tok(name="ana\n"), token="vlead", field="name"),
    Case(TOKENS, "name-cyrillic-lookalike", 422, body=tok(name="аdmin"), token="vlead", field="name"),
    Case(TOKENS, "name-a-number", 422, body=tok(name=123), token="vlead", field="name"),
    Case(TOKENS, "user-lone-surrogate", 422, body=tok(user=f"a{_S}"), token="vlead", field="user"),
    Case(TOKENS, "tenant-NUL", 422, body=tok(tenant="vision\0"), token="vlead", field="tenant"),
    Case(TOKENS, "role-unknown", 422, body=tok(role="root"), token="vlead", field="role"),
    Case(TOKENS, "role-null", 422, body=tok(role=None), token="vlead", field="role"),
    Case(TOKENS, "extra-field-scopes", 422, body=tok(scopes=["*"]), token="vlead", field="scopes"),
    Case(TOKENS, "extra-field-id", 422, body=tok(id=1), token="vlead", field="id"),
    Case(TOKENS, "missing-name", 422, body={"user": "x"}, token="vlead", field="name"),
    Case(TOKENS, "missing-user", 422, body={"name": "x"}, token="vlead", field="user"),
    Case(TOKENS, "malformed-json", 422, raw=b'{"name": "x", ', headers=JSON, token="vlead", field="body"),
    Case(TOKENS, "json-array", 422, raw=b'[{"name": "x", "user": "x"}]', headers=JSON, token="vlead",
         field="body"),
    Case(TOKENS, "empty-body", 422, raw=b"", headers=JSON, token="vlead", field="body"),
    Case(TOKENS, "body-over-1MiB", 413, raw=over_limit(tok()), headers=JSON, token="vlead"),
    Case(TOKENS, "no-token", 401, body=tok(), token=None),
    Case(TOKENS, "bogus-token", 401, body=tok(), token="bogus"),
    Case(TOKENS, "tenant-admin-slash-name", 201, body=tok(name="team/ana", user="ana"), token="vlead",
         effect="token"),
]
# fmt: on


# --- DELETE /v1/tokens/{token_id} ------------------------------------------------------------------


def _revoke(token_id: str) -> str:
    return f"/v1/tokens/{token_id}"


def _dead(holder: str) -> Callable[[Any, Any], None]:
    def check(h: Any, r: Any) -> None:
        assert r.json()["revoked_at"] is not None
        assert h.call("GET", "/v1/whoami", token=holder).status_code == 401

    return check


# fmt: off
REVOKE_CASES: list[Case] = [
    Case(REVOKE, "another-tenants-token", 403, "/v1/tokens/{id_nina}", says=("revoke",),
         never_says=("list",)),
    Case(REVOKE, "another-users-token", 403, "/v1/tokens/{id_bo}", says=("revoke",), never_says=("list",)),
    Case(REVOKE, "the-admin-token", 403, "/v1/tokens/{id_admin}", says=("revoke",)),
    Case(REVOKE, "tenant-admin-another-tenants-token", 404, "/v1/tokens/{id_nina}", token="vlead"),
    Case(REVOKE, "tenant-admin-the-admin-token", 404, "/v1/tokens/{id_admin}", token="vlead"),
    Case(REVOKE, "zero", 422, _revoke("0"), field="token_id"),
    Case(REVOKE, "minus-1", 422, _revoke("-1"), field="token_id"),
    Case(REVOKE, "minus-zero", 422, _revoke("-0"), field="token_id"),
    Case(REVOKE, "2**63", 422, _revoke(str(2**63)), field="token_id"),
    Case(REVOKE, "2**63-1", 404, _revoke(str(2**63 - 1)), token="vlead"),
    Case(REVOKE, "5000-digits", 422, _revoke("9" * 5000), field="token_id"),
    Case(REVOKE, "non-numeric", 422, _revoke("abc"), field="token_id"),
    Case(REVOKE, "fraction", 422, _revoke("1.5"), field="token_id"),
    Case(REVOKE, "exponent", 422, _revoke("1e3"), field="token_id"),
    Case(REVOKE, "hex", 422, _revoke("0x1"), field="token_id"),
    Case(REVOKE, "true", 422, _revoke("true"), field="token_id"),
    Case(REVOKE, "NUL", 422, _revoke("%00"), field="token_id"),
    Case(REVOKE, "sql", 422, _revoke("1%20OR%201=1"), field="token_id"),
    Case(REVOKE, "arabic-indic-digit-of-the-admin", 422, _revoke("%D9%A1"), field="token_id"),
    Case(REVOKE, "dotdot", 404, _revoke("%2E%2E%2F1")),
    Case(REVOKE, "a-body-where-none-expected", 403, "/v1/tokens/{id_bo}",
         body={"token_id": 1, "force": True}, says=("revoke",)),
    Case(REVOKE, "put-method", 405, "/v1/tokens/{id_bo}", method="PUT"),
    Case(REVOKE, "no-token", 401, "/v1/tokens/{id_bo}", token=None),
    Case(REVOKE, "bogus-token", 401, "/v1/tokens/{id_bo}", token="bogus"),
    Case(REVOKE, "tenant-admin-revokes-a-users-token", 200, "/v1/tokens/{id_doomed}", token="vlead",
         effect="revoke:doomed", then=_dead("doomed")),
    Case(REVOKE, "tenant-admin-revokes-it-again", 200, "/v1/tokens/{id_doomed}", token="vlead"),
    Case(REVOKE, "a-revoked-token-revokes", 401, "/v1/tokens/{id_bo}", token="doomed"),
    Case(REVOKE, "own-token", 200, "/v1/tokens/{id_selfish}", token="selfish",
         effect="revoke:selfish", then=_dead("selfish")),
]
# fmt: on


# --- POST /v1/what-if ----------------------------------------------------------------------


def _asked(c: Case) -> Case:
    """A job case asked as a what-if: the same refusal, and nothing stored, ever; where the
    submission is accepted (201), 200 with a start estimate."""
    ok = c.status == 201
    return replace(c, route=WHAT_IF, status=200 if ok else c.status, effect=None, then=None,
                   says=("start_estimate",) if ok else c.says)  # fmt: skip


# Every job body but those sent as raw bytes on a socket of their own (the protocol layer's).
WHAT_IF_CASES: list[Case] = [_asked(c) for c in JOB_CASES if c.wire is None]


# --- /v1/datasets -----------------------------------------------------------------------------


def _ds(name: str = "scans") -> str:
    return f"/v1/datasets/{name}"


ONE_GB = {"gb": 1}

# fmt: off
DATASET_CASES: list[Case] = [
    Case(DATASETS, "user-records-a-copy", 403, _ds(), body=ONE_GB, says=("admin",)),
    Case(DATASETS, "tenant-admin-records-a-copy", 403, _ds(), body=ONE_GB, token="vlead"),
    Case(DATASETS, "another-tenants-user-records-a-copy", 403, _ds(), body=ONE_GB, token="nina"),
    Case(DATASETS, "user-lists-the-copies", 403, "/v1/datasets", method="GET"),
    Case(DATASETS, "user-forgets-a-copy", 403, _ds(), method="DELETE"),
    Case(DATASETS, "no-token", 401, _ds(), body=ONE_GB, token=None),
    Case(DATASETS, "bogus-token", 401, _ds(), body=ONE_GB, token="bogus"),
    Case(DATASETS, "gb-negative", 422, _ds(), body={"gb": -1}, token="admin", field="gb"),
    Case(DATASETS, "gb-NaN", 422, _ds(), body={"gb": float("nan")}, token="admin", field="gb"),
    Case(DATASETS, "gb-Infinity", 422, _ds(), body={"gb": float("inf")}, token="admin", field="gb"),
    Case(DATASETS, "gb-over-an-exabyte", 422, _ds(), body={"gb": 1e10}, token="admin", field="gb"),
    Case(DATASETS, "gb-words", 422, _ds(), body={"gb": "ten"}, token="admin", field="gb"),
    Case(DATASETS, "state-unknown", 422, _ds(), body={**ONE_GB, "state": "lost"}, token="admin",
         field="state"),
    Case(DATASETS, "arriving-without-when", 422, _ds(), body={**ONE_GB, "state": "arriving"},
         token="admin", field="arrives_in_s"),
    Case(DATASETS, "present-with-when", 422, _ds(), body={**ONE_GB, "arrives_in_s": 5}, token="admin",
         field="arrives_in_s"),
    Case(DATASETS, "arrives-in-minus-1", 422, _ds(),
         body={**ONE_GB, "state": "arriving", "arrives_in_s": -1}, token="admin", field="arrives_in_s"),
    Case(DATASETS, "arrives-in-1e12-s", 422, _ds(),
         body={**ONE_GB, "state": "arriving", "arrives_in_s": 1e12}, token="admin",
         field="arrives_in_s"),
    Case(DATASETS, "source-with-a-space", 422, _ds(), body={**ONE_GB, "source": "a b"}, token="admin",
         field="source"),
    Case(DATASETS, "source-NUL", 422, _ds(), body={**ONE_GB, "source": "a\0b"}, token="admin",
         field="source"),
    Case(DATASETS, "source-10k-chars", 422, _ds(), body={**ONE_GB, "source": "s" * 10_000},
         token="admin", field="source"),
    Case(DATASETS, "source-lone-surrogate", 422, _ds(), body={**ONE_GB, "source": f"a{_S}"},
         token="admin", field="source"),
    Case(DATASETS, "extra-field-owner", 422, _ds(), body={**ONE_GB, "owner": "nlp"}, token="admin",
         field="owner"),
    Case(DATASETS, "malformed-json", 422, _ds(), raw=b'{"gb": ', headers=JSON, token="admin",
         field="body"),
    Case(DATASETS, "json-array", 422, _ds(), raw=b'[{"gb": 1}]', headers=JSON, token="admin",
         field="body"),
    Case(DATASETS, "body-over-1MiB", 413, _ds(), raw=over_limit(ONE_GB), headers=JSON, token="admin"),
    Case(DATASETS, "name-NUL", 422, _ds("a%00b"), body=ONE_GB, token="admin", field="name"),
    Case(DATASETS, "name-201-chars", 422, _ds("n" * 201), body=ONE_GB, token="admin", field="name"),
    Case(DATASETS, "name-leading-dash", 422, _ds("-rf"), body=ONE_GB, token="admin", field="name"),
    Case(DATASETS, "name-trailing-newline", 422, _ds("scans%0A"), body=ONE_GB, token="admin",
         field="name"),
    Case(DATASETS, "user-records-a-200-char-name", 403, _ds("n" * 200), body=ONE_GB),
    Case(DATASETS, "name-cyrillic-lookalike", 422, _ds("%D0%B0"), body=ONE_GB, token="admin",
         field="name"),
    Case(DATASETS, "name-dotdot", 404, _ds("%2E%2E%2Fx"), body=ONE_GB, token="admin"),
    Case(DATASETS, "admin-forgets-a-copy-never-held", 404, _ds("never"), method="DELETE",
         token="admin"),
    Case(DATASETS, "admin-records-a-copy", 200, _ds(), body={"gb": 500}, token="admin",
         effect="dataset:scans", says=('"present"',)),
    Case(DATASETS, "admin-says-a-present-copy-is-arriving", 200, _ds(),
         body={"gb": 500, "state": "arriving", "arrives_in_s": 60}, token="admin",
         says=('"present"',)),
    Case(DATASETS, "user-forgets-the-copy", 403, _ds(), method="DELETE", token="bo"),
]
# fmt: on


# --- POST /v1/jobs/{job_id}/withdraw ------------------------------------------------------------


def _wd(job: str = "{bo_sleeper}") -> str:
    return f"/v1/jobs/{job}/withdraw"


WHY = {"reason": "re-routed"}

# fmt: off
WITHDRAW_CASES: list[Case] = [
    Case(WITHDRAW, "user-withdraws-own-running-job", 403, _wd("{ana_sleeper}"), body=WHY,
         says=("cancel it instead",)),
    Case(WITHDRAW, "user-withdraws-another-users-job", 403, _wd(), body=WHY),
    Case(WITHDRAW, "user-withdraws-another-tenants-job", 403, _wd("{nlp_sleeper}"), body=WHY),
    Case(WITHDRAW, "tenant-admin-withdraws", 403, _wd(), body=WHY, token="vlead"),
    Case(WITHDRAW, "no-token", 401, _wd(), body=WHY, token=None),
    Case(WITHDRAW, "bogus-token", 401, _wd(), body=WHY, token="bogus"),
    Case(WITHDRAW, "admin-withdraws-a-running-job", 409, _wd(), body=WHY, token="admin",
         says=("not withdrawn", "is running")),
    Case(WITHDRAW, "admin-withdraws-a-finished-job", 409, _wd("{ana_done}"), token="admin",
         says=("is succeeded",)),
    Case(WITHDRAW, "admin-withdraws-no-such-job", 404, _wd("9999999"), body=WHY, token="admin"),
    Case(WITHDRAW, "reason-NUL", 422, _wd(), body={"reason": "a\0b"}, token="admin", field="reason"),
    Case(WITHDRAW, "reason-newline", 422, _wd(), body={"reason": "a\nb"}, token="admin",
         field="reason"),
    Case(WITHDRAW, "reason-lone-surrogate", 422, _wd(), body={"reason": f"a{_S}"}, token="admin",
         field="reason"),
    Case(WITHDRAW, "reason-10k-chars", 422, _wd(), body={"reason": "r" * 10_000}, token="admin",
         field="reason"),
    Case(WITHDRAW, "reason-a-number", 422, _wd(), body={"reason": 5}, token="admin", field="reason"),
    Case(WITHDRAW, "extra-field-force", 422, _wd(), body={**WHY, "force": True}, token="admin",
         field="force"),
    Case(WITHDRAW, "malformed-json", 422, _wd(), raw=b'{"reason": ', headers=JSON, token="admin",
         field="body"),
    Case(WITHDRAW, "json-array", 422, _wd(), raw=b'["x"]', headers=JSON, token="admin", field="body"),
    Case(WITHDRAW, "body-over-1MiB", 413, _wd(), raw=over_limit(WHY), headers=JSON, token="admin"),
    Case(WITHDRAW, "job-id-NUL", 404, _wd("a%00b"), body=WHY, token="admin"),
    Case(WITHDRAW, "job-id-201-chars", 422, _wd("9" * 201), body=WHY, token="admin",
         field="job_id"),
    Case(WITHDRAW, "job-id-dotdot", 404, _wd("%2E%2E"), body=WHY, token="admin"),
    Case(WITHDRAW, "get-method", 405, _wd(), method="GET", token="admin"),
]
# fmt: on


CASES: list[Case] = (
    JOB_CASES + CANCEL_CASES + TOKEN_CASES + REVOKE_CASES + WHAT_IF_CASES + DATASET_CASES
    + WITHDRAW_CASES
)


def per_route(cases: list[Case]) -> dict[str, int]:
    return {route: sum(1 for c in cases if c.route == route) for route in ROUTES}

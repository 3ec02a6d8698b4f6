"""After a live front routes a job (``suanli route``): routing it again when it waits far
longer than predicted (``suanli reroute``, ``POST /v1/jobs/{id}/withdraw``), over real member
servers on SQLite and PostgreSQL (and stub members for the answers no real server gives), and
the member's settlement of the charges of a job routed from another region."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pg import location_fixture, postgres_server  # noqa: F401  (postgres_server: a fixture)
from serving import PY, federation, free_port, hold_gpu, start, tenant_token, wait_for, wait_state
from suanli.cli.main import app as cli
from suanli.core.model import SpecError
from suanli.core.routing import Route
from suanli.federation.front import Front, load_federation, load_members

db_location = location_fixture()


def test_a_job_waiting_far_longer_than_predicted_is_rerouted_once_and_only_if_pending(
    tmp_path: Path, db_location: str
) -> None:
    """The idle member is down when the job is routed, so it waits at the busy one; once
    the idle member is back, the front routes it again: taken back from the busy member
    (cancelled there with the reason) and sent to the idle one, where it runs. Not before
    it has waited three times its predicted wait (unless forced), never a job that runs,
    and never twice."""
    busy = start(tmp_path / "busy", db_location, gpus=1)
    idle = start(tmp_path / "idle", str(tmp_path / "idle.db"), gpus=1)
    try:
        with busy.client(tenant_token(busy, "vision")) as c:
            hour = hold_gpu(c, 60, max_runtime=3600)
        tokens = (str(busy.state / "admin.token"), str(idle.state / "admin.token"))
        down = federation(tmp_path, [("busy", busy.url, tokens[0]),
                                     ("idle", f"http://127.0.0.1:{free_port()}", tokens[1])])  # fmt: skip
        spec = {"command": [PY, "-c", "pass"], "gpus": 1, "estimate": 600, "tenant": "vision"}
        first = Front(load_members(down)).submit(spec)
        assert first.route.member == "busy" and first.job_id is not None
        up = federation(tmp_path, [("busy", busy.url, tokens[0]), ("idle", idle.url, tokens[1])])
        front = Front(load_members(up))
        with busy.client() as admin:
            kept = admin.get(f"/v1/jobs/{first.job_id}").json()["job"]
            assert kept["state"] == "pending"
            assert 1800 <= kept["spec"]["routing"]["wait_s"] <= 7200  # about an hour
            wait_for("its start estimate", lambda: (admin.get(f"/v1/jobs/{first.job_id}").json()
                                                    ["job"].get("start_estimate") or {}).get("p50"))  # fmt: skip

            # Not due: it has waited seconds of the three hours after which it may move.
            early = front.reroute("busy", first.job_id)
            assert not early.moved and early.why.startswith("it stays: it has waited 0.00 h of the")
            # A running job is never taken back.
            running = front.reroute("busy", hour, force=True)
            assert not running.moved and running.why == "it stays: it is running at busy"

            moved = front.reroute("busy", first.job_id, force=True)
            assert moved.moved and moved.routed is not None, moved.why
            assert moved.why.startswith("re-routed to idle by the federation front: finishes in")
            r = moved.routed.route
            assert r.member == "idle" and dict(r.excluded)["busy"].startswith("already tried")
            gone = admin.get(f"/v1/jobs/{first.job_id}").json()["job"]
            assert (gone["state"], gone["reason"]) == ("cancelled", moved.why)
        with idle.client() as admin:
            there = admin.get(f"/v1/jobs/{moved.routed.job_id}").json()["job"]
            assert there["spec"]["routing"]["rerouted_from"] == "busy"
            assert wait_state(admin, moved.routed.job_id, "succeeded")["state"] == "succeeded"
        # At most once: the moved job's own decision, were it waiting at busy, keeps it there.
        # A job no front of this version sent (no 'asks' kept) stays too.
        with busy.client() as admin:
            moved_note = {k: v for k, v in there["spec"]["routing"].items() if v is not None}
            twice = admin.post("/v1/jobs", json={**spec, "routing": moved_note}).json()["id"]
            again = front.reroute("busy", twice, force=True)
            assert not again.moved and again.why == "it stays: it was re-routed once already (from busy)"
            bare = Route.from_dict(kept["spec"]["routing"]).as_dict()
            unsent = admin.post("/v1/jobs", json={**spec, "routing": bare}).json()["id"]
            old = front.reroute("busy", unsent, force=True)
            assert not old.moved and old.why.startswith("it stays: no front of this version")
            for job in (twice, unsent):
                assert admin.get(f"/v1/jobs/{job}").json()["job"]["state"] == "pending"
            # An operator's periodic run: every pending job a front sent there, each saying why.
            every = CliRunner().invoke(cli, ["reroute", "busy", "--all", "-m", str(up), "--force"])
            assert every.exit_code == 0, every.output
            assert every.output.splitlines() == [
                f"{twice}: it stays: it was re-routed once already (from busy)",
                f"{unsent}: it stays: no front of this version sent it there (its routing "
                "decision does not keep what it asked of the federation)",
            ]
            neither = CliRunner().invoke(cli, ["reroute", "busy", "-m", str(up)])
            assert neither.exit_code == 2 and "--all" in neither.output
            for job in (twice, unsent, hour):
                admin.post(f"/v1/jobs/{job}/cancel")
        # The command line.
        out = CliRunner().invoke(cli, ["reroute", "busy", "nope", "-m", str(up)])
        assert out.exit_code == 1 and "busy: job nope: refused (404)" in out.output
    finally:
        busy.stop()
        idle.stop()


def test_a_member_settles_the_charges_of_a_job_routed_from_another_region(
    tmp_path: Path, db_location: str
) -> None:
    """A job a front sent to ``us`` from users at home in ``eu`` is a cross-region use: the
    member's ledger holds its charges and, for each, a settlement crediting ``region/us``
    (the two net to zero), as the simulated federation settles them; a job whose home is the
    member is not settled. The ledger still reconciles clean against its usage."""
    from suanli.control.metering import recomputed_usage
    from suanli.metering.rating import rate
    from suanli.store import journal, reconcile

    prices = Path(__file__).resolve().parents[2] / "examples" / "prices.yaml"
    srv = start(tmp_path / "us", db_location, gpus=1, prices=prices)
    try:
        spec = {"command": [PY, "-c", "import time; time.sleep(1.5)"], "gpus": 1,
                "tenant": "vision"}  # fmt: skip
        note = {"member": "us", "router": "suanli", "why": "the cheapest"}
        with srv.client() as admin:
            away = admin.post("/v1/jobs", json={**spec, "routing": {**note, "asks": {
                "home": "eu"}}}).json()["id"]  # fmt: skip
            local = admin.post("/v1/jobs", json={**spec, "routing": {**note, "asks": {
                "home": "us"}}}).json()["id"]  # fmt: skip
            for job in (away, local):
                assert wait_state(admin, job, "succeeded")["state"] == "succeeded"
        store = srv.server.store
        deadline = time.monotonic() + 30
        while not {e.charge.job_id for e in journal(store, kind="charge")} >= {away, local}:
            assert time.monotonic() < deadline, "not metered"
            time.sleep(0.2)
        charges = [e.charge for e in journal(store, kind="charge") if e.charge.job_id == away]
        settled = list(journal(store, kind="settlement"))
        assert charges and len(settled) == len(charges)
        assert {e.charge.org for e in settled} == {"region/us"}
        assert {e.charge_key for e in settled} == {c.key for c in charges}
        assert sum(e.charge.amount for e in settled) == -sum(c.amount for c in charges)
        assert all(e.charge.job_id == away for e in settled)  # the local job: none
        config = srv.server.controller.config
        assert config.prices is not None
        expected = list(rate(recomputed_usage(store, config), config.prices))
        assert reconcile(store, expected).clean
    finally:
        srv.stop()


def test_a_rerouted_job_stays_where_staying_is_sooner_or_its_rules_allow_nowhere_else(
    tmp_path: Path, db_location: str
) -> None:
    """Routing again weighs staying (its start as the member plans it, then its run there)
    against moving, and keeps what the job asked of the federation: a job whose data may
    stay only in the EU is never moved to the US member, however long it waits. A winner
    that refuses the job once it was taken back gets it sent back where it waited (a stub
    winner here: a real member that passes the what-if and then refuses is rare)."""
    eu = start(tmp_path / "eu", db_location, gpus=1)
    us = start(tmp_path / "us", str(tmp_path / "us.db"), gpus=1)

    stub = stub_member("refuse", [])
    try:
        with eu.client(tenant_token(eu, "vision")) as c:
            hour = hold_gpu(c, 60, max_runtime=3600)
        tok = {n: str(s.state / "admin.token") for n, s in (("eu", eu), ("us", us))}
        fed = tmp_path / "federation.yaml"

        def write(slow: float, stub_too: bool) -> Front:
            extra = (f"  - {{name: stub, url: 'http://127.0.0.1:{stub.server_address[1]}', "
                     "token: x, prices: {H100: 0.01}}\n") if stub_too else ""  # fmt: skip
            fed.write_text(
                f"members:\n  - {{name: eu, url: '{eu.url}', token_file: '{tok['eu']}', "
                "prices: {H100: 10.0}, jurisdiction: EU}\n"
                f"  - {{name: us, url: '{us.url}', token_file: '{tok['us']}', "
                f"prices: {{H100: 10.0}}, speeds: {{H100: {slow}}}, jurisdiction: US}}\n"
                + extra + "datasets:\n  - {name: scans, gb: 5, at: [eu], jurisdictions: [EU]}\n")
            return Front(load_federation(fed))

        spec = {"command": [PY, "-c", "pass"], "gpus": 1, "estimate": 600, "tenant": "vision"}
        # Residency: only eu may hold it, so it waits there, and stays there.
        kept = write(1.0, False).submit({**spec, "federation": {"data": ["scans"]}})
        assert kept.route.member == "eu"
        stay = write(1.0, False).reroute("eu", str(kept.job_id), force=True)
        assert not stay.moved and stay.why.startswith("it stays: no other member may take it")
        assert "us: data residency: data set scans may stay only in EU" in stay.why

        # us 100 times slower: an hour's wait at eu beats 16.7 hours' run at us.
        with eu.client() as admin:
            plain = admin.post("/v1/jobs", json={**spec, "routing": {
                "member": "eu", "router": "suanli", "why": "w", "asks": {},
                "wait_s": 60}}).json()["id"]  # fmt: skip
            wait_for("its start estimate", lambda: (admin.get(f"/v1/jobs/{plain}").json()["job"]
                                                    .get("start_estimate") or {}).get("p50"))  # fmt: skip
            slow = write(0.01, False).reroute("eu", plain, force=True)
            assert not slow.moved, slow.why
            assert slow.why.startswith("it stays: us would finish it in 16.")

            # The stub, the cheapest and as fast, wins and then refuses: back to eu, a new
            # job there in its queue, never to be routed again; nothing at us.
            with pytest.raises(SpecError, match="the job was sent back to eu as job") as e:
                write(1.0, True).reroute("eu", plain, force=True)
            assert "member stub did not take the job: refused (422)" in str(e.value)
            back = str(e.value).rsplit(" ", 1)[-1]
            assert admin.get(f"/v1/jobs/{plain}").json()["job"]["state"] == "cancelled"
            again = admin.get(f"/v1/jobs/{back}").json()["job"]
            assert again["state"] == "pending" and again["queue"] == "vision"
            assert again["spec"]["routing"]["rerouted_from"] == "eu"
            for job in (back, hour, str(kept.job_id)):
                admin.post(f"/v1/jobs/{job}/cancel")
        with us.client() as admin:
            assert admin.get("/v1/jobs").json()["jobs"] == []
    finally:
        stub.shutdown()
        eu.stop()
        us.stop()


def stub_member(mode: str, posts: list[dict[str, object]]) -> HTTPServer:
    """A member stub (what no real server here does): ``old`` refuses a decision with the
    fields a member of an older version does not know (422), and takes it without them;
    ``lost`` stores a job and then fails its answer (500); ``refuse`` refuses every job
    (422) after a what-if that said it would start at once. Each job body posted is kept."""
    import json

    class Stub(BaseHTTPRequestHandler):
        def answer(self, code: int, body: object) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self.answer(200, {"nodes": [{"gpu_model": "H100", "gpu_count": 8, "gpus": []}],
                              "datasets": []})  # fmt: skip

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            if self.path == "/v1/what-if":
                now = datetime.now(UTC).isoformat()
                self.answer(200, {"room_now": True, "load": 0.0, "start_estimate": {"p50": now}})
                return
            posts.append(body)
            extra = set(body.get("routing") or {}) - {"member", "router", "why", "scores",
                                                      "excluded"}  # fmt: skip
            if mode == "old" and extra:
                self.answer(422, {"error": f"invalid request: routing.{sorted(extra)[0]}: Extra "
                                           "inputs are not permitted", "fields": []})  # fmt: skip
            elif mode == "old":
                self.answer(201, {"id": "7"})
            elif mode == "refuse":
                self.answer(422, {"error": "refused: the queue is closed", "fields": []})
            else:
                self.answer(500, {"error": "internal error", "fields": []})

        def log_message(self, *args: object) -> None:
            pass

    srv = HTTPServer(("127.0.0.1", 0), Stub)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def test_an_older_member_gets_the_decision_alone_and_a_lost_answer_sends_nothing_twice(
    tmp_path: Path, db_location: str
) -> None:
    """A member of an older version refuses a decision with fields it does not know: the
    front sends it the decision alone. A job taken back whose winner then fails to answer
    (it may hold the job) is not sent back as well: the front says where to look and prints
    the spec; the job is at no other member. Both winners are stubs."""
    posts: list[dict[str, object]] = []
    old, lost = stub_member("old", posts), stub_member("lost", posts)
    eu = start(tmp_path / "eu", db_location, gpus=1)
    try:
        token = tmp_path / "t"
        token.write_text("x")
        fed = federation(tmp_path, [("old", f"http://127.0.0.1:{old.server_address[1]}", str(token))])
        spec = {"command": [PY, "-c", "pass"], "gpus": 1, "estimate": 600, "tenant": "vision"}
        sent = Front(load_members(fed)).submit(spec)
        assert sent.job_id == "7" and len(posts) == 2
        assert set(posts[1]["routing"]) == {"member", "router", "why", "scores", "excluded"}  # type: ignore[arg-type]

        with eu.client(tenant_token(eu, "vision")) as c:
            hour = hold_gpu(c, 60, max_runtime=3600)
        eu_token = str(eu.state / "admin.token")
        alone = federation(tmp_path, [("eu", eu.url, eu_token)])
        first = Front(load_members(alone)).submit(spec)
        assert first.route.member == "eu" and first.job_id is not None
        both = federation(tmp_path, [("eu", eu.url, eu_token),
                                     ("lost", f"http://127.0.0.1:{lost.server_address[1]}",
                                      str(token))])  # fmt: skip
        with eu.client() as admin:
            wait_for("its start estimate", lambda: (admin.get(f"/v1/jobs/{first.job_id}").json()
                                                    ["job"].get("start_estimate") or {}).get("p50"))  # fmt: skip
        with pytest.raises(SpecError, match="lost may hold it: look there") as e:
            Front(load_members(both)).reroute("eu", first.job_id, force=True)
        assert '"command"' in str(e.value)  # the spec, to send it again by hand
        with eu.client() as admin:
            assert admin.get(f"/v1/jobs/{first.job_id}").json()["job"]["state"] == "cancelled"
            assert [j["id"] for j in admin.get("/v1/jobs?state=pending").json()["jobs"]] == []
            admin.post(f"/v1/jobs/{hour}/cancel")
        assert len(posts) == 3  # the one lost answer; nothing posted again
    finally:
        old.shutdown()
        lost.shutdown()
        eu.stop()

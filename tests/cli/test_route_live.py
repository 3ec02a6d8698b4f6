"""``suanli route``: a live federation front over real member servers (``suanli serve`` as
``tests/serving.py`` starts it, two of them, on SQLite and PostgreSQL), asking each when it
would start the job (``POST /v1/what-if``) and submitting to the winner with its decision
attached; a member down or refusing is excluded with its reason, and nothing is queued
where the job did not go."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pg import location_fixture, postgres_server  # noqa: F401  (postgres_server: a fixture)
from serving import PY, free_port, hold_gpu, run_cli, start, tenant_token, wait_state
from suanli.cli.main import app as cli
from suanli.core.model import SpecError
from suanli.core.routing import Route
from suanli.federation.front import Front, load_members

db_location = location_fixture()


def federation(tmp_path: Path, members: list[tuple[str, str, str]]) -> Path:
    """A federation file of (name, url, admin token file) members, H100s at $10 an hour."""
    rows = "".join(f"  - name: {n}\n    url: {u}\n    token_file: {t}\n    prices: {{H100: 10.0}}\n"
                   for n, u, t in members)  # fmt: skip
    path = tmp_path / "federation.yaml"
    path.write_text("members:\n" + rows)
    return path


def test_the_front_routes_to_the_member_that_starts_it_first_and_explains_why(
    tmp_path: Path, db_location: str
) -> None:
    busy = start(tmp_path / "busy", db_location, gpus=1)
    idle = start(tmp_path / "idle", str(tmp_path / "idle.db"), gpus=1)
    try:
        with busy.client(tenant_token(busy, "vision")) as c:
            hour = hold_gpu(c, 60, max_runtime=3600)
        down = f"http://127.0.0.1:{free_port()}"  # nothing listens there
        fed = federation(tmp_path, [("busy", busy.url, str(busy.state / "admin.token")),
                                    ("idle", idle.url, str(idle.state / "admin.token")),
                                    ("gone", down, str(idle.state / "admin.token"))])  # fmt: skip
        spec = {"command": [PY, "-c", "pass"], "gpus": 1, "estimate": 600, "tenant": "vision"}
        front = Front(load_members(fed))

        # Both live members may take it; the busy one would start it in about an hour.
        routed = front.route(spec)
        r = routed.route
        assert r.member == "idle", r.explain()
        wait = {c.member: c.start_s for c in routed.candidates if not c.excluded}
        assert wait["idle"] == 0.0 and 1800 <= wait["busy"] <= 7200
        assert dict(r.excluded)["gone"].startswith("down:")

        # Submitted: at the idle member with its decision, nowhere else.
        sent = front.submit(spec)
        assert sent.route.member == "idle" and sent.job_id is not None
        with idle.client() as admin:
            kept = admin.get(f"/v1/jobs/{sent.job_id}").json()["job"]
            assert kept["tenant"] == "vision"
            assert Route.from_dict(kept["spec"]["routing"]).member == "idle"
            assert wait_state(admin, sent.job_id, "succeeded")["state"] == "succeeded"
        with busy.client() as admin:
            assert [j["id"] for j in admin.get("/v1/jobs").json()["jobs"]] == [hour]
        shown = run_cli(idle, tenant_token(idle, "vision"), "show", sent.job_id)
        assert "routed to idle by suanli" in shown and "gone: excluded: down" in shown

        # A job no member could hold: each member's own refusal, and nothing queued.
        with pytest.raises(SpecError, match="no member may take the job") as e:
            front.submit({**spec, "gpus": 2})
        assert str(e.value).count("refused (422)") == 2
        nonsense = front.route({**spec, "gpus": "many", "tasks": [1]}).route  # members judge it
        assert nonsense.member is None and "refused (422)" in nonsense.why
        with idle.client() as admin:
            assert [j["id"] for j in admin.get("/v1/jobs").json()["jobs"]] == [sent.job_id]

        # The command line: a dry run explains and sends nothing; a real one submits.
        runner = CliRunner()
        spec_file = tmp_path / "job.yaml"
        spec_file.write_text(f"command: [{PY!r}, -c, pass]\ngpus: 1\nestimate: 600\n")
        dry = runner.invoke(cli, ["route", str(spec_file), "--members", str(fed),
                                  "--tenant", "vision", "--dry-run"])  # fmt: skip
        assert dry.exit_code == 0, dry.output
        assert "routed to idle by suanli" in dry.output and "Nothing was submitted" in dry.output
        real = runner.invoke(cli, ["route", str(spec_file), "-m", str(fed), "--tenant", "vision",
                                   "--router", "first-admit"])  # fmt: skip
        assert real.exit_code == 0, real.output
        assert "Submitted job" in real.output and "to member idle" in real.output
        no_tenant = runner.invoke(cli, ["route", str(spec_file), "-m", str(fed)])
        assert no_tenant.exit_code == 2 and "tenant" in no_tenant.output
        time.sleep(0.1)
        with busy.client() as admin:
            assert [j["id"] for j in admin.get("/v1/jobs").json()["jobs"]] == [hour]
            admin.post(f"/v1/jobs/{hour}/cancel")
    finally:
        busy.stop()
        idle.stop()


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("members: []\n", "at least one member"),
        ("members:\n  - name: a\n    url: ftp://x\n    token: t\n    prices: {H100: 1}\n", "url"),
        ("members:\n  - name: a\n    url: http://x\n    prices: {H100: 1}\n", "token"),
        ("members:\n  - name: a\n    url: http://x\n    token: t\n    prices: {H100: -1}\n", "H100"),
        ("members:\n  - name: a\n    url: http://x\n    token: t\n    prices: {H100: .nan}\n", "H100"),
        ("members:\n  - {name: a, url: 'http://x', token: t, prices: {H100: 1}}\n"
         "  - {name: a, url: 'http://y', token: t, prices: {H100: 1}}\n", "unique"),
        ("members:\n  - {name: a, url: 'http://x', token: t, prices: {H100: 1}, port: 1}\n", "port"),
        ("members: [\n", "not valid YAML"),
    ],
)
def test_a_bad_federation_file_is_refused_naming_what_and_where(
    tmp_path: Path, text: str, says: str
) -> None:
    path = tmp_path / "federation.yaml"
    path.write_text(text)
    with pytest.raises(SpecError, match=says) as e:
        load_members(path)
    assert str(path) in str(e.value)


def test_a_member_whose_answers_are_not_the_apis_counts_as_down(tmp_path: Path) -> None:
    """Something else listens at a member's address (a web page for every path): the front
    excludes it as down, saying why, and routes nowhere."""

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"<html>not suanli</html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_POST = do_GET

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        token = tmp_path / "t"
        token.write_text("x")
        url = f"http://127.0.0.1:{server.server_address[1]}"
        front = Front(load_members(federation(tmp_path, [("web", url, str(token))])))
        r = front.route({"command": ["true"], "gpus": 1, "tenant": "t"}).route
        assert r.member is None
        assert dict(r.excluded)["web"].startswith("down: its answer is not the API's")
    finally:
        server.shutdown()


def test_the_front_asks_every_member_at_once(tmp_path: Path) -> None:
    """Two members' first requests are in flight together (each waits at a barrier for the
    other before answering), so a slow member costs the front one timeout, not one each."""
    met = threading.Barrier(2, timeout=10)
    together: list[bool] = []

    class Slow(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            try:
                met.wait()
                together.append(True)
            except threading.BrokenBarrierError:
                together.append(False)
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    servers = [HTTPServer(("127.0.0.1", 0), Slow) for _ in range(2)]
    for s in servers:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    try:
        token = tmp_path / "t"
        token.write_text("x")
        fed = federation(tmp_path, [(f"m{k}", f"http://127.0.0.1:{s.server_address[1]}", str(token))
                                    for k, s in enumerate(servers)])  # fmt: skip
        r = Front(load_members(fed)).route({"command": ["true"], "gpus": 1, "tenant": "t"}).route
        assert together == [True, True]
        assert all(why.startswith("down: it answered 503") for _, why in r.excluded)
    finally:
        for s in servers:
            s.shutdown()

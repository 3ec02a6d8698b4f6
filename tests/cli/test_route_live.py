"""``suanli route``: a live federation front over real member servers (``suanli serve`` as
``tests/serving.py`` starts it, two of them, on SQLite and PostgreSQL), asking each when it
would start the job (``POST /v1/what-if``) and submitting to the winner with its decision
attached; a member down or refusing is excluded with its reason, and nothing is queued
where the job did not go."""

from __future__ import annotations

import math
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pg import location_fixture, postgres_server  # noqa: F401  (postgres_server: a fixture)
from serving import (
    PY,
    federation,
    free_port,
    hold_gpu,
    run_cli,
    start,
    tenant_token,
    wait_state,
)  # fmt: skip
from suanli.cli.main import app as cli
from suanli.core.model import SpecError
from suanli.core.routing import Route
from suanli.federation.front import Front, load_federation, load_members

db_location = location_fixture()


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
        # A spot job's hour follows each member's use now (the federation's stated rule, on
        # demand when full, a tenth when idle): busy's one GPU is held, idle's is not.
        spot = {c.member: c for c in front.route({**spec, "priority_class": "spot"}).candidates
                if c.ok}  # fmt: skip
        assert spot["busy"].price_hour == pytest.approx(10.0)
        assert spot["idle"].price_hour == pytest.approx(1.0)
        assert spot["busy"].list_price_hour == spot["idle"].list_price_hour == 10.0

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


ONE = "members:\n  - {name: a, url: 'http://x', token: t, prices: {H100: 1}}\n"


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
        (ONE + "regions: []\n", "unknown field"),
        (ONE + "datasets:\n  - {name: d, gb: 10, at: [b]}\n", "names no member of the file: b"),
        (ONE + "datasets:\n  - {name: d, gb: -1, at: [a]}\n", "data set 1 \\(d\\): gb"),
        (ONE + "datasets:\n  - {name: d, gb: 1, at: []}\n", "at least one"),
        (ONE + "datasets:\n  - {name: d, gb: 1, at: a, jurisdictions: []}\n", "jurisdictions"),
        (ONE + "datasets:\n  - {name: d, gb: 1, at: a}\n  - {name: d, gb: 2, at: a}\n", "unique"),
        (ONE + "network: {gbps: 0}\n", "network: gbps"),
        (ONE + "network: {mbps: 10}\n", "network: a mapping"),
        (ONE + "1: x\n", "unknown field\\(s\\) 1"),
        ("members:\n  - {name: eu west, url: 'http://x', token: t, prices: {H100: 1}}\n", "name"),
        (ONE + "datasets:\n  - {name: x/../other, gb: 1, at: a}\n", "'name' must be letters"),
        (ONE + "datasets:\n  - {name: d, gb: 1" + "0" * 400 + ", at: a}\n", "gb: must be a finite"),
        (ONE + "datasets:\n  - {name: d, gb: 2000000000, at: a}\n", "gb: at most"),
        ("members:\n  - {name: a, url: 'http://x', token: t, prices: {H100: 1}, site: [91, 0]}\n",
         "site"),
        ("members:\n  - {name: a, url: 'http://x', token: t, prices: {H100: 1}, egress_usd_gb: x}\n",
         "egress_usd_gb"),
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


DUBLIN, VIRGINIA = (53.35, -6.26), (38.95, -77.45)


def great_circle_km(a: tuple[float, float], b: tuple[float, float]) -> float:
    """Written out here, apart from the project's: the spherical law of cosines."""
    la1, lo1, la2, lo2 = map(math.radians, (*a, *b))
    c = math.sin(la1) * math.sin(la2) + math.cos(la1) * math.cos(la2) * math.cos(lo2 - lo1)
    return 6371.0 * math.acos(c)


class Spy(BaseHTTPRequestHandler):
    """A member that records every request it gets and answers none of them well."""

    asked: list[str] = []

    def do_GET(self) -> None:
        Spy.asked.append(self.path)
        self.send_response(503)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_POST = do_GET

    def log_message(self, *args: object) -> None:
        pass


def test_the_front_keeps_the_federations_rules_and_prices_the_datas_move(
    tmp_path: Path, db_location: str
) -> None:
    """Two live members, eu (Dublin, EU) and us (Virginia, US, and cheaper), and a spy in the
    US that records whatever it is asked. A job's data residency, its owner's regions, its
    users' latency and its budget each exclude a member with the reason, and a member so
    excluded is never told of the job; a data set held elsewhere is priced as moved, at the
    file's egress and link figures, against a distance worked out here."""
    eu = start(tmp_path / "eu", db_location, gpus=1)
    us = start(tmp_path / "us", str(tmp_path / "us.db"), gpus=1)
    spy = HTTPServer(("127.0.0.1", 0), Spy)
    threading.Thread(target=spy.serve_forever, daemon=True).start()
    Spy.asked = []
    try:
        fed = tmp_path / "federation.yaml"
        fed.write_text(f"""
members:
  - {{name: eu, url: '{eu.url}', token_file: '{eu.state / "admin.token"}', prices: {{H100: 12.0}},
     site: {list(DUBLIN)}, jurisdiction: EU, egress_usd_gb: 0.02}}
  - {{name: us, url: '{us.url}', token_file: '{us.state / "admin.token"}', prices: {{H100: 10.0}},
     site: {list(VIRGINIA)}, jurisdiction: US, egress_usd_gb: 0.02}}
  - {{name: spy, url: 'http://127.0.0.1:{spy.server_address[1]}', token: x,
     prices: {{H100: 1.0}}, site: {list(VIRGINIA)}, jurisdiction: US}}
datasets:
  - {{name: scans, gb: 500, at: [eu], jurisdictions: [EU]}}
  - {{name: weights, gb: 2000, at: eu}}
  - {{name: corpus, gb: 100, at: [eu, us]}}
  - {{name: logs, gb: 1, at: [eu]}}
  - {{name: huge, gb: 1000000000, at: [eu]}}
network: {{gbps: 10, hour_usd: 2.25}}
""")
        front = Front(load_federation(fed))
        spec = {"command": [PY, "-c", "pass"], "gpus": 1, "estimate": 600, "tenant": "vision"}

        def route(**asks: object) -> tuple[Route, dict[str, object]]:
            routed = front.route({**spec, "federation": asks} if asks else spec)
            return routed.route, {c.member: c for c in routed.candidates}

        # Nothing asked of the federation: both idle, us is cheaper; the spy is down.
        r, _ = route()
        assert r.member == "us", r.explain()
        assert dict(r.excluded)["spy"].startswith("down: it answered 503")
        asked = len(Spy.asked)

        # Data that may stay only in the EU: us and the spy are excluded, and not asked.
        r, _ = route(data=["scans"])
        assert r.member == "eu", r.explain()
        why = dict(r.excluded)
        assert why["us"] == why["spy"] == "data residency: data set scans may stay only in EU"
        # Asked only which copies it holds, as every member is: never told of the job.
        assert Spy.asked[asked:] == ["/v1/datasets"]

        # 2,000 GB held only at eu: moving it to us is priced, and the job starts no sooner.
        # The spy, found down when asked for its copies, is not asked again.
        asked = len(Spy.asked)
        r, c = route(data=["weights"])
        assert Spy.asked[asked:] == ["/v1/datasets"]
        assert dict(r.excluded)["spy"].startswith("down: it answered 503")
        rtt_ms = 2 * great_circle_km(DUBLIN, VIRGINIA) / 200.0  # light in fibre: 200 km a ms
        seconds = 2000 * 8 / 10 + rtt_ms / 1000
        assert 5000 < great_circle_km(DUBLIN, VIRGINIA) < 5700  # about 5,450 km
        assert c["us"].move_gb == 2000 and c["eu"].move_gb == 0
        assert c["us"].move_s == pytest.approx(seconds, rel=1e-3)
        assert c["us"].move_cost == pytest.approx(2000 * 0.02 + seconds / 3600 * 2.25, rel=1e-3)
        assert c["us"].start_s >= c["us"].move_s and not c["us"].admits_now
        assert r.member == "eu", r.explain()  # $41 and 27 minutes to save $0.33 of compute
        # Held at both: nothing moves.
        r, c = route(data=["corpus"])
        assert r.member == "us" and c["us"].move_gb == c["eu"].move_gb == 0

        # A member that says it holds a copy (item 6): nothing moves there, and it wins.
        with us.client() as admin:
            assert admin.put("/v1/datasets/weights", json={"gb": 2000}).status_code == 200
            r, c = route(data=["weights"])
            assert r.member == "us" and c["us"].move_gb == 0, r.explain()
            assert admin.delete("/v1/datasets/weights").status_code == 200
            # One on its way, due in an hour: nothing moves, and the job waits for it there.
            on_way = {"gb": 2000, "state": "arriving", "arrives_in_s": 3600, "source": "eu"}
            assert admin.put("/v1/datasets/weights", json=on_way).status_code == 200
            r, c = route(data=["weights"])
            assert c["us"].move_gb == 0 and 3500 < c["us"].start_s <= 3600, r.explain()
            assert r.member == "eu" and not c["us"].admits_now
            assert admin.delete("/v1/datasets/weights").status_code == 200

        # A small data set held only at eu: the job goes to us and the copy with it. us is
        # told the copy is on its way, so the next job there moves nothing again.
        sent = front.submit({**spec, "federation": {"data": ["logs"]}})
        assert sent.route.member == "us" and sent.notes == ()
        [mv] = sent.moves
        one = 8 / 10 + rtt_ms / 1000
        assert (mv.name, mv.source, mv.target, mv.gb) == ("logs", "eu", "us", 1.0)
        assert mv.seconds == pytest.approx(one, rel=1e-3)
        assert mv.usd == pytest.approx(0.02 + one / 3600 * 2.25, rel=1e-3)
        with us.client() as admin:
            [held] = admin.get("/v1/datasets").json()["datasets"]
            assert (held["name"], held["state"], held["source"]) == ("logs", "arriving", "eu")
            assert wait_state(admin, sent.job_id, "succeeded")["state"] == "succeeded"
        again = front.route({**spec, "federation": {"data": ["logs"]}})
        assert again.route.member == "us" and again.moves == ()
        assert {c.member: c.move_gb for c in again.candidates if c.ok} == {"eu": 0, "us": 0}

        # A copy the member will not record (a move of years): the job is still taken, and
        # the front says what the member did not take.
        far = front.submit({**spec, "federation": {"data": ["huge"], "regions": ["us"]}})
        assert far.route.member == "us" and far.job_id is not None
        [note] = far.notes
        assert note.startswith("us was not told that data set huge is on its way: refused (422)")
        with us.client() as admin:
            assert admin.post(f"/v1/jobs/{far.job_id}/cancel").status_code == 202
            assert [d["name"] for d in admin.get("/v1/datasets").json()["datasets"]] == ["logs"]

        # The owner's regions.
        r, _ = route(regions=["eu"])
        assert r.member == "eu" and dict(r.excluded)["us"] == "the owner allows only eu"

        # An online job's users in Dublin, within 30 ms: Virginia is about 55 ms away.
        online = {**spec, "priority_class": "online"}
        routed = front.route({**online, "federation": {"home": "eu", "max_latency_ms": 30}})
        assert routed.route.member == "eu", routed.route.explain()
        far = dict(routed.route.excluded)["us"]
        assert far == f"{rtt_ms:.0f} ms from its users, more than 30 ms"

        # A budget: an hour at most (max_runtime) of eu's $12 GPU passes $11; us's $10 does not.
        capped = {**spec, "max_runtime": 3600}
        r = front.route({**capped, "federation": {"budget_usd": 11}}).route
        assert r.member == "us" and dict(r.excluded)["eu"] == "budget: its worst case $12.00 passes $11.00"
        # With the 2,000 GB to move to us, no member is within it: nothing is sent.
        with pytest.raises(SpecError, match="no member may take the job") as e:
            front.submit({**capped, "federation": {"budget_usd": 11, "data": ["weights"]}})
        assert "budget: its worst case $51." in str(e.value)
        # An elastic job's worst case is at the most workers it may grow to.
        grows = front.route({**capped, "max_workers": 8, "federation": {"budget_usd": 11}}).route
        assert grows.member is None
        assert dict(grows.excluded)["us"] == "budget: its worst case $80.00 passes $11.00"

        # Submitted: the member gets the job without the block, and the decision with the move.
        sent = front.submit({**spec, "federation": {"data": ["weights"]}})
        assert sent.moves == () and sent.notes == ()
        assert sent.route.member == "eu" and sent.job_id is not None
        with eu.client() as admin:
            kept = admin.get(f"/v1/jobs/{sent.job_id}").json()["job"]["spec"]
            assert "federation" not in kept
            scores = {s.member: dict(s.parts) for s in Route.from_dict(kept["routing"]).scores}
            assert scores["us"]["move $"] == pytest.approx(2000 * 0.02 + seconds / 3600 * 2.25,
                                                           rel=1e-3)  # fmt: skip
            assert wait_state(admin, sent.job_id, "succeeded")["state"] == "succeeded"
        with us.client() as admin:  # the two jobs sent there above, and no other
            assert len(admin.get("/v1/jobs").json()["jobs"]) == 2

        # An operator's command line for the copies (admins only).
        root = (us.state / "admin.token").read_text().strip()
        put = run_cli(us, root, "datasets", "put", "ckpt", "--gb", "5", "--arriving-in", "60",
                      "--source", "eu")  # fmt: skip
        assert put.startswith("data set ckpt: arriving, due ")
        listed = run_cli(us, root, "datasets")
        assert "ckpt" in listed and "arriving" in listed and "logs" in listed
        assert run_cli(us, root, "datasets", "rm", "ckpt") == "data set ckpt: forgotten here\n"
        plain = CliRunner().invoke(cli, ["datasets", "--server", us.url, "--token",
                                         tenant_token(us, "vision")])  # fmt: skip
        assert plain.exit_code == 1 and "admin" in plain.output

        # The command line reads the block from the job's file.
        job = tmp_path / "job.yaml"
        job.write_text(f"command: [{PY!r}, -c, pass]\ngpus: 1\nfederation: {{data: [scans]}}\n")
        out = CliRunner().invoke(cli, ["route", str(job), "-m", str(fed), "--tenant", "vision",
                                       "--dry-run"])  # fmt: skip
        assert out.exit_code == 0, out.output
        assert "routed to eu" in out.output
        assert "us: excluded: data residency: data set scans may stay only in EU" in out.output
    finally:
        spy.shutdown()
        eu.stop()
        us.stop()


@pytest.mark.parametrize(
    ("asks", "says"),
    [
        ("nonsense", "a mapping of"),
        ({"zone": "eu"}, "unknown field\\(s\\) zone"),
        ({"data": ["nowhere"]}, "data: no data set nowhere in the federation file"),
        ({"regions": ["mars"]}, "regions: no member mars"),
        ({"regions": [1]}, "regions: a list of names"),
        ({"home": "mars"}, "home: 'mars' is not a member"),
        ({"budget_usd": 10}, "budget_usd needs the job's max_runtime"),
        ({"budget_usd": -1}, "budget_usd: must be a finite number >= 0"),
        ({"max_latency_ms": 30, "home": "a"}, "online job"),
        ({"max_latency_ms": float("nan"), "home": "a"}, "max_latency_ms: must be a finite"),
        ({"home": ["a"]}, "home: \\['a'\\] is not a member"),
        ({1: 2, "x": 3}, "unknown field\\(s\\) 1, x"),
        ({"budget_usd": 10**400}, "budget_usd: must be a finite number"),
        ({"regions": 0}, "regions: a list of names"),
        ({"data": {}}, "data: a list of names"),
        ({"budget_usd": 5, "max_runtime": "1h"}, "max_runtime: must be a finite number > 0"),
    ],
)
def test_a_bad_federation_block_is_refused_before_any_member_is_asked(
    tmp_path: Path, asks: object, says: str
) -> None:
    """The job's ``federation`` block is checked against the file first: nothing is sent
    (the member's address has nothing listening; were it asked, it would be 'down')."""
    fed = tmp_path / "federation.yaml"
    fed.write_text(f"members:\n  - {{name: a, url: 'http://127.0.0.1:{free_port()}', token: t, "
                   "prices: {H100: 1}}\ndatasets:\n  - {name: d, gb: 1, at: a}\n")  # fmt: skip
    front = Front(load_federation(fed))
    job = {"command": ["true"], "gpus": 1, "tenant": "t", "federation": asks}
    if isinstance(asks, dict) and "max_runtime" in asks:
        job["max_runtime"] = asks.pop("max_runtime")
    with pytest.raises(SpecError, match=says):
        front.route(job)


def test_a_file_that_is_not_text_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "federation.yaml"
    path.write_bytes(b"members: [\xff\xfe]\n")
    with pytest.raises(SpecError, match="not UTF-8 text"):
        load_federation(path)
    token = tmp_path / "token"
    token.write_bytes(b"\xff\xfe")
    path.write_text(f"members:\n  - {{name: a, url: 'http://x', token_file: '{token}', "
                    "prices: {H100: 1}}\n")  # fmt: skip
    with pytest.raises(SpecError, match="token_file: not UTF-8 text"):
        load_federation(path)


@pytest.mark.parametrize(
    ("nodes", "what_if", "says"),
    [
        ('{"nodes": [{"gpu_model": "H100", "gpu_count": 1e400, "gpus": []}]}', None,
         "gpu_count: inf is not a count"),
        ('{"nodes": [{"gpu_model": "H100", "gpu_count": -8, "gpus": []}]}', None,
         "gpu_count: -8 is not a count"),
        (None, '{"room_now": "false", "load": 0, "start_estimate": {"p50": null}}',
         "room_now: 'false' is not true or false"),
        (None, '{"room_now": true, "load": NaN, "start_estimate": {"p50": null}}',
         "load: nan is not a finite figure"),
    ],
)
def test_a_member_answering_odd_figures_is_excluded_alone(
    tmp_path: Path, nodes: str | None, what_if: str | None, says: str
) -> None:
    """A member that answers with figures no control plane gives (a count past a float's
    range, a negative count, "false" as a text, NaN) is excluded as down, saying which
    figure, and the front still routes among the others. The odd member is a stub: a real
    server never answers so."""
    good_nodes = '{"nodes": [{"gpu_model": "H100", "gpu_count": 1, "gpus": [], "state": "up"}]}'
    good_what_if = '{"room_now": true, "load": 0.0, "start_estimate": {"p50": null}}'

    def handler(body_nodes: str, body_what_if: str) -> type[BaseHTTPRequestHandler]:
        class Member(BaseHTTPRequestHandler):
            def answer(self, body: str) -> None:
                data = body.encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self.answer(body_nodes)

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self.answer(body_what_if)

            def log_message(self, *args: object) -> None:
                pass

        return Member

    servers = [HTTPServer(("127.0.0.1", 0), handler(nodes or good_nodes, what_if or good_what_if)),
               HTTPServer(("127.0.0.1", 0), handler(good_nodes, good_what_if))]  # fmt: skip
    for srv in servers:
        threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        token = tmp_path / "t"
        token.write_text("x")
        fed = federation(tmp_path, [(name, f"http://127.0.0.1:{srv.server_address[1]}", str(token))
                                    for name, srv in zip(("odd", "fine"), servers, strict=True)])  # fmt: skip
        r = Front(load_members(fed)).route({"command": ["true"], "gpus": 1, "tenant": "t"}).route
        assert r.member == "fine", r.explain()
        why = dict(r.excluded)["odd"]
        assert why.startswith("down: its answer is not the API's") and says in why, why
    finally:
        for srv in servers:
            srv.shutdown()

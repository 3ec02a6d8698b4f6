"""``suanli ready`` against a tiny real HTTP server, and the hint when no token is given."""

from __future__ import annotations

import shlex
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from suanli.cli.main import app as cli

NO_TOKEN: dict[str, str | None] = {"SUANLI_TOKEN": None, "SUANLI_TOKEN_FILE": "/nonexistent/token"}


@dataclass
class Fake:
    """A server that answers /healthz 503 until ``healthy`` is set (or for its first
    ``unhealthy`` requests, then calls ``on_healthy``), and /v1/whoami 200 for the token
    ``good`` only."""

    url: str
    healthy: threading.Event = field(default_factory=threading.Event)
    unhealthy: int | None = None
    on_healthy: Any = None
    seen: list[tuple[str, int]] = field(default_factory=list)


@pytest.fixture
def fake() -> Iterator[Fake]:
    state: dict[str, Fake] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            f = state["fake"]
            if self.path == "/healthz":
                if f.unhealthy is not None and not f.healthy.is_set():
                    if sum(path == "/healthz" for path, _ in f.seen) >= f.unhealthy:
                        f.healthy.set()
                        if f.on_healthy is not None:
                            f.on_healthy()
                code = 200 if f.healthy.is_set() else 503
                body = b'{"status":"ok"}' if code == 200 else b'{"error":"scheduler not running"}'
            elif self.path == "/v1/whoami":
                good = self.headers.get("Authorization") == "Bearer good"
                code, body = (200, b"{}") if good else (401, b'{"error":"invalid token"}')
            else:
                code, body = 404, b'{"error":"no such path"}'
            f.seen.append((self.path, code))
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state["fake"] = Fake(f"http://127.0.0.1:{httpd.server_address[1]}")
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield state["fake"]
    httpd.shutdown()
    httpd.server_close()
    thread.join(10)


def later(seconds: float, action: Any) -> threading.Thread:
    def run() -> None:
        time.sleep(seconds)
        action()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def ready(*args: str, env: Mapping[str, str | None] | None = None) -> Any:
    return CliRunner().invoke(cli, ["ready", *args, "--interval", "0.05"], env=env)


def test_ready_waits_for_health_then_the_admin_token(fake: Fake, tmp_path: Path) -> None:
    state = tmp_path / "state"
    token = state / "admin.token"
    written: list[float] = []

    def write_token() -> None:  # as a fresh server does, some time after it answers
        state.mkdir()
        token.write_text("")  # created, not written yet: not ready
        time.sleep(0.4)
        token.write_text("sl_admin\n")
        written.append(time.monotonic())

    fake.unhealthy = 3
    fake.on_healthy = lambda: later(0.2, write_token)
    result = ready("--server", fake.url, "--state-dir", str(state), "--timeout", "20", env=NO_TOKEN)
    done = time.monotonic()
    assert result.exit_code == 0, result.output
    assert result.stdout == f"ready: {fake.url}/v1\n" and result.stderr == ""
    assert written and done >= written[0]
    assert [code for path, code in fake.seen if path == "/healthz"] == [503, 503, 503, 200]


def test_ready_uses_the_default_state_dir(fake: Fake, tmp_path: Path) -> None:
    fake.healthy.set()
    env = {**NO_TOKEN, "SUANLI_STATE_DIR": str(tmp_path)}
    writer = later(0.3, lambda: (tmp_path / "admin.token").write_text("sl_admin\n"))
    result = ready("--server", fake.url, "--quiet", env=env)
    writer.join()
    assert result.exit_code == 0 and result.output == ""
    assert (tmp_path / "admin.token").read_text()


def test_ready_with_a_working_token_waits_for_no_admin_token(fake: Fake, tmp_path: Path) -> None:
    fake.healthy.set()
    env = {"SUANLI_TOKEN": "good", "SUANLI_STATE_DIR": str(tmp_path)}
    result = ready("--server", fake.url, "--timeout", "5", env=env)
    assert result.exit_code == 0 and result.stdout == f"ready: {fake.url}/v1\n"
    # A revoked or stale token does not count: a fresh server writes the admin token.
    env = {"SUANLI_TOKEN": "stale", "SUANLI_STATE_DIR": str(tmp_path)}
    result = ready("--server", fake.url, "--timeout", "0.3", env=env)
    assert result.exit_code == 1 and str(tmp_path / "admin.token") in result.stderr


def test_ready_times_out_saying_what_it_waited_for(fake: Fake, tmp_path: Path) -> None:
    result = ready("--server", fake.url, "--timeout", "0.3", "--state-dir", str(tmp_path))
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith("suanli: error: not ready after 0.3s: waiting for ")
    assert f"{fake.url}/healthz" in result.stderr and "503" in result.stderr
    assert "scheduler not running" in result.stderr and result.stderr.count("\n") == 1

    fake.healthy.set()
    result = ready(
        "--server", fake.url, "--timeout", "0.3", "--state-dir", str(tmp_path), env=NO_TOKEN
    )
    assert result.exit_code == 1
    assert f"waiting for the admin token {tmp_path / 'admin.token'}" in result.stderr

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    result = ready("--server", f"http://127.0.0.1:{port}", "--timeout", "0.4", "--quiet")
    assert result.exit_code == 1 and "cannot reach it" in result.stderr
    assert 0.4 <= time.monotonic() - t0 < 5
    assert ready("--server", "localhost:8620").exit_code == 2
    assert ready("--timeout", "-1").exit_code == 2


def test_no_token_says_how_to_get_one(tmp_path: Path) -> None:
    state = tmp_path / "my state"
    env = {**NO_TOKEN, "SUANLI_STATE_DIR": str(state)}
    result = CliRunner().invoke(cli, ["queue", "--server", "http://127.0.0.1:9"], env=env)
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert "no API token: give --token, set SUANLI_TOKEN" in result.stderr
    hint = f"export SUANLI_TOKEN=$(cat {shlex.quote(str(state / 'admin.token'))})"
    assert result.stderr.rstrip().endswith(hint)
    xdg = {**NO_TOKEN, "SUANLI_STATE_DIR": None, "XDG_DATA_HOME": str(tmp_path)}
    result = CliRunner().invoke(cli, ["nodes", "--server", "http://127.0.0.1:9"], env=xdg)
    assert f"$(cat {tmp_path / 'suanli' / 'admin.token'})" in result.stderr

"""What the client commands share: the server and token, HTTP calls, errors and output.

Server: ``--server`` or ``SUANLI_SERVER`` (default ``http://127.0.0.1:8620``). Token:
``--token``, else ``SUANLI_TOKEN``, else the file ``SUANLI_TOKEN_FILE`` names (default
``~/.config/suanli/token``); with none, the error says where a local server's admin
token is (``STATE/admin.token``, the state directory resolved as ``suanli serve`` does).
A refusal by the server (its ``error``) or an unreachable server
ends the command with one line on stderr and exit code 1; bad usage with exit code 2
(``suanli.cli.errors.fail``).

Light to import: ``httpx`` is imported on the first request, and nothing here imports the
store or the simulator.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from suanli.cli.errors import PROG, fail, one_line

if TYPE_CHECKING:
    import httpx
    from rich.console import Console

DEFAULT_SERVER = "http://127.0.0.1:8620"
TOKEN_FILE = Path("~/.config/suanli/token")
REFUSED_EXIT = 1
NON_TTY_WIDTH = 160
TIMEOUT_S = 30.0

ServerOption = Annotated[
    str,
    typer.Option(
        "--server", envvar="SUANLI_SERVER", help="The control plane's URL.", show_envvar=True
    ),
]
TokenOption = Annotated[
    str | None,
    typer.Option(
        "--token",
        envvar="SUANLI_TOKEN",
        help="API token (else the file SUANLI_TOKEN_FILE or ~/.config/suanli/token).",
        show_envvar=True,
        show_default=False,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the API's JSON.")]


def refused(message: str) -> NoReturn:
    """Print ``suanli: error: <message>`` on stderr and exit with code 1."""
    typer.echo(f"{PROG}: error: {one_line(message)}", err=True)
    raise typer.Exit(REFUSED_EXIT)


def token_file() -> Path:
    """The token file: ``SUANLI_TOKEN_FILE``, else ``~/.config/suanli/token``."""
    return Path(os.environ.get("SUANLI_TOKEN_FILE") or TOKEN_FILE).expanduser()


def resolve_token(given: str | None) -> str:
    """``given`` (``--token`` or ``SUANLI_TOKEN``), else the token file's; ``""`` if none.
    Exits (code 2) if the token file exists but cannot be read."""
    if given and given.strip():
        return given.strip()
    path = token_file()
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        return ""
    except OSError as e:
        fail(f"cannot read the token file {path}: {e.strerror}")


def admin_token_file(state_dir: Path | None = None) -> Path:
    """Where ``suanli serve`` writes its admin token on first start: ``STATE/admin.token``,
    the state directory resolved as ``suanli serve`` resolves it."""
    from suanli.cli.serve import TOKEN_FILE as ADMIN_TOKEN
    from suanli.cli.serve import default_state_dir

    return (state_dir or default_state_dir()).expanduser().absolute() / ADMIN_TOKEN


def find_token(given: str | None) -> str:
    token = resolve_token(given)
    if not token:
        admin = shlex.quote(str(admin_token_file()))
        fail(
            f"no API token: give --token, set SUANLI_TOKEN or write it to {token_file()}; "
            f"a local 'suanli serve' writes its admin token on first start "
            f"('suanli ready' waits for it): export SUANLI_TOKEN=$(cat {admin})"
        )
    return token


@dataclass
class Client:
    """One server, one token."""

    server: str
    token: str

    @classmethod
    def of(cls, server: str, token: str | None) -> Client:
        if not server.startswith(("http://", "https://")):
            fail(f"--server {server!r}: an http:// or https:// URL")
        return cls(server.rstrip("/"), find_token(token))

    def send(self, method: str, path: str, **kw: Any) -> httpx.Response:
        """The server's answer; exits (code 1) if it cannot be reached or refuses."""
        import httpx

        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        try:
            r = httpx.request(method, self.server + path, headers=headers, timeout=TIMEOUT_S, **kw)
        except httpx.HTTPError as e:
            refused(f"cannot reach {self.server}: {e}")
        if r.status_code >= 400:
            refused(error_of(r))
        return r

    def get(self, path: str, **params: Any) -> Any:
        return self.send("GET", path, params=_params(params)).json()

    def post(self, path: str, body: Any = None) -> Any:
        return self.send("POST", path, json=body).json()

    def delete(self, path: str) -> Any:
        return self.send("DELETE", path).json()


def _params(params: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if v is not None and v != []}


def error_of(r: httpx.Response) -> str:
    """The API's one-line ``error`` (with the fields at fault), else the status line."""
    try:
        body = r.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        message: str = body["error"]
        if r.status_code == 401:
            message += " (check --token, SUANLI_TOKEN or the token file)"
        return message
    return f"{r.status_code} {r.reason_phrase} from {r.request.url}"


def print_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, ensure_ascii=False))


def print_rows(
    columns: Sequence[str],
    rows: Iterable[Sequence[str]],
    *,
    right: Collection[str] = (),
    wrap: Collection[str] = (),
) -> None:
    """Print ``rows`` under ``columns`` in the client's list format: bold headers, no box,
    cells on one line (but those of ``wrap``), right-aligned for ``right``."""
    from rich.table import Table

    table = Table(header_style="bold", box=None, pad_edge=False)
    for col in columns:
        table.add_column(col, no_wrap=col not in wrap, justify="right" if col in right else "left")
    for row in rows:
        table.add_row(*row)
    console().print(table)


def console() -> Console:
    from rich.console import Console

    c = Console(highlight=False)
    if not c.is_terminal:
        c = Console(highlight=False, width=NON_TTY_WIDTH, file=sys.stdout)
    return c


def natural_key(text: str) -> tuple[str | int, ...]:
    """Sort key that orders the digit runs of ``text`` as numbers: job ids ``1, 2, 10``
    (not ``1, 10, 2``), nodes ``n2`` before ``n10``."""
    return tuple(int(p) if i % 2 else p for i, p in enumerate(re.split(r"(\d+)", text)))


def expected_start(estimate: dict[str, Any] | None) -> str:
    """A pending job's start estimate as a range, like ``squeue --start`` (``-``: none yet;
    ``never`` for a job no healthy node could hold)."""
    if not estimate:
        return "-"
    if estimate.get("p50") is None:
        return "never (no healthy node can hold it)"
    lo, hi = when(estimate["p50"]), when(estimate.get("p90"))
    if hi == lo or hi == "-":
        return lo
    day = lo[:11]
    return f"{lo} to {hi[11:] if hi.startswith(day) else hi}"


def when(iso: str | None) -> str:
    """An API time, shown local and to the second (``-`` for none)."""
    if not iso:
        return "-"
    try:
        t = datetime.fromisoformat(iso)
    except ValueError:
        return iso
    return t.astimezone().strftime("%Y-%m-%d %H:%M:%S")

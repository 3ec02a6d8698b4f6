"""Schemathesis over the API's OpenAPI document, one operation at a time (shared by the test
against the ASGI app and the one against the real server).

``operations`` gives the schema's operations with token revocation last (it may revoke the very
token a run uses); ``fuzz`` runs one operation's generated cases through ``send`` and says
whether any could be generated (in negative mode, an operation may have nothing to make
invalid); ``request_of`` is a case as the keyword arguments of an ``httpx`` request, with the
run's own token instead of the one schemathesis chose (``case.call()`` drops the token of a
case whose auth it negates).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable


def operations(schema: Any) -> list[Any]:
    found = sorted(
        (result.ok() for result in schema.get_all_operations()), key=lambda o: o.method == "delete"
    )
    assert len(found) >= 12
    return found


def fuzz(
    operation: Any,
    mode: schemathesis.GenerationMode,
    send: Callable[[Any], None],
    examples: int,
) -> bool:
    """Send up to ``examples`` generated cases of ``operation``; False if none could be made."""

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
        database=None,
    )
    def check(case: Any) -> None:
        send(case)

    try:
        check()
    except Unsatisfiable:
        assert mode == schemathesis.GenerationMode.NEGATIVE, operation.label
        return False
    return True


def request_of(case: Any, base_url: str, auth: Mapping[str, str]) -> dict[str, Any]:
    sent = case.as_transport_kwargs(base_url=base_url)
    headers = {k: v for k, v in sent["headers"].items() if k.lower() != "authorization"}
    return {
        "method": sent["method"],
        "url": sent["url"],
        "params": sent.get("params"),
        "headers": {**headers, **auth},
        "json": sent.get("json"),
        "content": sent.get("data"),
    }


def describe(case: Any, status: int, text: str) -> str:
    return f"{case.method} {case.formatted_path} {case.query} {case.body!r}: {status} {text[:300]}"

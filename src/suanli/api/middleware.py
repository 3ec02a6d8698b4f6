"""The API's outer layer (plain ASGI): request counting and the request-body limit.

``Guard`` wraps the FastAPI app. It counts every request in the metrics by its route
template (``/v1/jobs/{job_id}``, never the concrete path: bounded series; ``<unmatched>``
for paths no route has), and reads the request body before the app does: a body longer than
``max_body_bytes`` is answered 413 before anything parses it, whether its ``Content-Length``
says so or a chunked body turns out longer as it streams in.
"""

from __future__ import annotations

from typing import Any

from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from suanli.api.errors import error_response
from suanli.control.metrics import ControlMetrics

UNMATCHED = "<unmatched>"


def route_template(routes: list[BaseRoute], scope: Scope) -> str:
    """The path template of the route ``scope`` goes to (any method), else ``UNMATCHED``."""
    partial = None
    for route in routes:
        match, _ = route.matches(scope)
        if match == Match.FULL:
            return str(getattr(route, "path", UNMATCHED))
        if match == Match.PARTIAL and partial is None:
            partial = str(getattr(route, "path", UNMATCHED))
    return partial or UNMATCHED


class Guard:
    def __init__(
        self,
        app: ASGIApp,
        *,
        metrics: ControlMetrics,
        routes: list[BaseRoute],
        max_body_bytes: int,
    ) -> None:
        self.app = app
        self.metrics = metrics
        self.routes = routes
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        route = route_template(self.routes, scope)
        status = 500  # unless the app answers (an exception escaping it is a 500)

        async def counted(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self._limited(scope, receive, counted)
        finally:
            self.metrics.request(scope["method"], route, status)

    async def _limited(self, scope: Scope, receive: Receive, send: Send) -> None:
        limit = self.max_body_bytes
        length = dict(scope.get("headers", ())).get(b"content-length")
        if length is not None:
            text = length.decode("latin-1").strip()
            if not text.isdigit():
                await self._refuse(scope, receive, send, 400, "bad Content-Length header")
                return
            if int(text) > limit:
                await self._refuse(scope, receive, send, 413, self._too_large())
                return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client is gone: nobody to answer
            body = message.get("body", b"")
            size += len(body)
            if size > limit:
                await self._refuse(scope, receive, send, 413, self._too_large())
                return
            chunks.append(body)
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    def _too_large(self) -> str:
        return f"request body too large: at most {self.max_body_bytes} bytes"

    @staticmethod
    async def _refuse(scope: Scope, receive: Receive, send: Send, status: int, msg: str) -> None:
        response: Any = error_response(status, msg, headers={"Connection": "close"})
        await response(scope, receive, send)

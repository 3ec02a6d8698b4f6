"""Errors as JSON, one shape everywhere: ``{"error": "<one line>", "fields": [...]}``.

``fields`` lists, for invalid input, each field at fault by its dotted path (``gpus``,
``env.FOO``, ``limit``; without pydantic's ``body.``/``query.`` prefix) and why; it is empty
otherwise. Store refusals (``JobStoreError``, ``TokenError``) are 400 with their message.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from suanli.api.schemas import ErrorBody, ErrorField
from suanli.store.jobs import JobStoreError
from suanli.store.tokens import TokenError

MAX_LINE = 1000
_LOCATIONS = frozenset({"body", "query", "path", "header", "cookie"})


class ApiError(Exception):
    """An answer other than success: the status, one line, and the fields at fault."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        fields: Iterable[ErrorField] = (),
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.fields = list(fields)
        self.headers = dict(headers or {})


def one_line(text: str, limit: int = MAX_LINE) -> str:
    line = " ".join(part.strip() for part in str(text).splitlines() if part.strip())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def error_response(
    status: int,
    message: str,
    fields: Iterable[ErrorField] = (),
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    body = ErrorBody(error=one_line(message), fields=list(fields))
    return JSONResponse(body.model_dump(), status_code=status, headers=dict(headers or {}))


def field_path(loc: Iterable[Any]) -> str:
    """Pydantic's error location as a dotted path, without where the value came from."""
    parts = [str(p) for p in loc]
    if parts and parts[0] in _LOCATIONS:
        parts = parts[1:]
    return ".".join(parts) or "body"


def problem(error: Mapping[str, Any]) -> str:
    msg = str(error.get("msg", "invalid"))
    kind = error.get("type")
    if kind == "extra_forbidden":
        return "unknown field"
    if kind == "missing":
        return "required"
    return one_line(msg.removeprefix("Value error, "), 300)


def validation_fields(errors: Iterable[Mapping[str, Any]]) -> list[ErrorField]:
    fields: list[ErrorField] = []
    for e in errors:
        if e.get("type") == "json_invalid":
            # Its location is the character offset of the syntax error, not a field.
            loc = list(e.get("loc", ()))
            at = f" at character {loc[-1]}" if loc and isinstance(loc[-1], int) else ""
            why = (e.get("ctx") or {}).get("error", "")
            f = ErrorField(field="body", problem=one_line(f"invalid JSON{at}: {why}", 300))
        else:
            f = ErrorField(field=field_path(e.get("loc", ())), problem=problem(e))
        if f not in fields:
            fields.append(f)
    return fields


def invalid(fields: list[ErrorField]) -> str:
    """The one-line message of a 422."""
    return "invalid request: " + "; ".join(f"{f.field}: {f.problem}" for f in fields)


def install(app: FastAPI) -> None:
    """Answer every error of ``app`` in the one shape."""

    @app.exception_handler(ApiError)
    async def _api(_: Request, exc: ApiError) -> JSONResponse:
        return error_response(exc.status, exc.message, exc.fields, exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        fields = validation_fields(exc.errors())
        return error_response(422, invalid(fields), fields)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return error_response(exc.status_code, str(exc.detail), (), exc.headers)

    @app.exception_handler(JobStoreError)
    async def _jobs(_: Request, exc: JobStoreError) -> JSONResponse:
        return error_response(400, str(exc))

    @app.exception_handler(TokenError)
    async def _tokens(_: Request, exc: TokenError) -> JSONResponse:
        return error_response(400, str(exc))

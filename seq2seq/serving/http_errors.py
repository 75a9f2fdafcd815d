"""Every error as an HTTP status and a one-line JSON body, {"error": "..."}, never a traceback
or an HTML page; and the checks made before any parsing: the request's head (`CheckHead`) and
the request-body limit (`ReadBody`)."""

from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class ApiError(Exception):
    """An answer other than 200: `status`, a one-line `message`, and extra `headers`."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers


def error_response(
    status: int, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse({"error": " ".join(message.split())}, status, headers)


def field_name(location: Sequence[Any]) -> str:
    """("body", "lines", 2) -> "lines[2]"; the body itself -> "body"."""
    name = ""
    for part in location[1:] if location and location[0] == "body" else location:
        name += f"[{part}]" if isinstance(part, int) else f".{part}" if name else str(part)
    return name or "body"


async def api_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, ApiError)
    return error_response(error.status, error.message, error.headers)


async def validation_error(request: Request, error: Exception) -> JSONResponse:
    """Malformed JSON is 400; a field of the wrong type or value is 422, naming the field."""
    assert isinstance(error, RequestValidationError)
    first = error.errors()[0]
    if first["type"] == "json_invalid":
        reason = first.get("ctx", {}).get("error", "JSON decode error")
        return error_response(400, f"malformed JSON: {reason} at character {first['loc'][-1]}")
    if tuple(first["loc"]) == ("body",):
        content_type = request.headers.get("content-type", "")
        if content_type and "json" not in content_type:
            return error_response(415, f"Content-Type {content_type}: send application/json")
        return error_response(422, "body: a JSON object is needed")
    return error_response(422, f"{field_name(first['loc'])}: {first['msg']}")


async def http_error(request: Request, error: Exception) -> JSONResponse:
    """The framework's own errors: unknown path (404), wrong method (405), ..."""
    assert isinstance(error, HTTPException)
    messages = {
        404: f"{request.url.path}: no such endpoint",
        405: f"{request.method} {request.url.path}: method not allowed",
    }
    message = messages.get(error.status_code, str(error.detail))
    return error_response(error.status_code, message, error.headers)


async def internal_error(request: Request, error: Exception) -> JSONResponse:
    """A bug: the traceback goes to the server's log, the client gets one line."""
    return error_response(500, f"internal error ({type(error).__name__}); see the server's log")


def add_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(Exception, internal_error)


MAX_HEAD_BYTES = 16 * 1024  # the request line and headers together


class CheckHead:
    """ASGI middleware: answer 505 for an HTTP version other than 1.0 and 1.1, 431 for a head
    (request line and headers) over MAX_HEAD_BYTES, and 415 for a body without a
    Content-Type, before the app sees the request."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        has_body = headers.get(b"content-length", b"0") != b"0" or b"transfer-encoding" in headers
        head_bytes = len(scope["raw_path"]) + len(scope["query_string"])
        head_bytes += sum(len(name) + len(value) + 4 for name, value in scope["headers"])
        if scope["http_version"] not in ("1.0", "1.1"):
            error = error_response(505, f"HTTP/{scope['http_version']}: send HTTP/1.1")
        elif head_bytes > MAX_HEAD_BYTES:
            error = error_response(431, f"the request's headers are over {MAX_HEAD_BYTES} bytes")
        elif has_body and b"content-type" not in headers:
            error = error_response(415, "Content-Type: missing; send application/json")
        else:
            await self.app(scope, receive, send)
            return
        await error(scope, receive, send)


class ReadBody:
    """ASGI middleware: read each request's body in full (`read_body`) before the app sees it."""

    def __init__(self, app: ASGIApp, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if (body := await read_body(scope, receive, send, self.max_bytes)) is not None:
            await self.app(scope, Replay(body, receive), send)


async def read_body(scope: Scope, receive: Receive, send: Send, max_bytes: int) -> bytes | None:
    """A request's whole body; None when the client left or the request was answered here: a
    body over `max_bytes` (declared in Content-Length or counted while reading) gets 413 at
    once, so no request can make the server hold more, and a body that is not UTF-8 text gets
    400, naming the first bad byte."""
    too_large = error_response(413, f"the request body is over {max_bytes} bytes")
    declared = dict(scope["headers"]).get(b"content-length", b"0")
    if not declared.isdigit():
        await error_response(400, "Content-Length: not a number")(scope, receive, send)
        return None
    if int(declared) > max_bytes:
        await too_large(scope, receive, send)
        return None
    chunks: list[bytes] = []
    size, more = 0, True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        size += len(chunks[-1])
        if size > max_bytes:
            await too_large(scope, receive, send)
            return None
        more = message.get("more_body", False)
    body = b"".join(chunks)
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as err:
        message = f"the request body is not UTF-8 text (bad byte at byte {err.start + 1})"
        await error_response(400, message)(scope, receive, send)
        return None
    return body


class Replay:
    """An ASGI `receive` that gives the body read already, then waits on the real one (for the
    client's disconnect)."""

    def __init__(self, body: bytes, receive: Receive):
        self.body: bytes | None = body
        self.receive = receive

    async def __call__(self) -> Message:
        if self.body is None:
            return await self.receive()
        body, self.body = self.body, None
        return {"type": "http.request", "body": body, "more_body": False}

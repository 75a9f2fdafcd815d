"""Who may use the server, and how often: the Host allow-list, the Origin check on POSTs, API
keys and rate limits (as LibreTranslate offers them), and the headers every answer carries.

    Host      a request's Host must be one of `Access.allowed_hosts` (localhost, 127.0.0.1,
              [::1] and the bound address by default): a web page that rebinds its own name to
              127.0.0.1 (DNS rebinding) sends its own name, and gets 421
    Origin    a POST that a browser sends from another site (Origin or Sec-Fetch-Site naming
              another site, e.g. a cross-site form) gets 403 before it is read
    keys      an API key comes in an `Authorization: Bearer KEY` header, or as LibreTranslate
              reads it, an `api_key` in the query string or the body's fields (JSON or form);
              an unknown key gets 403, and with `require_key` so does a request without one;
              a key in the header or the query is checked before the body is read
    limits    each key, and each client address without a key, may send `per_minute` decoding
              requests (POSTs) in any 60 s; past it: 429 with Retry-After

Keys are compared in constant time, as UTF-8 bytes, and never written to a log (`HideKeys`)
or an answer.
"""

import hmac
import json
import logging
import re
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from seq2seq.errors import UserError
from seq2seq.files import read_small_file
from seq2seq.serving.http_errors import Replay, error_response, read_body

LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")
WINDOW_S = 60.0  # rate limits count the requests of the last minute
MAX_KEYS_FILE_BYTES = 1 << 20
QUERY_KEY = re.compile(r"([?&]api_key=)[^&\s]*")  # in a logged path, written as (hidden)
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; "
    "base-uri 'none'; "
    "form-action 'self'",
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cross-origin-resource-policy": "same-origin",
}
# Swagger UI (/docs) starts itself from an inline script and styles parts of the page inline.
DOCS_CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; frame-ancestors 'none'"
)


@dataclass(frozen=True)
class Access:
    """Who may send requests (see the module docstring).

    allowed_hosts: the host names (no port) a request's Host may name; keys: each API key and
    its requests per minute (None: `per_minute`); require_key: refuse requests without a key;
    per_minute: requests per minute of a client address without a key, and of a key without
    its own limit (0: no limit)."""

    allowed_hosts: frozenset[str] = frozenset(LOCAL_HOSTS)
    keys: dict[str, int | None] = field(default_factory=dict)
    require_key: bool = False
    per_minute: int = 0


def read_keys(path: Path, option: str = "--api-keys") -> dict[str, int | None]:
    """The keys of a keys file: one a line, `KEY` or `KEY REQUESTS_PER_MINUTE`; blank lines and
    lines starting with # are skipped. A problem is a `UserError` naming the line, never the
    key."""
    text = read_small_file(path, MAX_KEYS_FILE_BYTES, f"{option} {path}").decode(errors="replace")
    keys: dict[str, int | None] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        if len(fields) > 2 or (len(fields) == 2 and not fields[1].isdecimal()):
            raise UserError(f"{option} {path}:{number}: expected KEY or KEY REQUESTS_PER_MINUTE")
        keys[fields[0]] = int(fields[1]) if len(fields) == 2 else None
    if not keys:
        raise UserError(f"{option} {path}: no keys in it")
    return keys


def host_name(host: str) -> str:
    """The name in a Host header, without the port: "[::1]:8000" -> "::1"."""
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class RateLimiter:
    """Requests per identity in the last WINDOW_S seconds."""

    def __init__(self) -> None:
        self.times: dict[str, deque[float]] = {}

    def retry_after(self, identity: str, per_minute: int) -> int:
        """0 and count a request of `identity` when it is within `per_minute`; else the seconds
        until it would be, counting nothing."""
        now = time.monotonic()
        times = self.times.setdefault(identity, deque())
        while times and times[0] <= now - WINDOW_S:
            times.popleft()
        if len(times) >= per_minute:
            return max(1, int(times[0] + WINDOW_S - now) + 1)
        times.append(now)
        return 0

    def forget_idle(self) -> None:
        """Drop the identities with no request in the window, so the table stays small."""
        now = time.monotonic()
        idle = [
            key for key, times in self.times.items() if not times or times[-1] <= now - WINDOW_S
        ]
        for identity in idle:
            del self.times[identity]


class SecurityHeaders:
    """ASGI middleware adding SECURITY_HEADERS to every answer (DOCS_CSP to the /docs page's)."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        extra = {**SECURITY_HEADERS}
        if scope["path"] == "/docs":
            extra["content-security-policy"] = DOCS_CSP

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {name.lower() for name, _ in message.get("headers", [])}
                added = [
                    (k.encode(), v.encode()) for k, v in extra.items() if k.encode() not in present
                ]
                message = {**message, "headers": [*message.get("headers", []), *added]}
            await send(message)

        await self.app(scope, receive, send_with_headers)


class AccessGuard:
    """ASGI middleware applying an `Access` to every request. A POST without a key in its head
    has its body read (`read_body`, at most `max_body_bytes`) for LibreTranslate's `api_key`
    field. The identity a request counts under (its key, else its client's address) goes to the
    request's state as `client`, for the decoding worker's fair queueing."""

    def __init__(self, app: ASGIApp, access: Access, max_body_bytes: int):
        self.app = app
        self.access = access
        self.max_body_bytes = max_body_bytes
        self.limiter = RateLimiter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {
            name.decode("latin-1"): value.decode("latin-1") for name, value in scope["headers"]
        }
        refusal = self.host_refusal(headers)
        if refusal is None and scope["method"] == "POST":
            refusal = self.origin_refusal(headers)
            if refusal is None:
                key = head_key(headers, scope["query_string"])
                if key is None:
                    body = await read_body(scope, receive, send, self.max_body_bytes)
                    if body is None:
                        return
                    key, receive = body_key(headers, body), Replay(body, receive)
                refusal = self.key_refusal(key or None, scope)  # an empty key is no key
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def host_refusal(self, headers: dict[str, str]) -> JSONResponse | None:
        host = host_name(headers.get("host", ""))
        if host.lower() in self.access.allowed_hosts:
            return None
        allowed = ", ".join(sorted(self.access.allowed_hosts))
        message = f"Host {host or '(none)'}: not served here; allowed: {allowed} (--allowed-host)"
        return error_response(421, message)

    def origin_refusal(self, headers: dict[str, str]) -> JSONResponse | None:
        origin = headers.get("origin")
        if (
            origin is not None
            and host_name(urlsplit(origin).netloc) not in self.access.allowed_hosts
        ):
            return error_response(403, f"Origin {origin}: cross-site requests are refused")
        if headers.get("sec-fetch-site") == "cross-site":
            return error_response(403, "Sec-Fetch-Site cross-site: cross-site requests are refused")
        return None

    def key_refusal(self, key: str | None, scope: Scope) -> JSONResponse | None:
        """403 for an unknown key (or none, when one is required); 429 past the rate limit."""
        access = self.access
        known = next((k for k in access.keys if key is not None and same_key(k, key)), None)
        if key is not None and known is None:
            return error_response(403, "api_key: not a valid API key")
        if known is None and access.require_key:
            return error_response(403, "api_key: this server needs an API key (api_key field "
                                  "or Authorization: Bearer)")  # fmt: skip
        client = scope.get("client") or ("unknown", 0)
        identity = f"key {known}" if known is not None else f"client {client[0]}"
        scope.setdefault("state", {})["client"] = identity
        per_minute = access.keys[known] if known is not None else None
        per_minute = access.per_minute if per_minute is None else per_minute
        if not per_minute:
            return None
        self.limiter.forget_idle()
        if wait := self.limiter.retry_after(identity, per_minute):
            who = "this API key" if known is not None else "this client"
            message = f"over the limit of {per_minute} requests per minute for {who}"
            return error_response(429, message, {"Retry-After": str(wait)})
        return None


def same_key(known: str, given: str) -> bool:
    """Whether `given` is the key `known`, in constant time, as UTF-8 bytes (any characters)."""
    return hmac.compare_digest(known.encode(), given.encode("utf-8", "surrogatepass"))


def head_key(headers: dict[str, str], query_string: bytes) -> str | None:
    """The API key in a request's head: `Authorization: Bearer KEY` (UTF-8), else an `api_key`
    in the query string."""
    authorization = headers.get("authorization", "")
    if authorization.lower().startswith("bearer "):
        return authorization[7:].strip().encode("latin-1").decode("utf-8", "surrogateescape")
    return dict(parse_qsl(query_string.decode("latin-1"))).get("api_key")


def body_key(headers: dict[str, str], body: bytes) -> str | None:
    """LibreTranslate's `api_key` field of a request's body (JSON or form)."""
    content_type = headers.get("content-type", "")
    if content_type.startswith("application/x-www-form-urlencoded"):
        return dict(parse_qsl(body.decode("utf-8", errors="replace"))).get("api_key")
    if b'"api_key"' not in body:
        return None
    try:
        fields = json.loads(body)
    except (ValueError, RecursionError):
        return None
    key = fields.get("api_key") if isinstance(fields, dict) else None
    return key if isinstance(key, str) else None


class HideKeys(logging.Filter):
    """Writes each `api_key=...` in a log record's arguments as `api_key=(hidden)`: uvicorn's
    access log prints every request's path with its query string."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                QUERY_KEY.sub(r"\1(hidden)", arg) if isinstance(arg, str) else arg
                for arg in record.args
            )
        return True


def allowed_hosts(bound: str, more: Iterable[str]) -> frozenset[str]:
    """LOCAL_HOSTS, the address the server is bound to, and `more` (--allowed-host)."""
    return frozenset(name.lower().strip("[]") for name in (*LOCAL_HOSTS, bound, *more))

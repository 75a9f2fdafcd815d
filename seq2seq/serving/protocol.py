"""uvicorn's HTTP/1.1 connection (h11), with two changes for clients that misbehave:

- a request whose head (request line and headers) is not complete `header_timeout_s` after the
  connection opened, or after the previous answer, gets its connection closed: a client that
  sends its headers slowly, or nothing at all, cannot hold a socket for longer;
- a request that is not valid HTTP/1.1 (bad framing, a malformed header, a head over h11's
  size limit) gets 400 with a one-line JSON body, like every other error, instead of
  uvicorn's plain text.
"""

import asyncio
import json
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol


class GuardedH11Protocol(H11Protocol):
    """`H11Protocol` with a header timeout and JSON 400s (see the module docstring); uvicorn
    takes it as `uvicorn.Config(http=functools.partial(GuardedH11Protocol,
    header_timeout_s=...))`."""

    def __init__(self, *args: Any, header_timeout_s: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.header_timeout_s = header_timeout_s
        self.header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.start_header_timer()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self.start_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.header_timer is not None:
            self.header_timer.cancel()
        super().connection_lost(exc)

    def start_header_timer(self) -> None:
        if self.header_timer is not None:
            self.header_timer.cancel()
        self.header_timer = self.loop.call_later(self.header_timeout_s, self.header_timed_out)

    def header_timed_out(self) -> None:
        """Close the connection if no request head has come in full since the timer started
        (h11 waits for one in IDLE; DONE: the previous request, answered, and nothing since)."""
        self.header_timer = None
        if self.transport.is_closing() or self.conn.their_state not in (h11.IDLE, h11.DONE):
            return
        if self.cycle is not None and not self.cycle.response_complete:
            return  # a request in progress (pipelined): its answer restarts the timer
        self.transport.close()

    def send_400_response(self, msg: str) -> None:
        body = json.dumps({"error": f"malformed HTTP request ({msg.rstrip('.')})"}).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        for event in (h11.Response(status_code=400, headers=headers), h11.Data(data=body)):
            self.transport.write(self.conn.send(event))
        self.transport.write(self.conn.send(h11.EndOfMessage()))
        self.transport.close()

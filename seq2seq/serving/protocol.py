"""uvicorn's HTTP/1.1 connection (h11), with these changes for clients that misbehave:

- a request whose head (request line and headers) is not complete `header_timeout_s` after the
  connection opened, or after the previous answer, gets its connection closed: a client that
  sends its headers slowly, or nothing at all, cannot hold a socket for longer;
- a request whose body is not complete `body_timeout_s` after its head gets 408 and its
  connection closed; and at most half of uvicorn's `limit_concurrency` connections may wait
  for a body at once: past it, the one that has waited longest gets 408 and is closed;
- one client address may use at most half of `limit_concurrency` connections: past it, a new
  connection of that address is not read, nor counted by uvicorn's limit, and its header
  timeout closes it (closing it at once would only make its client open another). So bodies
  (or heads) that never arrive hold at most half the connections, for a bounded time, and the
  others serve the clients that send theirs (uvicorn and h11 bound neither: uvicorn answers 503
  to every request once `limit_concurrency` connections are open, whatever holds them);
- a request that is not valid HTTP/1.1 (bad framing, a malformed header, a head over h11's
  size limit) gets 400 with a one-line JSON body, like every other error, instead of
  uvicorn's plain text.
"""

import asyncio
import json
import time
from collections import Counter
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol


class GuardedH11Protocol(H11Protocol):
    """`H11Protocol` with a header timeout and JSON 400s (see the module docstring); uvicorn
    takes it as `uvicorn.Config(http=functools.partial(GuardedH11Protocol,
    header_timeout_s=..., body_timeout_s=..., addresses=Counter()))`, where `addresses`, shared
    by the connections, counts them by client address."""

    def __init__(
        self,
        *args: Any,
        header_timeout_s: float,
        body_timeout_s: float,
        addresses: Counter[str | None],
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.addresses = addresses
        self.header_timeout_s = header_timeout_s
        self.body_timeout_s = body_timeout_s
        self.header_timer: asyncio.TimerHandle | None = None
        self.body_since: float | None = None  # when the head of a request waiting for its body came

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.addresses[address_of(self)] += 1
        if self.addresses[address_of(self)] > (self.limit_concurrency or 2**62) // 2:
            self.connections.discard(self)  # not counted by uvicorn's limit: nothing is read
            transport.pause_reading()
        self.start_header_timer()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self.body_since = None
        self.start_header_timer()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        waiting = self.waits_for_body()
        if waiting and self.body_since is None:  # a head has come, its body not yet in full
            self.body_since = time.monotonic()
            self.start_header_timer(self.body_timeout_s)
            self.close_the_longest_wait()
        elif not waiting:
            self.body_since = None

    def waits_for_body(self) -> bool:
        """Whether a request's head has come and its body has not, with nothing answered yet."""
        return self.conn.their_state is h11.SEND_BODY and self.conn.our_state is h11.SEND_RESPONSE

    def close_the_longest_wait(self) -> None:
        """Answer 408 to the connection that has waited longest for a body when more than half
        of `limit_concurrency` wait for one."""
        if self.limit_concurrency is None:
            return
        waiting = [
            other
            for other in self.connections
            if isinstance(other, GuardedH11Protocol) and other.body_since is not None
        ]
        if len(waiting) > self.limit_concurrency // 2:
            min(waiting, key=lambda other: other.body_since or 0.0).body_timed_out()

    def body_timed_out(self) -> None:
        self.body_since = None
        self.send_error(408, "the request's body did not arrive in time; send it at once")

    def connection_lost(self, exc: Exception | None) -> None:
        self.addresses[address_of(self)] -= 1
        if not self.addresses[address_of(self)]:
            del self.addresses[address_of(self)]
        if self.header_timer is not None:
            self.header_timer.cancel()
        super().connection_lost(exc)

    def start_header_timer(self, seconds: float | None = None) -> None:
        """Time the head (`header_timeout_s`), or the body (`seconds`: `body_timeout_s`)."""
        if self.header_timer is not None:
            self.header_timer.cancel()
        seconds = self.header_timeout_s if seconds is None else seconds
        self.header_timer = self.loop.call_later(seconds, self.header_timed_out)

    def header_timed_out(self) -> None:
        """Close the connection if no request head has come in full since the timer started
        (h11 waits for one in IDLE; DONE: the previous request, answered, and nothing since;
        SEND_BODY: a request answered before its body came in full), or answer 408 if a body
        is still coming."""
        self.header_timer = None
        if self.transport.is_closing():
            return
        if self.waits_for_body():
            self.body_timed_out()
            return
        if self.conn.their_state not in (h11.IDLE, h11.DONE, h11.SEND_BODY):
            return
        if self.cycle is not None and not self.cycle.response_complete:
            return  # a request in progress (pipelined): its answer restarts the timer
        self.transport.close()

    def send_400_response(self, msg: str) -> None:
        self.send_error(400, f"malformed HTTP request ({msg.rstrip('.')})")

    def send_error(self, status: int, message: str) -> None:
        """Answer `status` with one line of JSON and close the connection; the app, if it is
        still at the request, sees its client gone."""
        if self.cycle is not None:
            self.cycle.disconnected = True
        body = json.dumps({"error": message}).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        for event in (h11.Response(status_code=status, headers=headers), h11.Data(data=body)):
            self.transport.write(self.conn.send(event))
        self.transport.write(self.conn.send(h11.EndOfMessage()))
        self.transport.close()


def address_of(connection: H11Protocol) -> str | None:
    """The client's address (no port) of `connection`."""
    return connection.client[0] if connection.client else None

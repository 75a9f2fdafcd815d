"""The Prometheus metrics of one server, in a registry of its own (GET /metrics)."""

import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class Metrics:
    """Requests by path and status, their latency, the decoding batches and the queue."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "seq2seq_http_requests",
            "HTTP requests answered, by route and status",
            ["path", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "seq2seq_http_request_seconds",
            "Time from a request's arrival to its answer, by route",
            ["path"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.batch_sentences = Histogram(
            "seq2seq_batch_sentences",
            "Sentences per decoding batch",
            buckets=SIZE_BUCKETS,
            registry=self.registry,
        )
        self.batch_requests = Histogram(
            "seq2seq_batch_requests",
            "Requests merged into one decoding batch",
            buckets=SIZE_BUCKETS,
            registry=self.registry,
        )
        self.queue_lines = Gauge(
            "seq2seq_queue_lines",
            "Lines waiting for the decoding worker",
            registry=self.registry,
        )

    def exposition(self) -> bytes:
        """All metrics in the Prometheus text format."""
        return generate_latest(self.registry)


class CountRequests:
    """ASGI middleware: count every answer by route and status, and time it (`Metrics`).

    A request answered before routing (a body over the limit, say) is counted under its path
    when that path is a route already seen; other paths are counted together, as "other", so
    that no client can add labels without end."""

    def __init__(self, app: ASGIApp, metrics: Metrics):
        self.app = app
        self.metrics = metrics
        self.routes: set[str] = set()  # the paths of the routes that have answered so far

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.monotonic()
        status = StatusOf(send)
        try:
            await self.app(scope, receive, status)
        finally:
            route = getattr(scope.get("route"), "path", None)
            if route is not None:
                self.routes.add(route)
            path = route or (scope["path"] if scope["path"] in self.routes else "other")
            self.metrics.requests.labels(path, str(status.code)).inc()
            self.metrics.latency.labels(path).observe(time.monotonic() - start)


class StatusOf:
    """An ASGI `send` that notes the response's status (500 until one is sent)."""

    def __init__(self, send: Send):
        self.send = send
        self.code = 500

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.code = message["status"]
        await self.send(message)

"""The decoding worker: one thread that runs the models, merging queued requests into batches.

Decoding many sentences at once is what makes beam search fast on a CPU, so requests are not
decoded one by one. A request's lines wait in a queue; the worker takes a request (the leader)
and every other queued request for the same model with the same decoding options, up to a
sentence and a token budget, waiting at most `Limits.batch_wait_s` for more to join (counted
from the leader's arrival, or from the end of the previous batch if that came later). It decodes
their lines together (`Translator.translate_ids`: the lines come tokenized) and answers each
request with its own lines, in order. Requests with other options wait for a later batch.

Clients are served fairly (start-time fair queueing): each request costs its beam steps
(`Job.cost`), and the leader is the oldest request of the client whose requests taken so far
cost least; a client with nothing queued starts level with the last leader's. A client that
sends heavy requests, or many at once, waits behind the others, not they behind it. A batch that
has decoded for SLICE_S lets the other clients' queued requests go first: before its next step
it decodes their next batch, then goes on, so a heavy request slows its own client.
A traced request (the explorer's beam tree: one line and a `BeamTrace` to fill) is decoded
alone, by the PyTorch translator whose maps the explorer shows, so that its tree and its n-best
list come from one search.

The event loop never runs the model: `submit` queues a job and returns an asyncio future,
which the worker settles from its thread with `loop.call_soon_threadsafe`. Work nobody waits
for is dropped: before each decoding step the search asks `_nobody_waits`, and once every job
of the batch is past its time limit or cancelled (its client left), the batch stops there.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from contextlib import suppress
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from seq2seq.decoding.line_translator import Stopped, Translation
from seq2seq.serving.limits import Limits
from seq2seq.serving.prometheus import Metrics
from seq2seq.serving.registry import ServedModel

if TYPE_CHECKING:  # beam_trace imports torch, which a translate-only server never loads
    from seq2seq.decoding.beam_trace import BeamTrace

log = logging.getLogger(__name__)
SLICE_S = 0.5  # a batch decoding for longer lets other clients' queued requests go first


class QueueFull(Exception):
    """The queue holds `Limits.max_queue_lines` lines already: come back later (503)."""


class Stopping(Exception):
    """The server is shutting down and takes no new work (503)."""


class DeadlineExceeded(Exception):
    """The request waited longer than `Limits.timeout_s` (504)."""


@dataclass(frozen=True)
class DecodeOptions:
    """How to decode; only requests with equal options share a batch."""

    beam: int
    nbest: int
    length_penalty: float
    max_len_ratio: float
    keep_numbers: bool = False  # the number guard (seq2seq.decoding.number_guard)
    need_attention: bool = False  # each best translation carries its attention map


@dataclass
class Job:
    """One request's lines, tokenized, waiting for the worker."""

    model: str
    sources: list[list[int]]  # each line's ids (no EOS)
    tokens: int  # source tokens, EOS included, for the batch's token budget
    options: DecodeOptions
    future: asyncio.Future[list[list[Translation]]]
    loop: asyncio.AbstractEventLoop
    trace: BeamTrace | None = None  # the beam search to record: one line, decoded alone
    client: str = ""  # who sent it (fair queueing): its API key or its address
    cost: int = 0  # its beam steps (`ServerState.check_cost`)
    queued_at: float = field(default_factory=time.monotonic)

    @property
    def key(self) -> tuple[str, DecodeOptions]:
        return self.model, self.options


class DecodingWorker:
    """Decodes the queued jobs of `models` in a thread of its own (`start`, `stop`)."""

    def __init__(self, models: dict[str, ServedModel], limits: Limits, metrics: Metrics):
        self.models = models
        self.limits = limits
        self.metrics = metrics
        self._jobs: deque[Job] = deque()
        self._queued_lines = 0
        self._used: dict[str, int] = {}  # beam steps taken by each client with queued jobs
        self._virtual = 0  # the last leader's client's figure in _used when it was taken
        self._changed = threading.Condition()  # guards the above, _queued_lines and _stopping
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="decoding-worker", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Take no new jobs, decode those queued, then end the thread."""
        with self._changed:
            self._stopping = True
            self._changed.notify()
        if self._thread.is_alive():
            self._thread.join()

    @property
    def queued_lines(self) -> int:
        return self._queued_lines

    def submit(
        self,
        model: str,
        sources: list[list[int]],
        options: DecodeOptions,
        trace: BeamTrace | None = None,
        client: str = "",
        cost: int = 0,
    ) -> asyncio.Future[list[list[Translation]]]:
        """Queue the lines `sources` (each line's ids from `model`'s source tokenizer, no EOS)
        for `model` (from the event loop), sent by `client` and costing `cost` beam steps; the
        future gets, in input order, each line's n-best translations. With a `trace` (one
        line), the beam search that finds them fills it. Raises QueueFull or Stopping instead
        of queueing."""
        if trace is not None and len(sources) != 1:
            raise ValueError(f"a trace records one line, got {len(sources)}")
        tokens = sum(len(ids) + 1 for ids in sources)
        loop = asyncio.get_running_loop()
        job = Job(model, sources, tokens, options, loop.create_future(), loop, trace, client, cost)
        with self._changed:
            if self._stopping:
                raise Stopping
            if self._queued_lines + len(sources) > self.limits.max_queue_lines:
                raise QueueFull
            self._jobs.append(job)
            self._used.setdefault(client, self._virtual)
            self._queued_lines += len(sources)
            self.metrics.queue_lines.set(self._queued_lines)
            self._changed.notify()
        return job.future

    def _run(self) -> None:
        while (jobs := self._next_batch()) is not None:
            self._decode(jobs)

    def _next_batch(self) -> list[Job] | None:
        """Wait for jobs and take the next batch out of the queue; None once stopped and empty."""
        free_since = time.monotonic()
        with self._changed:
            while not self._jobs:
                if self._stopping:
                    return None
                self._changed.wait()
            leader = self._leader(set())
            assert leader is not None
            # After a batch, the clients it answered need a moment to send their next requests.
            wait_until = max(leader.queued_at, free_since) + self.limits.batch_wait_s
            batch, full = self._matching_jobs(leader, set())
            while not (full or self._stopping) and (left := wait_until - time.monotonic()) > 0:
                self._changed.wait(left)
                batch, full = self._matching_jobs(leader, set())
            return self._take(batch)

    def _batch_of_others(self, busy: set[str]) -> list[Job] | None:
        """The next batch of the clients not in `busy`, taken at once; None if they have none."""
        with self._changed:
            leader = self._leader(busy)
            return None if leader is None else self._take(self._matching_jobs(leader, busy)[0])

    def _leader(self, busy: set[str]) -> Job | None:
        """The oldest queued job of the client, not in `busy`, whose jobs cost least so far."""
        jobs = [job for job in self._jobs if job.client not in busy]
        return min(jobs, key=lambda job: self._used[job.client], default=None)

    def _take(self, batch: list[Job]) -> list[Job]:
        """Take `batch` (its leader first) out of the queue, charging each client its cost."""
        self._virtual = self._used[batch[0].client]
        for job in batch:
            self._jobs.remove(job)
            self._used[job.client] += job.cost
        queued = {job.client for job in self._jobs}
        for client in [client for client in self._used if client not in queued]:
            del self._used[client]
        self._queued_lines -= sum(len(job.sources) for job in batch)
        self.metrics.queue_lines.set(self._queued_lines)
        return batch

    def _matching_jobs(self, first: Job, busy: set[str]) -> tuple[list[Job], bool]:
        """`first` and the queued jobs of clients not in `busy` that can join its batch, oldest
        first, within the budgets; and whether the batch is full (a matching job did not fit).
        A traced job makes a batch of its own."""
        if first.trace is not None:
            return [first], True
        batch, sentences, tokens = [first], len(first.sources), first.tokens
        for job in self._jobs:
            if job is first or job.key != first.key or job.trace is not None:
                continue
            if job.client in busy:
                continue
            sentences += len(job.sources)
            tokens += job.tokens
            if sentences > self.limits.batch_sentences or tokens > self.limits.batch_tokens:
                return batch, True
            batch.append(job)
        return batch, sentences >= self.limits.batch_sentences

    def _decode(self, jobs: list[Job], nested: bool = False) -> None:
        """Translate the lines of `jobs` together and settle each job's future; unless
        `nested` (decoded during another batch), let other clients go first after SLICE_S."""
        now = time.monotonic()
        late = [job for job in jobs if now - job.queued_at > self.limits.timeout_s]
        for job in late:
            _settle(job, error=DeadlineExceeded())
        jobs = [job for job in jobs if job not in late]
        if not jobs:
            return
        model, options = jobs[0].key
        trace = jobs[0].trace  # a traced job is alone in its batch
        served = self.models[model]
        translator = (served.translator if trace is None else served.pytorch).with_decode(
            beam_size=options.beam,
            length_penalty=options.length_penalty,
            max_len_ratio=options.max_len_ratio,
            keep_numbers=options.keep_numbers,
        )
        translate = translator.translate_ids
        if trace is not None:  # PyTorch's beam search, which records what it does
            translate = partial(translator.translate_ids, trace=trace)
        sources = [ids for job in jobs for ids in job.sources]
        self.metrics.batch_sentences.observe(len(sources))
        self.metrics.batch_requests.observe(len(jobs))
        try:
            results = translate(
                sources,
                nbest=options.nbest,
                need_attention=options.need_attention,
                should_stop=partial(self._should_stop, jobs, time.monotonic(), nested),
            )
        except Stopped:
            log.info("dropped a batch of %d lines: nobody waits for it any more", len(sources))
            for job in jobs:
                _settle(job, error=DeadlineExceeded())
            return
        except Exception as err:  # answered as a 500; the server keeps serving
            log.exception("decoding failed")
            for job in jobs:
                _settle(job, error=err)
            return
        start = 0
        for job in jobs:
            _settle(job, result=results[start : start + len(job.sources)])
            start += len(job.sources)

    def _should_stop(self, jobs: list[Job], started: float, nested: bool) -> bool:
        """Before each decoding step of `jobs`: whether nobody waits for them any more; and
        once they have decoded for SLICE_S (not `nested`), decode the other clients' next batch
        first."""
        if self._nobody_waits(jobs):
            return True
        if not nested and time.monotonic() - started > SLICE_S:
            others = self._batch_of_others({job.client for job in jobs})
            if others is not None:
                self._decode(others, nested=True)
        return False

    def _nobody_waits(self, jobs: list[Job]) -> bool:
        """Whether every one of `jobs` is past `Limits.timeout_s` or was cancelled (a done
        future before the worker settles it: the request timed out or its client left)."""
        now = time.monotonic()
        return all(job.future.done() or now - job.queued_at > self.limits.timeout_s for job in jobs)


def _settle(
    job: Job,
    result: list[list[Translation]] | None = None,
    error: Exception | None = None,
) -> None:
    """Set the job's result or error, from the worker's thread, in the job's event loop."""
    with suppress(RuntimeError):  # the event loop is closed: nobody is waiting any more
        job.loop.call_soon_threadsafe(_set_future, job.future, result, error)


def _set_future(
    future: asyncio.Future[list[list[Translation]]],
    result: list[list[Translation]] | None,
    error: Exception | None,
) -> None:
    if future.done():  # cancelled: the client left or the request timed out
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)

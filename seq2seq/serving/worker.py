"""The decoding worker: one thread that runs the models, merging queued requests into batches.

Decoding many sentences at once is what makes beam search fast on a CPU, so requests are not
decoded one by one. A request's lines wait in a queue; the worker takes the oldest request and
every other queued request for the same model with the same decoding options, up to a sentence
and a token budget, waiting at most `Limits.batch_wait_s` for more to join (counted from the
oldest one's arrival, or from the end of the previous batch if that came later). It decodes
their lines together (`Translator.translate_ids`: the lines come tokenized) and answers each
request with its own lines, in order. Requests with other options wait for a later batch.
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
        self._changed = threading.Condition()  # guards _jobs, _queued_lines and _stopping
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
    ) -> asyncio.Future[list[list[Translation]]]:
        """Queue the lines `sources` (each line's ids from `model`'s source tokenizer, no EOS)
        for `model` (from the event loop); the future gets, in input order, each line's n-best
        translations. With a `trace` (one line), the beam search that finds them fills it.
        Raises QueueFull or Stopping instead of queueing."""
        if trace is not None and len(sources) != 1:
            raise ValueError(f"a trace records one line, got {len(sources)}")
        tokens = sum(len(ids) + 1 for ids in sources)
        loop = asyncio.get_running_loop()
        job = Job(model, sources, tokens, options, loop.create_future(), loop, trace)
        with self._changed:
            if self._stopping:
                raise Stopping
            if self._queued_lines + len(sources) > self.limits.max_queue_lines:
                raise QueueFull
            self._jobs.append(job)
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
            # After a batch, the clients it answered need a moment to send their next requests.
            wait_until = max(self._jobs[0].queued_at, free_since) + self.limits.batch_wait_s
            batch, full = self._matching_jobs()
            while not (full or self._stopping) and (left := wait_until - time.monotonic()) > 0:
                self._changed.wait(left)
                batch, full = self._matching_jobs()
            for job in batch:
                self._jobs.remove(job)
            self._queued_lines -= sum(len(job.sources) for job in batch)
            self.metrics.queue_lines.set(self._queued_lines)
            return batch

    def _matching_jobs(self) -> tuple[list[Job], bool]:
        """The oldest job and the queued jobs that can join its batch, oldest first, within the
        budgets; and whether the batch is full (a matching job did not fit). A traced job
        makes a batch of its own."""
        first = self._jobs[0]
        if first.trace is not None:
            return [first], True
        batch, sentences, tokens = [first], len(first.sources), first.tokens
        for job in list(self._jobs)[1:]:
            if job.key != first.key or job.trace is not None:
                continue
            sentences += len(job.sources)
            tokens += job.tokens
            if sentences > self.limits.batch_sentences or tokens > self.limits.batch_tokens:
                return batch, True
            batch.append(job)
        return batch, sentences >= self.limits.batch_sentences

    def _decode(self, jobs: list[Job]) -> None:
        """Translate the lines of `jobs` together and settle each job's future."""
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
                should_stop=partial(self._nobody_waits, jobs),
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

"""What every route of a server shares (`ServerState`), and the path from a request's lines to
their translations: model lookup, limits, decoding options, the worker's queue. A request's
lines are tokenized once, here, and travel as ids to the worker and the translator.

A router added to the app (e.g. another endpoint that decodes) gets the state with a parameter
`state: StateDep` and decodes through `ServerState.translate`, so that its requests are
batched, limited and counted like those of /v1/translate."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

from fastapi import Depends, Request
from starlette.concurrency import run_in_threadpool

from seq2seq.decoding.line_translator import Translation, join_translations
from seq2seq.decoding.sentences import Sentences
from seq2seq.serving.http_errors import ApiError
from seq2seq.serving.limits import Limits
from seq2seq.serving.prometheus import Metrics
from seq2seq.serving.registry import ServedModel
from seq2seq.serving.worker import (
    DeadlineExceeded,
    DecodeOptions,
    DecodingWorker,
    QueueFull,
    Stopping,
)

# What the explorer's routes answer (409) for a model served from a CTranslate2 folder
NO_EXPLORER = (
    "the attention explorer needs the PyTorch model, and {name} is a CTranslate2 folder; serve "
    "the exported model it came from (--model NAME) to explore it"
)

if TYPE_CHECKING:  # beam_trace imports torch, which a translate-only server never loads
    from seq2seq.decoding.beam_trace import BeamTrace
RETRY_AFTER_S = 1  # what a 503 asks the client to wait
DISCONNECT_POLL_S = 0.25  # how often a waiting request checks that its client is still there


@dataclass
class ServerState:
    """The loaded models (by name, the default first), the limits, the decoding worker and the
    metrics of one app (`app.state.server`)."""

    models: dict[str, ServedModel]
    limits: Limits
    worker: DecodingWorker
    metrics: Metrics

    def model(self, name: str | None, field: str = "model") -> ServedModel:
        """The model named `name` (None: the default one); 404 for a name not served."""
        if name is None:
            return next(iter(self.models.values()))
        if name not in self.models:
            known = ", ".join(self.models)
            raise ApiError(404, f"{field}: no model named {name!r}; this server has {known}")
        return self.models[name]

    def explorable_model(self, name: str | None) -> ServedModel:
        """`model`, and 409 for one without a PyTorch model to compute its attention maps."""
        served = self.model(name)
        if served.pytorch is None:
            raise ApiError(409, NO_EXPLORER.format(name=served.name))
        return served

    def check_lines(self, lines: list[str], field: str = "lines") -> None:
        """413 for more lines, or a longer line, than the limits allow; 422 for a line that is
        not text (a lone surrogate, from a JSON escape such as "\\ud800")."""
        limits = self.limits
        if len(lines) > limits.max_lines:
            message = f"{field}: {len(lines)} lines, over the limit of {limits.max_lines}"
            raise ApiError(413, message + " per request")
        for number, line in enumerate(lines):
            if len(line) > limits.max_line_chars:
                message = f"{field}[{number}]: {len(line)} characters, over the limit of "
                raise ApiError(413, message + f"{limits.max_line_chars} per line")
            try:
                line.encode("utf-8")
            except UnicodeEncodeError as err:
                message = f"{field}[{number}]: a lone surrogate at character {err.start + 1}"
                raise ApiError(422, message) from None

    def options(
        self,
        served: ServedModel,
        beam: int | None = None,
        nbest: int = 1,
        length_penalty: float | None = None,
        max_len_ratio: float | None = None,
        keep_numbers: bool | None = None,
        need_attention: bool = False,
    ) -> DecodeOptions:
        """The decoding options of a request: those given, the model's defaults for the rest;
        422 for a beam over the limit, an n-best list longer than the beam, or the number guard
        asked of an engine without it."""
        cfg = served.translator.decode_cfg
        if keep_numbers and "keep_numbers" in served.translator.lacks_options:
            message = f"{served.name} is served on CTranslate2, which has no number guard"
            raise ApiError(422, f"keep_numbers: {message}")
        beam = beam or cfg.beam_size
        if beam > self.limits.max_beam:
            raise ApiError(
                422, f"beam: {beam} is over this server's limit of {self.limits.max_beam}"
            )
        if nbest > beam:
            raise ApiError(422, f"nbest: {nbest} is more than the beam size ({beam})")
        return DecodeOptions(
            beam=beam,
            nbest=nbest,
            length_penalty=cfg.length_penalty if length_penalty is None else length_penalty,
            max_len_ratio=cfg.max_len_ratio if max_len_ratio is None else max_len_ratio,
            keep_numbers=cfg.keep_numbers if keep_numbers is None else keep_numbers,
            need_attention=need_attention,
        )

    def check_pieces(
        self,
        served: ServedModel,
        sources: list[list[int]],
        beam: int,
        field: str = "lines",
        sentences: Sentences | None = None,
    ) -> None:
        """413 for a sentence (`sources`: each one's ids) of more sentencepiece pieces than the
        model decodes at this beam (`Translator.source_limit`), before it is queued beside other
        requests' sentences; the message names its line of `sentences` (None: one sentence a
        line)."""
        translator = served.translator
        if translator.decode_cfg.truncate_src:
            return
        limit = translator.source_limit(beam)
        for number, ids in enumerate(sources):
            if len(ids) > limit:
                line, sentence = sentences.where(number) if sentences else (number, "")
                message = f"{field}[{line}]: {sentence}{len(ids)} pieces, over the limit of "
                raise ApiError(413, message + f"{limit} pieces per sentence at beam {beam}")

    def check_cost(
        self, served: ServedModel, sources: list[list[int]], options: DecodeOptions, field: str
    ) -> int:
        """The beam steps of a request (`sources`: each line's ids): its beam times the longest
        output any of its lines may have (max_len_ratio x its pieces with EOS +
        decode.max_len_const); 413 when they are over `Limits.max_beam_steps`."""
        translator = served.translator
        pieces = min(max(map(len, sources), default=0), translator.source_limit(options.beam))
        longest = int((pieces + 1) * options.max_len_ratio) + translator.decode_cfg.max_len_const
        steps, limit = options.beam * longest, self.limits.max_beam_steps
        if steps > limit:
            message = f"{field}: beam {options.beam} x up to {longest} output pieces "
            message += f"(max_len_ratio {options.max_len_ratio:g}) = {steps:,} beam steps, over "
            raise ApiError(413, message + f"this server's limit of {limit:,} per request")
        return steps

    def tokenize(self, served: ServedModel, lines: list[str]) -> list[list[int]]:
        """Each line's ids (no EOS) from `served`'s source tokenizer: the one time a request's
        lines are encoded."""
        return served.translator.src_tokenizer.encode(lines)

    async def translate(
        self,
        served: ServedModel,
        lines: list[str],
        options: DecodeOptions,
        field: str = "lines",
        http: Request | None = None,
        split_sentences: bool = True,
    ) -> list[list[Translation]]:
        """Cut `lines` into sentences (with `split_sentences`: `LineTranslator.split`), tokenize
        them, `translate_ids` them all together, and join each line's translations again
        (seq2seq.decoding.line_translator.join_translations)."""
        sentences = served.translator.split(lines, split_sentences)
        sources = self.tokenize(served, sentences.sentences)
        self.check_pieces(served, sources, options.beam, field, sentences)
        results = await self.translate_ids(served, sources, options, field, http)
        return join_translations(sentences, results)

    async def translate_html(
        self,
        served: ServedModel,
        texts: list[str],
        options: DecodeOptions,
        field: str,
        http: Request | None = None,
        split_sentences: bool = True,
    ) -> list[Translation]:
        """Each HTML text of `texts` translated, its tags put back around the output words
        aligned to those they enclosed (seq2seq.decoding.markup): the sentences queued for the
        worker like `translate`'s, then aligned in a thread of the pool; 409 for a model
        without PyTorch, which aligns."""
        if served.pytorch is None:
            message = "format html: word alignments come from the PyTorch model, and "
            raise ApiError(409, message + f"{served.name} is a CTranslate2 folder")
        from seq2seq.decoding.alignment import Aligner  # imports torch
        from seq2seq.decoding.markup import cut, parse_html, restore

        markups = [parse_html(text) for text in texts]
        sentences = cut(markups, served.translator.split, split_sentences)
        sources = self.tokenize(served, sentences.sentences)
        self.check_pieces(served, sources, options.beam, field, sentences)
        results = await self.translate_ids(served, sources, options, field, http)
        aligner = Aligner(served.pytorch)
        return await run_in_threadpool(restore, aligner, markups, sentences, results)

    async def translate_ids(
        self,
        served: ServedModel,
        sources: list[list[int]],
        options: DecodeOptions,
        field: str = "lines",
        http: Request | None = None,
        trace: BeamTrace | None = None,
    ) -> list[list[Translation]]:
        """Queue the tokenized lines `sources` (`tokenize`) for the worker and wait for their
        translations, in input order.

        413 for a line over the model's length in pieces (`check_pieces`, `field` names the
        request's field) or a request over the beam steps limit (`check_cost`); 503 with
        Retry-After when the queue is full or the server is stopping; 504 when the answer takes
        longer than `Limits.timeout_s`. The request `http` names the client the worker queues
        it for (`client_of`), and is asked every DISCONNECT_POLL_S while waiting whether its
        client is still there; once the client has left, or the time is up, the job is
        cancelled and the worker drops it (see `seq2seq.serving.worker`). With a `trace` (one
        line), PyTorch's beam search that finds the translations records itself in it."""
        self.check_pieces(served, sources, options.beam, field)
        cost = self.check_cost(served, sources, options, field)
        client = client_of(http) if http is not None else ""
        try:
            future = self.worker.submit(served.name, sources, options, trace, client, cost)
        except (QueueFull, Stopping) as err:
            why = "the server is busy" if isinstance(err, QueueFull) else "the server is stopping"
            headers = {"Retry-After": str(RETRY_AFTER_S)}
            raise ApiError(503, f"{why}; retry in {RETRY_AFTER_S} s", headers) from None
        try:
            return await self._wait(future, http)
        except (TimeoutError, DeadlineExceeded):
            message = f"no answer within the server's limit of {self.limits.timeout_s:g} s"
            raise ApiError(504, message) from None
        finally:
            future.cancel()  # no effect once settled; else the worker stops decoding it

    async def _wait(
        self,
        future: asyncio.Future[list[list[Translation]]],
        http: Request | None,
    ) -> list[list[Translation]]:
        """The future's result; TimeoutError after `Limits.timeout_s`; ApiError 499 (the client
        closed the connection) as soon as `http` is disconnected."""
        deadline = asyncio.get_running_loop().time() + self.limits.timeout_s
        while (left := deadline - asyncio.get_running_loop().time()) > 0:
            done, _ = await asyncio.wait({future}, timeout=min(left, DISCONNECT_POLL_S))
            if done:
                return future.result()
            if http is not None and await http.is_disconnected():
                raise ApiError(499, "the client closed the connection")
        raise TimeoutError


def client_of(request: Request) -> str:
    """Who sent `request`, for fair queueing: what `seq2seq.serving.access.AccessGuard` counts
    it under (its API key or its address), else its address."""
    client = getattr(request.state, "client", None)
    return client or (f"client {request.client.host}" if request.client else "")


async def server_state(request: Request) -> ServerState:
    """The app's state (`app.state.server`). A coroutine: FastAPI runs a plain function
    dependency in a worker thread, two thread hops per request for a dictionary lookup."""
    return request.app.state.server


StateDep = Annotated[ServerState, Depends(server_state)]  # a route's parameter `state: StateDep`

"""Word alignment over HTTP: `POST /v1/align` (seq2seq.decoding.alignment, docs/align.md).

Each pair is teacher-forced through the model, in a thread of the pool, never in the event
loop; a pair without a target is first translated by the decoding worker, like a
/v1/translate line. The server's limits apply to every source and target as to lines: their
number, their characters, and their pieces."""

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from seq2seq.decoding.alignment import Aligner, AlignmentRule, WordAlignment, align_ids
from seq2seq.errors import UserError
from seq2seq.serving.http_errors import ApiError
from seq2seq.serving.registry import ServedModel
from seq2seq.serving.schemas import AlignedPair, AlignRequest, AlignResponse, ErrorBody
from seq2seq.serving.state import ServerState, StateDep

router = APIRouter(prefix="/v1", tags=["alignment"])
ERRORS: dict[int | str, dict] = {
    status: {"model": ErrorBody, "description": why}
    for status, why in {
        404: "no model of that name",
        409: "a model served from a CTranslate2 folder, which has no attention maps",
        413: "more pairs, or a longer source or target, than the server's limits",
        422: "a bad rule, an empty source or target, or a field of the wrong type or value",
        503: "the queue is full, or the server is stopping (see Retry-After)",
        504: "no answer within the server's time limit",
    }.items()
}


def aligners(request: AlignRequest, state: ServerState) -> tuple[Aligner, Aligner | None]:
    """The request's model and reverse model with their rules; 404 for a model not served,
    409 for one without PyTorch, 422 for a bad rule."""
    served = state.explorable_model(request.model)
    reverse = None
    if request.reverse_model is not None:
        state.model(request.reverse_model, field="reverse_model")
        reverse = state.explorable_model(request.reverse_model)
    try:
        rule = AlignmentRule.parse(request.rule, "rule")
        forward = Aligner(served.pytorch, rule)
        if reverse is None:
            return forward, None
        reverse_rule = AlignmentRule.parse(request.reverse_rule or request.rule, "reverse_rule")
        option = "reverse_rule" if request.reverse_rule else "rule"
        return forward, Aligner(reverse.pytorch, reverse_rule, option)
    except UserError as err:
        raise ApiError(422, str(err)) from None


async def pair_ids(
    request: AlignRequest, state: ServerState, served: ServedModel, http: Request
) -> list[tuple[list[int], list[int]]]:
    """Each pair's source and target ids; a pair without a target gets the model's
    translation (queued for the worker)."""
    options = state.options(served, request.beam)
    sources = state.tokenize(served, [pair.source for pair in request.pairs])
    state.check_pieces(served, sources, options.beam, field="pairs.source")
    given = [pair.target or "" for pair in request.pairs]
    targets = served.pytorch.tgt_tokenizer.encode(given)
    state.check_pieces(served, targets, options.beam, field="pairs.target")
    missing = [number for number, pair in enumerate(request.pairs) if pair.target is None]
    if missing:
        untranslated = [sources[number] for number in missing]
        translated = await state.translate_ids(
            served, untranslated, options, "pairs.source", http=http
        )
        for number, nbest in zip(missing, translated, strict=True):
            targets[number] = nbest[0].tokens
    return list(zip(sources, targets, strict=True))


def align_all(
    ids: list[tuple[list[int], list[int]]],
    forward: Aligner,
    reverse: Aligner | None,
    combine: str,
) -> list[WordAlignment]:
    """Every pair's alignment; 422 naming the first pair with an empty side."""
    alignments = []
    for number, pair in enumerate(ids):
        try:
            alignments.append(align_ids(forward, pair, reverse, combine))
        except ValueError as err:
            raise ApiError(422, f"pairs[{number}]: {err}") from None
    return alignments


@router.post("/align", responses=ERRORS)
async def align(request: AlignRequest, state: StateDep, http: Request) -> AlignResponse:
    """Word alignments of sentence pairs, each target word linked to the source word it
    attends to most under `rule` (with `reverse_model`, both directions combined by
    `combine`), in Pharaoh form."""
    state.check_lines([pair.source for pair in request.pairs], "pairs.source")
    state.check_lines([pair.target or "" for pair in request.pairs], "pairs.target")
    forward, reverse = aligners(request, state)
    served = state.model(request.model)
    ids = await pair_ids(request, state, served, http)
    alignments = await run_in_threadpool(align_all, ids, forward, reverse, request.combine)
    return AlignResponse(
        model=served.name,
        reverse_model=request.reverse_model,
        alignments=[
            AlignedPair(
                source_words=found.src_words, target_words=found.tgt_words, links=found.pharaoh()
            )
            for found in alignments
        ],
    )

"""Word alignment over HTTP: `POST /v1/align` (seq2seq.decoding.alignment, docs/align.md),
and the grid of every head scored over a gold file, `POST /v1/align/gold`.

Each pair is teacher-forced through the model, in a thread of the pool, never in the event
loop; a pair without a target is first translated by the decoding worker, like a
/v1/translate line. The server's limits apply to every source and target as to lines: their
number, their characters, and their pieces; a pair's gold line is bounded by the body's size,
and each of its links by the pair's words. The gold file is the one the server was started
with (`--gold PAIRS GOLD`): no request names a file, and its grid is computed once per model
and direction, then kept (`GoldScores`)."""

from collections.abc import Callable
from dataclasses import dataclass, field

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from seq2seq.decoding.alignment import (
    Aligner,
    AlignmentRule,
    AlignmentScore,
    GoldFile,
    GoldLinks,
    WordAlignment,
    add_to_grid,
    align_ids,
    check_sides,
    parse_gold,
    pharaoh,
)
from seq2seq.errors import UserError
from seq2seq.serving.http_errors import ApiError
from seq2seq.serving.registry import ServedModel
from seq2seq.serving.schemas import (
    AlignedPair,
    AlignRequest,
    AlignResponse,
    ErrorBody,
    GoldFileRequest,
    GoldFileResponse,
    GoldPair,
)
from seq2seq.serving.state import ServerState, StateDep

router = APIRouter(prefix="/v1", tags=["alignment"])
ERRORS: dict[int | str, dict] = {
    status: {"model": ErrorBody, "description": why}
    for status, why in {
        404: "no model of that name (/v1/align/gold: or no gold file)",
        409: "a model served from a CTranslate2 folder, which has no attention maps",
        413: "more pairs, or a longer source or target, than the server's limits",
        422: "a bad rule, an empty source or target, a bad gold line or one past its pair's "
        "words, or a field of the wrong type or value",
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


@dataclass
class GoldScores:
    """The gold file of `--gold PAIRS GOLD` (None: none), and its grid of scores by model name
    and direction (swapped or not), kept once computed (`app.state.gold`)."""

    file: GoldFile | None
    grids: dict[tuple[str, bool], dict[str, dict]] = field(default_factory=dict)


def request_gold(request: AlignRequest) -> list[GoldLinks] | None:
    """Each pair's gold (None: no pair has any); 422 for a bad gold line, a pair without gold
    or target beside pairs with gold, or grid without gold or with reverse_model."""
    if request.grid and request.reverse_model is not None:
        raise ApiError(422, "grid: scores one model; leave reverse_model out")
    if all(pair.gold is None for pair in request.pairs) and not request.grid:
        return None
    gold = []
    for number, pair in enumerate(request.pairs):
        if pair.gold is None or pair.target is None:
            lacking = "gold" if pair.gold is None else "target"
            message = f"pairs[{number}]: no {lacking}; to score, give every pair both"
            raise ApiError(422, message)
        try:
            gold.append(parse_gold(pair.gold))
        except ValueError as err:
            raise ApiError(422, f"pairs[{number}].gold: {err}") from None
    return gold


def grid_scores(
    ids: list[tuple[list[int], list[int]]],
    gold: list[GoldLinks],
    aligner: Aligner,
    where: Callable[[int], str],
) -> dict[str, dict]:
    """The scores of every rule of the grid over the pairs `ids` against `gold`; 422 naming the
    first pair (`where(number)`) with an empty side or gold past its words."""
    scores: dict[str, AlignmentScore] = {}
    for number, (pair, links) in enumerate(zip(ids, gold, strict=True)):
        try:
            check_sides(pair)
            add_to_grid(scores, aligner.maps(*pair), links, aligner.rule.shifted)
        except ValueError as err:
            raise ApiError(422, f"{where(number)}: {err}") from None
    return {rule: found.summary() for rule, found in scores.items()}


def rule_scores(alignments: list[WordAlignment], gold: list[GoldLinks], rule: str) -> dict:
    """The scores of `alignments` against `gold` under the name `rule`; 422 naming the first
    pair with gold past its words."""
    total = AlignmentScore()
    for number, (found, links) in enumerate(zip(alignments, gold, strict=True)):
        try:
            total.add_pair(found, links)
        except ValueError as err:
            raise ApiError(422, f"pairs[{number}].gold: {err}") from None
    return {rule: total.summary()}


def aligned_pair(found: WordAlignment, gold: GoldLinks | None) -> AlignedPair:
    shown = None
    if gold is not None:
        shown = GoldPair(sure=pharaoh(gold.sure), possible=pharaoh(gold.possible - gold.sure))
    return AlignedPair(
        source_words=found.src_words,
        target_words=found.tgt_words,
        links=found.pharaoh(),
        gold=shown,
    )


@router.post("/align", responses=ERRORS)
async def align(request: AlignRequest, state: StateDep, http: Request) -> AlignResponse:
    """Word alignments of sentence pairs, each target word linked to the source word it
    attends to most under `rule` (with `reverse_model`, both directions combined by
    `combine`), in Pharaoh form."""
    state.check_lines([pair.source for pair in request.pairs], "pairs.source")
    state.check_lines([pair.target or "" for pair in request.pairs], "pairs.target")
    gold = request_gold(request)
    forward, reverse = aligners(request, state)
    served = state.model(request.model)
    ids = await pair_ids(request, state, served, http)
    alignments = await run_in_threadpool(align_all, ids, forward, reverse, request.combine)
    scores = None
    if gold is not None:
        rule = str(forward.rule) if reverse is None else f"{forward.rule} {request.combine}"
        scores = rule_scores(alignments, gold, rule)
        if request.grid:
            where = "pairs[{}]".format
            scores |= await run_in_threadpool(grid_scores, ids, gold, forward, where)
    return AlignResponse(
        model=served.name,
        reverse_model=request.reverse_model,
        alignments=[
            aligned_pair(found, links)
            for found, links in zip(alignments, gold or [None] * len(ids), strict=True)
        ],
        scores=scores,
    )


def file_grid(gold: GoldFile, aligner: Aligner, swap: bool) -> dict[str, dict]:
    """The grid of `gold`'s pairs by `aligner` (with `swap`, each line is TARGET ||| SOURCE of
    its model, and its gold is turned round)."""
    pairs = [(tgt, src) if swap else (src, tgt) for src, tgt in gold.pairs]
    links = [found.reversed() for found in gold.gold] if swap else gold.gold
    ids = [aligner.ids(*pair) for pair in pairs]
    return grid_scores(ids, links, aligner, lambda number: f"--gold {gold.name}:{number + 1}")


@router.post("/align/gold", responses=ERRORS)
async def align_gold_file(
    request: GoldFileRequest, state: StateDep, http: Request
) -> GoldFileResponse:
    """The grid over the gold file the server was started with (`--gold PAIRS GOLD`): AER,
    precision and recall of every head, every layer's mean and the mean of all, summed over
    its pairs (as `seq2seq align --gold GOLD --grid` scores them); 404 without a gold file."""
    gold: GoldScores = http.app.state.gold
    if gold.file is None:
        raise ApiError(404, "no gold file: start the server with --gold PAIRS GOLD")
    served = state.explorable_model(request.model)
    key = (served.name, request.swap)
    if key not in gold.grids:
        aligner = Aligner(served.pytorch)
        gold.grids[key] = await run_in_threadpool(file_grid, gold.file, aligner, request.swap)
    found = gold.grids[key]
    pairs = len(gold.file.pairs)
    return GoldFileResponse(model=served.name, file=gold.file.name, pairs=pairs, scores=found)

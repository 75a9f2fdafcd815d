"""The attention explorer over HTTP: the page at `/`, `POST /v1/explain`, and the static files
of every page (the chapters' endpoints are in `seq2seq.serving.chapters`).

The page is static HTML, CSS and JavaScript in `static/`, served as they are (no build step,
nothing fetched from elsewhere). It asks `POST /v1/explain` for what
`seq2seq.decoding.explain.explain`
computes: the n-best translations, pieces, words, every attention map and the word alignment.
The sentence is decoded by the server's decoding worker, like a /v1/translate request; the maps
are computed in a thread of the pool, never in the event loop. With `beam_tree`, the worker
decodes the sentence alone with PyTorch's beam search, which records its steps in a `BeamTrace`
(`seq2seq.decoding.explain.traced_tree`): one search gives both the tree and the n-best list.
With `target`, a translation of one's own, nothing is decoded: the sentence and that target are
teacher-forced (`seq2seq.decoding.explain.given_target`), as POST /v1/align forces a pair.
"""

from pathlib import Path

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from seq2seq.decoding.beam_trace import BeamTrace
from seq2seq.decoding.explain import check_text, explain, given_target, traced_tree
from seq2seq.errors import UserError
from seq2seq.models import Seq2SeqModel, TransformerSeq2Seq
from seq2seq.serving.http_errors import ApiError
from seq2seq.serving.registry import ServedModel
from seq2seq.serving.schemas import ErrorBody
from seq2seq.serving.state import ServerState, StateDep
from seq2seq.serving.worker import DecodeOptions

MAX_TEXT_CHARS = 400  # the maps grow with its square: 400 characters give a few MB of JSON
# The most attention weights one answer may hold, counted before decoding for the longest output
# the model may write: each is a Python float while the answer is built (32 bytes) and about 6
# bytes of JSON, so an answer takes at most about 80 MB of memory and 12 MB on the wire.
MAX_MAP_WEIGHTS = 2_000_000
MAX_TREE_BEAM = 8  # the beam tree has 2K candidates per beam and step: K * 2K per step
STATIC = Path(__file__).parent / "static"
STATIC_TYPES = {
    "explorer.js": "text/javascript",
    "explorer.css": "text/css",
    "common.js": "text/javascript",
    "beam_tree.js": "text/javascript",
    "gold.js": "text/javascript",
    "chapters.html": "text/html",
    "nadaraya_watson.html": "text/html",
    "nadaraya_watson.js": "text/javascript",
    "masked_softmax.html": "text/html",
    "masked_softmax.js": "text/javascript",
    "training.html": "text/html",
    "training.js": "text/javascript",
    "compare.html": "text/html",
    "compare.js": "text/javascript",
    "scoring.html": "text/html",
    "scoring.js": "text/javascript",
    "multi_head.html": "text/html",
    "multi_head.js": "text/javascript",
    "self_attention.html": "text/html",
    "self_attention.js": "text/javascript",
}

ERRORS: dict[int | str, dict] = {
    status: {"model": ErrorBody, "description": why}
    for status, why in {
        404: "no model of that name",
        413: f"a text over {MAX_TEXT_CHARS} characters, or maps over {MAX_MAP_WEIGHTS:,} weights",
        422: f"an empty text, a lone surrogate, a beam over {MAX_TREE_BEAM} with beam_tree, or "
        "a field of the wrong type or value",
        503: "the queue is full, or the server is stopping (see Retry-After)",
        504: "no answer within the server's time limit",
    }.items()
}

router = APIRouter()


class ExplainRequest(BaseModel):
    """POST /v1/explain."""

    model_config = ConfigDict(extra="forbid", strict=True)

    model: str | None = Field(None, description="a served model; default: the first")
    text: str = Field(
        description=f"a text, at most {MAX_TEXT_CHARS} characters, cut into sentences as "
        "/v1/translate cuts a line (`sentences` in the answer)"
    )
    sentence: int = Field(0, ge=0, description="which of the text's sentences is explained")
    beam: int | None = Field(None, ge=1, description="beam size; default: the model's")
    nbest: int = Field(1, ge=1, description="hypotheses listed, at most the beam size")
    hypothesis: int = Field(0, ge=0, description="the hypothesis whose maps are returned")
    all_maps: bool = Field(False, description="return the maps of every hypothesis")
    beam_tree: bool = Field(
        False, description=f"also return the beam search step by step (beam <= {MAX_TREE_BEAM})"
    )
    target: str | None = Field(
        None,
        description=f"a translation of the chosen sentence, at most {MAX_TEXT_CHARS} characters, "
        "to explain instead of the model's own: `hypotheses` holds it alone, teacher-forced as "
        "POST /v1/align forces a pair's target, with score null; nothing is searched, so beam, "
        "nbest, hypothesis, all_maps and beam_tree do not apply",
    )


def map_weights(model: Seq2SeqModel, src_pieces: int, tgt_pieces: int) -> int:
    """The attention weights in one hypothesis's maps (`seq2seq.decoding.explain`) for S =
    `src_pieces` and T = `tgt_pieces`, EOS included in both: L_enc * H * S * S + L_dec * H *
    (T * T + T * S) for a Transformer, T * S for a GRU."""
    if not isinstance(model, TransformerSeq2Seq):
        return tgt_pieces * src_pieces
    heads = model.encoder_layers[0].self_attn.num_heads
    encoder = len(model.encoder_layers) * heads * src_pieces * src_pieces
    decoder = len(model.decoder_layers) * heads * (tgt_pieces + src_pieces) * tgt_pieces
    return encoder + decoder


def tree_numbers(beam: int, src_pieces: int, tgt_pieces: int) -> int:
    """The numbers in a beam tree (`seq2seq.decoding.explain.beam_tree`) of at most
    `tgt_pieces` steps: per step and beam, S = `src_pieces` attention weights and 2K candidates
    of 5 numbers each (token, piece, log-probability, score, next beam)."""
    return tgt_pieces * beam * (src_pieces + 5 * 2 * beam)


def check_answer_size(
    served: ServedModel,
    request: ExplainRequest,
    beam: int,
    src_ids: list[int],
    tgt_ids: list[int] | None = None,
) -> None:
    """413 when the maps the request asks for (and its beam tree) could hold more than
    MAX_MAP_WEIGHTS numbers, counted for the longest output the model may write
    (decode.max_len_ratio and max_len_const), or for the target's ids `tgt_ids`, before
    anything is decoded; `src_ids`: the text's ids."""
    translator = served.pytorch  # the maps are PyTorch's, whatever the engine
    cfg = translator.decode_cfg
    src_pieces = len(src_ids) + 1
    src_pieces = min(src_pieces, translator.source_limit(beam) + 1)
    tgt_pieces = int(src_pieces * cfg.max_len_ratio) + cfg.max_len_const + 1
    if tgt_ids is not None:
        tgt_pieces = len(tgt_ids) + 1
    decoded = tgt_ids is None  # else a target, teacher-forced: one hypothesis, no beam tree
    shown = request.nbest if request.all_maps and decoded else 1
    weights = shown * map_weights(translator.model, src_pieces, tgt_pieces)
    if request.beam_tree and decoded:
        weights += tree_numbers(beam, src_pieces, tgt_pieces)
    if weights > MAX_MAP_WEIGHTS:
        maps = f"the maps of {shown} hypotheses" if shown > 1 else "its maps"
        held = f"{weights:,} attention weights"
        if request.beam_tree:
            maps, held = f"{maps} and beam tree", f"{weights:,} numbers"
        raise ApiError(
            413,
            f"text: {src_pieces} pieces; {maps} could hold {held}, over "
            f"the explorer's limit of {MAX_MAP_WEIGHTS:,}; send a shorter text"
            + (" or all_maps false" if shown > 1 else ""),
        )


def json_response(content: dict) -> Response:
    """JSON without spaces (the maps are most of an answer, and spaces would add a fifth), as
    `json.dumps(content, ensure_ascii=False, separators=(",", ":"))` writes it, by orjson,
    which writes the maps' numbers several times faster (docs/benchmarks.md)."""
    return Response(orjson.dumps(content), media_type="application/json")


@router.get("/", include_in_schema=False)
async def page() -> FileResponse:
    return FileResponse(STATIC / "index.html", media_type="text/html")


@router.get("/explorer/{name}", include_in_schema=False)
async def static_file(name: str) -> FileResponse:
    if name not in STATIC_TYPES:
        raise ApiError(404, f"/explorer/{name}: no such file")
    return FileResponse(STATIC / name, media_type=STATIC_TYPES[name])


@router.post("/v1/explain", responses=ERRORS, tags=["explorer"])
async def explain_sentence(request: ExplainRequest, state: StateDep, http: Request) -> Response:
    """The sentences of `text` (`sentences`) and, of the one chosen (`sentence`): the n-best
    translations with scores; source and target pieces and the words they belong to; every
    attention map of the chosen hypothesis (weights rounded to 3 decimals); a word alignment
    read off cross-attention (see `alignment_rule`); the map the page opens on (`first_view`:
    the last layer's sharpest head); and the positional encoding of the positions shown
    (Transformer). With `beam_tree`, also the beam search step by step
    (`beam_tree`): every live beam's 2K best candidates, kept, pruned or finished, the
    cross-attention row each beam read, and the finished hypotheses with their raw and
    length-penalised scores. With `target`, the maps and alignment are those of that target,
    teacher-forced, the one hypothesis, and nothing is searched."""
    served = state.explorable_model(request.model)
    check_box(request.text, "text")
    if request.hypothesis >= request.nbest:
        message = f"hypothesis: {request.hypothesis} is not below nbest ({request.nbest})"
        raise ApiError(422, message)
    options = state.options(served, request.beam, request.nbest)
    if request.beam_tree and request.target is None and options.beam > MAX_TREE_BEAM:
        raise ApiError(422, f"beam: {options.beam}, over the beam tree's limit of {MAX_TREE_BEAM}")
    sentences = served.pytorch.split([request.text]).sentences
    if request.sentence >= len(sentences):
        message = f"sentence: {request.sentence}, but the text has {len(sentences)} sentences"
        raise ApiError(422, message + " (counted from 0)")
    sources = state.tokenize(served, [sentences[request.sentence]])
    try:
        if request.target is None:
            payload = await explain_search(request, state, served, options, sources, http)
        else:
            forced = (sources[0], request.target)
            payload = await explain_target(request, forced, state, served, options.beam)
    except UserError as err:
        raise ApiError(422, str(err)) from None
    shown = {"sentences": sentences, "sentence": request.sentence}
    return json_response({"model": served.name, **shown, **payload})


def check_box(text: str, field: str) -> None:
    """413 for a `text` over MAX_TEXT_CHARS, 422 for an empty one or one that is not text;
    `field` names it."""
    if len(text) > MAX_TEXT_CHARS:
        message = f"{field}: {len(text)} characters, over the explorer's limit of "
        raise ApiError(413, message + f"{MAX_TEXT_CHARS}")
    try:
        check_text(text, field)
    except UserError as err:
        raise ApiError(422, str(err)) from None


async def explain_search(
    request: ExplainRequest,
    state: ServerState,
    served: ServedModel,
    options: DecodeOptions,
    sources: list[list[int]],
    http: Request,
) -> dict:
    """What /v1/explain shows of the n-best translations of the one sentence `sources`, decoded
    by the worker (with its beam tree when asked)."""
    check_answer_size(served, request, options.beam, sources[0])
    trace = BeamTrace() if request.beam_tree else None
    (nbest,) = await state.translate_ids(
        served, sources, options, field="text", http=http, trace=trace
    )
    payload = await run_in_threadpool(
        explain, served.pytorch, nbest, request.hypothesis, request.all_maps
    )
    if trace is not None:
        payload["beam_tree"] = await run_in_threadpool(
            traced_tree, served.pytorch, trace, options.beam, request.nbest
        )
    return payload


async def explain_target(
    request: ExplainRequest,
    pair: tuple[list[int], str],
    state: ServerState,
    served: ServedModel,
    beam: int,
) -> dict:
    """What /v1/explain shows of `pair`, the source's ids and the request's target,
    teacher-forced (nothing is searched); the limits of POST /v1/align's pairs apply."""
    src_ids, target = pair
    check_box(target, "target")
    given = given_target(served.pytorch, src_ids, target)
    state.check_pieces(served, [src_ids], beam, field="text")
    state.check_pieces(served, [given.tokens], beam, field="target")
    check_answer_size(served, request, beam, src_ids, given.tokens)
    return await run_in_threadpool(explain, served.pytorch, [given])

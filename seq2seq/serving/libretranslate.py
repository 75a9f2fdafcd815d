"""LibreTranslate's API, so that its clients and tools work against this server unchanged.

    POST /translate   {"q": "text" | ["text", ...], "source": "en", "target": "de",
                       "format": "text", "alternatives": 0}  as JSON or as a form
                      -> {"translatedText": "..." | [...], "alternatives": [...]}
    GET  /languages   -> [{"code": "en", "name": "English", "targets": ["de"]}, ...]

The model is the first one served that translates `source` into `target` ("auto": the only
source language served for `target`). Each line of a text is cut into sentences, each
translated on its own, and the sentences and lines are joined again with the text's own
spacing (`split_sentences` false, a field of ours: each line whole). Format "html" keeps the
tags (seq2seq.decoding.markup; 409 for a CTranslate2 folder, 400 with alternatives). An API
key (`api_key`) is checked, with the rate limits, by `seq2seq.serving.access`."""

import json
from typing import Any, Literal
from urllib.parse import parse_qsl

from fastapi import APIRouter, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, Field, ValidationError

from seq2seq.serving.http_errors import ApiError
from seq2seq.serving.registry import ServedModel
from seq2seq.serving.state import ServerState, StateDep

router = APIRouter(tags=["LibreTranslate"])

LANGUAGE_NAMES = {
    "ar": "Arabic", "cs": "Czech", "de": "German", "en": "English", "es": "Spanish",
    "fr": "French", "it": "Italian", "ja": "Japanese", "nl": "Dutch", "pl": "Polish",
    "pt": "Portuguese", "ru": "Russian", "tr": "Turkish", "uk": "Ukrainian", "zh": "Chinese",
}  # fmt: skip


class LibreTranslateRequest(BaseModel):
    q: str | list[str] = Field(description="a text, or a list of texts")
    source: str = Field(description='a language code, or "auto"')
    target: str
    format: Literal["text", "html"] = "text"
    alternatives: int = Field(0, ge=0, description="other translations to give per text")
    api_key: str | None = Field(None, description="an API key (see seq2seq serve --api-keys)")
    split_sentences: bool = Field(
        True, description="cut each line into sentences (not LibreTranslate's; false: lines whole)"
    )


REQUEST_BODY = {
    "required": True,
    "content": {
        kind: {"schema": LibreTranslateRequest.model_json_schema()}
        for kind in ("application/json", "application/x-www-form-urlencoded")
    },
}


@router.get("/languages")
async def languages(state: StateDep) -> list[dict[str, Any]]:
    """The source languages served, each with the languages it translates into."""
    targets: dict[str, list[str]] = {}
    for served in state.models.values():
        targets.setdefault(served.source, [])
        if served.target not in targets[served.source]:
            targets[served.source].append(served.target)
    return [
        {"code": code, "name": LANGUAGE_NAMES.get(code, code), "targets": codes}
        for code, codes in targets.items()
    ]


@router.post("/translate", openapi_extra={"requestBody": REQUEST_BODY})
async def translate(request: Request, state: StateDep) -> dict[str, Any]:
    """Translate a text or a list of texts, as LibreTranslate does."""
    body = await read_request(request)
    served = pick_model(state, body.source, body.target)
    texts = [body.q] if isinstance(body.q, str) else body.q
    if body.format == "html":
        translated = await translate_html(request, state, body, served, texts)
    else:
        translated = await translate_text(request, state, body, served, texts)
    answer: dict[str, Any] = {"translatedText": [ranked[0] for ranked in translated]}
    if body.alternatives:
        answer["alternatives"] = [ranked[1:] for ranked in translated]
    if isinstance(body.q, str):
        answer = {key: value[0] for key, value in answer.items()}
    if body.source == "auto":
        answer["detectedLanguage"] = {"confidence": 100.0, "language": served.source}
    return answer


async def translate_text(
    request: Request,
    state: ServerState,
    body: LibreTranslateRequest,
    served: ServedModel,
    texts: list[str],
) -> list[list[str]]:
    """The translations of plain `texts`, for each its best and its alternatives: line by
    line, joined again with the text's line breaks."""
    lines = [line for text in texts for line in text.split("\n")]
    state.check_lines(lines, field="q")
    nbest = body.alternatives + 1
    beam = max(served.translator.decode_cfg.beam_size, nbest)
    options = state.options(served, beam=beam, nbest=nbest)
    translations = await state.translate(
        served, lines, options, field="q", http=request, split_sentences=body.split_sentences
    )
    results = iter(translations)
    translated = []
    for text in texts:
        nbest_lists = [next(results) for _ in text.split("\n")]
        translated.append(
            ["\n".join(nbest[rank].text for nbest in nbest_lists) for rank in range(options.nbest)]
        )
    return translated


async def translate_html(
    request: Request,
    state: ServerState,
    body: LibreTranslateRequest,
    served: ServedModel,
    texts: list[str],
) -> list[list[str]]:
    """The translations of HTML `texts`, each whole (its line breaks are HTML's whitespace),
    its tags kept (`ServerState.translate_html`); 400 for alternatives."""
    if body.alternatives:
        raise ApiError(400, "alternatives: format html gives the best translation alone")
    state.check_lines(texts, field="q")
    options = state.options(served)
    found = await state.translate_html(
        served, texts, options, "q", request, split_sentences=body.split_sentences
    )
    return [[best.text] for best in found]


async def read_request(request: Request) -> LibreTranslateRequest:
    """The request's fields, sent as JSON or as a form (LibreTranslate's clients send forms)."""
    body = await request.body()
    if request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
        fields: dict[str, Any] = {}
        for name, value in parse_qsl(body.decode(), keep_blank_values=True):
            fields[name] = [*fields[name], value] if name == "q" and name in fields else value
    else:
        try:
            fields = json.loads(body)
        except ValueError as err:
            raise ApiError(400, f"malformed JSON: {err}") from None
        except RecursionError:
            raise ApiError(400, "malformed JSON: nested too deeply") from None
    try:
        return LibreTranslateRequest.model_validate(fields)
    except ValidationError as err:
        raise RequestValidationError(err.errors()) from None


def pick_model(state: ServerState, source: str, target: str) -> ServedModel:
    """The first model from `source` ("auto": any) into `target`; 400 when there is none, or
    when "auto" could mean several source languages."""
    candidates = [
        served
        for served in state.models.values()
        if served.target == target and source in ("auto", served.source)
    ]
    if not candidates:
        raise ApiError(
            400, f"source {source}, target {target}: no model for this pair; see /languages"
        )
    if len({served.source for served in candidates}) > 1:
        raise ApiError(400, f"source auto: several languages translate into {target}; name one")
    return candidates[0]

"""The FastAPI application: `create_app(models, limits)`.

    POST /v1/translate   lines -> their n-best translations with scores, in input order
    GET  /v1/models      the models served: languages, family, size, decoding defaults, scores
    GET  /healthz        answers at once, even while the model decodes
    GET  /metrics        Prometheus text format (seq2seq.serving.prometheus)
    GET  /openapi.json   the schema of all of these, browsable at /docs (Swagger UI, served
                         from the swagger-ui-bundle package: nothing is fetched from elsewhere)
    POST /translate, GET /languages   LibreTranslate's API (seq2seq.serving.libretranslate)
    GET  /, POST /v1/explain          the attention explorer (seq2seq.serving.explorer)
    POST /v1/align, /v1/align/gold    word alignments, scored against gold
                                      (seq2seq.serving.alignment)
    GET  /v1/run/attention            a run's attention by step (seq2seq.serving.run_history)
    POST /v1/chapters/...             the explorer's chapter widgets (seq2seq.serving.chapters)

On a server of CTranslate2 folders alone, which has no PyTorch model for the maps and never
imports torch, the explorer's routes are not served: `GET /`, `POST /v1/explain` and
`POST /v1/align` answer 409.

Every answer carries the security headers of `seq2seq.serving.access`; with an `Access`,
requests are checked for their Host, Origin, API key and rate limit before they are read (a key
in the body: before the rest of the app sees it).

Another router can be added to the app that `create_app` returns (`app.include_router`); its
routes reach the models, the limits and the decoding worker through
a parameter `state: seq2seq.serving.state.StateDep`.
"""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, FastAPI, Request, Response
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse
from prometheus_client import CONTENT_TYPE_LATEST
from swagger_ui_bundle import swagger_ui_path

from seq2seq.serving import libretranslate
from seq2seq.serving.access import Access, AccessGuard, SecurityHeaders
from seq2seq.serving.http_errors import ApiError, CheckHead, ReadBody, add_error_handlers
from seq2seq.serving.limits import Limits
from seq2seq.serving.prometheus import CountRequests, Metrics
from seq2seq.serving.registry import ServedModel
from seq2seq.serving.schemas import (
    ErrorBody,
    Hypothesis,
    ModelInfo,
    TranslateRequest,
    TranslateResponse,
)
from seq2seq.serving.state import NO_EXPLORER, ServerState, StateDep
from seq2seq.serving.worker import DecodingWorker

if TYPE_CHECKING:  # imports torch, which a server of CTranslate2 folders never loads
    from seq2seq.decoding.alignment import GoldFile

ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": why}
    for status, why in {
        400: "malformed JSON, or a body that is not UTF-8",
        403: "a cross-site request, or a missing or unknown API key",
        404: "no model of that name",
        409: "format html asked of a model served from a CTranslate2 folder",
        413: "a body, a line or a number of lines over the server's limits",
        415: "a body that is not JSON, or no Content-Type",
        421: "a Host header naming a host this server does not answer to",
        422: "a field of the wrong type or value",
        429: "over the rate limit (see Retry-After)",
        503: "the queue is full, or the server is stopping (see Retry-After)",
        504: "no answer within the server's time limit",
    }.items()
}

v1 = APIRouter(prefix="/v1", tags=["translation"])


@v1.post("/translate", responses=ERRORS)
async def translate(request: TranslateRequest, state: StateDep, http: Request) -> TranslateResponse:
    """Translate `lines`: for each, its `nbest` best translations and their scores."""
    served = state.model(request.model)
    state.check_lines(request.lines)
    options = state.options(
        served,
        request.beam,
        request.nbest,
        request.length_penalty,
        request.max_len_ratio,
        request.keep_numbers,
    )
    split = request.split_sentences
    if request.format == "html":
        if request.nbest != 1:
            raise ApiError(422, "nbest: format html gives the best translation alone")
        found = await state.translate_html(served, request.lines, options, "lines", http, split)
        results = [[best] for best in found]
    else:
        results = await state.translate(
            served, request.lines, options, http=http, split_sentences=split
        )
    return TranslateResponse(
        model=served.name,
        translations=[[Hypothesis(text=t.text, score=t.score) for t in nbest] for nbest in results],
    )


@v1.get("/models")
async def models(state: StateDep) -> list[ModelInfo]:
    """The models this server holds, the default one first."""
    return [ModelInfo(**served.info()) for served in state.models.values()]


service = APIRouter(tags=["service"])


@service.get("/healthz")
async def healthz(state: StateDep) -> dict[str, Any]:
    """Whether the server answers; never waits for the model."""
    return {"status": "ok", "models": list(state.models), "queue_lines": state.worker.queued_lines}


@service.get("/metrics")
async def metrics(state: StateDep) -> Response:
    """Requests by status, latency, decoding batch sizes and queue depth, for Prometheus."""
    return Response(state.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)


DOCS_FILES = {
    "swagger-ui-bundle.js": "text/javascript",
    "swagger-ui.css": "text/css",
    "favicon-32x32.png": "image/png",
}


@service.get("/docs", include_in_schema=False)
async def docs() -> HTMLResponse:
    """Swagger UI, from the files of the swagger-ui-bundle package."""
    return get_swagger_ui_html(
        openapi_url="/openapi.json",
        title="seq2seq translation server",
        swagger_js_url="/docs/swagger-ui-bundle.js",
        swagger_css_url="/docs/swagger-ui.css",
        swagger_favicon_url="/docs/favicon-32x32.png",
    )


@service.get("/docs/{name}", include_in_schema=False)
async def docs_file(name: str) -> FileResponse:
    if name not in DOCS_FILES:
        raise ApiError(404, f"/docs/{name}: no such file")
    return FileResponse(Path(str(swagger_ui_path)) / name, media_type=DOCS_FILES[name])


translate_only = APIRouter(tags=["explorer"])


@translate_only.get("/", include_in_schema=False)
@translate_only.post("/v1/explain", include_in_schema=False)
@translate_only.post("/v1/align", include_in_schema=False)
@translate_only.post("/v1/align/gold", include_in_schema=False)
async def no_explorer(state: StateDep) -> None:
    """The explorer's routes on a server whose models are all CTranslate2 folders."""
    raise ApiError(409, NO_EXPLORER.format(name=next(iter(state.models))))


@asynccontextmanager
async def run_worker(app: FastAPI) -> AsyncIterator[None]:
    """Run the decoding worker while the app serves; on shutdown (after the requests in flight
    are answered) let it finish what is queued."""
    worker = app.state.server.worker
    worker.start()
    try:
        yield
    finally:
        worker.stop()


def create_app(
    models: dict[str, ServedModel],
    limits: Limits | None = None,
    access: Access | None = None,
    attention_history: Path | None = None,
    gold: "GoldFile | None" = None,
) -> FastAPI:
    """The app serving `models` (by name; the first is the default) within `limits`, to the
    clients that `access` lets in (None: no Host, Origin, key or rate checks, e.g. behind a
    proxy that makes them; `seq2seq serve` always passes one), the run's attention history
    file `attention_history`, if any, and the sentence pairs and gold links `gold` that
    `POST /v1/align/gold` scores, if any."""
    if not models:
        raise ValueError("create_app needs at least one model")
    limits = limits or Limits()
    metrics = Metrics()
    app = FastAPI(
        title="seq2seq translation server",
        summary="Neural machine translation with the models loaded at start",
        lifespan=run_worker,
        docs_url=None,  # served by the route `docs`, from local files
        redoc_url=None,  # ReDoc would load its script from a CDN
    )
    app.state.server = ServerState(models, limits, DecodingWorker(models, limits, metrics), metrics)
    app.add_middleware(ReadBody, max_bytes=limits.max_body_bytes)
    if access is not None:  # outside ReadBody: a key in the head is checked before the body
        app.add_middleware(AccessGuard, access=access, max_body_bytes=limits.max_body_bytes)
    app.add_middleware(CheckHead)
    app.add_middleware(SecurityHeaders)
    app.add_middleware(CountRequests, metrics=metrics)
    add_error_handlers(app)
    app.include_router(v1)
    app.include_router(service)
    app.include_router(libretranslate.router)
    if any(served.pytorch is not None for served in models.values()):
        from seq2seq.serving import alignment, chapters, explorer, run_history  # torch: the maps

        app.include_router(explorer.router)
        app.state.attention_history = run_history.RunHistory(attention_history)
        app.state.gold = alignment.GoldScores(gold)
        app.include_router(alignment.router)
        app.include_router(run_history.router)
        app.include_router(chapters.router)
    else:
        app.include_router(translate_only)
    return app

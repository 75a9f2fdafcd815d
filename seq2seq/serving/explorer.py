"""The attention explorer over HTTP: the page at `/` and `POST /v1/explain`.

The page is static HTML, CSS and JavaScript in `static/`, served as they are (no build step,
nothing fetched from elsewhere). It asks `POST /v1/explain` for what `seq2seq.explain.explain`
computes: the n-best translations, pieces, words, every attention map and the word alignment.
"""

import json
from collections.abc import Mapping
from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, Response
from pydantic import BaseModel

from seq2seq.errors import UserError
from seq2seq.explain import ExplainRequest, explain
from seq2seq.translator import Translator

STATIC = Path(__file__).parent / "static"
STATIC_TYPES = {"explorer.js": "text/javascript", "explorer.css": "text/css"}


class ExplainBody(BaseModel):
    """POST /v1/explain: see `seq2seq.explain.ExplainRequest`."""

    model: str
    text: str
    beam: int | None = None
    nbest: int = 1
    hypothesis: int = 0
    all_maps: bool = False


def json_response(content: dict, status_code: int = 200) -> Response:
    """JSON without spaces: the maps are most of an answer, and spaces would add a fifth."""
    body = json.dumps(content, ensure_ascii=False, separators=(",", ":"))
    return Response(body, status_code=status_code, media_type="application/json")


def error_response(status_code: int, message: str) -> Response:
    return json_response({"error": f"error: {message}"}, status_code)


def explorer_router(translators: Mapping[str, Translator]) -> APIRouter:
    """The explorer's routes over the loaded models, by name."""
    router = APIRouter()

    @router.get("/", include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html")

    @router.get("/explorer/{name}", include_in_schema=False)
    def static_file(name: str) -> Response:
        if name not in STATIC_TYPES:
            return error_response(404, f"/explorer/{name}: no such file")
        return FileResponse(STATIC / name, media_type=STATIC_TYPES[name])

    @router.post("/v1/explain")
    def explain_sentence(body: ExplainBody) -> Response:
        """Translations, pieces, words, attention maps and word alignment of one sentence."""
        translator = translators.get(body.model)
        if translator is None:
            loaded = ", ".join(sorted(translators))
            return error_response(404, f"model: no model {body.model!r}; loaded: {loaded}")
        try:
            return json_response(explain(translator, ExplainRequest(**body.model_dump())))
        except UserError as err:
            return error_response(400, str(err))

    return router

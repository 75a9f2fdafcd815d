"""A run's attention through training over HTTP, for the explorer's training page: the run's
attention history (`seq2seq.training.attention_history`), named with `--run` when the server
starts, read again when it changes so that a run still training shows its new steps.

    GET /v1/run/attention                     the sentences, their pieces, the maps and steps
    GET /v1/run/attention/{step}/{sentence}   every map of one sentence at one step
"""

import threading
from dataclasses import dataclass, field
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from seq2seq.decoding.explain import rounded
from seq2seq.errors import UserError
from seq2seq.serving.explorer import json_response
from seq2seq.serving.http_errors import ApiError
from seq2seq.serving.schemas import ErrorBody
from seq2seq.training.attention_history import AttentionHistory, load_history

ERRORS: dict[int | str, dict] = {
    404: {"model": ErrorBody, "description": "no --run, or no such step or sentence"},
    500: {"model": ErrorBody, "description": "the run's file can no longer be read"},
}

router = APIRouter(prefix="/v1/run", tags=["explorer"])


@dataclass
class RunHistory:
    """The run's attention history file (None: no --run) and what it held when last read
    (`read_history`), with the file's inode, modification time and size then."""

    path: Path | None
    lock: threading.Lock = field(default_factory=threading.Lock)
    stamp: tuple[int, int, int] | None = None
    history: AttentionHistory | None = None


def read_history(run: RunHistory) -> AttentionHistory:
    """What `run`'s file holds now, read again only when it has changed since it was last read,
    by one thread at a time: a large file is read once per change, not once per request.
    Errors name the file relative to the run folder, never the server's path."""
    with run.lock:
        try:
            info = run.path.stat()
        except OSError as err:
            raise UserError(f"{run.path.name}: cannot read: {err.strerror}") from None
        stamp = (info.st_ino, info.st_mtime_ns, info.st_size)
        if stamp != run.stamp:
            run.history, run.stamp = load_history(run.path, run.path.name), stamp
        return run.history


async def served_history(http: Request) -> tuple[Path, AttentionHistory]:
    """The file the server was started with and what it holds now, read in a worker thread
    (`read_history`), never in the event loop."""
    run = http.app.state.attention_history
    if run.path is None:
        raise ApiError(404, "no run: start the server with --run RUN_FOLDER")
    try:
        return run.path, await run_in_threadpool(read_history, run)
    except UserError as err:
        raise ApiError(500, str(err)) from None


@router.get("/attention", responses=ERRORS)
async def run_attention(http: Request) -> Response:
    """The run folder, the model's architecture, the names of its maps, the sentences (source,
    reference and their pieces, EOS included) and the steps of the snapshots."""
    path, history = await served_history(http)
    sentences = [
        {key: getattr(s, key) for key in ("source", "reference", "src_pieces", "tgt_pieces")}
        for s in history.sentences
    ]
    maps = sorted(history.snapshots[history.steps[0]][0])
    return json_response(
        {
            "run": path.resolve().parent.name,
            "arch": history.arch,
            "maps": maps,
            "sentences": sentences,
            "steps": history.steps,
        }
    )


@router.get("/attention/{step}/{sentence}", responses=ERRORS)
async def run_attention_maps(step: int, sentence: int, http: Request) -> Response:
    """Every map of sentence number `sentence` at `step`, weights rounded to 3 decimals, with
    the shapes of `seq2seq.training.attention_history`."""
    _, history = await served_history(http)
    if step not in history.snapshots:
        raise ApiError(404, f"step {step}: not in the run's history (steps: {history.steps})")
    if not 0 <= sentence < len(history.sentences):
        raise ApiError(404, f"sentence {sentence}: the history has {len(history.sentences)}")
    maps = history.snapshots[step][sentence]
    weights = {name: rounded(tensor) for name, tensor in maps.items()}
    return json_response({"step": step, "sentence": sentence, "maps": weights})

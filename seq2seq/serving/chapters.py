"""The textbook's chapters as live pages: the endpoints that compute their widgets.

Each chapter page (`static/<chapter>.html`) asks one of these for what the project's own
functions compute, so nothing is re-implemented in the browser. In textbook order:

    POST /v1/chapters/nadaraya_watson/fit  data and a kernel width learned as
                                           examples/kernel_regression.py learns it
    POST /v1/chapters/nadaraya_watson      attention.nadaraya_watson: pooled values and weights
    POST /v1/chapters/masked_softmax       attention.masked_softmax
    POST /v1/chapters/scoring              AdditiveAttention and DotProductAttention, same q, K
    POST /v1/chapters/multi_head           MultiHeadAttention: split, attend per head, merge
    POST /v1/chapters/self_attention       a served Transformer's first encoder self-attention,
                                           with and without its positional encoding

Requests are small and bounded (pydantic: 422 and one line otherwise); seeded weights come from
a generator of their own, so a request never touches the process's random state. Every
computation runs in a thread of the pool, never in the event loop: the routes that compute are
plain functions, which FastAPI runs there, and the others hand their work to the pool.
"""

import math
from typing import Annotated

import torch
from fastapi import APIRouter
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool
from torch import Tensor, nn

from seq2seq.data.specials import EOS_ID
from seq2seq.decoding.explain import check_text
from seq2seq.decoding.line_translator import pieces
from seq2seq.errors import UserError
from seq2seq.models import TransformerSeq2Seq
from seq2seq.models.attention import (
    AdditiveAttention,
    DotProductAttention,
    MultiHeadAttention,
    masked_softmax,
    nadaraya_watson,
)
from seq2seq.models.kernel_regression import sample_points, train
from seq2seq.serving.explorer import json_response
from seq2seq.serving.http_errors import ApiError
from seq2seq.serving.schemas import ErrorBody
from seq2seq.serving.state import StateDep

MAX_ROWS = 16  # masked softmax: at most this many rows of this many keys
MAX_KEYS = 64
MAX_POINTS = 200  # Nadaraya-Watson: training points, and queries per request
MAX_VECTOR = 8  # scoring: at most this many queries, of at most this many numbers
MAX_SCORING_KEYS = 16
MAX_POSITIONS = 16  # multi-head: the input's length
MAX_MODEL_DIM = 64  # multi-head: the model size D
MAX_TEXT_CHARS = 200  # self-attention: a sentence of about 30 words
KERNEL_DATA_WIDTH = 5.0  # the kernel-regression data lie in [0, 5), as in the example
KERNEL_TEST_POINTS = 50
KERNEL_LR = 1.0

Number = Annotated[float, Field(allow_inf_nan=False, ge=-1e6, le=1e6)]
Seed = Annotated[int, Field(ge=0, le=2**31 - 1, description="seed of the weights drawn")]

ERRORS: dict[int | str, dict] = {
    404: {"model": ErrorBody, "description": "no model of that name (self_attention)"},
    409: {"model": ErrorBody, "description": "a CTranslate2 folder (self_attention)"},
    422: {"model": ErrorBody, "description": "a field of the wrong type, value or shape"},
}

router = APIRouter(prefix="/v1/chapters", tags=["chapters"])


class ChapterRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")


def seeded(module: nn.Module, seed: int) -> nn.Module:
    """`module` (built on the meta device) with every nn.Linear drawn as PyTorch draws it,
    uniform in ±1/sqrt(fan_in), from a generator seeded with `seed`; in eval mode."""
    module = module.to_empty(device="cpu")
    generator = torch.Generator().manual_seed(seed)
    for layer in module.modules():
        if isinstance(layer, nn.Linear):
            bound = 1 / math.sqrt(layer.in_features)
            nn.init.uniform_(layer.weight, -bound, bound, generator=generator)
            if layer.bias is not None:
                nn.init.uniform_(layer.bias, -bound, bound, generator=generator)
    return module.eval()


def matrix(rows: list[list[float]], field: str, max_columns: int) -> Tensor:
    """(rows, columns) tensor of `rows`; 422 unless every row has the same 1 .. max_columns."""
    columns = len(rows[0])
    if not 1 <= columns <= max_columns or any(len(row) != columns for row in rows):
        raise ApiError(422, f"{field}: rows of 1 to {max_columns} numbers, all of one length")
    return torch.tensor(rows)


# ---- Nadaraya-Watson pooling -------------------------------------------------------------


class KernelFitRequest(ChapterRequest):
    n_train: int = Field(50, ge=2, le=MAX_POINTS, description="training points")
    seed: Seed = 0
    epochs: int = Field(200, ge=1, le=500, description="full-batch gradient steps")


@router.post("/nadaraya_watson/fit", responses=ERRORS)
async def kernel_fit(request: KernelFitRequest) -> Response:
    """The example's data (`seq2seq.models.kernel_regression.sample_points`: noisy training
    points on [0, 5), a noise-free test grid) and the kernel scale w that
    `seq2seq.models.kernel_regression.train` learns from w = 1, with each epoch's loss."""
    points = sample_points(request.n_train, KERNEL_TEST_POINTS, KERNEL_DATA_WIDTH, request.seed)
    w = torch.ones(1)
    losses = await run_in_threadpool(
        train, w, points.x_train, points.y_train, KERNEL_LR, request.epochs
    )
    fields = {name: values.tolist() for name, values in points._asdict().items()}
    return json_response({**fields, "w": w.item(), "losses": losses})


class KernelPoolRequest(ChapterRequest):
    keys: list[Number] = Field(min_length=1, max_length=MAX_POINTS, description="x_i, (K,)")
    values: list[Number] = Field(min_length=1, max_length=MAX_POINTS, description="y_i, (K,)")
    queries: list[Number] = Field(min_length=1, max_length=MAX_POINTS, description="x, (Q,)")
    widths: list[Annotated[float, Field(gt=0, le=100)]] = Field(
        min_length=1, max_length=4, description="kernel scales w, one pooling each"
    )


@router.post("/nadaraya_watson", responses=ERRORS)
def kernel_pool(request: KernelPoolRequest) -> Response:
    """For each kernel scale w: `nadaraya_watson`'s pooled values (Q,) at the queries and its
    weights (Q, K) over the keys; `pooled` (W, Q) and `weights` (W, Q, K)."""
    if len(request.values) != len(request.keys):
        message = f"values: {len(request.values)} values for {len(request.keys)} keys"
        raise ApiError(422, message)
    queries, keys, values = map(torch.tensor, (request.queries, request.keys, request.values))
    pooled, weights = [], []
    with torch.no_grad():
        for w in request.widths:
            pooled_w, weights_w = nadaraya_watson(queries, keys, values, torch.tensor([w]))
            pooled.append(pooled_w.tolist())
            weights.append(weights_w.tolist())
    return json_response({"pooled": pooled, "weights": weights})


# ---- masked softmax ----------------------------------------------------------------------


class MaskedSoftmaxRequest(ChapterRequest):
    scores: list[list[Number]] = Field(
        min_length=1, max_length=MAX_ROWS, description="(queries, keys) scores"
    )
    valid_lens: list[int] = Field(description="one valid length per query row, 0 .. keys")


@router.post("/masked_softmax", responses=ERRORS)
def masked_softmax_chapter(request: MaskedSoftmaxRequest) -> Response:
    """The weights `seq2seq.models.attention.masked_softmax` gives `scores` (queries, keys) when
    each query row may see the keys before its valid length."""
    scores = matrix(request.scores, "scores", MAX_KEYS)  # (queries, keys)
    keys = scores.shape[1]
    if len(request.valid_lens) != len(request.scores):
        raise ApiError(
            422, f"valid_lens: {len(request.valid_lens)} lengths for {len(request.scores)} rows"
        )
    if not all(0 <= length <= keys for length in request.valid_lens):
        raise ApiError(422, f"valid_lens: each from 0 to the number of keys ({keys})")
    weights = masked_softmax(scores[None], torch.tensor([request.valid_lens]))[0]
    return json_response({"weights": weights.tolist()})


# ---- additive against scaled dot-product scoring -----------------------------------------


class ScoringRequest(ChapterRequest):
    queries: list[list[Number]] = Field(min_length=1, max_length=MAX_VECTOR, description="(Q, d)")
    keys: list[list[Number]] = Field(
        min_length=1, max_length=MAX_SCORING_KEYS, description="(K, d)"
    )
    attention_size: int = Field(8, ge=1, le=64, description="A: the size of W_q q + W_k k")
    seed: Seed = 0


@router.post("/scoring", responses=ERRORS)
def scoring(request: ScoringRequest) -> Response:
    """The scores (Q, K) and weights (Q, K) of the same queries over the same keys under
    `AdditiveAttention` (W_q, W_k, w_v drawn from `seed`) and `DotProductAttention`."""
    queries = matrix(request.queries, "queries", MAX_VECTOR)[None]  # (1, Q, d)
    keys = matrix(request.keys, "keys", MAX_VECTOR)[None]  # (1, K, d)
    size = queries.shape[-1]
    if keys.shape[-1] != size:
        raise ApiError(422, f"keys: {keys.shape[-1]} numbers each, the queries have {size}")
    with torch.device("meta"):
        additive = AdditiveAttention(size, size, request.attention_size)
    additive = seeded(additive, request.seed)
    dot_product = DotProductAttention().eval()
    with torch.no_grad():
        projected = additive.project_keys(keys)
        additive_scores = additive.score(queries, projected)
        _, additive_weights = additive(queries, projected, keys, None)
        _, dot_weights = dot_product(queries, keys, keys, None)
        dot_scores = dot_product.score(queries, keys)
    return json_response(
        {
            "additive": {
                "scores": additive_scores[0].tolist(),
                "weights": additive_weights[0].tolist(),
            },
            "dot_product": {"scores": dot_scores[0].tolist(), "weights": dot_weights[0].tolist()},
        }
    )


# ---- multi-head attention ----------------------------------------------------------------


class MultiHeadRequest(ChapterRequest):
    length: int = Field(6, ge=1, le=MAX_POSITIONS, description="L: positions of the input")
    dim: int = Field(8, ge=1, le=MAX_MODEL_DIM, description="D: the model size")
    heads: int = Field(2, ge=1, le=MAX_MODEL_DIM, description="H, dividing D")
    seed: Seed = 0
    input_seed: int = Field(0, ge=0, le=2**31 - 1, description="seed of the input X (L, D)")


@router.post("/multi_head", responses=ERRORS)
def multi_head(request: MultiHeadRequest) -> Response:
    """Self-attention of an input X (L, D) drawn from N(0, 1) by `MultiHeadAttention` (weights
    drawn from `seed`), step by step: per-head queries (H, L, d), weights (H, L, L) and contexts
    (H, L, d), the heads merged (L, D), and the output W_o merged (L, D)."""
    if request.dim % request.heads:
        raise ApiError(422, f"heads: {request.heads} does not divide dim ({request.dim})")
    with torch.device("meta"):
        attention = MultiHeadAttention(request.dim, request.heads)
    attention = seeded(attention, request.seed)
    generator = torch.Generator().manual_seed(request.input_seed)
    x = torch.randn(1, request.length, request.dim, generator=generator)  # (1, L, D)
    with torch.no_grad():
        queries = attention.project_q(x)  # (1, H, L, d)
        keys, values = attention.project_kv(x)
        context, weights = attention.attention(queries, keys, values, None)
        merged = attention.merge_heads(context)  # (1, L, D)
        output = attention.out_proj(merged)
    return json_response(
        {
            "inputs": x[0].tolist(),
            "queries": queries[0].tolist(),
            "weights": weights[0].tolist(),
            "context": context[0].tolist(),
            "merged": merged[0].tolist(),
            "output": output[0].tolist(),
        }
    )


# ---- self-attention and positional encoding ----------------------------------------------


class SelfAttentionRequest(ChapterRequest):
    model: str | None = Field(None, description="a served Transformer; default: the first one")
    text: str = Field(description=f"one sentence, at most {MAX_TEXT_CHARS} characters")


def first_layer_self_attention(model: TransformerSeq2Seq, ids: list[int]) -> dict[str, list]:
    """The positional encodings (S, D) of the S = len(ids) positions, and the first encoder
    layer's self-attention weights (H, S, S) over the embedded `ids`, with the encodings added
    (what the model computes, as `TransformerSeq2Seq._embed` and `EncoderLayer` do) and
    without them."""
    tokens = torch.tensor([ids])  # (1, S)
    layer = model.encoder_layers[0]
    with torch.no_grad():
        embedded = model.src_embed(tokens) * math.sqrt(model.d_model)  # (1, S, D)
        encodings = model.positional(torch.arange(len(ids)))  # (S, D)
        maps = {}
        for name, x in (("with_pe", embedded + encodings), ("without_pe", embedded)):
            h = layer.self_attn_res.input(x)
            _, weights = layer.self_attn(h, h, None, need_weights=True)
            maps[name] = weights[0].tolist()
    return {"positional": encodings.tolist(), **maps}


@router.post("/self_attention", responses=ERRORS)
async def self_attention(request: SelfAttentionRequest, state: StateDep) -> Response:
    """The pieces of `text` (with EOS, as the encoder reads them), their positional encodings
    and the first encoder layer's self-attention with and without them
    (`first_layer_self_attention`), from `model` (default: the first PyTorch Transformer
    served; 409 for a CTranslate2 folder, which has no PyTorch model); `models`: the PyTorch
    Transformers served."""
    transformers = [
        name
        for name, served in state.models.items()
        if served.pytorch is not None and isinstance(served.pytorch.model, TransformerSeq2Seq)
    ]
    if request.model is None and not transformers:
        raise ApiError(422, "model: this server has no Transformer; self-attention needs one")
    served = state.explorable_model(request.model or transformers[0])
    model = served.pytorch.model
    if not isinstance(model, TransformerSeq2Seq):
        raise ApiError(422, f"model: {served.name} is a GRU; self-attention needs a Transformer")
    if len(request.text) > MAX_TEXT_CHARS:
        message = f"text: {len(request.text)} characters, over this chapter's limit of "
        raise ApiError(422, message + str(MAX_TEXT_CHARS))
    try:
        check_text(request.text)
    except UserError as err:
        raise ApiError(422, str(err)) from None
    ids = state.tokenize(served, [request.text])[0]
    tokenizer = served.pytorch.src_tokenizer
    payload = await run_in_threadpool(first_layer_self_attention, model, [*ids, EOS_ID])
    answer = {"model": served.name, "models": transformers, "pieces": pieces(tokenizer, ids)}
    return json_response({**answer, **payload})

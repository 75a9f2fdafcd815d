"""The JSON bodies of the /v1 API, as pydantic models: FastAPI checks requests against them
and writes the OpenAPI schema (GET /openapi.json, pages at /docs) from them.

The range of each decoding field is derived from seq2seq.config_rules.ARGUMENTS, the ranges
the configuration, the command line and the Python API check too."""

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from seq2seq.config_rules import ARGUMENTS


class TranslateRequest(BaseModel):
    """POST /v1/translate. Options left out take the model's defaults (GET /v1/models)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    model: str | None = Field(None, description="a name from GET /v1/models; default: the first")
    lines: list[str] = Field(min_length=1, description="the sentences to translate, one a line")
    beam: int | None = Field(
        None, **ARGUMENTS["beam"].bounds(), description="beam size; 1: greedy search"
    )
    nbest: int = Field(
        1, **ARGUMENTS["nbest"].bounds(), description="translations per line, best first; <= beam"
    )
    length_penalty: float | None = Field(
        None,
        **ARGUMENTS["length_penalty"].bounds(),
        allow_inf_nan=False,
        description="GNMT alpha; higher favours longer outputs",
    )
    max_len_ratio: float | None = Field(
        None,
        **ARGUMENTS["max_len_ratio"].bounds(),
        allow_inf_nan=False,
        description="maximum output tokens per source token",
    )
    keep_numbers: bool | None = Field(
        None,
        description="the number guard: write a number only as one of the source's, whole, "
        "and every character whole (PyTorch engine only)",
    )
    split_sentences: bool = Field(
        True,
        description="cut each line into sentences, translate each, and join them again with "
        "the line's own spacing; false: translate each line whole",
    )
    format: Literal["text", "html"] = Field(
        "text",
        description="html: each line is HTML, its tags put back around the output words aligned "
        "to those they enclosed (docs/serve.md); the best translation alone (nbest 1)",
    )


class Hypothesis(BaseModel):
    text: str
    score: float = Field(description="length-penalised log-probability")


class TranslateResponse(BaseModel):
    model: str
    translations: list[list[Hypothesis]] = Field(
        description="for each input line, in input order, its n-best translations, best first"
    )


class Limit(BaseModel):
    problem: str = Field(description="what the model gets wrong, e.g. numbers and names")
    source: str = Field(description="an input that shows it")
    output: str = Field(description="the model's real output for it")


class ModelInfo(BaseModel):
    name: str
    source: str
    target: str
    family: str
    domain: str = Field(description="the text the model was trained on, so what it translates well")
    limits: list[Limit] = Field(
        description="what the model gets wrong, each with an example (empty: none recorded)"
    )
    parameters: int | None = Field(description="None: a CTranslate2 folder that does not say")
    precision: str
    beam: int
    length_penalty: float
    max_len_ratio: float
    keep_numbers: bool = Field(description="whether numbers are kept by default (the guard)")
    scores: dict[str, Any] | None = Field(description="the model card's test scores")


class ErrorBody(BaseModel):
    error: str = Field(description="one line naming the field or limit")


class AlignPair(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    source: str = Field(description="the source sentence, words split on whitespace")
    target: str | None = Field(
        None, description="its translation; left out: the model's own translation is aligned"
    )
    gold: str | None = Field(
        None,
        description="human links of the pair, as a line of a gold file: `i-j` a sure link and "
        "`ipj` a possible one, source word i and target word j counted from 1 (needs target)",
    )


class AlignRequest(BaseModel):
    """POST /v1/align (docs/align.md)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    model: str | None = Field(None, description="a name from GET /v1/models; default: the first")
    pairs: list[AlignPair] = Field(min_length=1, description="the sentence pairs to align")
    rule: str = Field(
        "mean",
        description="the attention that aligns: mean, layer:L, head:L.H or alignment-head "
        "(the head trained to align), each optionally after shifted:",
    )
    reverse_model: str | None = Field(
        None, description="the opposite model (target to source): both directions combined"
    )
    reverse_rule: str | None = Field(None, description="the reverse model's rule; default: rule")
    combine: Literal[
        "intersection", "union", "grow-diag", "grow-diag-final", "grow-diag-final-and"
    ] = Field("grow-diag-final", description="how reverse_model's links join the model's")
    beam: int | None = Field(
        None, **ARGUMENTS["beam"].bounds(), description="beam size of the translations"
    )
    grid: bool = Field(
        False, description="with gold: score every layer and head too, not only `rule`"
    )


class GoldPair(BaseModel):
    sure: str = Field(description="the sure links, in Pharaoh form from 0")
    possible: str = Field(description="the links marked possible alone, in Pharaoh form from 0")


class AlignedPair(BaseModel):
    source_words: list[str]
    target_words: list[str] = Field(description="the target's words (the translation's)")
    links: str = Field(description="Pharaoh form: `i-j` source word i, target word j, from 0")
    gold: GoldPair | None = Field(None, description="the pair's gold, if given")


class Score(BaseModel):
    aer: float = Field(description="alignment error rate, percent")
    precision: float = Field(description="percent")
    recall: float = Field(description="percent")
    links: int = Field(description="the links found, |A|")
    sure: int = Field(description="the gold's sure links, |S|")


class AlignResponse(BaseModel):
    model: str
    reverse_model: str | None
    alignments: list[AlignedPair] = Field(description="one per pair, in request order")
    scores: dict[str, Score] | None = Field(
        None,
        description="with gold: against it, over all pairs, by rule (with grid: every head "
        "`head:L.H`, layer `layer:L` and `mean`; with reverse_model: `RULE COMBINE`)",
    )


class GoldFileRequest(BaseModel):
    """POST /v1/align/gold: the grid over the gold file the server was started with."""

    model_config = ConfigDict(extra="forbid", strict=True)

    model: str | None = Field(None, description="a name from GET /v1/models; default: the first")
    swap: bool = Field(False, description="the file's lines are TARGET ||| SOURCE of the model")


class GoldFileResponse(BaseModel):
    model: str
    file: str = Field(description="the gold file, as given to --gold")
    pairs: int = Field(description="the sentence pairs scored")
    scores: dict[str, Score] = Field(description="by rule: every head, layer, and `mean`")

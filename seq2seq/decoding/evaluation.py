"""Corpus evaluation: translate a test set and score the output with sacreBLEU.

Training validation and `seq2seq evaluate` both call `evaluate`, so a BLEU printed during
training is computed exactly like the one printed at test time. `evaluate_entities` adds the
copy accuracy of an entity test (seq2seq.data.entity_copy), and `scores_by_length` the scores of
the sentences of each source length (`seq2seq evaluate` prints them).
"""

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from seq2seq.data.entity_copy import EntityPair, copy_accuracy
from seq2seq.decoding.line_translator import LineTranslator
from seq2seq.decoding.scores import corpus_scores
from seq2seq.errors import UserError

# The source lengths, in words, that `scores_by_length` scores apart: 1-10, 11-20, 21-30, 31+.
LENGTH_BUCKETS = ((1, 10), (11, 20), (21, 30), (31, None))


@dataclass
class EvalResult:
    """Corpus scores of a test set (see seq2seq.decoding.scores) and the decoding speed, with the
    output: `hypotheses` (detokenized text) and `hypothesis_ids` (the ids the search produced,
    without BOS/EOS), one per source line."""

    bleu: float
    bleu_lc: float
    chrf: float
    bleu_details: str
    signatures: dict[str, str]
    sentences: int
    seconds: float
    sentences_per_second: float
    device: str
    precision: str  # what the model computed in: "fp32", "bf16", "fp16" or "int8"
    beam_size: int
    keep_numbers: bool  # decoded with the number guard (seq2seq.decoding.number_guard)
    split_sentences: bool  # each line cut into sentences (seq2seq.decoding.sentences)
    hypotheses: list[str]
    hypothesis_ids: list[list[int]]
    # the entity test's (seq2seq.data.entity_copy): its CopyAccuracy as a dict; None elsewhere
    copy_accuracy: dict[str, float] | None = None
    # the scores of each source length bucket that has sentences (`scores_by_length`)
    by_length: list[dict[str, object]] = field(default_factory=list)

    def summary(self) -> dict[str, object]:
        """Everything but the output, as plain values (for JSON and logs)."""
        output = ("hypotheses", "hypothesis_ids")
        return {k: v for k, v in vars(self).items() if k not in output}


def check_aligned(
    src_lines: list[str],
    ref_lines: list[str],
    src_name: str = "the source",
    ref_name: str = "the reference",
) -> None:
    """`UserError` unless there is one reference line per source line; the names say where
    the lines come from (e.g. "--src test.en")."""
    if len(src_lines) != len(ref_lines):
        raise UserError(
            f"{src_name} has {len(src_lines)} lines but {ref_name} has {len(ref_lines)}: "
            "they must match one to one"
        )


def evaluate(
    translator: LineTranslator,
    src_lines: list[str],
    ref_lines: list[str],
    beam_size: int | None = None,
    on_batch: Callable[[int], None] | None = None,
    split_sentences: bool = True,
) -> EvalResult:
    """Translate `src_lines` and score the detokenized output against `ref_lines`
    (`on_batch`, `split_sentences`: see `LineTranslator.translate`)."""
    check_aligned(src_lines, ref_lines)
    beam_size = beam_size or translator.decode_cfg.beam_size
    start = time.perf_counter()
    translations = translator.translate(
        src_lines, beam_size, on_batch=on_batch, split_sentences=split_sentences
    )
    best = [nbest[0] for nbest in translations]
    seconds = time.perf_counter() - start
    hypotheses = [translation.text for translation in best]
    scores = corpus_scores(hypotheses, ref_lines)
    return EvalResult(
        bleu=scores.bleu,
        bleu_lc=scores.bleu_lc,
        chrf=scores.chrf,
        bleu_details=scores.bleu_details,
        signatures=scores.signatures,
        sentences=len(src_lines),
        seconds=seconds,
        sentences_per_second=len(src_lines) / max(seconds, 1e-9),
        device=str(translator.device),
        precision=translator.precision_for(len(src_lines)),
        beam_size=beam_size,
        keep_numbers=translator.decode_cfg.keep_numbers,
        split_sentences=split_sentences,
        hypotheses=hypotheses,
        hypothesis_ids=[translation.tokens for translation in best],
    )


def evaluate_entities(
    translator: LineTranslator,
    test: list[EntityPair],
    beam_size: int | None = None,
    on_batch: Callable[[int], None] | None = None,
    split_sentences: bool = True,
) -> EvalResult:
    """`evaluate` on the entity test, with the copy accuracy of its names and numbers."""
    sources, references = [pair.source for pair in test], [pair.reference for pair in test]
    result = evaluate(translator, sources, references, beam_size, on_batch, split_sentences)
    result.copy_accuracy = copy_accuracy(test, result.hypotheses).to_dict()
    return result


def scores_by_length(
    sources: list[str],
    references: list[str],
    hypotheses: list[str],
    test: list[EntityPair] | None = None,
) -> list[dict[str, object]]:
    """BLEU and chrF of the sentences of each bucket of LENGTH_BUCKETS (the source's words, as
    whitespace separates them), and with an entity `test` the copy accuracy of its pairs there:
    one dict per bucket that has sentences, its bucket under "words" ("11-20", "31+")."""
    words = [len(line.split()) for line in sources]
    buckets = []
    for low, high in LENGTH_BUCKETS:
        picked = [i for i, count in enumerate(words) if low <= count <= (high or count)]
        if not picked:
            continue
        hyps = [hypotheses[i] for i in picked]
        scores = corpus_scores(hyps, [references[i] for i in picked])
        bucket: dict[str, object] = {
            "words": f"{low}-{high}" if high else f"{low}+",
            "sentences": len(picked),
            "bleu": scores.bleu,
            "chrf": scores.chrf,
        }
        if test is not None:
            bucket["copy_accuracy"] = copy_accuracy([test[i] for i in picked], hyps).to_dict()
        buckets.append(bucket)
    return buckets

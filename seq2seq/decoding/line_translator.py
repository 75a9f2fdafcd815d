"""What both decoding engines share, without torch: a search's output, a translation, the rules
on input lengths and batches, the way from a batch of ids back to text, and the cutting of
lines into sentences (seq2seq.decoding.sentences) and joining of their translations.

`LineTranslator` holds them. Our PyTorch search (seq2seq.decoding.torch_translator.Translator) and
CTranslate2 (seq2seq.decoding.ct2_translator.CTranslate2Translator) are its two subclasses; each
gives `translate_ids` its search of one batch. A program that translates with CTranslate2
alone (seq2seq serve and translate on a CTranslate2 folder) imports this module and never
torch, which halves its start time and memory (docs/benchmarks.md).
"""

import copy
import dataclasses
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from seq2seq.config import DecodeConfig
from seq2seq.data.specials import EOS_PIECE
from seq2seq.data.tokenizer import Tokenizer
from seq2seq.decoding.sentences import Sentences, join_line, split_lines
from seq2seq.errors import UserError

if TYPE_CHECKING:  # only the PyTorch engine makes tensors
    from torch import Tensor

MAX_BATCH_TOKENS = 16_000  # padded source tokens times beam size per decoding batch


class Stopped(Exception):
    """A search's `should_stop` returned True: its result is not wanted any more."""


def check_stop(should_stop: Callable[[], bool] | None) -> None:
    """Raise `Stopped` once `should_stop` (if given) returns True."""
    if should_stop is not None and should_stop():
        raise Stopped


@dataclass
class Hypothesis:
    """One output of a search.

    tokens: the output ids, without BOS and EOS.
    score: the length-penalised log-probability (seq2seq.decoding.search).
    attention: (len(tokens) + 1, S_i) cross-attention averaged over heads, one row per output
        token (the EOS included) over the sentence's S_i source tokens; None unless asked for.
    """

    tokens: list[int]
    score: float
    attention: "Tensor | None" = None


def gnmt_penalty(lengths: "Tensor | int", alpha: float) -> "Tensor | float":
    """GNMT length penalty ((5 + n) / 6) ** alpha of output lengths n (EOS included)."""
    return ((5.0 + lengths) / 6.0) ** alpha


def source_limit(decode_cfg: DecodeConfig, beam_size: int) -> int:
    """The most pieces an input line may have (EOS not counted): decode.max_src_pieces, and at
    most what one sentence's beams fit in the decoding budget of MAX_BATCH_TOKENS padded source
    tokens, so decoding memory is bounded whatever the input."""
    return max(1, min(decode_cfg.max_src_pieces, MAX_BATCH_TOKENS // beam_size - 1))


class SourceTooLong(UserError):
    """An input line over the source length limit (`LineTranslator.source_limit`).

    index: the line's position in the list given to `LineTranslator.translate` (from 0);
    problem: the message without the line's position, for callers that name it better
    (e.g. "--input FILE:LINE")."""

    def __init__(self, index: int, problem: str) -> None:
        super().__init__(f"input line {index + 1}: {problem}")
        self.index, self.problem = index, problem


@dataclass
class Translation:
    """One translation of one input line.

    text: the detokenized output; score: its length-penalised log-probability
    (seq2seq.decoding.search);
    tokens: the output ids (no BOS/EOS); src_pieces / tgt_pieces: the sentencepiece pieces of
    input and output, each ending with the EOS piece; attention: (len(tgt_pieces),
    len(src_pieces)) cross-attention averaged over heads, or None unless asked for;
    truncated_from: see `LineTranslator.source_limit`; src_tokens: the input ids the model read
    (no EOS; cut short when truncated_from is set).
    """

    text: str
    score: float
    tokens: list[int]
    src_pieces: list[str]
    tgt_pieces: list[str]
    attention: "Tensor | None" = None
    truncated_from: int | None = None  # the input's length in pieces when it was cut short
    src_tokens: list[int] = field(default_factory=list)


def joined(parts: Sequence[Translation], gaps: Sequence[str]) -> Translation:
    """The translation of a line of several sentences from its sentences' (`parts`, in order,
    `gaps` the whitespace between them in the line): the texts joined with the line's gaps,
    the scores summed, the ids and pieces one sentence after the other, and the attention maps
    along the diagonal (an output piece attends to its own sentence alone)."""
    attention = None
    if parts[0].attention is not None:
        from torch import block_diag  # attention maps come from the PyTorch engine

        attention = block_diag(*(part.attention for part in parts))
    cut = [part.truncated_from for part in parts if part.truncated_from is not None]
    return Translation(
        text=join_line([part.text for part in parts], gaps),
        score=sum(part.score for part in parts),
        tokens=[i for part in parts for i in part.tokens],
        src_pieces=[piece for part in parts for piece in part.src_pieces],
        tgt_pieces=[piece for part in parts for piece in part.tgt_pieces],
        attention=attention,
        truncated_from=max(cut, default=None),
        src_tokens=[i for part in parts for i in part.src_tokens],
    )


def join_translations(
    sentences: Sentences, results: list[list[Translation]]
) -> list[list[Translation]]:
    """Each line's n-best list from its sentences' `results`: the k-th of a line of several
    sentences is the k-th of each `joined` (as many as the shortest list has)."""
    lines = zip(sentences.by_line(results), sentences.gaps, strict=True)
    return [
        [joined(ranked, gaps) for ranked in zip(*nbest_lists, strict=False)]
        if gaps
        else nbest_lists[0]
        for nbest_lists, gaps in lines
    ]


def pieces(tokenizer: Tokenizer, ids: list[int]) -> list[str]:
    """The sentencepiece pieces of `ids` (no EOS), followed by the EOS piece: the labels of one
    side of an attention map."""
    return [tokenizer.id_to_piece(i) for i in ids] + [EOS_PIECE]


# A search of one batch: (each sentence's ids, no EOS; beam size) -> each one's n-best list
BatchSearch = Callable[[list[list[int]], int], list[list[Hypothesis]]]


class LineTranslator:
    """Translate lines of text with a model's tokenizers and [decode] options; a subclass
    searches (`translate_ids`).

    decode_cfg gives the defaults: beam size, length penalty, maximum output length
    (max_len_ratio * source length + max_len_const), the repetition guards, the number of
    sentences per batch, the longest input line (max_src_pieces, or truncate_src) and the
    precision; `precision` is what the model computes in ("int8", "bf16", "fp16", "fp32").
    """

    src_tokenizer: Tokenizer
    tgt_tokenizer: Tokenizer
    decode_cfg: DecodeConfig
    precision: str
    max_batch_tokens: int = MAX_BATCH_TOKENS  # padded source tokens times beams per batch
    lacks_options: frozenset[str] = frozenset()  # decode_cfg options this engine cannot apply
    # source and target (e.g. ("en", "fr")): how lines are cut into sentences, and what
    # decode.keep_numbers needs; None: unknown (sentences are cut by English rules)
    languages: tuple[str, str] | None = None

    def translate(
        self,
        lines: list[str],
        beam_size: int | None = None,
        nbest: int = 1,
        need_attention: bool = False,
        on_batch: Callable[[int], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
        split_sentences: bool = True,
    ) -> list[list[Translation]]:
        """Translate `lines`; returns, in input order, the `nbest` best translations of each.

        With `split_sentences`, each line is cut into its sentences (`split`), which are
        translated with the others, and its translation is theirs `joined` with the line's own
        whitespace between them; a line of one sentence is translated as it is. The source
        tokenizer normalises each sentence as the training text was (NFC, single spaces,
        stripped). A line with nothing to translate gets `nbest` empty translations (score 0)
        without running the model. Sentences are decoded longest first, in batches of at most
        decode_cfg.batch_size sentences and `max_batch_tokens` padded source tokens times beams;
        `on_batch(n)`, if given, is called after each with its number of sentences (e.g. a
        progress bar's `update`). A sentence over `source_limit` is a `SourceTooLong` error
        naming its line (or cut, with decode.truncate_src), and a beam wider than the target
        vocabulary a `UserError`, both before anything is decoded. `should_stop`, if given, is
        called before each decoding step; once it returns True, the search raises `Stopped`.
        """
        sentences = self.split(lines, split_sentences)
        sources = self.src_tokenizer.encode(sentences.sentences)
        try:
            results = self.translate_ids(
                sources, beam_size, nbest, need_attention, on_batch, should_stop
            )
        except SourceTooLong as err:
            line, sentence = sentences.where(err.index)
            raise SourceTooLong(line, sentence + err.problem) from None
        return join_translations(sentences, results)

    def split(self, lines: Sequence[str], split_sentences: bool = True) -> Sentences:
        """`lines` cut into sentences by the rules of the source language
        (seq2seq.decoding.sentences); each line whole without `split_sentences`."""
        language = self.languages[0] if self.languages else "en"
        return split_lines(lines, language, split_sentences)

    def translate_ids(
        self,
        sources: list[list[int]],
        beam_size: int | None = None,
        nbest: int = 1,
        need_attention: bool = False,
        on_batch: Callable[[int], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> list[list[Translation]]:
        """`translate` for lines the source tokenizer has encoded already (`sources`: each
        line's ids, no EOS), e.g. by a server that checked their lengths first."""
        raise NotImplementedError

    def with_decode(self, **changes: Any) -> "LineTranslator":
        """A translator that shares this one's model and tokenizers, with `changes` made to a
        copy of its decode_cfg (e.g. `length_penalty=0.6`); the model is not copied again, so the
        precision, which chose that model, cannot change here: make a new translator for that."""
        decode_cfg = dataclasses.replace(self.decode_cfg, **changes)
        if decode_cfg.precision != self.decode_cfg.precision:
            raise ValueError("with_decode cannot change the precision; make a new translator")
        translator = copy.copy(self)
        translator.decode_cfg = decode_cfg
        return translator

    def precision_for(self, lines: int) -> str:
        """What a `translate` call of `lines` lines computes in."""
        return self.precision

    def check_beam_size(self, beam_size: int) -> None:
        """`UserError` for a beam wider than the target vocabulary: a search keeps `beam_size`
        distinct candidates, and there are no more than the vocabulary's pieces to extend."""
        vocab_size = self.tgt_tokenizer.vocab_size
        if beam_size > vocab_size:
            raise UserError(
                f"beam size {beam_size}: larger than the target vocabulary ({vocab_size} pieces)"
            )

    def source_limit(self, beam_size: int) -> int:
        """The most pieces an input line may have (see `source_limit`). A longer line is a
        `SourceTooLong` error, or with decode.truncate_src cut to the limit (its translations
        then have `truncated_from` set)."""
        return source_limit(self.decode_cfg, beam_size)

    def _translate_batches(
        self,
        sources: list[list[int]],
        beam_size: int | None,
        nbest: int,
        search: BatchSearch,
        on_batch: Callable[[int], None] | None,
    ) -> list[list[Translation]]:
        """What `translate_ids` does around the search: check the options, apply the length
        limit, decode the sentences longest first in batches within the budgets with `search`
        (on the `nbest` asked for), and return each line's n-best translations in input order."""
        beam_size = beam_size or self.decode_cfg.beam_size
        if not 1 <= nbest <= beam_size:
            raise UserError(f"the n-best list size ({nbest}) must be between 1 and the beam size")
        self.check_beam_size(beam_size)
        sources = [list(ids) for ids in sources]  # cut to the limit below, not the caller's
        cut = self._bound_lengths(sources, beam_size)
        results = [[Translation("", 0.0, [], [], []) for _ in range(nbest)] for _ in sources]
        order = sorted((i for i, ids in enumerate(sources) if ids), key=lambda i: -len(sources[i]))
        for batch in self._batches(order, sources, beam_size):
            batch_sources = [sources[i] for i in batch]
            hypotheses = search(batch_sources, beam_size)
            translations = self._translations(batch_sources, hypotheses)
            for i, nbest_list in zip(batch, translations, strict=True):
                for translation in nbest_list:
                    translation.truncated_from = cut.get(i)
                results[i] = nbest_list
            if on_batch:
                on_batch(len(batch))
        return results

    def _bound_lengths(self, sources: list[list[int]], beam_size: int) -> dict[int, int]:
        """Apply `source_limit` to `sources` in place; returns {index: pieces} of those cut."""
        limit, cut = self.source_limit(beam_size), {}
        for i, ids in enumerate(sources):
            if len(ids) <= limit:
                continue
            if not self.decode_cfg.truncate_src:
                if limit < self.decode_cfg.max_src_pieces:
                    why = f"the decoding budget ({MAX_BATCH_TOKENS:,} tokens) at beam {beam_size}"
                else:
                    why = "decode.max_src_pieces (--max-src-pieces)"
                raise SourceTooLong(
                    i,
                    f"{len(ids):,} pieces, more than the {limit} that {why} allows; split the "
                    "line, or cut it with --truncate (decode.truncate_src)",
                )
            cut[i] = len(ids)
            del ids[limit:]
        return cut

    def _batches(
        self, order: list[int], sources: list[list[int]], beam_size: int
    ) -> Iterator[list[int]]:
        """Split `order` (longest first) into batches within the sentence and token budgets."""
        batch: list[int] = []
        for i in order:
            if batch:
                padded_tokens = (len(batch) + 1) * (len(sources[batch[0]]) + 1) * beam_size
                full = len(batch) == self.decode_cfg.batch_size
                if full or padded_tokens > self.max_batch_tokens:
                    yield batch
                    batch = []
            batch.append(i)
        if batch:
            yield batch

    def _translations(
        self, sources: list[list[int]], hypotheses: list[list[Hypothesis]]
    ) -> list[list[Translation]]:
        """Detokenize the hypotheses of one batch of sentences and attach the pieces.

        One sentencepiece call detokenizes the whole batch: each call has a fixed cost, which
        one call per sentence would pay a thousand times for a test set (docs/benchmarks.md).
        """
        texts = iter(self.tgt_tokenizer.decode([h.tokens for nbest in hypotheses for h in nbest]))
        translations = []
        for source, nbest in zip(sources, hypotheses, strict=True):
            src_pieces = pieces(self.src_tokenizer, source)
            translations.append(
                [
                    Translation(
                        text=next(texts),
                        score=h.score,
                        tokens=h.tokens,
                        src_pieces=src_pieces,
                        tgt_pieces=pieces(self.tgt_tokenizer, h.tokens),
                        attention=h.attention,
                        src_tokens=source,
                    )
                    for h in nbest
                ]
            )
        return translations

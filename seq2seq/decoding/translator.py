"""From text to text: read lines, tokenize, batch, search, detokenize.

`Translator` is the one path from raw lines to translations. Training validation,
`seq2seq evaluate` (through seq2seq.decoding.evaluation) and `seq2seq translate` all go through it,
so a BLEU printed during training is computed exactly like the one printed at test time; both
scripts read their input with `seq2seq.files.text_lines`, so they split and decode text alike.
"""

import copy
import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from seq2seq.config import DecodeConfig
from seq2seq.data.specials import EOS_ID, PAD_ID
from seq2seq.data.tokenizer import Tokenizer
from seq2seq.decoding.attention_maps import pieces
from seq2seq.decoding.beam_trace import BeamTrace
from seq2seq.decoding.loading import Inference
from seq2seq.decoding.search import Hypothesis, beam_search, greedy_search, max_output_lengths
from seq2seq.device import decode_dtype, precision_name
from seq2seq.errors import UserError
from seq2seq.models.base import Seq2SeqModel

MAX_BATCH_TOKENS = 16_000  # padded source tokens times beam size per decoding batch


def source_limit(decode_cfg: DecodeConfig, beam_size: int) -> int:
    """The most pieces an input line may have (EOS not counted): decode.max_src_pieces, and at
    most what one sentence's beams fit in the decoding budget of MAX_BATCH_TOKENS padded source
    tokens, so decoding memory is bounded whatever the input."""
    return max(1, min(decode_cfg.max_src_pieces, MAX_BATCH_TOKENS // beam_size - 1))


class SourceTooLong(UserError):
    """An input line over the source length limit (`Translator.source_limit`).

    index: the line's position in the list given to `Translator.translate` (from 0);
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
    truncated_from: see `Translator.source_limit`; src_tokens: the input ids the model read
    (no EOS; cut short when truncated_from is set).
    """

    text: str
    score: float
    tokens: list[int]
    src_pieces: list[str]
    tgt_pieces: list[str]
    attention: Tensor | None = None
    truncated_from: int | None = None  # the input's length in pieces when it was cut short
    src_tokens: list[int] = field(default_factory=list)


class Translator:
    """Translate lines of text with a model and its tokenizers.

    decode_cfg gives the defaults: beam size, length penalty, maximum output length
    (max_len_ratio * source length + max_len_const), the repetition guards (no-repeat n-gram
    size, piece-repeat limit), the number of sentences per batch, the longest input line
    (max_src_pieces, or truncate_src), and the precision: the model runs under autocast in
    `dtype` (bf16 where decode_cfg.precision is "auto" and the device computes in it quickly;
    None: fp32), while the beam's log-probabilities and scores stay in fp32. With "int8" (CPU
    only) a copy of the model with int8 linear layers decodes, in fp32 otherwise
    (seq2seq/decoding/quantize.py). "auto" also decodes a single line on a CPU with that int8
    copy (see `precision_for`).
    """

    def __init__(
        self,
        model: Seq2SeqModel,
        src_tokenizer: Tokenizer,
        tgt_tokenizer: Tokenizer,
        decode_cfg: DecodeConfig,
        device: str | torch.device,
        max_batch_tokens: int = MAX_BATCH_TOKENS,
    ):
        self.src_tokenizer = src_tokenizer
        self.tgt_tokenizer = tgt_tokenizer
        self.decode_cfg = decode_cfg
        self.device = torch.device(device)
        self.max_batch_tokens = max_batch_tokens  # padded source tokens times beams per batch
        self.dtype = decode_dtype(decode_cfg.precision, self.device)
        int8 = decode_cfg.precision == "int8"
        self.model = model.int8_copy() if int8 else model
        # What the model computes in: "int8", "bf16", "fp16" or "fp32".
        self.precision = "int8" if int8 else precision_name(self.dtype)
        # "auto" on a CPU: the int8 copy for single lines, and the weights' version it copied
        self.one_line_model: tuple[int, Seq2SeqModel] | None = None

    @classmethod
    def from_inference(cls, inference: Inference, device: str | torch.device) -> "Translator":
        """The translator of a loaded checkpoint, with its [decode] configuration."""
        return cls(
            inference.model,
            inference.src_tokenizer,
            inference.tgt_tokenizer,
            inference.config.decode,
            device,
        )

    def with_decode(self, **changes: Any) -> "Translator":
        """A translator that shares this one's model and tokenizers, with `changes` made to a
        copy of its decode_cfg (e.g. `length_penalty=0.6`); the model is not copied again, so the
        precision, which chose that model, cannot change here: make a new Translator for that."""
        decode_cfg = dataclasses.replace(self.decode_cfg, **changes)
        if decode_cfg.precision != self.decode_cfg.precision:
            raise ValueError("with_decode cannot change the precision; make a new Translator")
        translator = copy.copy(self)
        translator.decode_cfg = decode_cfg
        return translator

    def precision_for(self, lines: int) -> str:
        """What a `translate` call of `lines` lines computes in: `precision`, except that with
        decode.precision "auto" on a CPU a single line decodes in int8. One sentence at a time,
        a beam step costs per operation more than per number computed, and int8 was the fastest
        precision on every CPU measured (docs/translate.md). Larger calls (files, `seq2seq
        evaluate`, validation) keep `precision`, whose outputs the model's card reports."""
        auto_on_cpu = self.decode_cfg.precision == "auto" and self.device.type == "cpu"
        return "int8" if auto_on_cpu and lines == 1 else self.precision

    def _model_for(self, lines: int) -> tuple[Seq2SeqModel, torch.dtype | None]:
        """The model that decodes a call of `lines` lines (`precision_for`) and its autocast
        dtype. The int8 copy for single lines is made at the first such call, and again once
        the model's weights have changed (trained, loaded) since."""
        if self.precision_for(lines) == self.precision:
            return self.model, self.dtype
        version = weights_version(self.model)
        if self.one_line_model is None or self.one_line_model[0] != version:
            self.one_line_model = (version, self.model.int8_copy())
        return self.one_line_model[1], None

    def translate(
        self,
        lines: list[str],
        beam_size: int | None = None,
        nbest: int = 1,
        need_attention: bool = False,
        on_batch: Callable[[int], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> list[list[Translation]]:
        """Translate `lines`; returns, in input order, the `nbest` best translations of each.

        The source tokenizer normalises each line as the training text was (NFC, single spaces,
        stripped). A line with nothing to translate gets `nbest` empty translations (score 0)
        without running the model. Sentences are decoded longest first, in batches of at most
        decode_cfg.batch_size sentences and `max_batch_tokens` (by default MAX_BATCH_TOKENS)
        padded source tokens times beams;
        `on_batch(n)`, if given, is called after each with its number of sentences (e.g. a
        progress bar's `update`). A line over `source_limit` is a `SourceTooLong` error (or cut,
        with decode.truncate_src), and a beam wider than the target vocabulary a `UserError`,
        both before anything is decoded. `should_stop`, if given, is called before each decoding
        step; once it returns True, the search raises `seq2seq.decoding.search.Stopped`.
        """
        sources = self.src_tokenizer.encode(lines)
        return self.translate_ids(sources, beam_size, nbest, need_attention, on_batch, should_stop)

    def translate_ids(
        self,
        sources: list[list[int]],
        beam_size: int | None = None,
        nbest: int = 1,
        need_attention: bool = False,
        on_batch: Callable[[int], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
        trace: BeamTrace | None = None,
    ) -> list[list[Translation]]:
        """`translate` for lines the source tokenizer has encoded already (`sources`: each
        line's ids, no EOS), e.g. by a server that checked their lengths first. `trace`: a
        `BeamTrace` for the beam search to fill (one line only; beam search even at beam 1)."""
        beam_size = beam_size or self.decode_cfg.beam_size
        if not 1 <= nbest <= beam_size:
            raise UserError(f"the n-best list size ({nbest}) must be between 1 and the beam size")
        self.check_beam_size(beam_size)
        sources = [list(ids) for ids in sources]  # cut to the limit below, not the caller's
        cut = self._bound_lengths(sources, beam_size)
        results = [[Translation("", 0.0, [], [], []) for _ in range(nbest)] for _ in sources]
        order = sorted((i for i, ids in enumerate(sources) if ids), key=lambda i: -len(sources[i]))
        model, dtype = self._model_for(len(sources))
        was_training = model.training
        if was_training:  # train() visits every module: not once per call when already off
            model.eval()
        try:
            for batch in self._batches(order, sources, beam_size):
                batch_sources = [sources[i] for i in batch]
                with torch.autocast(self.device.type, dtype, enabled=dtype is not None):
                    hypotheses = self._search(
                        model, batch_sources, beam_size, nbest, need_attention, should_stop, trace
                    )
                translations = self._translations(batch_sources, hypotheses)
                for i, nbest_list in zip(batch, translations, strict=True):
                    for translation in nbest_list:
                        translation.truncated_from = cut.get(i)
                    results[i] = nbest_list
                if on_batch:
                    on_batch(len(batch))
        finally:
            if was_training:
                model.train()
        return results

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

    def _search(
        self,
        model: Seq2SeqModel,
        sources: list[list[int]],
        beam_size: int,
        nbest: int,
        need_attention: bool,
        should_stop: Callable[[], bool] | None = None,
        trace: BeamTrace | None = None,
    ) -> list[list[Hypothesis]]:
        """Decode one batch of tokenized sources (EOS not yet appended) with `model`."""
        cfg = self.decode_cfg
        src_lens = torch.tensor([len(ids) + 1 for ids in sources])
        src = torch.full((len(sources), int(src_lens.max())), PAD_ID, dtype=torch.long)
        for row, ids in enumerate(sources):
            src[row, : len(ids) + 1] = torch.tensor([*ids, EOS_ID])
        src, src_lens = src.to(self.device), src_lens.to(self.device)
        max_lens = max_output_lengths(src_lens, cfg.max_len_ratio, cfg.max_len_const)
        if beam_size == 1 and trace is None:
            hypotheses = greedy_search(
                model,
                src,
                src_lens,
                max_lens,
                need_attention,
                length_penalty=cfg.length_penalty,
                no_repeat_ngram=cfg.no_repeat_ngram,
                max_piece_repeat=cfg.max_piece_repeat,
                should_stop=should_stop,
            )
            return [[hypothesis] for hypothesis in hypotheses]
        return beam_search(
            model,
            src,
            src_lens,
            beam_size,
            max_lens,
            length_penalty=cfg.length_penalty,
            nbest=nbest,
            no_repeat_ngram=cfg.no_repeat_ngram,
            need_attention=need_attention,
            stop_early=cfg.stop_early,
            max_piece_repeat=cfg.max_piece_repeat,
            should_stop=should_stop,
            trace=trace,
        )

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


def weights_version(model: torch.nn.Module) -> int:
    """A number that grows whenever a weight of `model` is changed in place: the sum of the
    parameters' version counters, which every in-place write (an optimizer step, a
    `load_state_dict`) increments."""
    return sum(parameter._version for parameter in model.parameters())

"""Translating with CTranslate2 on our Transformer's weights (seq2seq.decoding.ct2_convert).

`CTranslate2Translator` translates like `Translator`, the same options meaning the same:

- beam search keeps the 2K best candidates and stops a sentence once K hypotheses have ended
  (with decode.stop_early: once its best candidate ends), as ours does; CTranslate2 returns
  the raw log-probabilities and the GNMT length penalty is applied here, exactly as ours;
- the maximum output length is per sentence (`max_output_lengths`); CTranslate2 takes one per
  call, so a sentence whose search reached its own limit is decoded again with it;
- at the maximum length our search forces the EOS after each of the K beams; CTranslate2's
  last step instead ends its K best candidates, with whatever token; those that are not the
  EOS get the EOS appended and are scored again (`score_batch`), which gives our hypotheses
  and scores.

Two differences remain. When some of those K best candidates are the EOS, our search also
forces the EOS after the next-best beams, which CTranslate2 never forms. And CTranslate2 keeps
at most K finished hypotheses per sentence, ranked by log-probability / length, where ours
ranks every finished one by the GNMT penalty: when more than K have ended (several end at the
last step of a search that reaches the maximum length), ours's best can be one CTranslate2
dropped. tests/test_ctranslate2.py counts them: on the test sets, only sentences whose search
runs to the maximum length differ.

Nothing here imports torch.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from seq2seq.config import DecodeConfig
from seq2seq.data.specials import BOS_PIECE, EOS_PIECE, PAD_PIECE
from seq2seq.data.tokenizer import Tokenizer
from seq2seq.decoding.ct2_engine import (
    PYTORCH_ONLY_OPTIONS,
    import_ctranslate2,
    pytorch_only_option,
)
from seq2seq.decoding.ct2_folder import POSITIONS
from seq2seq.decoding.line_translator import (
    Hypothesis,
    LineTranslator,
    Translation,
    check_stop,
    gnmt_penalty,
)
from seq2seq.errors import UserError

# CTranslate2's precisions for ours ("auto": float32 on a CPU, where its int8 is slower one
# sentence at a time (docs/benchmarks.md); float16 on a GPU)
COMPUTE_TYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "int8": "int8_float32"}


def cpu_threads() -> int:
    """The CPU cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def open_engine(
    folder: Path, precision: str, device: str = "cpu", threads: int | None = None
) -> tuple[Any, str]:
    """CTranslate2's translator of the checked `folder` on `device` ("cpu": on `threads`
    cores, by default every core this process may use; "cuda") in our `precision`, and that
    precision ("auto" resolved: fp32 on a CPU, fp16 on a GPU)."""
    ctranslate2 = import_ctranslate2()
    if precision == "auto":
        precision = "fp16" if device == "cuda" else "fp32"
    try:
        engine = ctranslate2.Translator(
            str(folder),
            device=device,
            compute_type=COMPUTE_TYPES[precision],
            intra_threads=(threads or cpu_threads()) if device == "cpu" else 0,
        )
    except (RuntimeError, ValueError) as err:
        raise UserError(f"{folder}: CTranslate2 cannot load it ({err})") from None
    return engine, precision


def check_options(decode_cfg: DecodeConfig) -> None:
    """`UserError` for a decoding option CTranslate2 has no counterpart of."""
    if (name := pytorch_only_option(decode_cfg)) is not None:
        on, off = PYTORCH_ONLY_OPTIONS[name]
        raise UserError(
            f"decode.{name} ({on}): CTranslate2 has no such rule; use --engine pytorch, or "
            f"{off} to decode without it"
        )


class CTranslate2Translator(LineTranslator):
    """`Translator`'s interface and options (see the module docstring) with CTranslate2 doing
    the search: `translate`, `source_limit`, `check_beam_size`, `with_decode`, `precision`."""

    lacks_options = frozenset(PYTORCH_ONLY_OPTIONS)

    def __init__(
        self,
        engine: Any,
        src_tokenizer: Tokenizer,
        tgt_tokenizer: Tokenizer,
        decode_cfg: DecodeConfig,
        precision: str,
        languages: tuple[str, str] | None = None,
    ) -> None:
        check_options(decode_cfg)
        self.engine = engine
        self.src_tokenizer, self.tgt_tokenizer = src_tokenizer, tgt_tokenizer
        self.decode_cfg = decode_cfg
        self.device = engine.device
        self.precision = precision
        self.languages = languages  # see LineTranslator.languages
        self.target_ids = {piece: i for i, piece in enumerate(tgt_tokenizer.vocabulary())}
        # the PyTorch translator that answers calls asking for attention maps (None: refused)
        self.attention_translator: LineTranslator | None = None

    @classmethod
    def open(
        cls,
        folder: Path,
        src_tokenizer: Tokenizer,
        tgt_tokenizer: Tokenizer,
        decode_cfg: DecodeConfig,
        device: str = "cpu",
        threads: int | None = None,
        languages: tuple[str, str] | None = None,
    ) -> CTranslate2Translator:
        """The translator of a checked CTranslate2 folder (`check_folder`) with `decode_cfg`,
        on `threads` CPU threads (None: every core this process may use), from and into
        `languages` (see LineTranslator.languages)."""
        engine, precision = open_engine(folder, decode_cfg.precision, device, threads)
        return cls(engine, src_tokenizer, tgt_tokenizer, decode_cfg, precision, languages)

    def with_decode(self, **changes: Any) -> CTranslate2Translator:
        translator = super().with_decode(**changes)
        check_options(translator.decode_cfg)
        if self.attention_translator is not None:
            translator.attention_translator = self.attention_translator.with_decode(**changes)
        return translator

    def source_limit(self, beam_size: int) -> int:
        """`LineTranslator.source_limit`, and below the POSITIONS of the stored encodings."""
        return min(super().source_limit(beam_size), POSITIONS - 1)

    def translate_ids(
        self,
        sources: list[list[int]],
        beam_size: int | None = None,
        nbest: int = 1,
        need_attention: bool = False,
        on_batch: Callable[[int], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> list[list[Translation]]:
        """`LineTranslator.translate_ids` (which `translate` calls); a call that asks for
        attention maps goes to `attention_translator` (PyTorch), and is refused without one.
        `should_stop` is called before each CTranslate2 call (a call runs to its end): once it
        returns True, `seq2seq.decoding.line_translator.Stopped` is raised."""
        if need_attention:
            if self.attention_translator is None:
                raise UserError("attention maps come from the PyTorch engine: use --engine pytorch")
            return self.attention_translator.translate_ids(
                sources, beam_size, nbest, need_attention, on_batch, should_stop
            )
        search = partial(self._search_all, nbest, should_stop)
        return self._translate_batches(sources, beam_size, nbest, search, on_batch)

    def max_lengths(self, sources: list[list[int]]) -> list[int]:
        """Each source's maximum output length (EOS not counted): `max_output_lengths`."""
        cfg = self.decode_cfg
        lengths = [int((len(ids) + 1) * cfg.max_len_ratio) + cfg.max_len_const for ids in sources]
        if max(lengths) >= POSITIONS:
            raise UserError(
                f"an output of up to {max(lengths)} pieces: more than the {POSITIONS - 1} that a "
                "CTranslate2 folder holds positions for; lower --max-len-ratio"
            )
        return lengths

    def _search_all(
        self,
        nbest: int,
        should_stop: Callable[[], bool] | None,
        sources: list[list[int]],
        beam_size: int,
    ) -> list[list[Hypothesis]]:
        """Search a batch at its longest maximum length, then again at their own the sentences
        whose search reached the last step of theirs (a hypothesis of limit - 1 tokens or
        more: the search ran that many steps)."""
        limits = self.max_lengths(sources)
        check_stop(should_stop)
        found = self._search(sources, beam_size, nbest, max(limits))
        again: dict[int, list[int]] = {}
        for i, (hypotheses, limit) in enumerate(zip(found, limits, strict=True)):
            if limit < max(limits) and max(len(h.tokens) for h in hypotheses) >= limit - 1:
                again.setdefault(limit, []).append(i)
        for limit, rows in again.items():
            check_stop(should_stop)
            redone = self._search([sources[i] for i in rows], beam_size, nbest, limit)
            for i, hypotheses in zip(rows, redone, strict=True):
                found[i] = hypotheses
        return [sorted(hypotheses, key=lambda h: -h.score)[:nbest] for hypotheses in found]

    def _search(
        self, sources: list[list[int]], beam_size: int, nbest: int, max_len: int
    ) -> list[list[Hypothesis]]:
        """One CTranslate2 search of outputs up to `max_len` tokens: every finished hypothesis
        of each source (the `nbest` best with decode.stop_early), scored with our length
        penalty.

        Its length penalty 1 divides each log-probability by the hypothesis' length, which is
        undone here; 0 would stop a sentence once its best candidate ends (stop_early). Its
        last step ends each beam with a token other than EOS; the log-probability of the EOS
        after them is added by `_end`, as our search forces the EOS there."""
        pieces = [[self.src_tokenizer.id_to_piece(i) for i in ids] + [EOS_PIECE] for ids in sources]
        if max_len == 0:  # nothing but the EOS
            return [[hypothesis] for hypothesis in self._end(pieces, [[]] * len(pieces))]
        stop_early = self.decode_cfg.stop_early and beam_size > 1
        results = self.engine.translate_batch(
            pieces,
            beam_size=beam_size,
            num_hypotheses=nbest if stop_early else beam_size,
            length_penalty=0.0 if stop_early else 1.0,
            no_repeat_ngram_size=self.decode_cfg.no_repeat_ngram,
            suppress_sequences=[[PAD_PIECE], [BOS_PIECE]],
            return_end_token=True,
            return_scores=True,
            max_input_length=0,
            max_decoding_length=max_len,
            min_decoding_length=0,
        )
        found, unended = [], []
        for row, result in enumerate(results):
            hypotheses = []
            for output, score in zip(result.hypotheses, result.scores, strict=True):
                if output[-1] != EOS_PIECE:
                    unended.append((row, output))
                    continue
                log_prob = score if stop_early else score * len(output)
                tokens = [self.target_ids[piece] for piece in output[:-1]]
                hypotheses.append(Hypothesis(tokens, self._penalised(log_prob, len(output))))
            found.append(hypotheses)
        ended = self._end([pieces[row] for row, _ in unended], [out for _, out in unended])
        for (row, _), hypothesis in zip(unended, ended, strict=True):
            found[row].append(hypothesis)
        return found

    def _end(self, sources: list[list[str]], outputs: list[list[str]]) -> list[Hypothesis]:
        """The hypotheses `outputs` followed by the EOS, scored by CTranslate2 (no search)."""
        if not outputs:
            return []
        results = self.engine.score_batch(sources, outputs, max_input_length=0)
        return [
            Hypothesis(
                [self.target_ids[piece] for piece in output],
                self._penalised(sum(result.log_probs), len(output) + 1),
            )
            for output, result in zip(outputs, results, strict=True)
        ]

    def _penalised(self, log_prob: float, length: int) -> float:
        """Our score of a hypothesis of `length` tokens, EOS included (gnmt_penalty)."""
        return float(log_prob / gnmt_penalty(length, self.decode_cfg.length_penalty))

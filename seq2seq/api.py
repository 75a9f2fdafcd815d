"""Translating from your own program: load a model, translate lines, look at its attention.

    import seq2seq

    model = seq2seq.load("transformer-tiny.multi30k.en-de")
    model.translate(["A dog runs in the snow."])         # ["Ein Hund rennt im Schnee."]
    model.translate(lines, beam=5, nbest=3)              # 3 Translations per line, best first
    model.attention("A dog runs in the snow.")           # its translation and every map
    model.beam_tree("A dog runs in the snow.", beam=4)   # the beam search, step by step
    model.align("A dog runs .", "Ein Hund rennt .")      # word links: .pharaoh() "0-0 1-1 ..."
    seq2seq.load("transformer-tiny.multi30k.en-de", engine="ctranslate2")  # faster, same output

docs/api.md describes every argument. The same `Translator` as `seq2seq translate` does the
work, and the arguments are checked as its options are (seq2seq.config_rules).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from seq2seq.config import Config, DecodeConfig
from seq2seq.config_rules import DECODE_PRECISIONS, checked, checked_flag, line_problem
from seq2seq.decoding.ct2_engine import use_ctranslate2
from seq2seq.decoding.ct2_translator import CTranslate2Translator
from seq2seq.decoding.line_translator import LineTranslator, Translation
from seq2seq.decoding.open_ctranslate2 import open_torch_free
from seq2seq.errors import UserError

if TYPE_CHECKING:
    from torch import Tensor

    from seq2seq.decoding.alignment import WordAlignment
    from seq2seq.decoding.open_pytorch import Inference
    from seq2seq.decoding.torch_translator import Translator

ENGINES = ("pytorch", "ctranslate2", "auto")


@dataclass
class Attention:
    """One line's best translation and the attention maps behind it.

    maps: as `Seq2SeqModel.attention_maps` gives them, without the batch axis; S = source
    pieces, T = output pieces, both ending with the EOS piece; L = layers, H = heads:

        Transformer   encoder_self (L, H, S, S)   decoder_self (L, H, T, T)   cross (L, H, T, S)
        GRU           bahdanau (T, S)
    """

    translation: Translation  # text, score, src_pieces (S), tgt_pieces (T)
    maps: dict[str, Tensor]

    def source_weights(self) -> Tensor:
        """(T, S) how much each output piece looks at each source piece: cross-attention
        averaged over every layer and head (the GRU's Bahdanau weights as they are)."""
        from seq2seq.decoding.attention_maps import source_attention

        return source_attention(self.maps)

    def heatmap(self) -> str:
        """`source_weights` as a text heatmap, one row per output piece."""
        from seq2seq.decoding.attention_maps import attention_text

        pieces = self.translation.src_pieces, self.translation.tgt_pieces
        return attention_text(self.source_weights(), *pieces)


class Model:
    """A trained model ready to translate (see `load`).

    inference: the PyTorch model and its tokenizers, None for a model opened on CTranslate2
    without torch (see `load`);
    translator: the engine's translator (`Translator` or `CTranslate2Translator`)."""

    def __init__(
        self, inference: Inference | None, translator: Translator, config: Config | None = None
    ) -> None:
        self.inference = inference
        self.translator = translator
        self.config = config if config is not None else inference.config

    @property
    def src(self) -> str:
        """The source language."""
        return self.config.data.src

    @property
    def tgt(self) -> str:
        """The target language."""
        return self.config.data.tgt

    def translate(
        self,
        lines: list[str],
        beam: int | None = None,
        nbest: int | None = None,
        length_penalty: float | None = None,
        max_len_ratio: float | None = None,
        keep_numbers: bool | None = None,
        split_sentences: bool = True,
        format: str = "text",
    ) -> list[str] | list[list[Translation]]:
        """The best translation of each line as text; with `nbest` = N, the N best of each line
        as `Translation`s, best first. Each argument left out is the model's decode setting;
        `split_sentences` translates each sentence of a line apart (seq2seq.decoding.sentences);
        `format` "html": each line is HTML, its tags kept around the words they enclose
        (seq2seq.decoding.markup; the best translation alone, PyTorch engine only)."""
        if isinstance(lines, str):
            raise TypeError("translate takes a list of lines; for one line: translate([line])")
        lines = list(lines)
        for number, line in enumerate(lines):
            problem = line_problem(line)
            if problem:
                raise ValueError(f"lines[{number}]: {problem}")
        beam = self._beam(beam, nbest)
        changes = {}
        if length_penalty is not None:
            changes["length_penalty"] = checked("length_penalty", length_penalty, float)
        if max_len_ratio is not None:
            changes["max_len_ratio"] = checked("max_len_ratio", max_len_ratio, float)
        if keep_numbers is not None:
            changes["keep_numbers"] = checked_flag("keep_numbers", keep_numbers)
        split = checked_flag("split_sentences", split_sentences)
        translator = self.translator.with_decode(**changes) if changes else self.translator
        if format != "text":
            return self._translate_html(translator, lines, beam, nbest, split, format)
        results = translator.translate(
            lines, beam_size=beam, nbest=nbest or 1, split_sentences=split
        )
        return results if nbest else [nbest_list[0].text for nbest_list in results]

    def _translate_html(
        self,
        translator: LineTranslator,
        lines: list[str],
        beam: int,
        nbest: int | None,
        split: bool,
        format: str,
    ) -> list[str]:
        """`translate` of HTML lines (seq2seq.decoding.markup); a ValueError naming a bad
        `format`, or an `nbest`."""
        if format != "html":
            raise ValueError(f"format {format!r}: one of text, html")
        if nbest is not None:
            raise ValueError("nbest: format html gives the best translation alone; leave it out")
        from seq2seq.decoding.markup import translate_html  # torch: PyTorch only

        results = translate_html(translator, lines, beam, split, option="format")
        return [best.text for best in results]

    def attention(self, line: str, beam: int | None = None, sentence: int = 0) -> Attention:
        """The best translation of `line` and every attention map the model computes when it
        produces exactly that translation (teacher-forced, in fp32); PyTorch engine only. The
        maps are a sentence's: of a line of several, that of number `sentence` (from 0), as
        `translate` cuts it."""
        line = self._sentence(line, sentence, "attention maps")
        from seq2seq.decoding.attention_maps import teacher_forced_maps  # torch: PyTorch only

        beam = self._beam(beam)
        (best,) = self.translator.translate([line], beam_size=beam, split_sentences=False)[0]
        if not best.src_tokens:
            raise UserError("nothing in the line is left to translate once normalised")
        model, device = self.translator.model, self.translator.device
        return Attention(best, teacher_forced_maps(model, best.src_tokens, best.tokens, device))

    def beam_tree(
        self, line: str, beam: int | None = None, nbest: int = 1, sentence: int = 0
    ) -> dict:
        """How the beam search reached the `nbest` best translations of `line` (of its sentence
        number `sentence`, as in `attention`), as the explorer draws it
        (`seq2seq.decoding.explain.beam_tree`); PyTorch engine only."""
        line = self._sentence(line, sentence, "the beam tree")
        from seq2seq.decoding.explain import beam_tree  # torch: PyTorch only

        beam = self._beam(beam, nbest)
        (src_ids,) = self.translator.src_tokenizer.encode([line])
        if not src_ids:
            raise UserError("nothing in the line is left to translate once normalised")
        return beam_tree(self.translator, src_ids, beam, nbest)

    def align(
        self,
        src: str,
        tgt: str | None = None,
        rule: str = "mean",
        reverse: Model | None = None,
        combine: str = "grow-diag-final",
    ) -> WordAlignment:
        """The word alignment of `src` and `tgt` (words split on whitespace), teacher-forced on
        `tgt`, or on the model's best translation of `src` when `tgt` is None: `links`, pairs
        (source word, target word) from 0, `pharaoh()` them as text. `rule`: the attention that
        aligns, "mean", "layer:L", "head:L.H", "alignment-head", each optionally after "shifted:"
        (seq2seq.decoding.alignment); with `reverse`, the opposite model (e.g. fr-en for
        en-fr), both directions combined by `combine` (one of the alignment module's
        COMBINATIONS). PyTorch engine only; a ValueError names a bad argument."""
        from seq2seq.data.word_links import COMBINATIONS
        from seq2seq.decoding.alignment import Aligner, AlignmentRule, align_ids

        for model in (self, reverse) if reverse is not None else (self,):
            model._check_pytorch_line(src, "alignment", "src")
        if tgt is not None:
            self._check_pytorch_line(tgt, "alignment", "tgt")
        if combine not in COMBINATIONS:
            raise ValueError(f"combine {combine!r}: one of {', '.join(COMBINATIONS)}")
        try:
            parsed = AlignmentRule.parse(rule, "rule")
            forward = Aligner(self.translator, parsed)
            backward = Aligner(reverse.translator, parsed) if reverse is not None else None
        except UserError as err:
            raise ValueError(str(err)) from None
        if tgt is None:
            (best,) = self.translator.translate([src], self._beam(None), split_sentences=False)[0]
            ids = best.src_tokens, best.tokens
        else:
            ids = forward.ids(src, tgt)
        return align_ids(forward, ids, backward, combine)

    def _check_pytorch_line(self, line: str, what: str, argument: str = "line") -> None:
        """UserError under the CTranslate2 engine (`what` comes from PyTorch's); a ValueError
        naming `line` for a line that is not one line of text."""
        if isinstance(self.translator, CTranslate2Translator):
            raise UserError(f"{what}: from the PyTorch engine only; use engine='pytorch'")
        problem = line_problem(line)
        if problem:
            raise ValueError(f"{argument}: {problem}")

    def _sentence(self, line: str, sentence: int, what: str) -> str:
        """Sentence number `sentence` of `line` (`_check_pytorch_line` first); a ValueError
        naming the argument for a number the line has no sentence of."""
        self._check_pytorch_line(line, what)
        sentences = self.translator.split([line]).sentences
        if isinstance(sentence, bool) or not isinstance(sentence, int):
            raise ValueError(f"sentence: {sentence!r} is not a whole number")
        if not 0 <= sentence < len(sentences):
            count = f"{len(sentences)} sentence" + ("s" if len(sentences) > 1 else "")
            raise ValueError(f"sentence: {sentence}, but the line has {count} (from 0)")
        return sentences[sentence]

    def _beam(self, beam: int | None, nbest: int | None = None) -> int:
        """The beam size to search with: `beam`, or the model's decode.beam_size; a ValueError
        naming the argument for a beam or an n-best list size out of its range
        (seq2seq.config_rules.ARGUMENTS), or an n-best list longer than the beam."""
        beam = self.translator.decode_cfg.beam_size if beam is None else checked("beam", beam, int)
        if nbest is not None and checked("nbest", nbest, int) > beam:
            raise ValueError(f"nbest: {nbest} is more than the beam size ({beam})")
        return beam


def load(
    name: str | Path,
    device: str = "auto",
    precision: str | None = None,
    plain: bool = False,
    engine: str = "pytorch",
    keep_numbers: bool | None = None,
) -> Model:
    """The model `name` names: a shipped model (e.g. "transformer-tiny.multi30k.en-de"), an
    exported model folder, a training checkpoint file, or (engine "ctranslate2" or "auto") a
    folder from `seq2seq export --format ctranslate2`. docs/api.md describes each argument; on
    CTranslate2 a Transformer opens without importing torch (seq2seq.decoding.open_ctranslate2)."""
    if precision is not None and precision not in DECODE_PRECISIONS:
        raise ValueError(f"precision {precision!r}: one of {', '.join(DECODE_PRECISIONS)}")
    if engine not in ENGINES:
        raise ValueError(f"engine {engine!r}: one of {', '.join(ENGINES)}")
    if keep_numbers is not None:
        checked_flag("keep_numbers", keep_numbers)
    checkpoint = Path(name).suffix == ".pt" or Path(name).is_file()
    set_options = partial(_set_options, precision, keep_numbers)
    if engine != "pytorch" and not checkpoint:
        opened = open_torch_free(
            name, engine, device, set_options=set_options, device_option="device"
        )
        if opened is not None:
            return Model(None, opened.translator, opened.config)
    from seq2seq.decoding.ct2_convert import translator_from_inference
    from seq2seq.decoding.open_pytorch import load_model
    from seq2seq.decoding.torch_translator import Translator
    from seq2seq.device import pick_device

    torch_device = pick_device(device, "device")
    inference = load_model(name, torch_device, plain)
    set_options(inference.config.decode)
    if use_ctranslate2(engine, inference.config):
        return Model(inference, translator_from_inference(inference, torch_device.type))
    return Model(inference, Translator.from_inference(inference, torch_device))


def _set_options(
    precision: str | None, keep_numbers: bool | None, decode_cfg: DecodeConfig
) -> None:
    """Decode in `precision` and with `keep_numbers` (None: the model's own setting)."""
    if precision is not None:
        decode_cfg.precision = precision
    if keep_numbers is not None:
        decode_cfg.keep_numbers = keep_numbers

"""Translating from your own program: load a model, translate lines, look at its attention.

    import seq2seq

    model = seq2seq.load("transformer-tiny.multi30k.en-de")
    model.translate(["A dog runs in the snow."])         # ["Ein Hund rennt im Schnee."]
    model.translate(lines, beam=5, nbest=3)              # 3 Translations per line, best first
    model.attention("A dog runs in the snow.")           # its translation and every map

docs/api.md shows more. The same `Translator` as `seq2seq translate` does the work, and the
same maps as the attention explorer (seq2seq.decoding.explain) come back, so the outputs are those
of the command line and of the explorer with the same options.
"""

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from torch import Tensor

from seq2seq.config_rules import DECODE_PRECISIONS
from seq2seq.decoding.attention_maps import attention_text
from seq2seq.decoding.explain import source_attention, teacher_forced_maps
from seq2seq.decoding.loading import Inference, load_model
from seq2seq.decoding.translator import Translation, Translator
from seq2seq.device import pick_device
from seq2seq.errors import UserError


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
        return source_attention(self.maps)

    def heatmap(self) -> str:
        """`source_weights` as a text heatmap, one row per output piece."""
        pieces = self.translation.src_pieces, self.translation.tgt_pieces
        return attention_text(self.source_weights(), *pieces)


class Model:
    """A trained model ready to translate (see `load`)."""

    def __init__(self, inference: Inference, translator: Translator) -> None:
        self.inference = inference
        self.translator = translator

    @property
    def src(self) -> str:
        """The source language."""
        return self.inference.config.data.src

    @property
    def tgt(self) -> str:
        """The target language."""
        return self.inference.config.data.tgt

    def translate(
        self, lines: list[str], beam: int | None = None, nbest: int | None = None
    ) -> list[str] | list[list[Translation]]:
        """Translate `lines` with beam size `beam` (default: the model's decode.beam_size).

        Returns the best translation of each line as text; with `nbest` = N, the N best of each
        line as `Translation`s (text, score, pieces), best first.
        """
        if isinstance(lines, str):
            raise TypeError("translate takes a list of lines; for one line: translate([line])")
        results = self.translator.translate(list(lines), beam_size=beam, nbest=nbest or 1)
        return results if nbest else [nbest_list[0].text for nbest_list in results]

    def attention(self, line: str, beam: int | None = None) -> Attention:
        """The best translation of `line` and every attention map the model computes when it
        produces exactly that translation (teacher-forced, in fp32)."""
        src_ids = self.translator.src_tokenizer.encode([line])[0]
        if not src_ids:
            raise UserError("nothing in the line is left to translate once normalised")
        (best,) = self.translator.translate([line], beam_size=beam)[0]
        return Attention(best, teacher_forced_maps(self.translator, src_ids, best.tokens))


def load(name: str | Path, device: str = "auto", precision: str | None = None) -> Model:
    """The model `name` names: a shipped model (e.g. "transformer-tiny.multi30k.en-de"), an
    exported model folder, or a training checkpoint file; on `device` ("auto": CUDA when
    present, else the CPU), decoding in `precision` (one of DECODE_PRECISIONS; default: the
    model's decode.precision)."""
    if precision is not None and precision not in DECODE_PRECISIONS:
        raise ValueError(f"precision {precision!r}: one of {', '.join(DECODE_PRECISIONS)}")
    torch_device = pick_device(device, "device")
    inference = load_model(name, torch_device)
    if precision is not None:
        decode = dataclasses.replace(inference.config.decode, precision=precision)
        inference.config = dataclasses.replace(inference.config, decode=decode)
    return Model(inference, Translator.from_inference(inference, torch_device))

"""From text to text: read lines, tokenize, batch, search, detokenize.

`Translator` is the one path from raw lines to translations. Training validation,
`seq2seq evaluate` (through seq2seq.decoding.evaluation) and `seq2seq translate` all go through it,
so a BLEU printed during training is computed exactly like the one printed at test time; both
scripts read their input with `seq2seq.files.text_lines`, so they split and decode text alike.

What needs no torch (the `Translation`, the length limit, the batching, the detokenizing) is
`LineTranslator` in seq2seq.decoding.line_translator, which CTranslate2's engine shares; this module
adds the PyTorch search of each batch.
"""

from collections.abc import Callable
from functools import cached_property, partial

import torch

from seq2seq.config import DecodeConfig, trained_alignment_head
from seq2seq.data.specials import EOS_ID, PAD_ID
from seq2seq.data.tokenizer import Tokenizer
from seq2seq.decoding.beam_trace import BeamTrace
from seq2seq.decoding.line_translator import (
    MAX_BATCH_TOKENS,
    Hypothesis,
    LineTranslator,
    Translation,
)
from seq2seq.decoding.number_guard import GuardVocabulary, NumberGuard, allowed_numbers
from seq2seq.decoding.open_pytorch import Inference
from seq2seq.decoding.quantize import quantized_copy
from seq2seq.decoding.search import (
    EVERY_STEP,
    BatchedReads,
    EveryStep,
    beam_search,
    greedy_search,
    max_output_lengths,
)
from seq2seq.device import decode_dtype, precision_name
from seq2seq.fast import FastModel, speed_up
from seq2seq.models.base import Seq2SeqModel

GPU_BATCH_TOKENS = 256_000  # MAX_BATCH_TOKENS on a GPU, where a batch should fill the device


def batch_tokens_for(device: torch.device) -> int:
    """The padded source tokens times beams of a decoding batch on `device`: MAX_BATCH_TOKENS on
    a CPU, where larger batches gain nothing; GPU_BATCH_TOKENS on a GPU, which a few hundred
    sentences' beams at a time keep busy (the Multi30k test set in one or two batches at beam
    5, with decode.batch_size = 1024)."""
    return MAX_BATCH_TOKENS if device.type == "cpu" else GPU_BATCH_TOKENS


def int8_copier(model: Seq2SeqModel) -> Callable[[Seq2SeqModel], Seq2SeqModel]:
    """How a Translator of `model` copies it to int8 to decode on a CPU: `quantized_copy`
    (seq2seq/decoding/quantize.py), or for a fast twin (seq2seq.fast) `fast_int8_copy`."""
    return fast_int8_copy if isinstance(model, FastModel) else quantized_copy


def fast_int8_copy(model: Seq2SeqModel) -> Seq2SeqModel:
    """The `quantized_copy` of a fast twin, switched to its own fast twin: its int8 layers call
    their kernel directly (`seq2seq.fast.int8.Int8Linear`), to the same outputs."""
    return speed_up(quantized_copy(model))


def reads_for(model: Seq2SeqModel, device: torch.device) -> EveryStep:
    """When the searches of `model` on `device` read the device (seq2seq/decoding/search.py):
    `BatchedReads` for a fast twin (seq2seq.fast) on a GPU, whose every read makes it wait;
    else the textbook's `EVERY_STEP`, on a CPU, where reading costs nothing and removing each
    finished sentence at once saves compute, and for a plain model (`--plain`) everywhere."""
    return BatchedReads() if isinstance(model, FastModel) and device.type != "cpu" else EVERY_STEP


class Translator(LineTranslator):
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
        max_batch_tokens: int | None = None,
        languages: tuple[str, str] | None = None,
    ):
        self.src_tokenizer = src_tokenizer
        self.tgt_tokenizer = tgt_tokenizer
        self.decode_cfg = decode_cfg
        self.device = torch.device(device)
        # padded source tokens times beams per batch (None: `batch_tokens_for` the device)
        self.max_batch_tokens = max_batch_tokens or batch_tokens_for(self.device)
        self.dtype = decode_dtype(decode_cfg.precision, self.device)
        # chosen once, by the model's class: how to copy it to int8, when to read the device
        self.int8_copy = int8_copier(model)
        self.reads = reads_for(model, self.device)
        int8 = decode_cfg.precision == "int8"
        self.model = self.int8_copy(model) if int8 else model
        # What the model computes in: "int8", "bf16", "fp16" or "fp32".
        self.precision = "int8" if int8 else precision_name(self.dtype)
        # "auto" on a CPU: the int8 copy for single lines, by the weights' version it copied;
        # one dictionary shared with every `with_decode` copy, so that they quantize once
        self.one_line_models: dict[int, Seq2SeqModel] = {}
        self.languages = languages  # see LineTranslator.languages
        # the (layer, head) trained to align (train.alignment_weight), set by from_inference
        self.alignment_head: tuple[int, int] | None = None

    @classmethod
    def from_inference(cls, inference: Inference, device: str | torch.device) -> "Translator":
        """The translator of a loaded checkpoint, with its [decode] configuration and its
        alignment head."""
        translator = cls(
            inference.model,
            inference.src_tokenizer,
            inference.tgt_tokenizer,
            inference.config.decode,
            device,
            languages=(inference.config.data.src, inference.config.data.tgt),
        )
        translator.alignment_head = trained_alignment_head(inference.config)
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
        if version not in self.one_line_models:
            self.one_line_models.clear()  # an older version's copy
            self.one_line_models[version] = self.int8_copy(self.model)
        return self.one_line_models[version], None

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
        """`LineTranslator.translate_ids`: each batch searched by `_search` with the model of
        `precision_for`, in eval mode, the searches reading the device as `reads` says.
        `trace`: a `BeamTrace` for the beam search to fill (one line only; beam search even at
        beam 1)."""
        model, dtype = self._model_for(len(sources))
        search = partial(self._search, model, dtype, nbest, need_attention, should_stop, trace)
        was_training = model.training
        if was_training:  # train() visits every module: not once per call when already off
            model.eval()
        try:
            return self._translate_batches(sources, beam_size, nbest, search, on_batch)
        finally:
            if was_training:
                model.train()

    def _search(
        self,
        model: Seq2SeqModel,
        dtype: torch.dtype | None,
        nbest: int,
        need_attention: bool,
        should_stop: Callable[[], bool] | None,
        trace: BeamTrace | None,
        sources: list[list[int]],
        beam_size: int,
    ) -> list[list[Hypothesis]]:
        """Decode one batch of tokenized sources (EOS not yet appended) with `model`, under
        autocast in `dtype` (None: fp32)."""
        cfg = self.decode_cfg
        src_lens = torch.tensor([len(ids) + 1 for ids in sources])
        src = torch.full((len(sources), int(src_lens.max())), PAD_ID, dtype=torch.long)
        for row, ids in enumerate(sources):
            src[row, : len(ids) + 1] = torch.tensor([*ids, EOS_ID])
        src, src_lens = src.to(self.device), src_lens.to(self.device)
        max_lens = max_output_lengths(src_lens, cfg.max_len_ratio, cfg.max_len_const)
        autocast = torch.autocast(self.device.type, dtype, enabled=dtype is not None)
        guard = self._guard(sources) if cfg.keep_numbers else None
        if beam_size == 1 and trace is None:
            with autocast:
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
                    guard=guard,
                    reads=self.reads,
                )
            return [[hypothesis] for hypothesis in hypotheses]
        with autocast:
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
                guard=guard,
                reads=self.reads,
            )

    @cached_property
    def guard_vocabulary(self) -> GuardVocabulary:
        """What the number guard needs of the target vocabulary."""
        return GuardVocabulary.of(self.tgt_tokenizer.vocabulary())

    def _guard(self, sources: list[list[int]]) -> NumberGuard:
        """The number guard of one batch of tokenized sources (seq2seq.decoding.number_guard)."""
        if self.languages is None:
            raise ValueError("decode.keep_numbers: give the Translator its languages")
        src, tgt = self.languages
        numbers = [allowed_numbers(line, src, tgt) for line in self.src_tokenizer.decode(sources)]
        guard = NumberGuard.build(numbers, self.guard_vocabulary, tgt)
        return guard.to(self.device)


def weights_version(model: torch.nn.Module) -> int:
    """A number that grows whenever a weight of `model` is changed in place: the sum of the
    parameters' version counters, which every in-place write (an optimizer step, a
    `load_state_dict`) increments."""
    return sum(parameter._version for parameter in model.parameters())

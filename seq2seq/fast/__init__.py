"""The speed work, in one place: fast versions of textbook pieces, each tested equal to it.

The modules a reader opens first (`seq2seq.models`, `seq2seq.training.loss`,
`seq2seq.decoding.search`, `seq2seq.decoding.quantize`) hold the maths in its plain form and
never import this package. Each piece here computes the same thing faster where it pays;
docs/benchmarks.md has the measured figures.

    attention.py   `BeamGroupedAttention`: multi-head attention in which the K beams of a
                   sentence read one copy of its source keys/values (one matrix product per
                   sentence and head); PyTorch's fused kernel on CUDA, the explicit operations
                   on a CPU, where they are faster.
                   Plain: `seq2seq.models.attention.MultiHeadAttention`.
    dropout.py     `PackedDropout`: dropout with one 64-bit random word per four elements on a
                   CPU (PyTorch's own on a GPU). Plain: `torch.nn.Dropout`.
    loss.py        `label_smoothed_cross_entropy`: the loss and the NLL from one log-softmax,
                   with the gradient p - q written by hand.
                   Plain: `seq2seq.training.loss.label_smoothed_cross_entropy`.
    topk.py        `best_candidates`: the beam's best continuations without forming the
                   (sentences, K * V) sum.
                   Plain: `Seq2SeqModel.best_candidates`.
    int8.py        `Int8Linear`: the int8 linear layer of seq2seq/decoding/quantize.py, calling
                   its kernel directly.
                   Plain: `torch.ao.nn.quantized.dynamic.Linear`.
    process.py     `tune_process`: glibc malloc and oneDNN settings for a training or decoding
                   process (the command line calls it; the library never does).

And here, `FastGRUSeq2Seq` and `FastTransformerSeq2Seq`: the models whose beams share their
sentence's encoder state, and which give beam search the fast top-k above (`FastModel`).
Plain: `GRUSeq2Seq`, `TransformerSeq2Seq`.

One piece of speed work lives in the module it changes, as an argument of its searches:
`BatchedReads` in `seq2seq.decoding.search`, the searches reading the device once every 8 steps
instead of after every step. Plain: `EVERY_STEP`, the textbook's.

One function turns a model into its fast twin: `speed_up(model)`. The code that sets up a model
for training (`seq2seq.training.run`) and for decoding (`seq2seq.decoding.open_pytorch`) calls it,
unless the configuration's `model.fast` is false (`--plain` on the command line). It swaps the
class of every module that has a fast twin, the model's own included (a twin adds no parameter or
buffer, so every weight stays where it is); nothing reads a flag afterwards. What follows the
model in the data flow asks its class once, when it is set up, and keeps the answer: a training
run its loss (`seq2seq.training.run.cross_entropy_of`), a Translator its int8 copier
(`seq2seq.decoding.torch_translator.int8_copier`: the copy's fast twin, with `Int8Linear`) and its
reads of the device (`seq2seq.decoding.torch_translator.reads_for`: `BatchedReads` on a GPU). So
`--plain` switches exactly these: the model's modules, the training loss, the int8 layer, and
on a GPU the searches' reads; the outputs are the same.

This package imports seq2seq.models and seq2seq.data only: training and decoding import it,
never the reverse.
"""

import torch.ao.nn.quantized.dynamic
from torch import nn

from seq2seq.fast import topk
from seq2seq.fast.attention import BeamGroupedAttention
from seq2seq.fast.dropout import PackedDropout
from seq2seq.fast.int8 import Int8Linear
from seq2seq.models import GRUSeq2Seq, Seq2SeqModel, State, TransformerSeq2Seq
from seq2seq.models.attention import MultiHeadAttention


class FastModel(Seq2SeqModel):
    """What the fast twin of a model changes in the functions a model gives beam search (see
    seq2seq.models.base)."""

    best_candidates = staticmethod(topk.best_candidates)

    def beam_state(self, state: State, beams: int) -> State:
        """`state` itself: the `beams` beams of a sentence read its one row (its cache rows are
        consecutive), through `BeamGroupedAttention` or the GRU's additive attention."""
        return state


class FastGRUSeq2Seq(FastModel, GRUSeq2Seq):
    """`GRUSeq2Seq` with the functions of `FastModel`."""


class FastTransformerSeq2Seq(FastModel, TransformerSeq2Seq):
    """`TransformerSeq2Seq` with the functions of `FastModel`."""


FAST_TWINS: dict[type[nn.Module], type[nn.Module]] = {
    GRUSeq2Seq: FastGRUSeq2Seq,
    TransformerSeq2Seq: FastTransformerSeq2Seq,
    nn.Dropout: PackedDropout,
    MultiHeadAttention: BeamGroupedAttention,
    torch.ao.nn.quantized.dynamic.Linear: Int8Linear,
}


def speed_up(model: nn.Module) -> nn.Module:
    """Switch `model` (in place) to its fast twin: every module of a class in FAST_TWINS to that
    class's twin; returns it.

    The outputs are the same as the plain model's (tests/test_fast.py); only dropout draws its
    random mask differently."""
    for module in model.modules():
        twin = FAST_TWINS.get(type(module))
        if twin is not None:
            module.__class__ = twin
    return model

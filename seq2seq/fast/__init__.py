"""The speed work, in one place: fast versions of textbook pieces, each tested equal to it.

The modules a reader opens first (`seq2seq.models.attention`, `seq2seq.models`,
`seq2seq.training.loss`, `seq2seq.decoding.search`) hold the maths in its plain form. Each piece
here computes the same thing faster where it pays; docs/benchmarks.md has the measured figures.

    attention.BeamGroupedAttention   multi-head attention in which the K beams of a sentence read
                                     one copy of its source keys/values (one matrix product per
                                     sentence and head); PyTorch's fused kernel on CUDA, the
                                     explicit operations on a CPU, where they are faster.
                                     Plain: `seq2seq.models.attention.MultiHeadAttention`.
    dropout.PackedDropout            dropout with one 64-bit random word per four elements on a
                                     CPU (PyTorch's own on a GPU). Plain: `torch.nn.Dropout`.
    loss.label_smoothed_cross_entropy   the loss and the NLL from one log-softmax, with the
                                     gradient p - q written by hand.
                                     Plain: `seq2seq.training.loss.label_smoothed_cross_entropy`.
    topk.best_candidates             the beam's best continuations without forming the
                                     (sentences, K * V) sum.
                                     Plain: `seq2seq.decoding.search.best_candidates`.
    int8.Int8Linear                  the int8 linear layer of seq2seq/decoding/quantize.py,
                                     calling its kernel directly.
                                     Plain: `torch.ao.nn.quantized.dynamic.Linear`.
    process.tune_process             glibc malloc and oneDNN settings for a training or decoding
                                     process (the command line calls it; the library never does).

One switch turns the model-level pieces on: `speed_up(model)`, which `seq2seq.models.build_model`
calls (and `seq2seq.decoding.quantize.quantized_copy` again, on the int8 copy of a fast model). It
swaps the class of the modules that have a fast twin (a twin adds no parameter or buffer, so every
weight stays where it is) and sets `model.fast`, which tells the loss and the
search to use their fast versions and beam search to keep the encoder state once per sentence.
"""

from torch import nn

from seq2seq.fast.attention import BeamGroupedAttention
from seq2seq.fast.dropout import PackedDropout
from seq2seq.fast.int8 import DynamicQuantizedLinear, Int8Linear
from seq2seq.models.attention import MultiHeadAttention

FAST_TWINS: dict[type[nn.Module], type[nn.Module]] = {
    nn.Dropout: PackedDropout,
    MultiHeadAttention: BeamGroupedAttention,
    DynamicQuantizedLinear: Int8Linear,
}


def speed_up(model: nn.Module) -> nn.Module:
    """Switch `model` (in place) to the fast modules of seq2seq.fast; returns it.

    The outputs are the same as the plain model's (tests/test_fast.py); only dropout draws its
    random mask differently."""
    for module in model.modules():
        twin = FAST_TWINS.get(type(module))
        if twin is not None:
            module.__class__ = twin
    model.fast = True
    return model

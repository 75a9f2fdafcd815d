"""The two model families behind one interface (`seq2seq.models.base.Seq2SeqModel`).

    attention.py          masked softmax, additive, dot-product and multi-head attention
    positional.py         sinusoidal positional encoding
    base.py               the interface both families implement (`Seq2SeqModel`), used by
                          training and by search
    gru.py                a GRU encoder-decoder with Bahdanau (additive) attention
    transformer.py        the Transformer encoder-decoder
    size.py               whether a model fits the machine, estimated before anything is
                          allocated
    kernel_regression.py  Nadaraya-Watson kernel regression, trained: the first attention, on
                          data of one variable (examples/kernel_regression.py runs it)

`build_model` below builds the model a configuration describes.
"""

from seq2seq.config import ModelConfig
from seq2seq.errors import UserError
from seq2seq.models.base import Seq2SeqModel, State, StepOutput, select_rows
from seq2seq.models.gru import GRUSeq2Seq
from seq2seq.models.transformer import TransformerSeq2Seq

__all__ = [
    "GRUSeq2Seq",
    "Seq2SeqModel",
    "State",
    "StepOutput",
    "TransformerSeq2Seq",
    "build_model",
    "select_rows",
]

ARCHITECTURES: dict[str, type[Seq2SeqModel]] = {
    "gru": GRUSeq2Seq,
    "transformer": TransformerSeq2Seq,
}


def build_model(
    cfg: ModelConfig,
    src_vocab_size: int,
    tgt_vocab_size: int,
    joint_vocab: bool,
    verbose: bool = True,
) -> Seq2SeqModel:
    """The model `cfg.arch` describes, freshly initialised, in its textbook form; prints its
    size when `verbose` (shared and tied weights counted once).

    `seq2seq.fast.speed_up` turns it into its fast twin, which computes the same; the code that
    sets up training and decoding calls it, unless `cfg.fast` is false.
    """
    if cfg.arch not in ARCHITECTURES:
        raise UserError(f"model.arch: unknown architecture {cfg.arch!r}; known: gru, transformer")
    model = ARCHITECTURES[cfg.arch](cfg, src_vocab_size, tgt_vocab_size, joint_vocab)
    if verbose:
        print(f"model {cfg.name}: {model.num_parameters():,} parameters")
    return model

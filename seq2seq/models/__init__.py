"""The two model families behind one interface (`seq2seq.models.base.Seq2SeqModel`)."""

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
    fast: bool = True,
) -> Seq2SeqModel:
    """The model `cfg.arch` describes, freshly initialised; prints its size when `verbose`.

    Shared and tied weights are counted once. `fast`: switch it to the fast modules of
    seq2seq.fast (the one place they are switched on); False gives the plain textbook model,
    which computes the same.
    """
    if cfg.arch not in ARCHITECTURES:
        raise UserError(f"model.arch: unknown architecture {cfg.arch!r}; known: gru, transformer")
    model = ARCHITECTURES[cfg.arch](cfg, src_vocab_size, tgt_vocab_size, joint_vocab)
    if fast:
        from seq2seq.fast import speed_up  # seq2seq.fast imports the attention parts

        speed_up(model)
    if verbose:
        print(f"model {cfg.name}: {model.num_parameters():,} parameters")
    return model

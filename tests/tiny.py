"""The tiny models of the tests: one definition, changed by keyword where a test needs to.

    tiny_model("gru")                                  # seeded, fast modules on
    tiny_model("transformer", decoder_layers=1, fast=False)
    tiny_config("transformer", dropout=0.0)            # its ModelConfig

Test modules take them from the `tiny_model` fixture (tests/conftest.py) or import them here for
module-level helpers and module-scoped fixtures.
"""

import torch

from seq2seq.config import ModelConfig
from seq2seq.fast import speed_up
from seq2seq.models import Seq2SeqModel, build_model

VOCAB = 40  # 4 specials and 36 symbols
TINY = {
    "transformer": dict(arch="transformer", embed_dim=32, ffn_size=64, num_heads=4),
    "transformer-post-norm": dict(
        arch="transformer", embed_dim=32, ffn_size=64, num_heads=4, pre_norm=False
    ),
    "gru": dict(arch="gru", embed_dim=16, hidden_size=32),
}
LAYERS = dict(encoder_layers=2, decoder_layers=2, dropout=0.1, attention_dropout=0.1)


def tiny_config(kind: str = "transformer", **changes: object) -> ModelConfig:
    """The tiny model `kind` ("transformer", "transformer-post-norm" or "gru") with `changes`."""
    return ModelConfig(name=kind, **{**LAYERS, **TINY[kind], **changes})


def tiny_model(
    kind: str = "transformer", vocab_size: int = VOCAB, fast: bool = True, **changes: object
) -> Seq2SeqModel:
    """A tiny model of a joint vocabulary of `vocab_size`, initialised with seed 0; `fast`: its
    fast twin (seq2seq.fast.speed_up), as training and decoding set it up by default."""
    torch.manual_seed(0)
    model = build_model(tiny_config(kind, **changes), vocab_size, vocab_size, True, verbose=False)
    return speed_up(model) if fast else model

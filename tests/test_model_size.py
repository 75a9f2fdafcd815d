"""The model-size estimate: parameters counted from the configuration equal those of the built
model, and a model that cannot fit is refused with the estimate."""

import itertools
from dataclasses import replace

import pytest
import torch

from seq2seq.config import MODEL_PRESETS, model_preset
from seq2seq.config_file import load_config
from seq2seq.errors import UserError
from seq2seq.models import build_model
from seq2seq.models import size as model_size
from seq2seq.models.size import GIB, check_model_fits, count_parameters


@pytest.mark.parametrize("name", list(MODEL_PRESETS))
def test_the_count_equals_the_built_models(name: str) -> None:
    for share, tie, joint, pre_norm in itertools.product([True, False], repeat=4):
        cfg = replace(
            model_preset(name),
            embed_dim=32,
            hidden_size=48,
            ffn_size=40,
            num_heads=2,
            encoder_layers=2,
            decoder_layers=3,
            share_embeddings=share,
            tie_output=tie,
            pre_norm=pre_norm,
        )
        vocab = (120, 120) if joint else (100, 140)
        built = build_model(cfg, *vocab, joint, verbose=False).num_parameters()
        assert count_parameters(cfg, *vocab, joint) == built, (share, tie, joint, pre_norm)


def test_a_model_that_cannot_fit_is_refused_with_the_estimate(monkeypatch) -> None:
    monkeypatch.setattr(model_size, "device_memory", lambda device: 2 * GIB)
    cpu = torch.device("cpu")
    check_model_fits(load_config(None, []), 8000, 8000, cpu, training=True)
    base = load_config(None, ["model.name=transformer-base"])
    parameters = count_parameters(base.model, 32000, 32000, True)
    check_model_fits(base, 32000, 32000, cpu, training=False)  # 0.2 GiB of weights
    with pytest.raises(UserError) as refused:
        check_model_fits(base, 32000, 32000, cpu, training=True)
    needed = 16 * parameters + 4 * 4096 * (12 * (12 * 512 + 2 * 2048) + 3 * 32000)
    assert str(refused.value) == (
        f"model transformer-base (embed_dim 512, ffn_size 2048, 6+6 layers): {parameters:,} "
        f"parameters need at least {needed / GIB:,.1f} GiB to train on batches of "
        "train.max_tokens=4096, more than the 2.0 GiB of cpu; choose smaller model sizes or a "
        "smaller train.max_tokens"
    )

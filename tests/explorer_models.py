"""Models for the explorer's tests: the shipped Transformers, and a GRU + Bahdanau model with
random weights and the shipped en-de tokenizer, exported like a shipped model."""

import dataclasses
from pathlib import Path

import torch

from seq2seq.config import ModelConfig
from seq2seq.decoding.export import export_model
from seq2seq.decoding.model_result import SHIPPED_MODELS
from seq2seq.decoding.open_pytorch import Inference, load_model
from seq2seq.models import build_model

ROOT = Path(__file__).resolve().parents[1]
EN_DE = SHIPPED_MODELS / "transformer-tiny.multi30k.en-de"
DE_EN = SHIPPED_MODELS / "transformer-tiny.multi30k.de-en"
GRU_NAME = "gru-random.multi30k.en-de"


def export_random_gru(folder: Path) -> Path:
    """Export a small GRU (random weights, seed 0) with the en-de model's tokenizer and decoding
    settings to `folder / GRU_NAME`; returns that folder."""
    shipped = load_model(EN_DE)
    model_cfg = ModelConfig(name="gru", arch="gru", embed_dim=32, hidden_size=64)
    config = dataclasses.replace(shipped.config, model=model_cfg)
    torch.manual_seed(0)
    vocab = shipped.src_tokenizer.vocab_size
    model = build_model(model_cfg, vocab, vocab, config.data.joint_vocab, verbose=False)
    inference = Inference(model.eval(), config, shipped.src_tokenizer, shipped.tgt_tokenizer, 0)
    export_model(inference, folder / GRU_NAME, dtype=torch.float32)
    return folder / GRU_NAME

"""The engine a command decodes with (--engine): our PyTorch search or CTranslate2
(seq2seq.decoding.ct2_engine), for seq2seq translate, evaluate and serve.

A CTranslate2 folder, and a shipped or exported model that --engine puts on CTranslate2, open
without torch (seq2seq.decoding.open_ctranslate2; docs/translate.md says when): nothing here
imports torch, or tunes the process for it, until a PyTorch model is loaded."""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from seq2seq.commands.cli import apply_decode_options, load_model
from seq2seq.config import Config
from seq2seq.decoding.ct2_engine import use_ctranslate2
from seq2seq.decoding.line_translator import LineTranslator
from seq2seq.decoding.model_folder import find_model
from seq2seq.decoding.open_ctranslate2 import TorchFree, ctranslate2_folder, open_torch_free
from seq2seq.errors import UserError

if TYPE_CHECKING:
    import torch

    from seq2seq.decoding.open_pytorch import Inference


def open_without_torch(
    args: argparse.Namespace,
    model: str | None,
    threads: int | None = None,
    need_pytorch: bool = False,
) -> TorchFree | None:
    """The model `model` (a --model) opened on CTranslate2 without torch
    (seq2seq.decoding.open_ctranslate2), on --device and `threads` CPU threads (None: every core),
    with the decoding options applied: a CTranslate2 folder (--engine must not be pytorch), or
    a shipped or exported model when --engine picks CTranslate2 for it and the caller does not
    `need_pytorch`; else None."""
    folder = ctranslate2_folder(model)
    if folder is not None and args.engine == "pytorch":
        raise UserError(f"--model {folder}: a CTranslate2 folder; use --engine ctranslate2")
    return open_torch_free(
        model,
        args.engine,
        args.device,
        threads,
        set_options=partial(apply_decode_options, args),
        need_pytorch=need_pytorch,
    )


def pytorch_device(args: argparse.Namespace) -> torch.device:
    """The device of --device for a PyTorch model, the process tuned for torch first."""
    from seq2seq.device import pick_device
    from seq2seq.fast.process import tune_process

    tune_process()
    return pick_device(args.device)


def model_folder(model: str) -> Path:
    """The folder of --model: a CTranslate2 folder or an exported (or shipped) model."""
    return ctranslate2_folder(model) or find_model(model)


def load_translator(
    args: argparse.Namespace, need_attention: bool = False, need_pytorch: bool = False
) -> tuple[LineTranslator, Config, Inference | None]:
    """The translator of --checkpoint or --model with the decoding options applied, on the
    engine --engine picks (seq2seq.decoding.ct2_engine.use_ctranslate2); its configuration;
    and the PyTorch model, None for a model opened without torch (`open_without_torch`,
    unless the caller needs the PyTorch model: `need_attention` maps, or `need_pytorch`)."""
    opened = open_without_torch(args, args.model, need_pytorch=need_attention or need_pytorch)
    if opened is not None:
        return opened.translator, opened.config, None
    from seq2seq.decoding.ct2_convert import translator_from_inference
    from seq2seq.decoding.torch_translator import Translator

    device = pytorch_device(args)
    inference = load_model(args, device)
    apply_decode_options(args, inference.config.decode)
    if use_ctranslate2(args.engine, inference.config, need_attention):
        return translator_from_inference(inference, device.type), inference.config, inference
    return Translator.from_inference(inference, device), inference.config, inference

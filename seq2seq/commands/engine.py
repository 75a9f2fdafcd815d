"""The engine a command decodes with (--engine): our PyTorch search or CTranslate2
(seq2seq.decoding.ctranslate2), for seq2seq translate, evaluate and serve.

A CTranslate2 folder (seq2seq export --format ctranslate2) translates without torch: nothing
here imports it until a PyTorch model is loaded, and only then is the process tuned for torch
(seq2seq.fast.process), so such a command starts in a fraction of the time."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from seq2seq.commands.cli import apply_decode_options, load_model
from seq2seq.config import Config
from seq2seq.decoding.ctranslate2 import (
    CTranslate2Translator,
    check_folder,
    engine_device,
    is_ctranslate2_folder,
)
from seq2seq.decoding.model_result import SHIPPED_MODELS
from seq2seq.decoding.translation import LineTranslator
from seq2seq.errors import UserError

if TYPE_CHECKING:
    import torch

    from seq2seq.decoding.loading import Inference


def ctranslate2_folder(model: str | None) -> Path | None:
    """The CTranslate2 folder that --model names, if it names one."""
    if model is None:
        return None
    for folder in (Path(model), SHIPPED_MODELS / model):
        if is_ctranslate2_folder(folder):
            return folder
    return None


def open_ctranslate2_folder(
    args: argparse.Namespace, folder: Path, threads: int | None = None
) -> tuple[CTranslate2Translator, Config]:
    """The translator of the CTranslate2 folder that --model names (--engine must not be
    pytorch), on --device and `threads` CPU threads (None: every core), with the decoding
    options applied; and its configuration."""
    if args.engine == "pytorch":
        raise UserError(f"--model {folder}: a CTranslate2 folder; use --engine ctranslate2")
    config, src_tokenizer, tgt_tokenizer = check_folder(folder)
    apply_decode_options(args, config.decode)
    device = engine_device(args.device)
    translator = CTranslate2Translator.open(
        folder, src_tokenizer, tgt_tokenizer, config.decode, device, threads
    )
    return translator, config


def pytorch_device(args: argparse.Namespace) -> torch.device:
    """The device of --device for a PyTorch model, the process tuned for torch first."""
    from seq2seq.device import pick_device
    from seq2seq.fast.process import tune_process

    tune_process()
    return pick_device(args.device)


def load_translator(
    args: argparse.Namespace, need_attention: bool = False
) -> tuple[LineTranslator, Config, Inference | None]:
    """The translator of --checkpoint or --model with the decoding options applied, on the
    engine --engine picks (seq2seq.decoding.ctranslate2.use_ctranslate2); its configuration;
    and the PyTorch model, None for a CTranslate2 folder (which has none, and translates
    without importing torch)."""
    folder = ctranslate2_folder(args.model)
    if folder is not None:
        translator, config = open_ctranslate2_folder(args, folder)
        return translator, config, None
    from seq2seq.decoding.ctranslate2 import translator_from_inference, use_ctranslate2
    from seq2seq.decoding.translator import Translator

    device = pytorch_device(args)
    inference = load_model(args, device)
    apply_decode_options(args, inference.config.decode)
    if use_ctranslate2(args.engine, inference.config, need_attention):
        return translator_from_inference(inference, device.type), inference.config, inference
    return Translator.from_inference(inference, device), inference.config, inference

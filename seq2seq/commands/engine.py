"""The engine a command decodes with (--engine): our PyTorch search or CTranslate2
(seq2seq.decoding.ctranslate2), for seq2seq translate, evaluate and serve."""

import argparse
from pathlib import Path

import torch

from seq2seq.commands.cli import apply_decode_options, load_model
from seq2seq.config import Config
from seq2seq.decoding.ctranslate2 import (
    CTranslate2Translator,
    check_folder,
    is_ctranslate2_folder,
    translator_from_inference,
    use_ctranslate2,
)
from seq2seq.decoding.loading import SHIPPED_MODELS, Inference
from seq2seq.decoding.translator import Translator
from seq2seq.errors import UserError


def ctranslate2_folder(model: str | None) -> Path | None:
    """The CTranslate2 folder that --model names, if it names one."""
    if model is None:
        return None
    for folder in (Path(model), SHIPPED_MODELS / model):
        if is_ctranslate2_folder(folder):
            return folder
    return None


def load_translator(
    args: argparse.Namespace, device: torch.device, need_attention: bool = False
) -> tuple[Translator, Config, Inference | None]:
    """The translator of --checkpoint or --model with the decoding options applied, on the
    engine --engine picks (seq2seq.decoding.ctranslate2.use_ctranslate2); its configuration;
    and the PyTorch model, None for a CTranslate2 folder (which has none)."""
    folder = ctranslate2_folder(args.model)
    if folder is not None:
        if args.engine == "pytorch":
            raise UserError(f"--model {args.model}: a CTranslate2 folder; use --engine ctranslate2")
        config, src_tokenizer, tgt_tokenizer = check_folder(folder)
        apply_decode_options(args, config.decode)
        translator = CTranslate2Translator.open(
            folder, src_tokenizer, tgt_tokenizer, config.decode, device.type
        )
        return translator, config, None
    inference = load_model(args, device)
    apply_decode_options(args, inference.config.decode)
    if use_ctranslate2(args.engine, inference.config, need_attention):
        return translator_from_inference(inference, device.type), inference.config, inference
    return Translator.from_inference(inference, device), inference.config, inference

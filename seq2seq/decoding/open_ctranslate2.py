"""Opening a model on CTranslate2 without importing torch, for the command line
(seq2seq.commands.engine) and the Python API (seq2seq.api) alike.

Two kinds of model translate with CTranslate2 without torch: a CTranslate2 folder (`seq2seq
export --format ctranslate2`), and a shipped or exported model (model.safetensors) when the
engine is CTranslate2, converted from its weights read with numpy
(seq2seq.decoding.model_folder) at each start. Nothing here imports torch, so a program that opens
one starts in a fraction of the time and memory (docs/benchmarks.md measures it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from seq2seq.config import Config, DecodeConfig
from seq2seq.decoding.ct2_convert import translator_from_weights
from seq2seq.decoding.ct2_engine import engine_device, use_ctranslate2
from seq2seq.decoding.ct2_folder import check_folder, folder_parameters, is_ctranslate2_folder
from seq2seq.decoding.ct2_translator import CTranslate2Translator
from seq2seq.decoding.model_folder import WEIGHTS, find_model, read_description, read_weights
from seq2seq.decoding.model_result import SHIPPED_MODELS


@dataclass
class TorchFree:
    """A model opened on CTranslate2 without torch."""

    translator: CTranslate2Translator
    config: Config
    folder: Path  # the folder it came from, where its card.json is
    parameters: int | None  # None: a CTranslate2 folder that does not record it


def ctranslate2_folder(model: str | Path | None) -> Path | None:
    """The CTranslate2 folder that `model` (a path or a shipped name) names, if it names one."""
    if model is None:
        return None
    for folder in (Path(model), SHIPPED_MODELS / model):
        if is_ctranslate2_folder(folder):
            return folder
    return None


def open_torch_free(
    model: str | Path | None,
    engine: str,
    device: str = "auto",
    threads: int | None = None,
    set_options: Callable[[DecodeConfig], None] | None = None,
    need_pytorch: bool = False,
    device_option: str = "--device",
) -> TorchFree | None:
    """The model `model` opened on CTranslate2 without torch, on `device` ("auto", "cpu" or
    "cuda", given by `device_option`) and `threads` CPU threads (None: every core): a
    CTranslate2 folder, whatever `engine`; or a shipped or exported model when `engine`
    ("pytorch", "ctranslate2" or "auto") picks CTranslate2 for it and the caller does not
    `need_pytorch`; else None. `set_options` changes the model's decoding settings (in place)
    before the engine is picked and opened."""
    folder = ctranslate2_folder(model)
    if folder is not None:
        config, src_tokenizer, tgt_tokenizer = check_folder(folder)
        if set_options is not None:
            set_options(config.decode)
        on = engine_device(device, device_option)
        languages = (config.data.src, config.data.tgt)
        translator = CTranslate2Translator.open(
            folder, src_tokenizer, tgt_tokenizer, config.decode, on, threads, languages
        )
        return TorchFree(translator, config, folder, folder_parameters(folder))
    if model is None or engine == "pytorch" or need_pytorch:
        return None
    folder = find_model(str(model))
    description = read_description(folder)
    config = description.config
    if set_options is not None:
        set_options(config.decode)
    if not use_ctranslate2(engine, config):
        return None
    weights = read_weights(folder / WEIGHTS)
    # a tied weight is one array under several names: each array counted once
    parameters = sum({id(array): array.size for array in weights.values()}.values())
    translator = translator_from_weights(
        weights,
        config,
        description.src_tokenizer,
        description.tgt_tokenizer,
        engine_device(device, device_option),
        threads,
    )
    return TorchFree(translator, config, folder, parameters)

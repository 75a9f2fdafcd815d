"""The engine a model decodes with: our PyTorch search, or CTranslate2, a C++ inference engine
that runs our Transformer's weights with the same search, much faster one sentence at a time
(seq2seq.decoding.ct2_translator).

    seq2seq export --model transformer-tiny.multi30k.en-de --format ctranslate2 --out ct2/en-de
    seq2seq translate --model ct2/en-de --engine ctranslate2

`use_ctranslate2` picks the engine, `engine_device` the device CTranslate2 runs on, and
PYTORCH_ONLY_OPTIONS are the decoding options CTranslate2 has no counterpart of. Nothing here
imports torch, and ctranslate2 only when it is used (`import_ctranslate2`).
"""

from __future__ import annotations

from types import ModuleType

from seq2seq.config import Config, DecodeConfig
from seq2seq.errors import UserError

# the decoding options CTranslate2 has no counterpart of, with the command-line flags that turn
# each on and off
PYTORCH_ONLY_OPTIONS = {
    "max_piece_repeat": ("--max-piece-repeat", "--max-piece-repeat 0"),
    "keep_numbers": ("--keep-numbers", "--no-keep-numbers"),
}


def import_ctranslate2() -> ModuleType:
    """The ctranslate2 module, or a `UserError` saying why it cannot be used."""
    try:
        import ctranslate2
    except ImportError as err:
        raise UserError(
            f"ctranslate2 cannot be imported ({err}); install it with "
            "`.venv/bin/python -m pip install ctranslate2`, or use --engine pytorch"
        ) from None
    return ctranslate2


def engine_device(name: str, option: str = "--device") -> str:
    """The device CTranslate2 runs on for the device `name` given by `option`: "cpu", or
    "cuda" ("auto": when CTranslate2 sees a GPU), without importing torch."""
    if name not in ("auto", "cpu", "cuda"):
        raise UserError(f"{option} {name}: CTranslate2 runs on cpu or cuda (or auto)")
    gpus = import_ctranslate2().get_cuda_device_count() if name != "cpu" else 0
    if name == "cuda" and gpus == 0:
        raise UserError(f"{option} cuda: CTranslate2 sees no CUDA device on this machine")
    return "cuda" if name != "cpu" and gpus > 0 else "cpu"


def use_ctranslate2(engine: str, config: Config, need_attention: bool = False) -> bool:
    """Whether `engine` ("pytorch", "ctranslate2" or "auto") decodes a model of `config`
    with CTranslate2.

    "auto" picks CTranslate2 only where it gives what PyTorch would: a Transformer, no
    attention maps asked for, options it has (none of PYTORCH_ONLY_OPTIONS), and ctranslate2
    installed; else PyTorch."""
    if engine != "auto":
        return engine == "ctranslate2"
    pytorch_only = pytorch_only_option(config.decode) is not None
    if config.model.arch != "transformer" or need_attention or pytorch_only:
        return False
    try:
        import_ctranslate2()
    except UserError:
        return False
    return True


def pytorch_only_option(decode_cfg: DecodeConfig) -> str | None:
    """The first option set in `decode_cfg` that CTranslate2 has no counterpart of, or None."""
    return next((name for name in PYTORCH_ONLY_OPTIONS if getattr(decode_cfg, name)), None)

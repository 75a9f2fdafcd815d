"""Reading an exported model folder without torch: its description (model.json), its
tokenizers and its weights as numpy float32 arrays by name. seq2seq.decoding.open_pytorch builds the
PyTorch model from the same folder; the CTranslate2 converter (seq2seq.decoding.ct2_convert)
takes the arrays, so a shipped Transformer translates with CTranslate2 without importing torch.

model.safetensors is plain data: an 8-byte little-endian header length, a JSON header giving
each tensor's dtype, shape and byte range, then the raw bytes. The safetensors library checks
the header (every byte range inside the file, in order, of the size its dtype and shape make)
and loads F32 and F16 tensors into numpy. numpy has no bfloat16, the dtype weights are shipped
in, so a BF16 tensor is read here from the byte range the header gives: each 16-bit word is the
high half of a float32, which widening it by 16 zero bits gives exactly (as torch's
bf16 -> fp32 conversion does).
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import safetensors
from safetensors import safe_open

from seq2seq.config import Config
from seq2seq.config_file import config_from_dict
from seq2seq.data.tokenizer import Tokenizer
from seq2seq.decoding.model_result import SHIPPED_MODELS
from seq2seq.errors import UserError
from seq2seq.files import check_regular_file, parse_json, read_small_file

# The files of a model folder (seq2seq.decoding.export writes them)
DESCRIPTION = "model.json"
CARD = "card.json"
JOINT_TOKENIZER = "sentencepiece.model"
SEPARATE_TOKENIZERS = ("src.model", "tgt.model")
WEIGHTS = "model.safetensors"
# The largest file of each kind read from a model folder: anything larger, or not a regular file
# (a FIFO, a link to /dev/zero), is refused before it is read.
MAX_DESCRIPTION_BYTES = 1 << 20  # model.json or card.json
MAX_TOKENIZER_BYTES = 64 << 20
MAX_WEIGHTS_BYTES = 16 << 30
MAX_HEADER_BYTES = 100 << 20  # the safetensors library's own limit on the JSON header
FLOAT_DTYPES = ("F32", "F16", "BF16")  # the safetensors dtypes that weights may be stored in


@dataclass
class Description:
    """What model.json and the tokenizers of an exported folder say of its model."""

    config: Config
    src_tokenizer: Tokenizer
    tgt_tokenizer: Tokenizer
    step: int
    averaged_checkpoints: int  # how many checkpoints were averaged into the weights


def is_exported_model(path: str | Path) -> bool:
    """Whether `path` holds a weights file (a special file there is refused when read)."""
    return (Path(path) / WEIGHTS).exists()


def find_model(name: str, models_dir: Path = SHIPPED_MODELS) -> Path:
    """The folder of an exported model given by path, or by name under `models_dir` (by
    default the shipped models)."""
    for folder in (Path(name), models_dir / name):
        if is_exported_model(folder):
            return folder
    left = Path(name).with_name(f".{Path(name).name}.old")
    if (left / WEIGHTS).is_file():  # a kill between the two renames of `seq2seq export --force`
        raise UserError(
            f"--model {name}: missing; an interrupted export left the model in {left} "
            f"(the next seq2seq export --out {name} puts it back, or rename it)"
        )
    shipped = sorted(p.parent.name for p in models_dir.glob(f"*/{WEIGHTS}"))
    known = f"; shipped models: {', '.join(shipped)}" if shipped else ""
    raise UserError(f"--model {name}: not an exported model folder{known}")


def read_description(folder: Path) -> Description:
    """The configuration, tokenizers, step and averaged checkpoints of an exported folder. Its
    configuration's values are checked as a configuration file's are (`config_from_dict`): one
    that breaks a rule is a one-line `UserError` naming model.json and the key."""
    path = folder / DESCRIPTION
    text = read_small_file(path, MAX_DESCRIPTION_BYTES)  # its own one line
    try:
        description = parse_json(text)
        config = config_from_dict(description["config"], str(path))
        step = int(description.get("step", 0))
        averaged = int(description.get("averaged_checkpoints", 1))
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise UserError(f"{path}: unreadable model description ({err})") from None
    if config.data.joint_vocab:
        src_tokenizer = tgt_tokenizer = read_tokenizer(folder / JOINT_TOKENIZER)
    else:
        src_tokenizer, tgt_tokenizer = (read_tokenizer(folder / n) for n in SEPARATE_TOKENIZERS)
    return Description(config, src_tokenizer, tgt_tokenizer, step, averaged)


def read_tokenizer(path: Path) -> Tokenizer:
    """The sentencepiece model at `path`; anything wrong is a one-line `UserError` naming it."""
    model_bytes = read_small_file(path, MAX_TOKENIZER_BYTES)
    try:
        return Tokenizer(model_bytes)
    except OSError as err:
        raise UserError(f"{path}: cannot read the tokenizer ({err.strerror})") from None
    except UserError as err:
        raise UserError(f"{path}: {err}") from None


def read_weights(path: Path) -> dict[str, np.ndarray]:
    """The float32 arrays by name of a safetensors file, with the names that
    `safetensors.torch.save_model` left out of a tied weight (its metadata maps each to the
    name stored) pointing at the stored array. A damaged file, or a tensor that is not F32,
    F16 or BF16, is a one-line `UserError` naming the file."""
    check_regular_file(path, MAX_WEIGHTS_BYTES)
    try:
        with safe_open(str(path), framework="numpy") as file:  # checks the header
            names, metadata = list(file.keys()), file.metadata() or {}
            dtypes = {name: file.get_slice(name).get_dtype() for name in names}
            for name, dtype in dtypes.items():
                if dtype not in FLOAT_DTYPES:
                    raise UserError(f"{path}: {name} is {dtype}, not a float weight")
            weights = {
                name: file.get_tensor(name).astype(np.float32)
                for name, dtype in dtypes.items()
                if dtype != "BF16"
            }
    except (OSError, safetensors.SafetensorError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UserError(f"{path}: not a readable safetensors file ({first})") from None
    bf16 = [name for name, dtype in dtypes.items() if dtype == "BF16"]
    if bf16:
        weights.update(_read_bf16(path, bf16))
    for name, stored in metadata.items():
        if name not in weights and stored in weights:
            weights[name] = weights[stored]
    return weights


def _read_bf16(path: Path, names: list[str]) -> dict[str, np.ndarray]:
    """The BF16 tensors `names` of a safetensors file whose header the safetensors library has
    checked, widened to float32: bfloat16 is the high 16 bits of a float32."""
    weights = {}
    try:
        with open(path, "rb") as file:
            (header_size,) = struct.unpack("<Q", file.read(8))
            if header_size > MAX_HEADER_BYTES:
                raise ValueError("header too large")
            header: dict[str, Any] = json.loads(file.read(header_size))
            for name in names:
                start, end = header[name]["data_offsets"]
                file.seek(8 + header_size + start)
                words = np.frombuffer(file.read(end - start), dtype="<u2")
                widened = (words.astype(np.uint32) << 16).view(np.float32)
                weights[name] = widened.reshape(header[name]["shape"])
    except (OSError, ValueError, KeyError, TypeError, struct.error) as err:  # changed since checked
        raise UserError(f"{path}: not a readable safetensors file ({err})") from None
    return weights

"""A checkpoint file: what it holds, and reading one without ever running code from the file.

A checkpoint is a plain dictionary saved with `torch.save`:

    format       CHECKPOINT_FORMAT
    config       Config.to_dict(): everything needed to rebuild the model
    model        the model's state_dict
    tokenizers   {"joint": bool, "src": uint8 tensor, "tgt": uint8 tensor}: the sentencepiece
                 model files themselves, so a checkpoint translates on its own
    training     (training checkpoints only) optimizer, scheduler, scaler, step, epoch, sampler
                 position, RNG states and validation history; see seq2seq.training.saving

Training writes them (seq2seq/training/checkpoint.py); decoding reads their model
(seq2seq/decoding/open_pytorch.py). Loading uses `torch.load(weights_only=True)`, whose unpickler
accepts only tensors and plain containers: a file carrying a pickled code payload is refused
before anything in it runs. It maps the file (`mmap=True`, private: nothing is ever written
back) instead of reading it, so only the tensors used are read: decoding reads the model weights
of a training checkpoint, not its optimizer state (docs/benchmarks.md).
"""

import pickle
import re
import zipfile
from pathlib import Path
from typing import Any

import torch

from seq2seq.data.tokenizer import Tokenizer
from seq2seq.errors import UserError

CHECKPOINT_FORMAT = 1


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Read a checkpoint safely; any problem is a one-line `UserError` naming the file."""
    path = Path(path)
    if path.is_dir():
        raise UserError(f"{path}: a folder, not a checkpoint file")
    if not path.is_file():
        raise UserError(f"{path}: checkpoint not found")
    _check_container(path)
    try:
        checkpoint = torch.load(path, map_location=map_location, weights_only=True, mmap=True)
    except pickle.UnpicklingError as err:
        found = re.search(r"GLOBAL ([\w.]+)", str(err))
        what = f" ({found[1]})" if found else ""
        raise UserError(
            f"{path}: refused to load: it holds objects other than tensors{what}, "
            "and loading them could run code"
        ) from None
    except (RuntimeError, EOFError, OSError, zipfile.BadZipFile, ValueError) as err:
        reason = str(err).strip().splitlines()[0][:120] if str(err).strip() else type(err).__name__
        raise UserError(f"{path}: unreadable checkpoint, truncated or corrupt ({reason})") from None
    if not isinstance(checkpoint, dict) or checkpoint.get("format") != CHECKPOINT_FORMAT:
        raise UserError(f"{path}: not a seq2seq checkpoint (format {CHECKPOINT_FORMAT})")
    for key in ("config", "model", "tokenizers"):
        if key not in checkpoint:
            raise UserError(f"{path}: checkpoint has no {key!r} entry")
    return checkpoint


def _check_container(path: Path) -> None:
    """Refuse a file that is not the zip archive `torch.save` writes, saying what it is."""
    if zipfile.is_zipfile(path):
        return
    with open(path, "rb") as file:
        start = file.read(2)
    if not start:
        raise UserError(f"{path}: empty file, not a checkpoint")
    if start == b"PK":
        raise UserError(f"{path}: unreadable checkpoint, truncated or corrupt (incomplete zip)")
    if start[0] == pickle.PROTO[0]:
        raise UserError(
            f"{path}: not a seq2seq checkpoint (saved with pickle or PyTorch's legacy format); "
            "refused because loading it could run code"
        )
    raise UserError(f"{path}: not a seq2seq checkpoint (not a file written by torch.save)")


def tokenizer_entry(src_tokenizer: Tokenizer, tgt_tokenizer: Tokenizer) -> dict[str, Any]:
    """The tokenizers as stored in a checkpoint: the sentencepiece model files as bytes."""

    def as_tensor(tokenizer: Tokenizer) -> torch.Tensor:
        return torch.frombuffer(bytearray(tokenizer.model_bytes), dtype=torch.uint8)

    joint = src_tokenizer is tgt_tokenizer
    return {
        "joint": joint,
        "src": as_tensor(src_tokenizer),
        "tgt": as_tensor(tgt_tokenizer),
    }


def checkpoint_tokenizers(checkpoint: dict[str, Any]) -> tuple[Tokenizer, Tokenizer]:
    """The (source, target) tokenizers stored in a checkpoint; one object when joint."""
    entry = checkpoint["tokenizers"]
    src = Tokenizer.from_bytes(entry["src"].numpy().tobytes())
    tgt = src if entry["joint"] else Tokenizer.from_bytes(entry["tgt"].numpy().tobytes())
    return src, tgt

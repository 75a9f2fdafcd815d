"""Exporting a trained model: a small folder that translates on its own, with no pickle
anywhere (its files: `seq2seq.decoding.model_folder`; `seq2seq.decoding.open_pytorch` loads it).
Tied weights (shared embeddings, tied output layer) are stored once
(`safetensors.torch.save_model`). `export_ctranslate2` writes a Transformer for CTranslate2
instead (seq2seq.decoding.ct2_convert)."""

import copy
import shutil
from collections.abc import Callable
from pathlib import Path

import safetensors.torch
import torch

from seq2seq.decoding.ct2_convert import check_number_guard, write_ctranslate2
from seq2seq.decoding.ct2_folder import is_ctranslate2_folder
from seq2seq.decoding.model_folder import CARD, WEIGHTS, is_exported_model
from seq2seq.decoding.model_result import SHIPPED_MODELS
from seq2seq.decoding.open_pytorch import Inference, write_description
from seq2seq.errors import UserError
from seq2seq.files import check_output_location, recover_folder, replace_folder, staging_folder

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
EXPORTED = Path("exported")  # where exports go by default, ignored by git


def default_export_folder(checkpoint: str | Path, suffix: str = "") -> Path:
    """exported/<run><suffix>: the folder of a checkpoint of checkpoints/<run>/ exported by
    default."""
    return EXPORTED / (Path(checkpoint).resolve().parent.name + suffix)


def check_export_target(out: Path, force: bool, option: str = "--out") -> None:
    """Refuse, before any work, to write the folder `out` (given by `option`) where the user did
    not ask to replace anything: a folder that is there already (an exported model is replaced
    only when `force`; anything else never), or any folder inside the shipped models' folder
    (only when `force`). Also `check_output_location`. What a killed export left beside `out`
    is recovered first (`recover_folder`), so `out` is checked as it was before that export."""
    resolved = check_output_location(option, out)
    if out.parent.is_dir():
        for line in recover_folder(out, "export"):
            print(line)
    if out.exists() and not (is_exported_model(out) or is_ctranslate2_folder(out)):
        raise UserError(
            f"{option} {out}: exists and is not an exported model folder; not replacing it"
        )
    if force:
        return
    if out.exists():
        raise UserError(
            f"{option} {out}: holds an exported model already; pass --force to replace it"
        )
    if resolved.is_relative_to(SHIPPED_MODELS):
        raise UserError(
            f"{option} {out}: inside {SHIPPED_MODELS}, the shipped models' folder; "
            "export elsewhere, or pass --force to write there"
        )


def export_model(inference: Inference, out: Path, dtype: torch.dtype = torch.bfloat16) -> None:
    """Write `inference`'s model to the folder `out`, replacing it if it exists
    (`write_folder`). A card.json already in `out` is kept."""

    def fill(tmp: Path) -> None:
        weights = copy.deepcopy(inference.model).to(dtype)
        safetensors.torch.save_model(weights, str(tmp / WEIGHTS))
        write_description(inference, tmp)
        if (out / CARD).is_file():
            shutil.copyfile(out / CARD, tmp / CARD)

    write_folder(Path(out), fill)


def export_ctranslate2(
    inference: Inference, out: Path, card: Path | None = None, keep_numbers: bool | None = None
) -> None:
    """Write `inference`'s Transformer as a CTranslate2 folder `out` (seq2seq.decoding.ct2_convert)
    with `card` as its card.json, replacing `out` if it exists (`write_folder`). A model that
    decodes with the number guard, which CTranslate2 lacks, is refused before anything is
    written, unless `keep_numbers` is False: then it is exported without the guard, and its
    card says so (`write_card`)."""
    check_number_guard(inference.config.decode, keep_numbers)
    write_folder(Path(out), lambda tmp: write_ctranslate2(inference, tmp, card))


def write_folder(out: Path, fill: Callable[[Path], None]) -> None:
    """Make the folder `out` with `fill(folder)`, replacing `out` if it exists.

    The folder is built beside `out` and put in place by `seq2seq.files.replace_folder`, so an
    interrupted export leaves the previous folder (or none) as it was, and what a killed one
    left is recovered first (`recover_folder`). A write that fails (e.g. a full disk, which
    the safetensors library reports as a SafetensorError) is a one-line `UserError`, and
    nothing is replaced.
    """
    out.parent.mkdir(parents=True, exist_ok=True)
    for line in recover_folder(out, "export"):
        print(line)
    tmp = staging_folder(out, "export")
    try:
        fill(tmp)
        for path in (tmp, *tmp.iterdir()):  # readable by all, like a folder made by hand
            path.chmod(0o755 if path.is_dir() else 0o644)
        replace_folder(tmp, out)
    except (OSError, safetensors.SafetensorError) as err:
        io_error = str(err).rpartition("I/O error: ")[2]  # safetensors: "... (os error 28)"
        reason = getattr(err, "strerror", None) or io_error.split(" (os error")[0]
        message = f"{out}: cannot write the exported model ({reason}); nothing replaced"
        raise UserError(message) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

"""Exported models: a small folder that translates on its own, with no pickle anywhere.

    <folder>/model.safetensors    the weights, in bf16 by default (half the size of fp32)
    <folder>/model.json           {"config": Config.to_dict(), "step": N, "averaged_checkpoints": K}
    <folder>/sentencepiece.model  the joint tokenizer; or src.model and tgt.model when separate
    <folder>/card.json            (optional) test scores with sacreBLEU signatures and how the
                                  model was made, written by `scripts/evaluate.py --record`

A training checkpoint carries the optimizer state and is read with PyTorch's restricted
unpickler; an exported model is plain data: safetensors files hold a JSON header and raw tensor
bytes, so loading one cannot run code. Tied weights (shared embeddings, tied output layer) are
stored once (`safetensors.torch.save_model`).
"""

import copy
import json
import shutil
import tempfile
from pathlib import Path

import safetensors.torch
import torch

from seq2seq.checkpoint import Inference
from seq2seq.config import config_from_dict
from seq2seq.errors import UserError
from seq2seq.files import check_output_location
from seq2seq.model_size import check_model_fits
from seq2seq.models import build_model
from seq2seq.tokenizer import Tokenizer

WEIGHTS = "model.safetensors"
DESCRIPTION = "model.json"
CARD = "card.json"
JOINT_TOKENIZER = "sentencepiece.model"
SEPARATE_TOKENIZERS = ("src.model", "tgt.model")
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
SHIPPED_MODELS = Path(__file__).resolve().parent.parent / "models"  # the repository's models/
EXPORTED = Path("exported")  # where exports go by default, ignored by git (models/ is shipped)


def default_export_folder(checkpoint: str | Path) -> Path:
    """exported/<run>: the folder of a checkpoint of checkpoints/<run>/ exported by default."""
    return EXPORTED / Path(checkpoint).resolve().parent.name


def check_export_target(out: Path, force: bool, option: str = "--out") -> None:
    """Refuse, before any work, to write the folder `out` (given by `option`) where the user did
    not ask to replace anything: a folder that is there already (an exported model is replaced
    only when `force`; anything else never), or any folder inside the repository's models/,
    which holds the shipped models (only when `force`). Also `check_output_location`."""
    resolved = check_output_location(option, out)
    if out.exists() and not (out / WEIGHTS).is_file():
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
            f"{option} {out}: inside the repository's models/ folder, which holds the shipped "
            "models; export elsewhere, or pass --force to write there"
        )


def export_model(inference: Inference, out: Path, dtype: torch.dtype = torch.bfloat16) -> None:
    """Write `inference`'s model to the folder `out`, replacing it atomically if it exists.

    The folder is built beside `out` and renamed into place, so an interrupted export leaves
    the previous folder (or none) as it was. A card.json already in `out` is kept.
    """
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        weights = copy.deepcopy(inference.model).to(dtype)
        safetensors.torch.save_model(weights, str(tmp / WEIGHTS))
        config = inference.config.to_dict()
        config["train"]["run_dir"] = ""  # a path of the machine that trained it: not needed here
        description = {
            "config": config,
            "step": inference.step,
            "averaged_checkpoints": inference.averaged_checkpoints,
        }
        (tmp / DESCRIPTION).write_text(json.dumps(description, indent=2) + "\n", encoding="utf-8")
        if inference.src_tokenizer is inference.tgt_tokenizer:
            (tmp / JOINT_TOKENIZER).write_bytes(inference.src_tokenizer.model_bytes)
        else:
            for name, tokenizer in zip(
                SEPARATE_TOKENIZERS, (inference.src_tokenizer, inference.tgt_tokenizer), strict=True
            ):
                (tmp / name).write_bytes(tokenizer.model_bytes)
        if (out / CARD).is_file():
            shutil.copyfile(out / CARD, tmp / CARD)
        for path in (tmp, *tmp.iterdir()):  # readable by all, like a folder made by hand
            path.chmod(0o755 if path.is_dir() else 0o644)
        old = out.with_name(f".{out.name}.old")
        if out.exists():
            out.rename(old)
        tmp.rename(out)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def is_exported_model(path: str | Path) -> bool:
    return (Path(path) / WEIGHTS).is_file()


def find_model(name: str, models_dir: Path) -> Path:
    """The folder of an exported model given by path, or by name under `models_dir`."""
    for folder in (Path(name), models_dir / name):
        if is_exported_model(folder):
            return folder
    shipped = sorted(p.parent.name for p in models_dir.glob(f"*/{WEIGHTS}"))
    known = f"; shipped models: {', '.join(shipped)}" if shipped else ""
    raise UserError(f"--model {name}: not an exported model folder{known}")


def load_exported(folder: str | Path, device: str | torch.device = "cpu") -> Inference:
    """Load an exported model (weights cast to fp32, eval mode, on `device`) and its tokenizers."""
    folder = Path(folder)
    try:
        description = json.loads((folder / DESCRIPTION).read_text(encoding="utf-8"))
        config = config_from_dict(description["config"])
    except (OSError, ValueError, KeyError, TypeError, UserError) as err:
        raise UserError(f"{folder / DESCRIPTION}: unreadable model description ({err})") from None
    if config.data.joint_vocab:
        src_tokenizer = tgt_tokenizer = _tokenizer(folder / JOINT_TOKENIZER)
    else:
        src_tokenizer, tgt_tokenizer = (_tokenizer(folder / n) for n in SEPARATE_TOKENIZERS)
    vocab_sizes = (src_tokenizer.vocab_size, tgt_tokenizer.vocab_size)
    try:
        check_model_fits(config, *vocab_sizes, torch.device("cpu"), training=False)
    except UserError as err:
        raise UserError(f"{folder / DESCRIPTION}: {err}") from None
    model = build_model(config.model, *vocab_sizes, config.data.joint_vocab, verbose=False)
    try:
        safetensors.torch.load_model(model, str(folder / WEIGHTS), strict=True)
    except (OSError, RuntimeError, safetensors.SafetensorError) as err:
        first = str(err).strip().splitlines()[0]
        raise UserError(
            f"{folder / WEIGHTS}: weights do not load into the model ({first})"
        ) from None
    return Inference(
        model.to(device).eval(),
        config,
        src_tokenizer,
        tgt_tokenizer,
        step=int(description.get("step", 0)),
        averaged_checkpoints=int(description.get("averaged_checkpoints", 1)),
    )


def _tokenizer(path: Path) -> Tokenizer:
    try:
        return Tokenizer(path.read_bytes())
    except OSError as err:
        raise UserError(f"{path}: cannot read the tokenizer ({err.strerror})") from None
    except UserError as err:
        raise UserError(f"{path}: {err}") from None

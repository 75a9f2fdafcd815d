"""Loading a trained model to translate with: `load_model`, the one loader of the command line,
the API, the server, the explorer and the benchmarks. It takes a training checkpoint, an exported
model folder, or a shipped model by name.

    load_model("transformer-tiny.multi30k.en-de")  # shipped in seq2seq/shipped_models
    load_model("exported/my-run")                   # a folder written by seq2seq.decoding.export
    load_model("checkpoints/run/best.pt")           # a training checkpoint
                                                    # (seq2seq/checkpoints.py)

An exported model folder holds

    model.safetensors    the weights, in bf16 by default (half the size of fp32)
    model.json           {"config": Config.to_dict(), "step": N, "averaged_checkpoints": K}
    sentencepiece.model  the joint tokenizer; or src.model and tgt.model when separate
    card.json            (optional) test scores with sacreBLEU signatures and how the model was
                         made, written by `seq2seq evaluate --record`

Neither kind of file can run code when loaded: a checkpoint is read with PyTorch's restricted
unpickler, an exported model is plain data (safetensors: a JSON header and raw tensor bytes).
"""

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import safetensors.torch
import torch

from seq2seq.checkpoints import checkpoint_tokenizers, load_checkpoint
from seq2seq.config import Config
from seq2seq.config_file import config_from_dict
from seq2seq.data.tokenizer import Tokenizer
from seq2seq.decoding.model_folder import (
    CARD,
    DESCRIPTION,
    JOINT_TOKENIZER,
    MAX_WEIGHTS_BYTES,
    SEPARATE_TOKENIZERS,
    WEIGHTS,
    find_model,
    read_description,
)
from seq2seq.errors import UserError
from seq2seq.fast import speed_up
from seq2seq.files import check_regular_file
from seq2seq.models import build_model
from seq2seq.models.base import Seq2SeqModel
from seq2seq.models.size import check_model_fits

ModelKind = Literal["checkpoint", "exported"]


@dataclass
class Inference:
    """Everything needed to translate with a trained model."""

    model: Seq2SeqModel
    config: Config
    src_tokenizer: Tokenizer
    tgt_tokenizer: Tokenizer
    step: int
    averaged_checkpoints: int = 1  # how many checkpoints were averaged into the weights
    # The checkpoint file or exported model folder it was loaded from; None: built in memory.
    path: Path | None = None

    @property
    def card(self) -> Path | None:
        """The model card of an exported model (card.json, which may not be there yet)."""
        return self.path / CARD if self.path is not None and self.path.is_dir() else None


def new_model(
    config: Config, src_vocab_size: int, tgt_vocab_size: int, plain: bool
) -> Seq2SeqModel:
    """The untrained model `config` describes: its fast twin (seq2seq.fast) unless
    `config.model.fast` is false, which `plain` makes it."""
    config.model.fast &= not plain
    model = build_model(
        config.model, src_vocab_size, tgt_vocab_size, config.data.joint_vocab, verbose=False
    )
    return speed_up(model) if config.model.fast else model


def load_model(
    name: str | Path,
    device: str | torch.device = "cpu",
    plain: bool = False,
    kind: ModelKind | None = None,
) -> Inference:
    """The model `name` gives, in eval mode on `device`, with its tokenizers: a training
    checkpoint (a path ending in .pt, or any file), an exported model folder, or the name of a
    shipped model. `plain`: on the textbook modules alone (model.fast false), not on the fast
    twins of seq2seq.fast, which compute the same. `kind` accepts only that kind (the command
    line's --checkpoint and --model). Anything wrong with it is a one-line `UserError` naming
    the file."""
    path = Path(name)
    if kind is None:
        kind = "checkpoint" if path.suffix == ".pt" or path.is_file() else "exported"
    if kind == "checkpoint":
        return _load_checkpoint(path, device, plain)
    return _load_exported(find_model(str(name)), device, plain)


def _load_checkpoint(path: Path, device: str | torch.device, plain: bool) -> Inference:
    """A checkpoint's model (eval mode, on `device`, plain or not) and its tokenizers."""
    checkpoint = load_checkpoint(path)
    src_tokenizer, tgt_tokenizer = checkpoint_tokenizers(checkpoint)
    vocab_sizes = (src_tokenizer.vocab_size, tgt_tokenizer.vocab_size)
    try:
        config = config_from_dict(checkpoint["config"])
        check_model_fits(config, *vocab_sizes, torch.device("cpu"), training=False)
    except UserError as err:
        raise UserError(f"{path}: {err}") from None
    model = new_model(config, *vocab_sizes, plain)
    try:
        model.load_state_dict(checkpoint["model"])
    except RuntimeError as err:
        first = str(err).strip().splitlines()[0]
        raise UserError(f"{path}: weights do not fit the model or tokenizer ({first})") from None
    return Inference(
        model.to(device).eval(),
        config,
        src_tokenizer,
        tgt_tokenizer,
        step=int(checkpoint.get("step", 0)),
        averaged_checkpoints=len(checkpoint.get("averaged", [path])),
        path=path,
    )


def _load_exported(folder: Path, device: str | torch.device, plain: bool) -> Inference:
    """An exported model (weights cast to fp32, eval mode, on `device`, plain or not) and its
    tokenizers."""
    description = read_description(folder)
    config = description.config
    src_tokenizer, tgt_tokenizer = description.src_tokenizer, description.tgt_tokenizer
    vocab_sizes = (src_tokenizer.vocab_size, tgt_tokenizer.vocab_size)
    try:
        check_model_fits(config, *vocab_sizes, torch.device("cpu"), training=False)
    except UserError as err:
        raise UserError(f"{folder / DESCRIPTION}: {err}") from None
    model = new_model(config, *vocab_sizes, plain)
    check_regular_file(folder / WEIGHTS, MAX_WEIGHTS_BYTES)
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
        step=description.step,
        averaged_checkpoints=description.averaged_checkpoints,
        path=folder,
    )


def write_description(inference: Inference, folder: Path) -> None:
    """Write what an exported folder says of its model besides the weights: model.json (the
    configuration, the step, the checkpoints averaged) and the sentencepiece model(s)."""
    config = inference.config.to_dict()
    config["train"]["run_dir"] = ""  # a path of the machine that trained it: not needed here
    description = {
        "config": config,
        "step": inference.step,
        "averaged_checkpoints": inference.averaged_checkpoints,
    }
    (folder / DESCRIPTION).write_text(json.dumps(description, indent=2) + "\n", encoding="utf-8")
    if inference.src_tokenizer is inference.tgt_tokenizer:
        (folder / JOINT_TOKENIZER).write_bytes(inference.src_tokenizer.model_bytes)
    else:
        tokenizers = (inference.src_tokenizer, inference.tgt_tokenizer)
        for name, tokenizer in zip(SEPARATE_TOKENIZERS, tokenizers, strict=True):
            (folder / name).write_bytes(tokenizer.model_bytes)

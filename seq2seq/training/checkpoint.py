"""Checkpoints: written atomically, read without ever running code from the file.

A checkpoint is a plain dictionary saved with `torch.save`:

    format       CHECKPOINT_FORMAT
    config       Config.to_dict(): everything needed to rebuild the model
    model        the model's state_dict
    tokenizers   {"joint": bool, "src": uint8 tensor, "tgt": uint8 tensor}: the sentencepiece
                 model files themselves, so a checkpoint translates on its own
    training     (training checkpoints only) optimizer, scheduler, scaler, step, epoch, sampler
                 position, RNG states and validation history; see seq2seq.training.loop

Loading uses `torch.load(weights_only=True)`, whose unpickler accepts only tensors and plain
containers: a file carrying a pickled code payload is refused before anything in it runs. It
maps the file (`mmap=True`, private: nothing is ever written back) instead of reading it, so only
the tensors used are read: decoding reads the model weights of a training checkpoint, not its
optimizer state (docs/benchmarks.md).
"""

import json
import pickle
import re
import shutil
import zipfile
from pathlib import Path
from typing import Any

import torch

from seq2seq.data.tokenizer import Tokenizer
from seq2seq.errors import UserError
from seq2seq.files import write_atomically

CHECKPOINT_FORMAT = 1
STEP_CHECKPOINT = re.compile(r"step-(\d+)\.pt")  # the names training gives step checkpoints
VOCABULARY_KEYS = ("src", "tgt", "vocab_size", "joint_vocab")  # of [data]: what the ids mean


def save_checkpoint(checkpoint: dict[str, Any], path: str | Path) -> None:
    """Write `checkpoint` to `path` atomically (see `write_atomically`); a failed write (a full
    disk) is a UserError that says the previous file is intact."""
    try:
        write_atomically(Path(path), lambda tmp: torch.save(checkpoint, tmp))
    except Exception as err:  # whatever the writer turns a failure into: see _write_error
        raise _write_error(path, err) from None


def copy_checkpoint(source: str | Path, path: str | Path) -> None:
    """Copy a checkpoint file to `path` atomically, e.g. last.pt to best.pt."""
    try:
        with open(source, "rb") as src:
            write_atomically(Path(path), lambda tmp: shutil.copyfileobj(src, tmp))
    except Exception as err:  # whatever the writer turns a failure into: see _write_error
        raise _write_error(path, err) from None


def _write_error(path: str | Path, err: Exception) -> UserError:
    """The one-line error of a failed save, whatever exception the writer raised: torch.save's
    zip writer turns a full disk into a RuntimeError ("unexpected pos ...") raised while the
    OSError is handled, so the OSError is looked for among the exceptions that led to `err`."""
    cause: BaseException | None = err
    while cause is not None and not isinstance(cause, OSError):
        cause = cause.__cause__ or cause.__context__
    if isinstance(cause, OSError):
        reason = cause.strerror or str(cause)
    else:
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0][:120]
    return UserError(f"{path}: cannot write the checkpoint ({reason}); the previous one is intact")


def step_checkpoints(run_dir: Path) -> list[Path]:
    """The step checkpoints training wrote in `run_dir` (`step-<N>.pt` exactly), oldest first.
    Other files, e.g. a user's step-120-copy.pt, are never counted or deleted."""
    steps = {
        int(m[1]): p for p in run_dir.glob("step-*.pt") if (m := STEP_CHECKPOINT.fullmatch(p.name))
    }
    return [steps[number] for number in sorted(steps)]


def save_validated(checkpoint: dict[str, Any], run_dir: Path, is_best: bool, keep: int) -> None:
    """Write a validated training checkpoint: step-<N>.pt (when `keep` > 0), best.pt (when
    `is_best`), then last.pt, and delete all but the newest `keep` step checkpoints.

    last.pt holds the progress record, so it is written last: a crash at any point leaves it at
    the previous save, the run resumes from there and redoes this validation, rewriting the
    same files with the same contents. No record ever names a step whose files are missing.
    """
    step = checkpoint["step"]
    targets = [run_dir / f"step-{step}.pt"] if keep else []
    targets += [run_dir / "best.pt"] if is_best else []
    targets.append(run_dir / "last.pt")
    save_checkpoint(checkpoint, targets[0])
    for path in targets[1:]:
        copy_checkpoint(targets[0], path)
    if keep:
        for path in step_checkpoints(run_dir)[:-keep]:
            path.unlink(missing_ok=True)


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


def average_checkpoints(paths: list[str | Path]) -> dict[str, Any]:
    """A checkpoint whose weights are the mean of those of `paths` (for inference).

    Floating-point tensors are averaged (summed in float64, then cast back); other tensors, e.g.
    integer buffers, are taken from the first checkpoint. The config and tokenizers come from
    the first checkpoint and the step is the latest of them all; training state is left out.
    All checkpoints must be of the same model: the same [model] configuration, vocabulary and
    tokenizers, parameter names and shapes.
    """
    if not paths:
        raise UserError("no checkpoints to average")
    first = load_checkpoint(paths[0])
    sums = {
        name: tensor.double() if tensor.is_floating_point() else tensor
        for name, tensor in first["model"].items()
    }
    step = first.get("step", 0)
    for path in paths[1:]:
        checkpoint = load_checkpoint(path)
        step = max(step, checkpoint.get("step", 0))
        differences = model_differences(first["config"], checkpoint["config"])
        if differences:
            raise UserError(
                f"{path}: not the same model as {paths[0]} ({', '.join(differences)}); only "
                "checkpoints of one model, e.g. of one run, can be averaged"
            )
        for key in ("src", "tgt"):
            if not torch.equal(checkpoint["tokenizers"][key], first["tokenizers"][key]):
                raise UserError(f"{path}: its tokenizers differ from those of {paths[0]}")
        weights = checkpoint["model"]
        if weights.keys() != sums.keys():
            different = sorted(weights.keys() ^ sums.keys())
            raise UserError(f"{path}: parameters differ from {paths[0]}: {', '.join(different)}")
        for name, tensor in weights.items():
            if tensor.shape != sums[name].shape:
                raise UserError(
                    f"{path}: {name} has shape {tuple(tensor.shape)}, "
                    f"not {tuple(sums[name].shape)} as in {paths[0]}"
                )
            if tensor.is_floating_point():
                sums[name] += tensor.double()
    model = {}
    for name, total in sums.items():
        dtype = first["model"][name].dtype
        model[name] = (total / len(paths)).to(dtype) if total.is_floating_point() else total
    return {
        "format": CHECKPOINT_FORMAT,
        "config": first["config"],
        "model": model,
        "tokenizers": first["tokenizers"],
        "step": step,
        "averaged": [str(path) for path in paths],
    }


def model_differences(config: dict[str, Any], other: dict[str, Any]) -> list[str]:
    """The keys of [model] but `fast` (the fast and textbook modules hold the same weights), and
    of [data] those that set the vocabulary, whose values differ between two saved
    configurations, as `section.key=other's (not config's)`."""
    keys = [("model", key) for key in {**config["model"], **other["model"]} if key != "fast"]
    keys += [("data", key) for key in VOCABULARY_KEYS]
    return [
        f"{section}.{key}={json.dumps(other[section].get(key))} "
        f"(not {json.dumps(config[section].get(key))})"
        for section, key in keys
        if config[section].get(key) != other[section].get(key)
    ]

"""Writing checkpoints: atomically, the step, best and last ones of a run, and the average of
several. What a checkpoint holds, and reading one safely, is seq2seq/checkpoints.py."""

import json
import re
import shutil
from pathlib import Path
from typing import Any

import torch

from seq2seq.checkpoints import CHECKPOINT_FORMAT, load_checkpoint
from seq2seq.errors import UserError
from seq2seq.files import write_atomically

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


def model_differences(
    config: dict[str, Any], other: dict[str, Any], ignored: frozenset[str] = frozenset({"fast"})
) -> list[str]:
    """The keys of [model] but `ignored` (by default `fast`: the fast and textbook modules hold
    the same weights), and of [data] those that set the vocabulary, whose values differ between
    two saved configurations, as `section.key=other's (not config's)`."""
    keys = [("model", key) for key in {**config["model"], **other["model"]} if key not in ignored]
    keys += [("data", key) for key in VOCABULARY_KEYS]
    return [
        f"{section}.{key}={json.dumps(other[section].get(key))} "
        f"(not {json.dumps(config[section].get(key))})"
        for section, key in keys
        if config[section].get(key) != other[section].get(key)
    ]

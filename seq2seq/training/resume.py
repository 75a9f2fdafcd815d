"""Starting a run: resuming it from last.pt, which changes of the configuration a resume may
make (`CHANGEABLE_ON_RESUME`), or starting a new one; a finished run only says so."""

import json
from dataclasses import fields
from pathlib import Path
from typing import Any

from seq2seq.checkpoints import checkpoint_tokenizers, load_checkpoint
from seq2seq.config import Config, DecodeConfig
from seq2seq.config_file import config_from_dict, dump_toml
from seq2seq.data.manifest import tokenization_options
from seq2seq.data.prepared_corpus import PreparedData
from seq2seq.decoding.open_pytorch import load_model
from seq2seq.errors import UserError
from seq2seq.files import remove_temporary_files
from seq2seq.training import distributed
from seq2seq.training.checkpoint import model_differences
from seq2seq.training.reproducibility import set_rng_state
from seq2seq.training.run import Progress, Run


def start(run: Run) -> Progress:
    """Resume from last.pt or start a new run, saying which; a finished run only says so."""
    run_dir, env = run.run_dir, run.env
    if env.is_main:
        remove_temporary_files(run_dir)  # left by a save that was killed; the lock is ours
    progress = resume(run)
    if progress is not None and (reason := finished_reason(run.cfg, progress)):
        if env.is_main:
            print(
                f"run {run_dir} already finished at step {progress.step} ({reason}); best valid "
                f"BLEU {progress.best_bleu:.2f} at step {progress.best_step}: nothing to do"
            )
        return progress
    if progress is None and run.cfg.train.init_from:
        load_initial_weights(run)
    if progress is None and env.is_main:
        init_from = run.cfg.train.init_from
        print(
            f"no checkpoint in {run_dir}: starting a new run"
            + (f" from the weights of {init_from}" if init_from else "")
        )
    if env.is_main and (progress is None or run.changes_on_resume):
        (run_dir / "config.toml").write_text(dump_toml(run.cfg.to_dict()), encoding="utf-8")
    distributed.barrier(env)
    return progress or Progress()


# Keys a resumed run may change: when it stops, how often it validates, saves and logs, where it
# runs, on the fast modules or the textbook ones (model.fast: they compute the same), where its
# batches are made (train.data_on_device, num_workers: the same batches), and how its checkpoints
# translate afterwards. Any other key (model, data, seed, learning rate and schedule, batches,
# precision, what validation measures) would make the run that continues another run than the one
# saved.
CHANGEABLE_ON_RESUME = frozenset({
    "model.fast", "train.run_name", "train.run_dir", "train.device", "train.compile",
    "train.data_on_device", "train.num_workers", "train.max_steps", "train.max_epochs",
    "train.patience", "train.max_bad_steps", "train.valid_every", "train.valid_every_minutes",
    "train.valid_batch_tokens", "train.save_every", "train.save_every_minutes", "train.keep_last",
    "train.log_every", "train.log_every_seconds", "train.attention_samples",
    "train.attention_history",
    *(f"decode.{key.name}" for key in fields(DecodeConfig) if key.name != "valid_beam_size"),
})  # fmt: skip


def changed_keys(saved: Config, cfg: Config) -> dict[str, str]:
    """Each key whose value in `cfg` differs from `saved`: `section.key` -> its change, as
    `section.key=new (saved: old)` with TOML values."""
    changes = {}
    for section, values in cfg.to_dict().items():
        for key, value in values.items():
            old = getattr(getattr(saved, section), key)
            if value != old:
                name = f"{section}.{key}"
                changes[name] = f"{name}={json.dumps(value)} (saved: {json.dumps(old)})"
    return changes


def check_resumable(saved: Config, cfg: Config, path: Path) -> list[str]:
    """The changes of `cfg` against the configuration `saved` in `path`, when a resume may make
    them all (CHANGEABLE_ON_RESUME); any other change is refused, naming every such key."""
    changes = changed_keys(saved, cfg)
    refused = [text for name, text in changes.items() if name not in CHANGEABLE_ON_RESUME]
    if refused:
        raise UserError(
            f"{path}: this run was saved with other values of keys that change its training: "
            f"{', '.join(refused)}; resume it without these changes, or start a new run with "
            "another train.run_name (or train.run_dir)"
        )
    return list(changes.values())


def check_same_tokens(checkpoint: dict[str, Any], data: PreparedData, path: Path) -> None:
    """`UserError` unless the checkpoint's tokenizers are the prepared folder's: a folder
    prepared again with other options (e.g. --no-byte-fallback) gives other token ids."""
    saved = [tokenizer.sha256 for tokenizer in checkpoint_tokenizers(checkpoint)]
    if saved != [data.src_tokenizer.sha256, data.tgt_tokenizer.sha256]:
        raise UserError(
            f"{path}: this run was trained on other tokens than {data.folder} now holds (it was "
            f"prepared again, now with {tokenization_options(data.manifest['settings'])}); "
            "resume on the folder the run started with, or start a new run with another "
            "train.run_name"
        )


def resume(run: Run) -> Progress | None:
    """Restore the run from last.pt when there is one: weights, optimizer, schedule, progress
    and this rank's random generators, and note in `run.changes_on_resume` the keys changed
    since (those allowed by `check_resumable`). None: no checkpoint, a new run."""
    if not run.last_path.is_file():
        return None
    checkpoint = load_checkpoint(run.last_path, map_location=run.device)
    saved = config_from_dict(checkpoint["config"])
    run.changes_on_resume = check_resumable(saved, run.cfg, run.last_path)
    check_same_tokens(checkpoint, run.data, run.last_path)
    state = checkpoint["training"]
    saved_world_size = len(state["rng"])
    if saved_world_size != run.env.world_size:
        raise UserError(
            f"{run.last_path}: saved by {saved_world_size} process(es), resumed by "
            f"{run.env.world_size}: each process's place in the epoch would be lost; resume "
            f"with {saved_world_size} (torchrun --nproc_per_node) or start a new train.run_name"
        )
    run.raw_model.load_state_dict(checkpoint["model"])
    run.optimizer.load_state_dict(state["optimizer"])
    run.scheduler.load_state_dict(state["scheduler"])
    run.scaler.load_state_dict(state["scaler"])
    set_rng_state(state["rng"][run.env.rank])
    return Progress(**state["progress"])


# Keys of [model] a run started from another model's weights may change: they set no weight.
FREE_WHEN_INITIALISED = frozenset(
    {"fast", "name", "dropout", "attention_dropout", "attention_layer"}
)


def load_initial_weights(run: Run) -> None:
    """Load the weights of train.init_from (a shipped model's name, an exported folder or a
    checkpoint) into the new run's model; the optimizer, schedule and step start fresh. Refused
    in one line unless that model has this run's shape and vocabulary, and its sentencepiece
    model is the prepared folder's (the same bytes)."""
    name = run.cfg.train.init_from
    try:
        source = load_model(name, plain=True)
    except UserError as err:
        raise UserError(f"train.init_from={name}: {err}") from None
    differences = model_differences(
        source.config.to_dict(), run.cfg.to_dict(), FREE_WHEN_INITIALISED
    )
    if differences:
        raise UserError(
            f"train.init_from={name}: a model of another shape or vocabulary: this run has "
            f"{', '.join(differences)}"
        )
    source_tokens = [source.src_tokenizer.sha256, source.tgt_tokenizer.sha256]
    if source_tokens != [run.data.src_tokenizer.sha256, run.data.tgt_tokenizer.sha256]:
        raise UserError(
            f"train.init_from={name}: its sentencepiece model is not that of {run.data.folder}; "
            "prepare the folder as the model's was (the prepare command of its card.json)"
        )
    run.raw_model.load_state_dict(source.model.state_dict())


def finished_reason(cfg: Config, progress: Progress) -> str | None:
    """Why a run whose progress is `progress` has nothing left to do; None: it has."""
    if progress.stopped_early:
        return f"stopped early, no BLEU improvement in {cfg.train.patience} validations"
    if cfg.train.max_steps and progress.step >= cfg.train.max_steps:
        return f"train.max_steps={cfg.train.max_steps} reached"
    if progress.epoch >= cfg.train.max_epochs:
        return f"train.max_epochs={cfg.train.max_epochs} reached"
    return None

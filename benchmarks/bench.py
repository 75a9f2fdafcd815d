#!/usr/bin/env python3
"""Speed and memory benchmarks, measured through the code that trains and translates.

    benchmarks/bench.py                               # gru, transformer-tiny, transformer-small
    benchmarks/bench.py --quick                       # minutes on a CPU: a check, not a result
    benchmarks/bench.py --checkpoint-dir checkpoints  # decode with trained weights where found
    benchmarks/bench.py --checkpoint transformer-tiny=checkpoints/run/best.pt
    benchmarks/bench.py --growth                      # cost against sequence length, with a plot
    benchmarks/bench.py --models transformer-tiny model.num_heads=8   # a variant of a preset

Writes results/bench/<device>-<time>.json (--growth: growth-<device>-<time>.json and .png) and
prints its table (benchmarks/results_table.py puts the latest into docs/benchmarks.md).

Throughput (`run_throughput`), for each model on a prepared corpus:

    training   target tokens/s and source+target tokens/s over `steps` updates that follow
               `warmup_steps` untimed ones: token-budget batches of the training split and the
               update of seq2seq.training.step (label-smoothed cross-entropy from `token_losses`,
               gradient clipping, AdamW), in the training precision (`autocast_dtype`)
    decoding   sentences/s and output tokens/s of greedy and beam search on the test split
               through `Translator`, the code of seq2seq evaluate, in decode.precision and
               batches of decode.batch_size sentences (or `decode_batch_size`), with the time of
               each batch; with a checkpoint's trained weights, or else random weights, which
               decode to the maximum length and so make decoding look slower than it is
               ("weights": "random")

Cost growth (`run_growth`), for each model on synthetic batches of B sentence pairs whose
source and target input both have L tokens, for L = 8, 16, ..., 256:

    training step       time and peak memory of one update (forward, backward, AdamW)
    cached decoding     time per output position of `encode` + one `decode_step` per position:
                        the Transformer caches the keys/values of the prefix, so each step
                        processes only the new position
    uncached decoding   (Transformer) `forward` on the whole prefix at every step, as decoding
                        without a cache would: step t processes t positions and re-encodes the
                        source, so the time per position grows with L

Memory: on CUDA, `torch.cuda.max_memory_allocated`; on CPU, the peak resident set size (RSS)
of the process, which includes the interpreter, torch and the data. Both are reported as the
peak and as its increase over the baseline taken just before the measured phase (the increase
includes gradients and AdamW state, which do not depend on L). A process's peak RSS never goes
down, so every measurement runs in a fresh process (`in_fresh_process`).
"""

import argparse
import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from itertools import count
from pathlib import Path
from typing import Any

import torch
from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator
from measure import (
    bench_path,
    environment,
    in_fresh_process,
    median_seconds,
    memory_report,
    memory_start,
    synchronize,
    write_record,
)
from results_table import growth_section, throughput_section

from seq2seq.commands.cli import ArgumentParser, number, run_cli
from seq2seq.config import MODEL_PRESETS, TrainConfig
from seq2seq.config_file import load_config
from seq2seq.config_rules import AT_LEAST_0, AT_LEAST_1, DECODE_PRECISIONS, PRECISIONS, RULES
from seq2seq.data.batching import Batch, ParallelDataset, TokenBatchSampler, make_loader
from seq2seq.data.prepared_corpus import PreparedData
from seq2seq.data.specials import BOS_ID, EOS_ID
from seq2seq.decoding import open_pytorch
from seq2seq.decoding.line_translator import Translation
from seq2seq.decoding.open_pytorch import Inference
from seq2seq.decoding.scores import corpus_scores
from seq2seq.decoding.torch_translator import Translator
from seq2seq.device import autocast_dtype, pick_device, precision_name
from seq2seq.errors import UserError
from seq2seq.fast import speed_up
from seq2seq.models import build_model
from seq2seq.models.base import Seq2SeqModel
from seq2seq.training.loss import token_losses
from seq2seq.training.run import cross_entropy_of

THROUGHPUT_MODELS = ["gru", "transformer-tiny", "transformer-small"]
GROWTH_MODELS = ["gru", "transformer-tiny"]
SYNTHETIC_VOCAB = 8000  # the growth benchmark's vocabulary size (that of the Multi30k setup)
FIRST_WORD_ID = EOS_ID + 1  # smaller ids are special tokens
DECODE_WARMUP_SENTENCES = 16


@dataclass
class BenchmarkSettings:
    """What to measure and how; stored with the results."""

    models: list[str] = field(default_factory=lambda: list(THROUGHPUT_MODELS))  # presets
    overrides: list[str] = field(default_factory=list)  # model.key=value for random weights
    device: str = "auto"
    precision: str = "auto"  # of training, as train.precision
    decode_precision: str = "auto"  # of decoding, as decode.precision
    seed: int = 1
    # Throughput
    data: str = "data/multi30k.en-de"
    max_tokens: int = 4096
    warmup_steps: int = 10
    steps: int = 100
    decode_sentences: int = 0  # the first N sentences of the test split; 0: all
    decode_batch_size: int = 0  # sentences per decoding batch; 0: the model's decode.batch_size
    beams: list[int] = field(default_factory=lambda: [1, 5])
    checkpoints: dict[str, str] = field(default_factory=dict)  # preset -> checkpoint
    # Cost growth
    lengths: list[int] = field(default_factory=lambda: [8, 16, 32, 64, 128, 256])
    batch_size: int = 32
    repeats: int = 3  # timed repetitions (after one warm-up); the median is reported
    quick: bool = False


# `--quick`: minutes on a CPU, for checking that everything runs, not for reporting.
QUICK = {
    "warmup_steps": 2,
    "steps": 5,
    "decode_sentences": 200,
    "lengths": [8, 16, 32, 64],
    "repeats": 1,
}


# ---------------------------------------------------------------------------------------------
# The work being measured
# ---------------------------------------------------------------------------------------------


def model_to_measure(
    settings: BenchmarkSettings, name: str, data: PreparedData, device: torch.device
) -> Inference:
    """The model of `settings.checkpoints[name]` with its tokenizers, or else the preset `name`
    (with `settings.overrides`) with random weights and the tokenizers of `data`."""
    checkpoint = settings.checkpoints.get(name)
    if checkpoint:
        inference = open_pytorch.load_model(checkpoint, device, kind="checkpoint")
        if inference.config.model.name != name:
            raise UserError(f"{checkpoint}: holds a {inference.config.model.name}, not a {name}")
        tokenizers = (inference.src_tokenizer.sha256, inference.tgt_tokenizer.sha256)
        if tokenizers != (data.src_tokenizer.sha256, data.tgt_tokenizer.sha256):
            raise UserError(f"{checkpoint}: its vocabulary is not that of {settings.data}")
        return inference
    config = load_config(None, [f"model.name={name}", *settings.overrides])
    torch.manual_seed(settings.seed)
    model = build_model(
        config.model,
        data.src_tokenizer.vocab_size,
        data.tgt_tokenizer.vocab_size,
        data.joint,
        verbose=False,
    )
    model = speed_up(model) if config.model.fast else model
    return Inference(model.to(device), config, data.src_tokenizer, data.tgt_tokenizer, step=0)


def make_training_step(
    model: Seq2SeqModel, device: torch.device, dtype: torch.dtype | None
) -> Callable[[Batch], None]:
    """One update of `model` per call, as seq2seq.training.step makes it (one batch, no
    accumulation): label-smoothed loss per target token, backward, gradient clipping, AdamW."""
    cfg = TrainConfig()
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=cfg.lr, betas=cfg.optimizer_betas, weight_decay=cfg.weight_decay
    )
    scaler = torch.amp.GradScaler(device.type, enabled=dtype == torch.float16)
    cross_entropy = cross_entropy_of(model)
    model.train()

    def step(batch: Batch) -> None:
        optimizer.zero_grad(set_to_none=True)
        loss, _, _ = token_losses(model, batch, cfg.label_smoothing, dtype, cross_entropy)
        scaler.scale(loss / batch.num_tgt_tokens).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip_norm)
        scaler.step(optimizer)
        scaler.update()

    return step


def endless_batches(dataset: ParallelDataset, max_tokens: int, seed: int) -> Iterator[Batch]:
    """Shuffled token-budget batches of `dataset`, epoch after epoch."""
    sampler = TokenBatchSampler(dataset.src_lens, dataset.tgt_lens, max_tokens, seed=seed)
    loader = make_loader(dataset, sampler)
    for epoch in count():
        sampler.set_epoch(epoch)
        yield from loader


@torch.no_grad()  # as the searches (seq2seq.decoding.search): autocast keeps its bf16 weights
def decode_cached(
    model: Seq2SeqModel, src: torch.Tensor, src_lens: torch.Tensor, tgt_in: torch.Tensor
) -> torch.Tensor:
    """Decode as the searches do: encode once, then one `decode_step` per position of tgt_in
    (B, T), fed its tokens so that every run does the same work. Returns the last step's
    log-probabilities (B, V)."""
    state = model.encode(src, src_lens)
    cache = model.init_cache(state)
    for prev in tgt_in.unbind(1):
        out = model.decode_step(state, prev, cache)
        cache = out.cache
    return out.log_probs


@torch.no_grad()
def decode_uncached(
    model: Seq2SeqModel, src: torch.Tensor, src_lens: torch.Tensor, tgt_in: torch.Tensor
) -> torch.Tensor:
    """The same positions without a cache: at step t, `forward` on the prefix tgt_in[:, :t]
    (which re-encodes the source) and the log-probabilities of its last position (B, V)."""
    for t in range(1, tgt_in.shape[1] + 1):
        log_probs = model(src, src_lens, tgt_in[:, :t])[:, -1].float().log_softmax(dim=-1)
    return log_probs


def synthetic_batch(batch_size: int, length: int, generator: torch.Generator) -> Batch:
    """Random sentence pairs: sources of `length` tokens (EOS included) and targets whose
    decoder input (BOS included) has `length` tokens."""
    shape = (batch_size, length - 1)
    src_words = torch.randint(FIRST_WORD_ID, SYNTHETIC_VOCAB, shape, generator=generator)
    tgt_words = torch.randint(FIRST_WORD_ID, SYNTHETIC_VOCAB, shape, generator=generator)
    bos, eos = torch.full((batch_size, 1), BOS_ID), torch.full((batch_size, 1), EOS_ID)
    src = torch.cat([src_words, eos], dim=1)
    tgt = torch.cat([bos, tgt_words, eos], dim=1)
    return Batch(
        src=src,
        src_lens=torch.full((batch_size,), length),
        tgt=tgt,
        tgt_lens=torch.full((batch_size,), length + 1),
        indices=torch.arange(batch_size),
        num_tgt_tokens=batch_size * length,
        num_src_tokens=batch_size * length,
    )


# ---------------------------------------------------------------------------------------------
# One measurement each (run in a fresh process)
# ---------------------------------------------------------------------------------------------


def bench_training(settings: BenchmarkSettings, name: str) -> dict[str, Any]:
    """Training throughput and peak memory of model `name`, with its configuration."""
    device = pick_device(settings.device)
    dtype = autocast_dtype(settings.precision, device)
    data = PreparedData.load(settings.data)
    batches = endless_batches(data.dataset("train"), settings.max_tokens, settings.seed)
    inference = model_to_measure(settings, name, data, device)
    step = make_training_step(inference.model, device, dtype)
    baseline = memory_start(device)
    for _ in range(settings.warmup_steps):
        step(next(batches).to(device))
    synchronize(device)
    start = time.perf_counter()
    tgt_tokens = src_tokens = 0
    for _ in range(settings.steps):
        batch = next(batches)
        step(batch.to(device))
        tgt_tokens += batch.num_tgt_tokens
        src_tokens += batch.num_src_tokens
    synchronize(device)
    seconds = time.perf_counter() - start
    return {
        "config": asdict(inference.config.model),
        "parameters": inference.model.num_parameters(),
        "training": {
            "precision": precision_name(dtype),
            "steps": settings.steps,
            "seconds": seconds,
            "tgt_tokens": tgt_tokens,
            "src_tokens": src_tokens,
            "tgt_tokens_per_second": tgt_tokens / seconds,
            "tokens_per_second": (tgt_tokens + src_tokens) / seconds,
            "memory": memory_report(device, baseline),
        },
    }


def timed_translate(
    translator: Translator, sources: list[str], beam_size: int
) -> tuple[list[Translation], float, list[float]]:
    """The best translation of each source, the seconds of the whole, and those of each batch."""
    synchronize(translator.device)
    ends = [time.perf_counter()]  # the start, then the end of each batch
    translations = translator.translate(
        sources, beam_size, on_batch=lambda _: ends.append(time.perf_counter())
    )
    synchronize(translator.device)
    seconds = time.perf_counter() - ends[0]
    batch_seconds = [end - start for start, end in itertools.pairwise(ends)]
    return [nbest[0] for nbest in translations], seconds, batch_seconds


def bench_decoding(settings: BenchmarkSettings, name: str) -> dict[str, Any]:
    """Decoding speed of model `name` on the test split, for each beam size of `settings`."""
    device = pick_device(settings.device)
    data = PreparedData.load(settings.data)
    sources, references = data.lines("test")
    if settings.decode_sentences:
        sources = sources[: settings.decode_sentences]
        references = references[: settings.decode_sentences]
    inference = model_to_measure(settings, name, data, device)
    inference.config.decode.precision = settings.decode_precision
    if settings.decode_batch_size:
        inference.config.decode.batch_size = settings.decode_batch_size
    translator = Translator.from_inference(inference, device)
    baseline = memory_start(device)
    translator.translate(sources[:DECODE_WARMUP_SENTENCES], beam_size=1)
    beams = []
    for beam_size in settings.beams:
        best, seconds, batch_seconds = timed_translate(translator, sources, beam_size)
        output_tokens = sum(len(translation.tokens) for translation in best)
        beams.append(
            {
                "beam_size": beam_size,
                "seconds": seconds,
                "sentences_per_second": len(sources) / seconds,
                "output_tokens": output_tokens,
                "tokens_per_second": output_tokens / seconds,
                "batch_seconds": batch_seconds,
                "bleu": corpus_scores([t.text for t in best], references).bleu,
            }
        )
    checkpoint = settings.checkpoints.get(name)
    return {
        "weights": "checkpoint" if checkpoint else "random",
        "checkpoint": checkpoint,
        "precision": translator.precision_for(len(sources)),
        "sentences": len(sources),
        "batch_size": translator.decode_cfg.batch_size,
        "beams": beams,
        "memory": memory_report(device, baseline),
    }


def growth_case(settings: BenchmarkSettings, name: str, length: int) -> dict[str, Any]:
    """Training step and decoding costs of model `name` on synthetic sequences of `length`."""
    device = pick_device(settings.device)
    dtype = autocast_dtype(settings.precision, device)
    config = load_config(None, [f"model.name={name}", *settings.overrides]).model
    torch.manual_seed(settings.seed)
    model = build_model(config, SYNTHETIC_VOCAB, SYNTHETIC_VOCAB, True, verbose=False).to(device)
    model = speed_up(model) if config.fast else model
    generator = torch.Generator().manual_seed(settings.seed)
    batch = synthetic_batch(settings.batch_size, length, generator).to(device)
    step = make_training_step(model, device, dtype)
    baseline = memory_start(device)
    step_seconds = median_seconds(lambda: step(batch), settings.repeats, device)
    memory = memory_report(device, baseline)

    model.eval()
    inputs = (model, batch.src, batch.src_lens, batch.tgt_in)
    cached = median_seconds(lambda: decode_cached(*inputs), settings.repeats, device)
    uncached = None
    if config.arch == "transformer":  # the GRU's cache is its state: there is nothing to redo
        uncached = median_seconds(lambda: decode_uncached(*inputs), settings.repeats, device)
    return {
        "config": asdict(config),
        "parameters": model.num_parameters(),
        "length": length,
        "train_step_ms": 1000 * step_seconds,
        "memory": memory,
        "decode_cached_ms_per_token": 1000 * cached / length,
        "decode_uncached_ms_per_token": None if uncached is None else 1000 * uncached / length,
    }


# ---------------------------------------------------------------------------------------------
# The two benchmarks
# ---------------------------------------------------------------------------------------------


def run_throughput(settings: BenchmarkSettings) -> dict[str, Any]:
    """Training and decoding speed and memory of every model; returns the results record."""
    device = pick_device(settings.device)
    PreparedData.load(settings.data)  # a missing corpus fails here, before any process starts
    models = []
    for name in settings.models:
        print(f"{name}: training {settings.warmup_steps} + {settings.steps} steps", flush=True)
        entry = {"name": name, **in_fresh_process(bench_training, settings, name)}
        print(f"{name}: decoding, beams {settings.beams}", flush=True)
        entry["decoding"] = in_fresh_process(bench_decoding, settings, name)
        models.append(entry)
    return {
        "kind": "throughput",
        "environment": environment(device),
        "settings": asdict(settings),
        "models": models,
    }


def run_growth(settings: BenchmarkSettings) -> dict[str, Any]:
    """Training step and per-token decoding costs against the sequence length, per model."""
    device = pick_device(settings.device)
    models = []
    for name in settings.models:
        cases = []
        for length in settings.lengths:
            print(f"{name}: length {length}", flush=True)
            cases.append(in_fresh_process(growth_case, settings, name, length))
        first = cases[0]
        models.append(
            {
                "name": name,
                "config": first["config"],
                "parameters": first["parameters"],
                "precision": precision_name(autocast_dtype(settings.precision, device)),
                "lengths": [
                    {k: v for k, v in case.items() if k not in ("config", "parameters")}
                    for case in cases
                ],
            }
        )
    return {
        "kind": "growth",
        "environment": environment(device),
        "settings": asdict(settings),
        "models": models,
    }


def growth_figure(record: dict[str, Any]) -> Figure:
    """Log-log panels against the sequence length: training step time, its memory, and the
    decoding time per output position (dashed: without a cache), one colour per model."""
    figure = Figure(figsize=(15, 4.5), layout="constrained")
    step_axes, memory_axes, decode_axes = figure.subplots(1, 3)
    for model in record["models"]:
        name, cases = model["name"], model["lengths"]
        lengths = [case["length"] for case in cases]
        (line,) = step_axes.plot(lengths, [c["train_step_ms"] for c in cases], "o-", label=name)
        color = line.get_color()
        memory = [case["memory"]["increase_mib"] for case in cases]
        memory_axes.plot(lengths, memory, "o-", color=color, label=name)
        cached = [case["decode_cached_ms_per_token"] for case in cases]
        decode_axes.plot(lengths, cached, "o-", color=color, label=f"{name}, cached")
        uncached = [case["decode_uncached_ms_per_token"] for case in cases]
        if None not in uncached:
            decode_axes.plot(lengths, uncached, "s--", color=color, label=f"{name}, no cache")
    batch = record["settings"]["batch_size"]
    titles = [
        f"training step (batch of {batch})",
        "memory of a training step (increase)",
        f"decoding, per output position (batch of {batch})",
    ]
    ylabels = ["milliseconds", "MiB", "milliseconds"]
    lengths = record["settings"]["lengths"]
    for axes, title, ylabel in zip(
        (step_axes, memory_axes, decode_axes), titles, ylabels, strict=True
    ):
        axes.set_xscale("log", base=2)
        axes.set_yscale("log", nonpositive="mask")
        axes.set_xticks(lengths, [str(length) for length in lengths])
        axes.xaxis.set_minor_locator(NullLocator())
        axes.set_xlabel("sequence length L (source = target)")
        axes.set_ylabel(ylabel)
        axes.set_title(title)
        axes.grid(True, which="major", alpha=0.3)
        axes.legend()
    env = record["environment"]
    figure.suptitle(f"Cost growth with sequence length on {env['device_name']} ({env['device']})")
    return figure


def default_out(record: dict[str, Any]) -> Path:
    """results/bench/[growth-]<device>-<time>.json"""
    prefix = "growth-" if record["kind"] == "growth" else ""
    return bench_path(prefix, record["environment"]["device_name"])


def save(record: dict[str, Any], out: Path) -> list[Path]:
    """Write the record as JSON to `out` (and a growth record's figure beside it, as PNG)."""
    write_record(record, out)
    written = [out]
    if record["kind"] == "growth":
        growth_figure(record).savefig(out.with_suffix(".png"), dpi=120)
        written.append(out.with_suffix(".png"))
    return written


def find_checkpoints(folder: str | Path, models: list[str], data: str) -> dict[str, str]:
    """The best.pt of each run folder under `folder` whose config.toml trains one of `models`
    on the prepared corpus `data`. Two runs of one model are an error: name one explicitly."""
    found: dict[str, list[str]] = {}
    for config_path in sorted(Path(folder).glob("*/config.toml")):
        best = config_path.parent / "best.pt"
        config = load_config(config_path)
        same_data = Path(config.data.prepared).resolve() == Path(data).resolve()
        if best.is_file() and same_data and config.model.name in models:
            found.setdefault(config.model.name, []).append(str(best))
    for name, paths in found.items():
        if len(paths) > 1:
            raise UserError(
                f"{folder}: several {name} runs ({', '.join(paths)}); choose one with "
                f"--checkpoint {name}=PATH"
            )
    return {name: paths[0] for name, paths in found.items()}


# ---------------------------------------------------------------------------------------------
# The command line
# ---------------------------------------------------------------------------------------------


positive = number(int, AT_LEAST_1)


def make_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    defaults = BenchmarkSettings()
    parser.add_argument(
        "overrides", nargs="*", metavar="model.key=value", help="changes to every preset"
    )
    parser.add_argument(
        "--models",
        nargs="+",
        choices=list(MODEL_PRESETS),
        help=f"presets (default: {' '.join(THROUGHPUT_MODELS)}; --growth: "
        f"{' '.join(GROWTH_MODELS)})",
    )
    parser.add_argument("--device", help="auto (default: CUDA when present), cpu, cuda, cuda:1")
    parser.add_argument(
        "--precision",
        choices=PRECISIONS,
        help="training precision as train.precision (default: auto, as in training)",
    )
    parser.add_argument(
        "--decode-precision",
        choices=DECODE_PRECISIONS,
        help="decoding precision as decode.precision (default: auto, as in decoding)",
    )
    parser.add_argument("--seed", type=number(int, RULES["train.seed"]))
    parser.add_argument("--quick", action="store_true", help=f"smaller settings: {QUICK}")
    parser.add_argument("--out", type=Path, help="the JSON file (default: results/bench/...)")
    throughput = parser.add_argument_group("throughput (the default)")
    throughput.add_argument("--data", help=f"prepared corpus (default: {defaults.data})")
    throughput.add_argument(
        "--max-tokens", type=positive, help=f"tokens per batch (default: {defaults.max_tokens})"
    )
    throughput.add_argument(
        "--warmup-steps",
        type=number(int, AT_LEAST_0),
        help=f"untimed steps (default: {defaults.warmup_steps})",
    )
    throughput.add_argument("--steps", type=positive, help=f"timed (default: {defaults.steps})")
    throughput.add_argument(
        "--decode-sentences",
        type=positive,
        help="decode the first N test sentences (default: all)",
    )
    throughput.add_argument(
        "--decode-batch-size",
        type=number(int, RULES["decode.batch_size"]),
        help="sentences per decoding batch (default: the model's decode.batch_size)",
    )
    throughput.add_argument(
        "--beams", nargs="+", type=positive, help=f"beam sizes (default: {defaults.beams})"
    )
    throughput.add_argument(
        "--checkpoint",
        action="append",
        default=[],
        metavar="MODEL=PATH",
        help="decode MODEL with these trained weights (repeat for several models)",
    )
    throughput.add_argument(
        "--checkpoint-dir",
        metavar="DIR",
        help="use DIR/<run>/best.pt of the runs that trained a model on --data",
    )
    growth = parser.add_argument_group("cost growth")
    growth.add_argument("--growth", action="store_true", help="measure cost against length")
    growth.add_argument(
        "--lengths", nargs="+", type=positive, help=f"(default: {defaults.lengths})"
    )
    growth.add_argument(
        "--batch-size", type=positive, help=f"sentences (default: {defaults.batch_size})"
    )
    growth.add_argument(
        "--repeats", type=positive, help=f"timed runs per figure (default: {defaults.repeats})"
    )
    return parser


def parse_args() -> tuple[argparse.Namespace, BenchmarkSettings]:
    parser = make_parser()
    args = parser.parse_args()
    defaults = BenchmarkSettings()
    if any(not item.startswith("model.") for item in args.overrides):
        parser.error("overrides change the model only: model.key=value")
    if args.lengths and min(args.lengths) < 2:
        parser.error("--lengths: each length must be >= 2 (a token and EOS)")
    if args.growth and (args.checkpoint or args.checkpoint_dir):
        parser.error("--growth measures random weights: no --checkpoint or --checkpoint-dir")
    models = args.models or (GROWTH_MODELS if args.growth else THROUGHPUT_MODELS)
    checkpoints = {}
    for item in args.checkpoint:
        name, sep, path = item.partition("=")
        if not sep or name not in models:
            parser.error(f"--checkpoint {item}: expected MODEL=PATH with MODEL one of {models}")
        checkpoints[name] = path

    given = {key: value for key, value in vars(args).items() if value is not None}
    values = {key: given[key] for key in vars(defaults) if key in given}
    settings = BenchmarkSettings(
        **{**(QUICK if args.quick else {}), **values, "models": list(models)}
    )
    if args.checkpoint_dir:
        found = find_checkpoints(args.checkpoint_dir, models, settings.data)
        checkpoints = {**found, **checkpoints}
    settings.checkpoints = checkpoints
    return args, settings


def main() -> None:
    args, settings = parse_args()
    run, section = (
        (run_growth, growth_section) if args.growth else (run_throughput, throughput_section)
    )
    record = run(settings)
    out = args.out or default_out(record)
    written = save(record, out)
    print()
    print(section(record, out))
    print(f"\nwrote {', '.join(map(str, written))}")


if __name__ == "__main__":
    run_cli(main, tune=True)

#!/usr/bin/env python3
"""Where beam-search decoding on a CPU spends its time, per beam step, and its memory.

    benchmarks/profile_decode.py                       # int8, fp32, bf16 at batch 128 and 1
    benchmarks/profile_decode.py --precisions int8 --batch-sizes 128 --sentences 100
    benchmarks/profile_decode.py --model transformer-small.tatoeba.en-fr --sources test.en

A shipped model (by name, or an exported folder or a .pt checkpoint) decodes the first N lines
of --sources (the Multi30k test split's English side by default; N: 1000 at a batch size above
1, 200 at batch 1) with beam search through `Translator`, the code of seq2seq evaluate, for
every decode.precision of --precisions and decoding batch size of --batch-sizes, each in a
fresh process (`measure.in_fresh_process`) on --threads threads. In that process:

    time     an untimed warm-up on 16 lines, then a timed run: wall seconds, sentences/s, output
             pieces/s, ms per sentence, and the beam steps, counted by wrapping this one model
             object's `decode_step` (one step decodes every running sentence's beams of a batch)
    profile  the same lines again under torch.profiler (CPU), a profiler per decoding batch
             (`BatchProfiler`): the self CPU time of every operator, grouped by CATEGORIES;
             "Python and dispatch overhead" is the profiled run's wall time (less the time taken
             to start, stop and read the profilers) less the sum of all operators' self times:
             the interpreter, torch's dispatch, the search's bookkeeping, tokenizing and
             detokenizing, the profiler's cost per operator. Each category is reported as its
             share of the profiled run and, as that share of the unprofiled run's wall time, in
             milliseconds per beam step
    memory   RSS (Linux: /proc/self/status) after the imports, after loading the model, with the
             translator ready (int8: after making the quantized copy), and the peak through
             decoding (getrusage, `measure.max_rss_mib`); the bytes of the weights that decode,
             and the largest encoder state, cache and log-probabilities one beam step held

The profile is taken after the timed run, so the profiler's own memory is in no figure. A
process that imports torch alone is measured once, for the baseline.

Writes results/bench/profile-decode-<cpu>-<time>.json and prints a table per configuration as
it goes, then the whole profile (benchmarks/results_table.py puts the latest into
docs/benchmarks.md). bf16 autocast is fast only on a CPU with bf16 instructions (AVX512_BF16 or
AMX); elsewhere it is emulated and slow, and the record says which CPU it was.
"""

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import measure
import torch
from measure import (
    MIB,
    bench_path,
    environment,
    max_rss_mib,
    rss_mib,
    status_mib,
    timed_call,
    write_record,
)
from results_table import PROFILE_KIND, profile_configuration_table, profile_section
from torch.profiler import ProfilerActivity, profile

from seq2seq.commands.cli import ArgumentParser, number, run_cli
from seq2seq.config_rules import AT_LEAST_1
from seq2seq.decoding.open_pytorch import load_model
from seq2seq.decoding.torch_translator import Translator
from seq2seq.device import cpu_has_bf16_instructions, cpu_has_fast_bf16
from seq2seq.errors import UserError
from seq2seq.files import read_lines
from seq2seq.models.base import StepOutput

MODEL = "transformer-tiny.multi30k.en-de"
SOURCES = "data/multi30k.en-de/test.en"
PRECISIONS = ["int8", "fp32", "bf16"]
BATCH_SIZES = [128, 1]
SENTENCES, SENTENCES_ONE_BY_ONE = 1000, 200  # by default; the second at batch size 1
WARMUP_SENTENCES = 16
TOP_OPERATORS = 25  # kept in the record, to check the grouping against

# Where each operator's self time goes, by the names torch.profiler gives (torch 2.13 on a CPU:
# `aten::linear` and `aten::matmul` are composite, their work is in `aten::addmm`, `aten::mm`,
# `aten::bmm`; int8 products are `quantized::linear_dynamic`). `aten::masked_fill` and
# `aten::bitwise_not` mask attention scores (seq2seq/models/attention.py); `aten::amax` takes the
# chunk
# maxima of the search's top-k (seq2seq/fast/topk.py); `aten::cat` appends to the keys/values
# cache and the beams' tokens; `aten::copy_` and `aten::_to_copy` are the copies of reshapes and
# autocast's casts. Views and allocations compute nothing: what they cost is torch's work per
# call, which many small tensors multiply. Any other operator is "elementwise and other ops".
CATEGORIES: dict[str, tuple[str, ...]] = {
    "matrix products": (
        "aten::addmm",
        "aten::mm",
        "aten::bmm",
        "aten::baddbmm",
        "aten::addbmm",
        "aten::matmul",
        "aten::linear",
        "aten::_int_mm",
        "quantized::linear_dynamic",
        "quantized::linear_dynamic_fp16",
    ),
    "attention softmax and masking": (
        "aten::_softmax",
        "aten::softmax",
        "aten::masked_fill",
        "aten::masked_fill_",
        "aten::where",
        "aten::bitwise_not",
    ),
    "vocabulary log-softmax": ("aten::_log_softmax", "aten::log_softmax"),
    "top-k": ("aten::topk", "aten::sort", "aten::amax"),
    "cache reordering and gathers": (
        "aten::index_select",
        "aten::index",
        "aten::gather",
        "aten::cat",
    ),
    "layer norm": ("aten::native_layer_norm", "aten::layer_norm"),
    "copies and casts": ("aten::copy_", "aten::_to_copy", "aten::clone", "aten::contiguous"),
    "views and allocations": (
        "aten::view",
        "aten::_unsafe_view",
        "aten::reshape",
        "aten::_reshape_alias",
        "aten::as_strided",
        "aten::expand",
        "aten::transpose",
        "aten::t",
        "aten::permute",
        "aten::select",
        "aten::slice",
        "aten::unsqueeze",
        "aten::squeeze",
        "aten::flatten",
        "aten::unflatten",
        "aten::unbind",
        "aten::split",
        "aten::chunk",
        "aten::narrow",
        "aten::alias",
        "aten::detach",
        "aten::resolve_conj",
        "aten::resolve_neg",
        "aten::empty",
        "aten::empty_like",
        "aten::empty_strided",
    ),
}
OTHER = "elementwise and other ops"
OVERHEAD = "Python and dispatch overhead"
CATEGORY_OF = {name: category for category, names in CATEGORIES.items() for name in names}


@dataclass
class ProfileSettings:
    """What to profile; stored with the results."""

    model: str = MODEL
    sources: str = SOURCES
    precisions: list[str] = field(default_factory=lambda: list(PRECISIONS))
    batch_sizes: list[int] = field(default_factory=lambda: list(BATCH_SIZES))
    sentences: int | None = None  # None: SENTENCES, or SENTENCES_ONE_BY_ONE at batch size 1
    beam: int = 5
    threads: int = 2

    def sentences_at(self, batch_size: int) -> int:
        if self.sentences:
            return self.sentences
        return SENTENCES_ONE_BY_ONE if batch_size == 1 else SENTENCES


# ---------------------------------------------------------------------------------------------
# Time: operators grouped into categories
# ---------------------------------------------------------------------------------------------


def group_operators(averages: Iterable[Any]) -> dict[str, float]:
    """Self CPU microseconds per category (CATEGORIES in order, then OTHER) of the operators in
    `averages`, torch.profiler's `key_averages()` (anything with `key` and
    `self_cpu_time_total`, in microseconds)."""
    micros = dict.fromkeys([*CATEGORIES, OTHER], 0.0)
    for event in averages:
        micros[CATEGORY_OF.get(event.key, OTHER)] += event.self_cpu_time_total
    return micros


def time_breakdown(
    micros: dict[str, float], profiled_seconds: float, timed_seconds: float, steps: int
) -> list[dict[str, Any]]:
    """Each category of `micros` (`group_operators`) and OVERHEAD, the profiled wall time that no
    operator accounts for: its milliseconds in the profiled run, its share of that run (the
    shares add up to 100), and that share of the unprofiled run's `timed_seconds` per beam step
    (None without steps)."""
    operators = sum(micros.values())
    profiled = profiled_seconds * 1e6
    spent = {**micros, OVERHEAD: max(0.0, profiled - operators)}
    total = max(profiled, operators)  # operators never outlast the run, but clocks differ
    breakdown = []
    for category, us in spent.items():
        share = us / total if total else 0.0
        breakdown.append(
            {
                "category": category,
                "profiled_ms": us / 1000,
                "share_percent": 100 * share,
                "ms_per_step": 1000 * share * timed_seconds / steps if steps else None,
            }
        )
    return breakdown


def top_operators(averages: Iterable[Any], count: int = TOP_OPERATORS) -> list[dict[str, Any]]:
    """The `count` operators of `averages` with the most self CPU time, with their category."""
    ranked = sorted(averages, key=lambda event: -event.self_cpu_time_total)[:count]
    return [
        {
            "name": event.key,
            "calls": event.count,
            "self_ms": event.self_cpu_time_total / 1000,
            "category": CATEGORY_OF.get(event.key, OTHER),
        }
        for event in ranked
    ]


@dataclass
class OperatorTime:
    """One operator's calls and self CPU time in microseconds, as in torch.profiler's
    `key_averages()`, added up over several profiles."""

    key: str
    count: int = 0
    self_cpu_time_total: float = 0.0


@contextmanager
def stderr_silenced() -> Iterator[None]:
    """Send this process's standard error (file descriptor 2) to /dev/null for a moment: the
    profiler's C++ side prints two lines at every start and stop."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


class BatchProfiler:
    """Profile each decoding batch of `translator` (one call of its `_search`) on its own and
    add up every operator's self time. One profile of a whole run would hold every event until
    the end, about 5 KB each, a thousand per beam step: gigabytes for 200 sentences at batch 1.

    Only this benchmark's translator object changes: its `_search` attribute becomes a wrapper
    that calls the translator's own method. The seconds spent starting, stopping and reading the
    profilers are counted in `profiler_seconds`, to be taken out of the run's wall time."""

    def __init__(self, translator: Translator) -> None:
        self.operators: dict[str, OperatorTime] = {}
        self.profiler_seconds = 0.0
        search = translator._search

        def profiled(*args: Any) -> Any:
            start = time.perf_counter()
            profiler = profile(activities=[ProfilerActivity.CPU])
            with stderr_silenced():
                profiler.start()
            self.profiler_seconds += time.perf_counter() - start
            try:
                return search(*args)
            finally:
                start = time.perf_counter()
                with stderr_silenced():
                    profiler.stop()
                self.add(profiler.key_averages())
                self.profiler_seconds += time.perf_counter() - start

        translator._search = profiled

    def add(self, averages: Iterable[Any]) -> None:
        for event in averages:
            total = self.operators.setdefault(event.key, OperatorTime(event.key))
            total.count += event.count
            total.self_cpu_time_total += event.self_cpu_time_total


def warm_up_profiler() -> None:
    """Start and stop a profiler once: the first start in a process takes seconds."""
    profiler = profile(activities=[ProfilerActivity.CPU])
    with stderr_silenced():
        profiler.start()
        profiler.stop()


class StepCounter:
    """Count the beam steps (`decode_step` calls) of one model object and the decoder rows they
    ran, and keep the sizes of the largest step's encoder state, cache and log-probabilities.

    Only this benchmark's model object changes: its `decode_step` attribute becomes a wrapper
    that calls the model's own method."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.reset()
        decode_step: Callable[..., StepOutput] = model.decode_step

        def counted(state: dict, prev_tokens: torch.Tensor, cache: dict, *args: Any) -> StepOutput:
            out = decode_step(state, prev_tokens, cache, *args)
            self.steps += 1
            self.rows += len(prev_tokens)
            held = [tensor_bytes(state), tensor_bytes(out.cache), tensor_bytes(out.log_probs)]
            if sum(held) > sum(self.largest[1:]):
                self.largest = (len(prev_tokens), *held)
            return out

        model.decode_step = counted

    def reset(self) -> None:
        self.steps = self.rows = 0
        self.largest: tuple[int, int, int, int] = (0, 0, 0, 0)  # rows, state, cache, log-probs


# ---------------------------------------------------------------------------------------------
# Memory
# ---------------------------------------------------------------------------------------------


def tensor_bytes(value: Any) -> int:
    """The bytes of the tensors in `value` (a tensor, or dicts, lists and tuples of them); a
    quantized tensor counts its integers and its per-row scales and zero points."""
    if isinstance(value, torch.Tensor):
        if not value.is_quantized:
            return value.nbytes
        size = value.numel() * value.element_size()
        if value.qscheme() in (torch.per_channel_affine, torch.per_channel_symmetric):
            size += value.q_per_channel_scales().nbytes
            size += value.q_per_channel_zero_points().nbytes
        return size
    if isinstance(value, dict):
        return sum(tensor_bytes(item) for item in value.values())
    if isinstance(value, list | tuple):
        return sum(tensor_bytes(item) for item in value)
    return 0


def weight_bytes(model: torch.nn.Module) -> int:
    """The bytes of `model`'s state_dict, a tensor shared by several names (tied embeddings)
    counted once; for an int8 copy, its quantized linear layers as `tensor_bytes` counts them
    (the packed cells of a quantized GRU are not counted)."""
    seen, total = set(), 0
    for value in model.state_dict().values():
        if isinstance(value, torch.Tensor) and not value.is_quantized:
            key = (value.untyped_storage().data_ptr(), value.storage_offset(), value.nbytes)
            if key in seen:
                continue
            seen.add(key)
        total += tensor_bytes(value)
    return total


TORCH_ONLY = "import torch; print(open('/proc/self/status').read())"


def torch_import_rss_mib() -> float | None:
    """The RSS of a new Python process that has imported torch and nothing else (None where
    /proc is missing)."""
    if not Path("/proc/self/status").is_file():
        return None
    result = subprocess.run([sys.executable, "-c", TORCH_ONLY], capture_output=True, text=True)
    return status_mib(result.stdout) if result.returncode == 0 else None


# ---------------------------------------------------------------------------------------------
# One configuration (in a fresh process)
# ---------------------------------------------------------------------------------------------


def profile_configuration(
    settings: ProfileSettings, sources: list[str], precision: str, batch_size: int
) -> dict[str, Any]:
    """Time, profile and memory of decoding `sources` in `precision` at `batch_size`."""
    torch.set_num_threads(settings.threads)
    memory = {"after_imports_mib": rss_mib()}
    inference = load_model(settings.model, "cpu")
    memory["model_loaded_mib"] = rss_mib()
    # The translator makes the int8 copy (and picks the autocast dtype) when it is made, from
    # decode.precision: set it first. `with_decode` changes only the settings of the search.
    inference.config.decode.precision = precision
    translator = Translator.from_inference(inference, "cpu").with_decode(batch_size=batch_size)
    if translator.precision != precision:
        decodes = translator.precision
        raise UserError(f"decode.precision={precision}: the translator decodes in {decodes}")
    memory["translator_mib"] = rss_mib()
    memory["weights_mib"] = weight_bytes(translator.model) / MIB
    counter = StepCounter(translator.model)

    memory["peak_before_decoding_mib"] = max_rss_mib()
    translator.translate(sources[:WARMUP_SENTENCES], settings.beam)
    counter.reset()
    translations, seconds = timed_call(translator.translate, sources, settings.beam)
    memory["decoding_peak_mib"] = max_rss_mib()
    memory["after_decoding_mib"] = rss_mib()
    steps, rows = counter.steps, counter.rows
    largest_rows, state, cache, log_probs = counter.largest

    warm_up_profiler()
    profiler = BatchProfiler(translator)
    _, seconds_with_profiler = timed_call(translator.translate, sources, settings.beam)
    profiled_seconds = seconds_with_profiler - profiler.profiler_seconds
    averages = list(profiler.operators.values())
    micros = group_operators(averages)

    pieces = sum(len(nbest[0].tokens) for nbest in translations)
    return {
        "precision": precision,
        "batch_size": batch_size,
        "sentences": len(sources),
        "decoding": {
            "seconds": seconds,
            "sentences_per_second": len(sources) / seconds,
            "output_pieces": pieces,
            "pieces_per_second": pieces / seconds,
            "ms_per_sentence": 1000 * seconds / len(sources),
            "beam_steps": steps,
            "decoder_rows": rows,
            "rows_per_step": rows / steps if steps else None,
            "ms_per_step": 1000 * seconds / steps if steps else None,
        },
        "profile": {
            "seconds": profiled_seconds,
            "profiler_seconds": profiler.profiler_seconds,  # left out of "seconds"
            "operator_seconds": sum(micros.values()) / 1e6,
            "categories": time_breakdown(micros, profiled_seconds, seconds, steps),
            "top_operators": top_operators(averages),
        },
        "memory": memory,
        "largest_step": {
            "rows": largest_rows,
            "state_mib": state / MIB,
            "cache_mib": cache / MIB,
            "log_probs_mib": log_probs / MIB,
        },
        "model": {
            "name": settings.model,
            "arch": inference.config.model.arch,
            "parameters": inference.model.num_parameters(),
            "fp32_weights_mib": weight_bytes(inference.model) / MIB,
        },
    }


# ---------------------------------------------------------------------------------------------
# The profile
# ---------------------------------------------------------------------------------------------


def run_profile(settings: ProfileSettings, sources: list[str]) -> dict[str, Any]:
    """Every configuration, each in a fresh process, printing its table as it ends; returns
    the record."""
    torch.set_num_threads(settings.threads)  # as the measuring processes: environment() says so
    configurations = []
    for batch_size in settings.batch_sizes:
        lines = sources[: settings.sentences_at(batch_size)]
        for precision in settings.precisions:
            print(f"{precision}, batch {batch_size}: {len(lines)} sentences", flush=True)
            configuration = measure.in_fresh_process(
                profile_configuration, settings, lines, precision, batch_size
            )
            print(f"\n{profile_configuration_table(configuration)}\n", flush=True)
            configurations.append(configuration)
    models = [configuration.pop("model") for configuration in configurations]
    return {
        "kind": PROFILE_KIND,
        "environment": environment(torch.device("cpu")),
        "cpu": {
            "bf16_instructions": cpu_has_bf16_instructions(),
            "fast_bf16_kernels": cpu_has_fast_bf16(),
            "capability": torch.backends.cpu.get_cpu_capability(),
        },
        "settings": asdict(settings),
        "model": models[0],
        "torch_import_rss_mib": torch_import_rss_mib(),
        "configurations": configurations,
    }


# ---------------------------------------------------------------------------------------------
# The command line
# ---------------------------------------------------------------------------------------------


positive = number(int, AT_LEAST_1)


def make_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--model", default=MODEL, help=f"a shipped model, an exported folder or a .pt ({MODEL})"
    )
    parser.add_argument(
        "--sources", default=SOURCES, help=f"source sentences, one a line (default: {SOURCES})"
    )
    parser.add_argument(
        "--precisions",
        nargs="+",
        choices=PRECISIONS,
        default=PRECISIONS,
        help=f"decode.precision values (default: {' '.join(PRECISIONS)})",
    )
    parser.add_argument(
        "--batch-sizes",
        nargs="+",
        type=positive,
        default=BATCH_SIZES,
        help=f"sentences per decoding batch (default: {' '.join(map(str, BATCH_SIZES))})",
    )
    parser.add_argument(
        "--sentences",
        type=positive,
        help=f"decode the first N lines (default: {SENTENCES}; at batch size 1, "
        f"{SENTENCES_ONE_BY_ONE})",
    )
    parser.add_argument("--beam", type=positive, default=5, help="beam size (default: 5)")
    parser.add_argument("--threads", type=positive, default=2, help="torch threads (default: 2)")
    parser.add_argument("--out", type=Path, help="the JSON file (default: results/bench/...)")
    return parser


def main() -> None:
    args = make_parser().parse_args()
    settings = ProfileSettings(
        model=args.model,
        sources=args.sources,
        precisions=list(dict.fromkeys(args.precisions)),
        batch_sizes=list(dict.fromkeys(args.batch_sizes)),
        sentences=args.sentences,
        beam=args.beam,
        threads=args.threads,
    )
    hint = " (make data prepares it)" if args.sources == SOURCES else ""
    if not Path(args.sources).is_file():
        raise UserError(f"--sources {args.sources}: no such file{hint}")
    sources = read_lines(Path(args.sources), f"--sources {args.sources}")
    if not any(line.strip() for line in sources):
        raise UserError(f"--sources {args.sources}: no sentences")
    load_model(args.model)  # a bad --model fails here, before any process starts
    record = run_profile(settings, sources)
    out = args.out or bench_path(f"{PROFILE_KIND}-", record["environment"]["device_name"])
    write_record(record, out)
    print(profile_section(record, out))
    print(f"\nwrote {out}")


if __name__ == "__main__":
    run_cli(main, tune=True)

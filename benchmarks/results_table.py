#!/usr/bin/env python3
"""Print the markdown tables of the committed results, or write them into the docs.

    benchmarks/results_table.py                    # print every section
    benchmarks/results_table.py --update           # README.md and docs/benchmarks.md
    benchmarks/results_table.py --update FILE ...  # the sections whose markers FILE holds

Sections, each written between its markers `<!-- NAME:start -->` and `<!-- NAME:end -->`:

    results   the trained models: per family and direction the shipped model
              (seq2seq/shipped_models/*/card.json) or else the best of results/models/*.json
              (seq2seq/decoding/model_result.py)
    bench     the latest record of each kind in results/bench/*.json: "throughput" and
              "growth" (benchmarks/bench.py), and side by side with fairseq and OpenNMT-py,
              training speed ("peers", benchmarks/peers/measure.sh) and decoding speed at
              about equal BLEU ("peers-decode", benchmarks/peers/decode.sh); the server's load
              records ("serve_load") are left out: docs/serve.md shows them
    profile   the latest "profile-decode" record (benchmarks/profile_decode.py): where beam
              search spends its time per step and its memory, per precision and batch size
    speedrun  the speed record table: of the "speedrun" records (benchmarks/speedrun.py), on
              each hardware, every run that reached the target and beat the last row
              (`speedrun_section` states the rules)

so that the numbers in the docs always come from these files.
"""

import argparse
import json
import os
import re
from pathlib import Path
from typing import Any

from seq2seq.commands.cli import ArgumentParser, run_cli
from seq2seq.decoding.model_result import SHIPPED_MODELS, ModelResult
from seq2seq.errors import UserError

DEFAULT_FILES = [Path("README.md"), Path("docs/benchmarks.md")]
BENCH_KINDS = ["throughput", "growth", "peers", "peers-decode", "gpu"]  # in the order shown
# Records shown by a page of their own: docs/serve.md (serve_load), the CTranslate2 section
# of docs/benchmarks.md (ctranslate2) and docs/experiments.md, "On one GPU: the speed recipe"
# (gpu-probes), "On one GPU: longer runs of the Multi30k models" (gpu-longer-runs) and
# "Copy-teaching on Tatoeba" (gpu-tatoeba).
UNTABULATED_KINDS = [
    *("serve_load", "ctranslate2", "gpu-probes", "gpu-longer-runs", "gpu-tatoeba"),
    "sentence-split",  # benchmarks/sentence_split.py: its table is in docs/benchmarks.md
    "starvation",  # benchmarks/serve_starvation.py: its figures are in docs/serve.md
    "speedrun",  # benchmarks/speedrun.py: the record table, a section of its own
]
PROFILE_KIND = "profile-decode"  # shown in a section of its own, "profile"
NO_MODELS = "_No trained model results committed yet._"
NO_BENCHMARKS = "_No benchmark results committed yet._"
NO_PROFILE = "_No decoding profile committed yet._"
SPEEDRUN_KIND = "speedrun"
SPEEDRUN_SEEDS = 3  # the fewest seeds of a record
NO_SPEEDRUN = "_No speed record yet: no committed run reaches the target._"
# Tools that moved after older records were written: the tables name them where they are now.
MOVED = {
    "scripts/benchmark.py": "benchmarks/bench.py",
    "scripts/peers/": "benchmarks/peers/",
    "scripts/export_model.py": "scripts/export.py",
}


def current(text: str) -> str:
    """A recorded command or note, naming moved tools (MOVED) where they are now."""
    for old, new in MOVED.items():
        text = text.replace(old, new)
    return text


def _markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _millions(count: int) -> str:
    return f"{count / 1e6:.2f}M"


def models_section(
    results: list[ModelResult], shipped: dict[str, ModelResult] | None = None
) -> str:
    """The table of one model of each family (GRU, Transformer) and direction, with the
    sacreBLEU signatures; each record's commands stay in its JSON file. Where the repository
    ships a model of that family and direction (`shipped`: folder name -> its card), that model,
    its folder named; else the best record by BLEU."""
    if not results and not shipped:
        return NO_MODELS
    chosen: dict[tuple[str, str], tuple[ModelResult, str | None]] = {}
    for folder, card in sorted((shipped or {}).items()):
        chosen.setdefault((card.model.split("-")[0], card.direction), (card, folder))
    for r in sorted(results, key=lambda r: -r.bleu):
        chosen.setdefault((r.model.split("-")[0], r.direction), (r, None))
    rows_of = sorted(chosen.values(), key=lambda pair: (pair[0].direction, -pair[0].bleu))
    results = [r for r, _ in rows_of]
    header = ["Model", "Direction", "Parameters", "BLEU", "BLEU (lc)", "chrF", "Beam"]
    header += ["Checkpoints averaged", "Steps", "Training", "Device"]
    rows = [
        [
            f"{r.name}: `{folder}`" if folder else r.name,
            r.direction,
            _millions(r.parameters),
            f"{r.bleu:.1f}",
            f"{r.bleu_lc:.1f}",
            f"{r.chrf:.1f}",
            str(r.beam_size),
            str(r.averaged_checkpoints),
            f"{r.train_steps:,}",
            f"{r.train_hours:.1f} h",
            r.device,
        ]
        for r, folder in rows_of
    ]
    scored = ", ".join(sorted({f"{r.corpus} {r.split}" for r in results}))
    signatures = sorted({(key, value) for r in results for key, value in r.signatures.items()})
    listed = ", ".join(f"{key} `{value}`" for key, value in signatures)
    return "\n".join(
        [
            _markdown_table(header, rows),
            "",
            f"Scored on {scored}; sacreBLEU {listed}. A row naming a shipped model is "
            "that model, scored from its files (its `card.json`); the others are the "
            "best run of their family and direction. The commands that made each model, and the "
            "revision that scored it, are in its record under `results/models/`.",
        ]
    )


def _run_line(record: dict[str, Any], source: Path) -> str:
    """Where and how a benchmark ran, in one line."""
    env, settings = record["environment"], record["settings"]
    revision = (env["git_revision"] or "unknown")[:10] + (" (modified)" if env["git_dirty"] else "")
    quick = ", `--quick`" if settings["quick"] else ""
    return (
        f"**{env['device_name']}** ({env['device']}, {env['threads']} threads{quick}), "
        f"torch {env['torch']}, revision `{revision}`, memory: {env['memory_measure']}; "
        f"`{current(env['command'])}` → `{source}`"
    )


def _memory(memory: dict[str, float]) -> str:
    return f"{memory['peak_mib']:,.0f} (+{memory['increase_mib']:,.0f})"


def throughput_section(record: dict[str, Any], source: Path) -> str:
    """One table row per model: training and decoding speed, peak memory."""
    settings = record["settings"]
    beams = settings["beams"]
    header = ["Model", "Parameters", "Train tgt tok/s", "Train src+tgt tok/s"]
    header += ["Train memory MiB"]
    for beam in beams:
        label = "Greedy" if beam == 1 else f"Beam {beam}"
        header += [f"{label} sent/s", f"{label} tok/s"]
    header += ["Decode memory MiB", "Weights"]
    rows = []
    for model in record["models"]:
        training, decoding = model["training"], model["decoding"]
        row = [
            model["name"],
            _millions(model["parameters"]),
            f"{training['tgt_tokens_per_second']:,.0f}",
            f"{training['tokens_per_second']:,.0f}",
            _memory(training["memory"]),
        ]
        for beam in decoding["beams"]:
            row += [f"{beam['sentences_per_second']:,.1f}", f"{beam['tokens_per_second']:,.0f}"]
        row += [_memory(decoding["memory"]), decoding["weights"]]
        rows.append(row)
    model = record["models"][0]
    sentences = model["decoding"]["sentences"]
    details = (
        f"Training: {model['training']['precision']}, batches of {settings['max_tokens']} tokens, "
        f"{settings['steps']} steps timed after {settings['warmup_steps']}. Decoding: "
        f"{model['decoding'].get('precision', 'fp32')}, "
        f"{sentences} test sentences. Memory: peak (+ increase over the process's baseline)."
    )
    return "\n".join([_run_line(record, source), "", _markdown_table(header, rows), "", details])


def _milliseconds(value: float | None) -> str:
    return "–" if value is None else f"{value:,.2f}"


def growth_section(record: dict[str, Any], source: Path, links_from: Path = Path()) -> str:
    """One row per model and length: training step time and memory, decoding time per token."""
    header = ["Model", "Length", "Train step ms", "Step memory MiB"]
    header += ["Decode ms/token, cached", "Decode ms/token, no cache"]
    rows = [
        [
            model["name"],
            str(case["length"]),
            _milliseconds(case["train_step_ms"]),
            _memory(case["memory"]),
            _milliseconds(case["decode_cached_ms_per_token"]),
            _milliseconds(case["decode_uncached_ms_per_token"]),
        ]
        for model in record["models"]
        for case in model["lengths"]
    ]
    settings = record["settings"]
    lines = [_run_line(record, source), ""]
    plot = source.with_suffix(".png")
    if plot.is_file():
        link = Path(os.path.relpath(plot, links_from)).as_posix()
        lines += [f"![Cost growth with sequence length]({link})", ""]
    lines += [
        _markdown_table(header, rows),
        "",
        f"Synthetic batches of {settings['batch_size']} sentences, source and target of the same "
        f"length; training in {record['models'][0]['precision']}, decoding in fp32; median of "
        f"{settings['repeats']} runs. Memory: peak (+ increase over the process's baseline).",
    ]
    return "\n".join(lines)


def _peers_run_line(record: dict[str, Any], source: Path) -> str:
    return (
        f"**Side by side** on {record['device']}, {record['threads']} threads, "
        f"torch {record['torch']}, revision `{record['git_revision'][:10]}`, {record['date']}: "
        f"{record['setup']}; `{current(record['reproduce'])}` → `{source}`"
    )


def peers_section(record: dict[str, Any], source: Path) -> str:
    """One row per toolkit: training speed (each run) and peak memory, the same model and data."""
    header = ["Toolkit", "Version", "Target tokens per step", "Train tgt tok/s (each run)"]
    header += ["Peak RSS MiB"]
    rows = [
        [
            toolkit["name"],
            toolkit["version"],
            f"{toolkit['tgt_tokens_per_step']:,.0f}",
            " / ".join(f"{speed:,.0f}" for speed in toolkit["tgt_tokens_per_second"]),
            f"{toolkit['peak_rss_mib']:,.0f}",
        ]
        for toolkit in record["toolkits"]
    ]
    return "\n".join(
        [
            _peers_run_line(record, source),
            "",
            _markdown_table(header, rows),
            "",
            current(record["method"]),
        ]
    )


def _each_run(values: list[float], digits: int) -> str:
    return " / ".join(f"{value:,.{digits}f}" for value in values)


RATIO_MEASURES = {
    "ms_per_output_piece": "time per output piece, batch 128",
    "batch1_mean_ms": "batch-1 mean latency",
    "batch1_median_ms": "batch-1 median latency",
}


def _ratio(value: float | None, against: str | None = None) -> str:
    """A ratio with two decimals, naming what it is against if given; "–" where there is none."""
    if value is None:
        return "–"
    return f"{value:.2f} ({against})" if against else f"{value:.2f}"


def _peers_decode_ratios(record: dict[str, Any]) -> str:
    """Ours against CTranslate2 and the fastest PyTorch peer, one row per ours and measure."""
    header = ["Ours", "Measure", "Ours / CTranslate2", "Ours / fastest PyTorch peer"]
    rows = [
        [
            row["ours"],
            RATIO_MEASURES[row["measure"]],
            _ratio(row["vs_ctranslate2"]),
            _ratio(row["vs_fastest_pytorch_peer"], row["fastest_pytorch_peer"]),
        ]
        for row in record["ratios"]
    ]
    return _markdown_table(header, rows)


def peers_decode_section(record: dict[str, Any], source: Path) -> str:
    """One row per toolkit: beam-5 decoding speed (each run), the BLEU of its output, and the
    peak memory of each run where the record has it (records before 2026-11-24 do not); records
    with CTranslate2 (from 2026-11-25) add output pieces/s, batch-1 latency and its peak memory,
    and a table of ratios."""
    header = ["Toolkit", "Version", "Beam-5 sent/s (each run)"]
    with_ratios = "ratios" in record
    if with_ratios:
        header += ["Output pieces/s", "Batch-1 ms, mean", "Batch-1 ms, median"]
    header += ["BLEU", "BLEU lc", "chrF"]
    with_memory = all("peak_rss_mib" in toolkit for toolkit in record["toolkits"])
    if with_memory:
        header.append("Peak RSS MiB (each run)")
    if with_ratios:
        header.append("Batch-1 peak RSS MiB")
    rows = []
    for toolkit in record["toolkits"]:
        row = [toolkit["name"], toolkit["version"], _each_run(toolkit["sentences_per_second"], 1)]
        if with_ratios:
            row += [
                _each_run(toolkit["pieces_per_second"], 0),
                _each_run(toolkit["batch1_mean_ms"], 1),
                _each_run(toolkit["batch1_median_ms"], 1),
            ]
        row += [f"{toolkit['bleu']:.1f}", f"{toolkit['bleu_lc']:.1f}", f"{toolkit['chrf']:.1f}"]
        if with_memory:
            row.append(_each_run(toolkit["peak_rss_mib"], 0))
        if with_ratios:
            row.append(_each_run(toolkit["batch1_peak_rss_mib"], 0))
        rows.append(row)
    lines = [_peers_run_line(record, source), "", _markdown_table(header, rows), ""]
    if with_ratios:
        lines += [_peers_decode_ratios(record), ""]
    return "\n".join([*lines, current(record["method"])])


def _time_to_bleu(reached: dict[str, float] | None) -> str:
    return (
        "not reached"
        if reached is None
        else f"{reached['seconds']:,.0f} s (step {reached['step']:,})"
    )


def gpu_section(record: dict[str, Any], source: Path) -> str:
    """The GPU benchmark (benchmarks/gpu.sh): the training run to BLEU and its decoding. Older
    records lack the model FLOPs utilisation, the warm decoding and the profile: no row."""
    env, run = record["environment"], record["training_run"]
    device = f"**{env['device_name']}** ({env['device']}, torch {env['torch']}, CUDA {env['cuda']})"
    memory = run["peak_device_memory_mib"]
    rows = [
        [f"Time to valid BLEU {target} (beam 5)", _time_to_bleu(reached)]
        for target, reached in run["time_to_valid_bleu"].items()
    ]
    best_step, best_bleu = max(run["valid_bleu"], key=lambda pair: pair[1])
    rows += [
        [
            "Training run",
            f"{run['steps']:,} steps in {run['seconds']:,.0f} s, best valid BLEU "
            f"{best_bleu:.2f} at step {best_step:,}",
        ],
        ["Training target tokens/s", f"{run['tgt_tokens_per_second']:,.0f}"],
    ]
    if "model_flops" in run:
        flops = run["model_flops"]
        utilisation = None if flops is None else flops["utilisation"]
        rows.append(["Model FLOPs utilisation", _optional(utilisation, ".2%")])
    rows.append(["Peak device memory", "not sampled" if memory is None else f"{memory:,.0f} MiB"])
    for name, label in (("beam5", "Beam 5"), ("beam1", "Greedy")):
        decoding = record["decoding"][name]
        rows.append(
            [
                f"{label} decoding, bf16, best checkpoint",
                f"{decoding['sentences_per_second']:,.1f} sentences/s, BLEU {decoding['bleu']:.2f}",
            ]
        )
    rows += _warm_decoding_rows(record.get("warm_decoding"))
    rows += _profile_rows(record.get("profile"))
    line = f"{device}; `{env['command']}` → `{source}`"
    return "\n".join([line, "", _markdown_table(["What", "Figure"], rows)])


def _warm_decoding_rows(warm: dict[str, Any] | None) -> list[list[str]]:
    """The warm decoder's sentences/s and host synchronisations per step (gpu_decode.py)."""
    if warm is None:
        return []
    return [
        [
            f"Warm decoding, {label}",
            f"{warm[name]['sentences_per_second']:,.1f} sentences/s, "
            f"{warm[name]['mean_syncs_per_step']:.2f} host syncs per step",
        ]
        for name, label in (("beam5", "beam 5"), ("beam1", "greedy"))
    ]


def _profile_rows(profile: dict[str, Any] | None) -> list[list[str]]:
    """The GPU's busy share of a profiled training step and decoding step (gpu_profile.py)."""
    if profile is None:
        return []
    rows = []
    for part, label in (("training", "training step"), ("decoding", "decoding step")):
        figures = profile[part]
        share = _optional(figures["gpu_busy_share"], ".1%")
        ms = figures["wall_seconds_per_step"] * 1000
        rows.append([f"GPU busy share of a {label} (profiled)", f"{share} of {ms:,.2f} ms"])
    return rows


def _configuration(config: dict[str, Any]) -> str:
    return f"{config['precision']}, batch {config['batch_size']}"


def _optional(value: float | None, spec: str, unit: str = "") -> str:
    return "–" if value is None else f"{value:{spec}}{unit}"


def profile_configuration_table(config: dict[str, Any]) -> str:
    """One configuration of a decoding profile: its speed, then one row per category of where
    the time goes (share of the profiled run, milliseconds per beam step), then its memory."""
    decoding, memory, largest = config["decoding"], config["memory"], config["largest_step"]
    lines = [
        f"**{_configuration(config)}**: {config['sentences']} sentences in "
        f"{decoding['seconds']:,.2f} s, {decoding['sentences_per_second']:,.1f} sentences/s, "
        f"{decoding['pieces_per_second']:,.0f} pieces/s, "
        f"{decoding['ms_per_sentence']:,.2f} ms per sentence; {decoding['beam_steps']:,} beam "
        f"steps of {_optional(decoding['rows_per_step'], ',.1f')} rows, "
        f"{_optional(decoding['ms_per_step'], ',.2f')} ms each",
        "",
        _markdown_table(
            ["Where the time goes", "Share", "ms per beam step"],
            [
                [c["category"], f"{c['share_percent']:.1f}%", _optional(c["ms_per_step"], ",.3f")]
                for c in config["profile"]["categories"]
            ],
        ),
        "",
        f"Profiled run: {config['profile']['seconds']:,.2f} s. Memory: RSS "
        f"{memory['after_imports_mib']:,.0f} MiB after the imports, "
        f"{memory['model_loaded_mib']:,.0f} after loading the model, "
        f"{memory['translator_mib']:,.0f} with the translator ready, peak "
        f"{memory['decoding_peak_mib']:,.0f} while decoding; weights "
        f"{memory['weights_mib']:,.1f} MiB; the largest step held "
        f"{largest['state_mib'] + largest['cache_mib'] + largest['log_probs_mib']:,.1f} MiB "
        "(encoder state, cache and log-probabilities).",
    ]
    return "\n".join(lines)


def profile_section(record: dict[str, Any], source: Path) -> str:
    """A decoding profile (benchmarks/profile_decode.py): speed per configuration, where the
    time of a beam step goes, and where the memory goes."""
    env, settings, cpu = record["environment"], record["settings"], record["cpu"]
    revision = (env["git_revision"] or "unknown")[:10] + (" (modified)" if env["git_dirty"] else "")
    bf16 = "with" if cpu["bf16_instructions"] else "without"
    configs = record["configurations"]
    names = [_configuration(config) for config in configs]
    run_line = (
        f"**{env['device_name']}** ({env['cpu_count']} cores, {bf16} bf16 instructions, kernels "
        f"{cpu['capability']}; {env['threads']} thread{'s' if env['threads'] != 1 else ''}), "
        f"torch {env['torch']}, revision "
        f"`{revision}`; `{record['model']['name']}`, beam {settings['beam']}; "
        f"`{current(env['command'])}` → `{source}`"
    )
    speed = _markdown_table(
        [
            *["Configuration", "Sentences", "Sent/s", "Pieces/s", "ms/sentence", "Beam steps"],
            *["Rows/step", "ms/step", "Profiled run"],
        ],
        [
            [
                name,
                f"{config['sentences']:,}",
                f"{config['decoding']['sentences_per_second']:,.1f}",
                f"{config['decoding']['pieces_per_second']:,.0f}",
                f"{config['decoding']['ms_per_sentence']:,.2f}",
                f"{config['decoding']['beam_steps']:,}",
                _optional(config["decoding"]["rows_per_step"], ",.1f"),
                _optional(config["decoding"]["ms_per_step"], ",.2f"),
                f"{config['profile']['seconds'] / config['decoding']['seconds']:.2f}×",
            ]
            for name, config in zip(names, configs, strict=True)
        ],
    )
    categories = [c["category"] for c in configs[0]["profile"]["categories"]]
    time_rows = []
    for i, category in enumerate(categories):
        row = [category]
        for config in configs:
            entry = config["profile"]["categories"][i]
            row.append(f"{entry['share_percent']:.1f}% · {_optional(entry['ms_per_step'], '.2f')}")
        time_rows.append(row)
    time_table = _markdown_table(["Share · ms per beam step", *names], time_rows)
    memory_rows = []
    for name, config in zip(names, configs, strict=True):
        memory, largest = config["memory"], config["largest_step"]
        copy = memory["translator_mib"] - memory["model_loaded_mib"]
        memory_rows.append(
            [
                name,
                f"{memory['after_imports_mib']:,.0f}",
                f"+{memory['model_loaded_mib'] - memory['after_imports_mib']:,.0f}",
                f"+{copy:,.0f}" if config["precision"] == "int8" else "–",
                f"{memory['decoding_peak_mib']:,.0f} "
                f"(+{memory['decoding_peak_mib'] - memory['translator_mib']:,.0f})",
                f"{memory['weights_mib']:,.1f}",
                f"{largest['state_mib']:,.1f} + {largest['cache_mib']:,.1f} + "
                f"{largest['log_probs_mib']:,.1f}",
            ]
        )
    memory_table = _markdown_table(
        [
            *["Configuration", "RSS after imports", "Model loaded", "int8 copy"],
            *["Peak decoding (+ over ready)", "Weights that decode"],
            "Largest step: encoder state + cache + log-probs",
        ],
        memory_rows,
    )
    model = record["model"]
    notes = (
        "Time: the share of each category in a run under torch.profiler, and that share of the "
        "unprofiled run's wall time divided by its beam steps (one `decode_step` for every "
        "running sentence and beam of a batch). Memory in MiB, each configuration in a fresh "
        "process: a process that imports torch alone holds "
        f"{_optional(record['torch_import_rss_mib'], ',.0f')} (this benchmark's imports add the "
        f"rest of the first column); weights: the model's {model['fp32_weights_mib']:,.1f} MiB "
        "in fp32, and for int8 those of the quantized copy that decodes (the fp32 model stays "
        "loaded beside it); bf16 autocast also keeps bf16 copies of the weights while it "
        "decodes. Beyond the weights, loading holds the tokenizers, the modules and the "
        "allocator's slack; decoding adds the tensors of a step (the last column: the step that "
        "held the most), the activations between them, and the freed blocks that glibc keeps "
        "for the next step (seq2seq/fast/process.py)."
    )
    sections = [run_line, "", speed, "", time_table, "", memory_table, "", notes]
    return "\n".join(sections)


def latest_profile_section(paths: list[Path]) -> str:
    """The tables of the latest decoding profile among the records `paths`."""
    latest = latest_records(paths)
    if PROFILE_KIND not in latest:
        return NO_PROFILE
    return profile_section(*latest[PROFILE_KIND])


def _read_record(path: Path) -> dict[str, Any]:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        record["kind"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise UserError(f"{path}: not a benchmark record ({err!r})") from None
    return record


def _mean_and_spread(figures: dict[str, float | None], spec: str) -> str:
    """ "mean ± stdev (min–max)" of a speedrun summary's figures."""
    stdev = "" if figures["stdev"] is None else f" ± {figures['stdev']:{spec}}"
    return f"{figures['mean']:{spec}}{stdev} ({figures['min']:{spec}}–{figures['max']:{spec}})"


def _speedrun_row(record: dict[str, Any], source: Path) -> list[str]:
    env, summary = record["environment"], record["summary"]
    revision = (env["git_revision"] or "unknown")[:10] + (" (modified)" if env["git_dirty"] else "")
    speed = summary["tgt_tokens_per_second"]
    return [
        f"{env['device_name']}, torch {env['torch']}",
        _mean_and_spread(summary["seconds_to_test_score"], ",.1f"),
        _mean_and_spread(summary["test_bleu"], ".2f"),
        "–" if speed is None else f"{speed['mean']:,.0f}",
        str(summary["seeds"]),
        env["created"][:10],
        f"`{env['command']}`",
        f"`{revision}`",
        f"`{source}`",
    ]


def speedrun_section(paths: list[Path]) -> str:
    """The speed record table, from the "speedrun" records among `paths` in the order of the
    times in their names. A run is a record when it ran on a GPU (not a dry run) with at least
    SPEEDRUN_SEEDS seeds, their mean test BLEU reached its target, and their mean seconds to
    the test score are fewer than those of the last record on the same hardware (the device's
    name). The other runs are counted below the table, the latest of each hardware named."""
    rows, best = [], {}
    others: dict[str, tuple[int, dict[str, Any], Path]] = {}
    for path in sorted(paths, key=lambda path: (_recorded_at(path), path.name)):
        record = _read_record(path)
        if record["kind"] != SPEEDRUN_KIND or record["dry_run"]:
            continue
        summary, hardware = record["summary"], record["environment"]["device_name"]
        seconds = summary["seconds_to_test_score"]["mean"]
        enough = summary["seeds"] >= SPEEDRUN_SEEDS and summary["reached"]
        if enough and seconds < best.get(hardware, float("inf")):
            best[hardware] = seconds
            rows.append(_speedrun_row(record, path))
        else:
            others[hardware] = (others.get(hardware, (0,))[0] + 1, record, path)
    header = ["Hardware", "Seconds to test score", "Test BLEU", "Target tok/s", "Seeds"]
    header += ["Date", "Command", "Commit", "Record"]
    lines = [_markdown_table(header, rows) if rows else NO_SPEEDRUN]
    for hardware, (count, record, path) in others.items():
        summary = record["summary"]
        lines.append(
            f"\n{hardware}: {count} run{'s' * (count > 1)} not a record (fewer than "
            f"{SPEEDRUN_SEEDS} seeds, short of the target or slower); the latest, `{path}`: test "
            f"BLEU {_mean_and_spread(summary['test_bleu'], '.2f')} in "
            f"{_mean_and_spread(summary['seconds_to_test_score'], ',.1f')} s, "
            f"{summary['seeds']} seed{'s' * (summary['seeds'] > 1)}, target "
            f"{summary['target_bleu']:g}."
        )
    return "\n".join(lines)


def _recorded_at(path: Path) -> str:
    """The time in a record's file name (<...>-YYYYMMDD-HHMMSS.json), or "" if it has none."""
    found = re.search(r"\d{8}-\d{6}", path.stem)
    return found.group() if found else ""


def latest_records(paths: list[Path]) -> dict[str, tuple[dict[str, Any], Path]]:
    """{kind: (record, path)} of the newest record of each kind, by the time in its file name."""
    latest: dict[str, tuple[dict[str, Any], Path]] = {}
    for path in sorted(paths, key=lambda path: (_recorded_at(path), path.name)):
        record = _read_record(path)
        kind = record["kind"]
        if kind in UNTABULATED_KINDS:
            continue
        if kind not in [*BENCH_KINDS, PROFILE_KIND]:
            raise UserError(f"{path}: unknown benchmark kind {kind!r}")
        latest[kind] = record, path
    return latest


def bench_section(paths: list[Path], links_from: Path = Path()) -> str:
    """The tables of the latest benchmark record of each kind; figures are linked relative to
    the folder `links_from` (that of the file the section goes into)."""
    latest = latest_records(paths)
    sections = []
    for kind in BENCH_KINDS:
        if kind not in latest:
            continue
        record, path = latest[kind]
        if kind == "throughput":
            sections.append(throughput_section(record, path))
        elif kind == "growth":
            sections.append(growth_section(record, path, links_from))
        elif kind == "peers":
            sections.append(peers_section(record, path))
        elif kind == "peers-decode":
            sections.append(peers_decode_section(record, path))
        else:
            sections.append(gpu_section(record, path))
    return "\n\n".join(sections) or NO_BENCHMARKS


def sections(
    results_dir: Path, links_from: Path = Path(), models_dir: Path | None = None
) -> dict[str, str]:
    """{"results": the models table, "bench": the benchmark tables, "profile": the decoding
    profile, "speedrun": the speed record table} from `results_dir`, with the cards of the
    models shipped in `models_dir` (none when None)."""
    models = [ModelResult.load(path) for path in sorted(results_dir.glob("models/*.json"))]
    cards = sorted(models_dir.glob("*/card.json")) if models_dir else []
    shipped = {path.parent.name: ModelResult.load(path) for path in cards}
    records = list(results_dir.glob("bench/*.json"))
    return {
        "results": models_section(models, shipped),
        "bench": bench_section(records, links_from),
        "profile": latest_profile_section(records),
        "speedrun": speedrun_section(records),
    }


def update_sections(text: str, bodies: dict[str, str]) -> str:
    """Replace what lies between `<!-- NAME:start -->` and `<!-- NAME:end -->` for every NAME
    of `bodies` whose markers `text` holds (at least one); everything else is kept as it is."""
    updated = 0
    for name, body in bodies.items():
        start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
        if start not in text and end not in text:
            continue
        if text.count(start) != 1 or text.count(end) != 1 or text.index(start) > text.index(end):
            raise UserError(f"expected one {start} followed by one {end}")
        head, rest = text.split(start)
        _, tail = rest.split(end)
        text = f"{head}{start}\n{body}\n{end}{tail}"
        updated += 1
    if not updated:
        markers = ", ".join(f"<!-- {name}:start -->" for name in bodies)
        raise UserError(f"no section markers: expected one of {markers}")
    return text


def update_file(path: Path, results_dir: Path, models_dir: Path | None = None) -> None:
    """Rewrite the sections of `path` from the records in `results_dir` and the cards of the
    models in `models_dir`."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise UserError(f"--update {path}: cannot read it ({err.strerror})") from None
    bodies = sections(results_dir, links_from=path.parent, models_dir=models_dir)
    try:
        updated = update_sections(text, bodies)
    except UserError as err:
        raise UserError(f"{path}: {err}") from None
    path.write_text(updated, encoding="utf-8")


def main() -> None:
    parser = ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--results", type=Path, default=Path("results"), help="results folder")
    parser.add_argument(
        "--models", type=Path, default=SHIPPED_MODELS, help="the shipped models' folder"
    )
    parser.add_argument(
        "--update",
        type=Path,
        nargs="*",
        metavar="FILE",
        help=f"rewrite the sections of each FILE (default: {' '.join(map(str, DEFAULT_FILES))})",
    )
    args = parser.parse_args()
    if args.update is None:
        print("\n\n".join(sections(args.results, models_dir=args.models).values()))
        return
    for path in args.update or DEFAULT_FILES:
        update_file(path, args.results, args.models)
        print(f"updated {path}")


if __name__ == "__main__":
    run_cli(main)

"""Markdown tables of the committed results, and the README sections generated from them.

    results/models/*.json   one trained model each, in the format of `ModelResult`
    results/bench/*.json    runs of scripts/benchmark.py ("kind": "throughput" or "growth"),
                            and side by side with fairseq and OpenNMT-py: training speed
                            ("kind": "peers", from scripts/peers/measure.sh) and decoding
                            speed at about equal BLEU ("peers-decode", scripts/peers/decode.sh)

`update_sections` replaces the text between `<!-- results:start -->` and `<!-- results:end -->`
with the models table, and between `<!-- bench:start -->` and `<!-- bench:end -->` with the
benchmark tables, so that the README's numbers always come from these files.

A model result, e.g. results/models/transformer-tiny.en-de.json:

    {
      "name": "Transformer tiny, 5 checkpoints averaged",
      "model": "transformer-tiny", "direction": "en-de", "corpus": "multi30k", "split": "test",
      "parameters": 2349568,
      "bleu": 38.1, "bleu_lc": 39.0, "chrf": 64.2,
      "signatures": {"bleu": "nrefs:1|case:mixed|...", "bleu_lc": "...", "chrf": "..."},
      "beam_size": 5, "averaged_checkpoints": 5,
      "train_steps": 30000, "train_hours": 1.5, "device": "1x NVIDIA H100",
      "commands": ["make data", "make train MODEL=transformer", "..."],
      "git_revision": "0123abc..."
    }

`scripts/evaluate.py --record FILE` writes one: the scores, signatures, beam, model, corpus,
parameter count, step and number of averaged checkpoints come from the evaluation and the
checkpoint; the name, training time, device and commands are given as options.
"""

import json
import subprocess
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, get_origin

from seq2seq.checkpoint import write_atomically
from seq2seq.errors import UserError

NO_MODELS = "_No trained model results committed yet._"
NO_BENCHMARKS = "_No benchmark results committed yet._"


@dataclass
class ModelResult:
    """One trained model's test scores and how it was made (see the module docstring)."""

    name: str  # the row's label
    model: str  # the model preset (model.name)
    direction: str  # e.g. "en-de"
    corpus: str  # e.g. "multi30k"
    split: str  # the scored split, e.g. "test"
    parameters: int
    bleu: float  # sacreBLEU, cased
    bleu_lc: float  # sacreBLEU, lowercased
    chrf: float
    signatures: dict[str, str]  # sacreBLEU signatures of "bleu", "bleu_lc" and "chrf"
    beam_size: int
    averaged_checkpoints: int  # checkpoints averaged into the weights; 1: a single checkpoint
    train_steps: int
    train_hours: float
    device: str  # what it was trained on
    commands: list[str]  # every command, from preparing the data to evaluating
    git_revision: str  # the commit that evaluated it, "-dirty" if tracked files differed

    @classmethod
    def load(cls, path: Path) -> "ModelResult":
        try:
            values = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise UserError(f"{path}: not readable JSON ({err})") from None
        known = {f.name: f for f in fields(cls)}
        if not isinstance(values, dict) or values.keys() != known.keys():
            got = values.keys() if isinstance(values, dict) else set()
            wrong = sorted(set(known) - set(got)) + sorted(set(got) - set(known))
            raise UserError(f"{path}: missing or unknown keys: {', '.join(wrong) or 'all'}")
        for name, value in values.items():
            kind = get_origin(known[name].type) or known[name].type
            number = isinstance(value, int | float) and not isinstance(value, bool)
            if not (number if kind is float else isinstance(value, kind)):
                raise UserError(f"{path}: {name} should be a {kind.__name__}, not {value!r}")
        return cls(**values)

    def save(self, path: Path) -> None:
        """Write the result as indented JSON, atomically."""
        text = json.dumps(asdict(self), indent=2, ensure_ascii=False) + "\n"
        try:
            write_atomically(path, lambda tmp: tmp.write(text.encode("utf-8")))
        except OSError as err:
            raise UserError(f"{path}: cannot write ({err.strerror})") from None


def git_state() -> tuple[str | None, bool | None]:
    """The commit checked out and whether tracked files differ from it (None outside git)."""
    root = Path(__file__).resolve().parents[1]

    def git(*args: str) -> str:
        result = subprocess.run(
            ["git", "--no-optional-locks", *args],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        )
        return result.stdout.strip()

    try:
        return git("rev-parse", "HEAD"), bool(git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.CalledProcessError):
        return None, None


def _markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _millions(count: int) -> str:
    return f"{count / 1e6:.2f}M"


def models_section(results: list[ModelResult]) -> str:
    """The table of trained models, best BLEU first per direction, with signatures and commands."""
    if not results:
        return NO_MODELS
    results = sorted(results, key=lambda r: (r.direction, -r.bleu))
    header = ["Model", "Direction", "Parameters", "BLEU", "BLEU (lc)", "chrF", "Beam"]
    header += ["Checkpoints averaged", "Steps", "Training", "Device"]
    rows = [
        [
            r.name,
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
        for r in results
    ]
    scored = ", ".join(sorted({f"{r.corpus} {r.split}" for r in results}))
    signatures = sorted({(key, value) for r in results for key, value in r.signatures.items()})
    listed = ", ".join(f"{key} `{value}`" for key, value in signatures)
    lines = [_markdown_table(header, rows), "", f"Scored on {scored}; sacreBLEU {listed}."]
    for r in results:
        revision = r.git_revision[:10] + (
            " (modified)" if r.git_revision.endswith("-dirty") else ""
        )
        lines += ["", f"{r.name} ({r.direction}, revision `{revision}`):", ""]
        lines += ["```sh", *r.commands, "```"]
    return "\n".join(lines)


def _run_line(record: dict[str, Any], source: Path) -> str:
    """Where and how a benchmark ran, in one line."""
    env, settings = record["environment"], record["settings"]
    revision = (env["git_revision"] or "unknown")[:10] + (" (modified)" if env["git_dirty"] else "")
    quick = ", `--quick`" if settings["quick"] else ""
    return (
        f"**{env['device_name']}** ({env['device']}, {env['threads']} threads{quick}), "
        f"torch {env['torch']}, revision `{revision}`, memory: {env['memory_measure']}; "
        f"`{env['command']}` → `{source}`"
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


def growth_section(record: dict[str, Any], source: Path) -> str:
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
        lines += [f"![Cost growth with sequence length]({plot})", ""]
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
        f"{record['setup']}; `{record['reproduce']}` → `{source}`"
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
        [_peers_run_line(record, source), "", _markdown_table(header, rows), "", record["method"]]
    )


def peers_decode_section(record: dict[str, Any], source: Path) -> str:
    """One row per toolkit: beam-5 decoding speed (each run), the BLEU of its output, and the
    peak memory of each run where the record has it (records before 2026-11-24 do not)."""
    header = ["Toolkit", "Version", "Beam-5 sent/s (each run)", "BLEU", "BLEU lc", "chrF"]
    with_memory = all("peak_rss_mib" in toolkit for toolkit in record["toolkits"])
    if with_memory:
        header.append("Peak RSS MiB (each run)")
    rows = []
    for toolkit in record["toolkits"]:
        row = [
            toolkit["name"],
            toolkit["version"],
            " / ".join(f"{speed:,.1f}" for speed in toolkit["sentences_per_second"]),
            f"{toolkit['bleu']:.1f}",
            f"{toolkit['bleu_lc']:.1f}",
            f"{toolkit['chrf']:.1f}",
        ]
        if with_memory:
            row.append(" / ".join(f"{peak:,.0f}" for peak in toolkit["peak_rss_mib"]))
        rows.append(row)
    return "\n".join(
        [_peers_run_line(record, source), "", _markdown_table(header, rows), "", record["method"]]
    )


def bench_section(paths: list[Path]) -> str:
    """The tables of every benchmark record, in file name order."""
    sections = []
    for path in sorted(paths):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
            kind = record["kind"]
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise UserError(f"{path}: not a benchmark record ({err!r})") from None
        if kind == "throughput":
            sections.append(throughput_section(record, path))
        elif kind == "growth":
            sections.append(growth_section(record, path))
        elif kind == "peers":
            sections.append(peers_section(record, path))
        elif kind == "peers-decode":
            sections.append(peers_decode_section(record, path))
        else:
            raise UserError(f"{path}: unknown benchmark kind {kind!r}")
    return "\n\n".join(sections) or NO_BENCHMARKS


def sections(results_dir: Path) -> dict[str, str]:
    """{"results": the models table, "bench": the benchmark tables} from `results_dir`."""
    models = [ModelResult.load(path) for path in sorted(results_dir.glob("models/*.json"))]
    return {
        "results": models_section(models),
        "bench": bench_section(list(results_dir.glob("bench/*.json"))),
    }


def update_sections(text: str, bodies: dict[str, str]) -> str:
    """Replace what lies between `<!-- NAME:start -->` and `<!-- NAME:end -->` for every NAME
    of `bodies`; everything else is kept as it is."""
    for name, body in bodies.items():
        start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
        if text.count(start) != 1 or text.count(end) != 1 or text.index(start) > text.index(end):
            raise UserError(f"expected one {start} followed by one {end}")
        head, rest = text.split(start)
        _, tail = rest.split(end)
        text = f"{head}{start}\n{body}\n{end}{tail}"
    return text

#!/usr/bin/env python3
"""Ship a retrained model: an exported folder and its record become a shipped model and its card.

    .venv/bin/python benchmarks/ship_model.py exported/tatoeba-gpu/transformer-small.tatoeba.en-fr

FOLDER is a folder written by `seq2seq export` and named after the shipped model it replaces;
FOLDER.json is its record (`seq2seq evaluate --record`, then `--split entities --record`, and
`--split realistic --record` and `seq2seq align --gold GOLD --record` where they were run), as
benchmarks/tatoeba_gpu.sh leaves them. They
become:

- seq2seq/shipped_models/NAME/ (--models-dir): the folder's files and card.json, the record with
  the limits of the card it replaces, each output translated again by the new model at the
  card's beam and precision (the problems are kept as written: the outputs are printed, so a
  problem the new model no longer has can be reworded by hand);
- results/models/NAME.shipped.json (--results-dir): the same card.

In both, the evaluations name the shipped model (`--model NAME`) instead of FOLDER (and an
alignment's `--reverse-model` the name of its folder), so their commands reproduce the scores
once it is shipped, and `--revision` gives the commit that
evaluated it where the record could not tell (a copy of the repository without its .git folder:
`unknown`). The shipped folder is replaced at once, never
left half written. Then update the README's tables: `benchmarks/results_table.py --update` for
the results, and by hand the row of the models in the box (size and first limit).
"""

import dataclasses
import shlex
import shutil
import sys
from pathlib import Path

from seq2seq.commands.cli import ArgumentParser, run_cli
from seq2seq.decoding.export import write_folder
from seq2seq.decoding.model_folder import CARD, is_exported_model
from seq2seq.decoding.model_result import SHIPPED_MODELS, ModelResult
from seq2seq.decoding.open_pytorch import load_model
from seq2seq.decoding.torch_translator import Translator
from seq2seq.errors import UserError

ROOT = Path(__file__).resolve().parents[1]
UNKNOWN = "unknown"  # the git revision of an evaluation outside a git checkout


def shipped_command(command: str, name: str) -> str:
    """`command` with the model of its --model option named `name`, and that of
    --reverse-model (an alignment's opposite model) by its folder's name, the model it ships as."""
    words = shlex.split(command)
    if "--model" not in words:
        return command
    words[words.index("--model") + 1] = name
    if "--reverse-model" in words:
        reverse = words.index("--reverse-model") + 1
        words[reverse] = Path(words[reverse]).name
    return shlex.join(words)


def translated_limits(folder: Path, record: ModelResult, limits: list[dict]) -> list[dict]:
    """`limits` with each output what the model of `folder` gives for its source, at the
    record's beam size and decoding precision, on the CPU."""
    if not limits:
        return []
    inference = load_model(folder)
    inference.config.decode.precision = record.decode_precision
    inference.config.decode.beam_size = record.beam_size
    translator = Translator.from_inference(inference, "cpu")
    outputs = translator.translate([limit["source"] for limit in limits])
    return [
        {**limit, "output": nbest[0].text} for limit, nbest in zip(limits, outputs, strict=True)
    ]


def known_revision(recorded: str, revision: str | None) -> str:
    """The `recorded` git revision, or `revision` where it is unknown and given."""
    return revision if revision and recorded == UNKNOWN else recorded


def shipped_test(scores: dict, name: str, revision: str | None) -> dict:
    """A test's scores in a record (an entity test's or the alignment test's; {}: not run), as
    the card of `name` gives them."""
    if not scores:
        return {}
    return {
        **scores,
        "command": shipped_command(scores["command"], name),
        "git_revision": known_revision(scores.get("git_revision", UNKNOWN), revision),
    }


def new_card(folder: Path, old_card: Path, revision: str | None = None) -> ModelResult:
    """The card of the model exported to `folder`: its record (FOLDER.json), evaluated by the
    shipped model's name, with the limits of `old_card` (if any) translated again, and
    `revision` as the git revision where the record has none."""
    name = folder.name
    record = ModelResult.load(folder.with_name(f"{name}.json"))
    if not name.endswith(f".{record.direction}"):
        raise UserError(f"{folder}: the record is of {record.direction}, not the model's direction")
    if not record.entity_test:
        raise UserError(
            f"{folder}.json: no entity_test; add it with seq2seq evaluate --model {folder} "
            f"--split entities --record {folder}.json"
        )
    limits = ModelResult.load(old_card).limits if old_card.is_file() else []
    return dataclasses.replace(
        record,
        commands=[shipped_command(command, name) for command in record.commands],
        limits=translated_limits(folder, record, limits),
        entity_test=shipped_test(record.entity_test, name, revision),
        realistic_entity_test=shipped_test(record.realistic_entity_test, name, revision),
        alignment_test=shipped_test(record.alignment_test, name, revision),
        git_revision=known_revision(record.git_revision, revision),
    )


def ship(
    folder: Path, models_dir: Path, results_dir: Path, revision: str | None = None
) -> ModelResult:
    """Put the model exported to `folder` in `models_dir` with its card, and the card in
    `results_dir` (see the module docstring); returns the card."""
    if not is_exported_model(folder):
        raise UserError(f"{folder}: not a folder written by seq2seq export")
    target = models_dir / folder.name
    card = new_card(folder, target / CARD, revision)

    def fill(tmp: Path) -> None:
        for path in folder.iterdir():
            if path.name != CARD:
                shutil.copyfile(path, tmp / path.name)
        card.save(tmp / CARD)

    write_folder(target, fill)
    results_dir.mkdir(parents=True, exist_ok=True)
    card.save(results_dir / f"{folder.name}.shipped.json")
    return card


def main(argv: list[str]) -> None:
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="a folder written by seq2seq export")
    parser.add_argument("--models-dir", type=Path, default=SHIPPED_MODELS)
    parser.add_argument("--results-dir", type=Path, default=ROOT / "results" / "models")
    parser.add_argument(
        "--revision", help="the commit that evaluated it, where its record says unknown"
    )
    args = parser.parse_args(argv)
    card = ship(args.folder, args.models_dir, args.results_dir, args.revision)
    entities = card.entity_test
    print(
        f"shipped {args.folder.name}: test BLEU {card.bleu:.2f}, chrF {card.chrf:.2f}; entity "
        f"test: numbers copied {entities['number_copy_accuracy']:.1f}%, names "
        f"{entities['name_copy_accuracy']:.1f}%"
    )
    for limit in card.limits:
        print(f"  limit {limit['problem']}: {limit['source']} -> {limit['output']}")


if __name__ == "__main__":
    run_cli(lambda: main(sys.argv[1:]), tune=True)

"""Score a checkpoint with sacreBLEU: BLEU, lowercased BLEU and chrF, with their signatures.

    seq2seq evaluate --checkpoint checkpoints/run/best.pt                 # the test split
    seq2seq evaluate --model transformer-tiny.multi30k.en-de              # a shipped model
    seq2seq evaluate --checkpoint best.pt --split valid --beam 1
    seq2seq evaluate --model transformer-small.tatoeba.en-fr --split entities
    seq2seq evaluate --model transformer-small.tatoeba.fr-en --split realistic
    seq2seq evaluate --checkpoint best.pt --split valid --length-penalty 1.5
    seq2seq evaluate --model transformer-tiny.multi30k.en-de --engine ctranslate2
    seq2seq evaluate --checkpoint best.pt --src test.en --ref test.de --output hyp.de --json
    seq2seq evaluate --checkpoint run/avg5.pt --beam 5 --record results/models/NAME.json \
        --name "Transformer tiny, last 5 averaged" --trained-on "1x NVIDIA H100, bf16" \
        --train-hours 1.2 --command "make data" --command "make train MODEL=transformer"

The split is read from the prepared folder named in the checkpoint's configuration
(data.prepared); a Tatoeba folder must be split by the configuration's data.split_rule, the one
the model was trained on (seq2seq.data.corpora.SPLIT_RULES). The output is detokenized and
scored against the plain reference text, the same code path that training validation uses.
`--split entities` is the project's entity test of the model's direction
(seq2seq.data.entity_copy): its sentences are full of names and numbers, and the copy accuracy
of each is printed beside BLEU and chrF. `--split realistic` is its realistic entity test:
longer sentences written by hand, with codes too. Every split's scores are also printed for
each source length (1-10, 11-20, 21-30 and 31+ words).

--record writes the model's entry for the README's results table (see
seq2seq.decoding.model_result): the
scores and signatures, and from the checkpoint the model, corpus, direction, parameter count,
step and number of averaged checkpoints. What the checkpoint cannot know is given as options:
the row's name, the training device and hours, and the commands that made the checkpoint; this
evaluation's own command and the git revision are added. With --split entities, --record adds
the entity test's scores to the existing record FILE (its field entity_test) and changes
nothing else in it; with --split realistic, the realistic test's (realistic_entity_test).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from seq2seq.commands.cli import (
    add_decode_options,
    add_model_options,
    add_split_option,
    check_output,
    command_parser,
    number,
)
from seq2seq.config_rules import AT_LEAST_0
from seq2seq.data.corpora import domain_of
from seq2seq.data.entity_copy import TESTS, entity_test_file, load_entity_test
from seq2seq.decoding.model_result import ModelResult, add_to_record, git_revision
from seq2seq.errors import UserError
from seq2seq.files import read_lines, write_atomically

if TYPE_CHECKING:  # main imports what decodes (torch), so that --help answers at once
    from seq2seq.config import Config
    from seq2seq.data.entity_copy import EntityPair
    from seq2seq.data.prepared_corpus import PreparedData
    from seq2seq.decoding.evaluation import EvalResult
    from seq2seq.decoding.open_pytorch import Inference

TUNE = False  # tuned for torch once a PyTorch model loads (seq2seq.commands.engine)
# The --split of each entity test, and the field of a record that --record fills with its scores
RECORD_FIELDS = dict(zip(TESTS, ("entity_test", "realistic_entity_test"), strict=True))


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = command_parser("evaluate", __doc__)
    add_model_options(parser)
    parser.add_argument(
        "--split",
        choices=["test", "valid", *TESTS],
        help="split of the prepared corpus, or an entity test of the model's direction "
        "(default: test)",
    )
    parser.add_argument("--src", metavar="FILE", help="source sentences, one a line")
    parser.add_argument("--ref", metavar="FILE", help="reference translations, one a line")
    add_decode_options(
        parser, batch_size_help="sentences per decoding batch (1024 on a GPU: the test set at once)"
    )
    add_split_option(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--output", metavar="FILE", help="write the translations, one a line")
    record = parser.add_argument_group("recording a result (all four are needed with --record)")
    record.add_argument("--record", metavar="FILE", help="write the result as JSON")
    record.add_argument("--name", help="the name of its row in the results table")
    record.add_argument("--trained-on", metavar="DEVICE", help='e.g. "1x NVIDIA H100, bf16"')
    record.add_argument(
        "--train-hours", type=number(float, AT_LEAST_0), metavar="H", help="training wall time"
    )
    record.add_argument(
        "--command",
        action="append",
        metavar="CMD",
        help="a command that made the checkpoint, in order (repeat the option)",
    )
    args = parser.parse_args(argv)
    if args.record and args.split not in TESTS:
        needed = {
            "--name": args.name,
            "--trained-on": args.trained_on,
            "--train-hours": args.train_hours,
            "--command": args.command,
        }
        missing = [option for option, value in needed.items() if value is None]
        if missing:
            parser.error(f"--record needs {', '.join(missing)}")
        if args.src:
            parser.error("--record scores a split of the prepared corpus, not --src and --ref")
    if args.split and (args.src or args.ref):
        parser.error("give either --split or --src and --ref, not both")
    if bool(args.src) != bool(args.ref):
        parser.error("--src and --ref go together")
    inputs = (args.checkpoint, args.src, args.ref)
    if args.output:
        check_output("--output", args.output, inputs)
    if args.record and args.split in TESTS and not Path(args.record).is_file():
        parser.error(f"--record {args.record}: --split {args.split} adds to an existing record")
    if args.record:  # results/models/ is created when missing
        check_output("--record", args.record, inputs, create_folder=True)
    return args


def copied_lines(copy: dict[str, float]) -> list[str]:
    """The copy accuracy of an entity test, as `report` prints it."""
    kinds = [("numbers", "number"), ("names", "name"), ("codes", "code")]
    each = [
        f"{kind} {copy[f'{one}_copy_accuracy']:6.2f}% ({copy[f'{kind}_copied']}/{copy[kind]})"
        for kind, one in kinds
        if copy[kind]
    ]
    copied = copy["numbers_copied"] + copy["names_copied"] + copy["codes_copied"]
    entities = copy["numbers"] + copy["names"] + copy["codes"]
    return [
        f"copied  {', '.join(each)}",
        f"        all entities {copy['entity_copy_accuracy']:6.2f}% ({copied}/{entities}), "
        f"sentences with every entity {copy['all_copied_accuracy']:6.2f}% "
        f"({copy['sentences_all_copied']}/{copy['sentences']})",
    ]


def length_lines(buckets: list[dict]) -> list[str]:
    """The scores of each source length bucket, as `report` prints them."""
    lines = ["by source length (words):"]
    for bucket in buckets:
        line = (
            f"  {bucket['words']:>5}  {bucket['sentences']:5d} sentences  "
            f"BLEU {bucket['bleu']:6.2f}  chrF {bucket['chrf']:6.2f}"
        )
        if copy := bucket.get("copy_accuracy"):
            line += (
                f"  entities {copy['entity_copy_accuracy']:6.2f}%  every entity "
                f"{copy['sentences_all_copied']}/{copy['sentences']}"
            )
        lines.append(line)
    return lines


def report(result: EvalResult) -> str:
    signatures = result.signatures
    return "\n".join(
        [
            f"BLEU    {result.bleu:6.2f}  {result.bleu_details}",
            f"                {signatures['bleu']}",
            f"BLEU-lc {result.bleu_lc:6.2f}  {signatures['bleu_lc']}",
            f"chrF    {result.chrf:6.2f}  {signatures['chrf']}",
            *(copied_lines(result.copy_accuracy) if result.copy_accuracy else []),
            *length_lines(result.by_length),
            f"{result.sentences} sentences in {result.seconds:.1f} s "
            f"({result.sentences_per_second:.1f} sentences/s) on {result.device}, "
            f"{result.precision}, beam {result.beam_size}",
        ]
    )


def evaluation_command(args: argparse.Namespace, result: EvalResult) -> str:
    """The command that reproduces this evaluation, as a record keeps it."""
    source = ["--checkpoint", args.checkpoint] if args.checkpoint else ["--model", args.model]
    evaluation = ["seq2seq", "evaluate", *source, "--split", args.split]
    evaluation += ["--beam", str(result.beam_size), "--precision", result.precision]
    if args.length_penalty is not None:
        evaluation += ["--length-penalty", str(args.length_penalty)]
    if args.stop_early:
        evaluation.append("--stop-early")
    if result.keep_numbers:
        evaluation.append("--keep-numbers")
    elif args.keep_numbers is False:
        evaluation.append("--no-keep-numbers")
    if not result.split_sentences:
        evaluation.append("--no-split-sentences")
    return shlex.join(evaluation)


def model_result(
    args: argparse.Namespace, inference: Inference, prepared: PreparedData, result: EvalResult
) -> ModelResult:
    """The results-table entry of this evaluation (see --record)."""
    return ModelResult(
        name=args.name,
        model=inference.config.model.name,
        direction=f"{prepared.src}-{prepared.tgt}",
        corpus=prepared.manifest["corpus"],
        split=args.split,
        parameters=inference.model.num_parameters(),
        bleu=result.bleu,
        bleu_lc=result.bleu_lc,
        chrf=result.chrf,
        signatures=result.signatures,
        beam_size=result.beam_size,
        averaged_checkpoints=inference.averaged_checkpoints,
        train_steps=inference.step,
        train_hours=args.train_hours,
        device=args.trained_on,
        commands=[*args.command, evaluation_command(args, result)],
        git_revision=git_revision(),
        decode_precision=result.precision,
        keep_numbers=result.keep_numbers,
        domain=domain_of(prepared.manifest["corpus"]),
    )


def record_entity_test(path: Path, args: argparse.Namespace, result: EvalResult) -> None:
    """Add the scores of the entity test of --split to the record at `path`, leaving the rest as
    it was."""
    scores = {
        "sentences": result.sentences,
        "bleu": result.bleu,
        "bleu_lc": result.bleu_lc,
        "chrf": result.chrf,
        "signatures": result.signatures,
        **(result.copy_accuracy or {}),
        "by_length": result.by_length,
        "beam_size": result.beam_size,
        "decode_precision": result.precision,
        "keep_numbers": result.keep_numbers,
        "command": evaluation_command(args, result),
    }
    add_to_record(path, RECORD_FIELDS[args.split], scores)


def read_split(
    args: argparse.Namespace, config: Config
) -> tuple[list[str], list[str], list[EntityPair] | None, PreparedData | None, str]:
    """The source and reference lines of --split, the entity test (with --split entities or
    realistic) or the prepared folder (with a split of it), and the file of the source lines (for
    errors)."""
    from seq2seq.data.prepared_corpus import PreparedData, prepare_hint

    args.split = args.split or "test"
    if args.split in TESTS:
        direction = f"{config.data.src}-{config.data.tgt}"
        test = load_entity_test(direction, args.split)
        sources, references = [p.source for p in test], [p.reference for p in test]
        return sources, references, test, None, str(entity_test_file(direction, args.split))
    prepared = PreparedData.load(config.data.prepared, prepare_hint(config))
    prepared.check_split_rule(config)
    source_file = str(prepared.folder / f"{args.split}.{prepared.src}")
    return *prepared.lines(args.split), None, prepared, source_file


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    from seq2seq.commands.engine import load_translator  # not for --help
    from seq2seq.decoding.evaluation import (
        check_aligned,
        evaluate,
        evaluate_entities,
        scores_by_length,
    )
    from seq2seq.decoding.line_translator import SourceTooLong

    if args.src:  # the files are checked before the model is loaded
        sources = read_lines(Path(args.src), f"--src {args.src}")
        references = read_lines(Path(args.ref), f"--ref {args.ref}")
        check_aligned(sources, references, f"--src {args.src}", f"--ref {args.ref}")
        test, prepared, where = None, None, f"--src {args.src}"
    record = args.record and args.split not in TESTS
    translator, config, inference = load_translator(args, need_pytorch=record)
    if record and inference is None:
        raise UserError("--record: needs the PyTorch model; give the model it was exported from")
    if not args.src:
        sources, references, test, prepared, where = read_split(args, config)
    translator.check_beam_size(translator.decode_cfg.beam_size)
    try:
        if test is not None:
            result = evaluate_entities(translator, test, split_sentences=args.split_sentences)
        else:
            result = evaluate(translator, sources, references, split_sentences=args.split_sentences)
    except SourceTooLong as err:
        raise UserError(f"{where}:{err.index + 1}: {err.problem}") from None
    result.by_length = scores_by_length(sources, references, result.hypotheses, test)
    if args.output:
        text = "".join(f"{line}\n" for line in result.hypotheses).encode()
        try:
            write_atomically(Path(args.output), lambda file: file.write(text))
        except OSError as err:
            raise UserError(f"--output {args.output}: cannot write: {err}") from None
    print(json.dumps(result.summary()) if args.json else report(result))
    if args.record and test is not None:
        record_entity_test(Path(args.record), args, result)
        print(f"recorded the {args.split} test in {args.record}", file=sys.stderr)
    elif args.record and prepared and inference:
        model_result(args, inference, prepared, result).save(Path(args.record))
        print(f"recorded {args.record}", file=sys.stderr)
